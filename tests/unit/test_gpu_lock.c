/*
 * tests/unit/test_gpu_lock.c — kl_gpu_run holds the GPU lock: GPU runs
 * from many evaluation threads (a campaign's slots, `eval --jobs`) and from
 * other kernlab processes on the machine reach the executor one at a time,
 * so no candidate is timed while another runs on the device. Two processes
 * of three threads each; an executor that stands in for the run-gpu worker
 * counts the runs in flight in shared memory. No device is needed for the
 * lock itself. KERNLAB_GPU_LOCK points at a file of this test's own, so a
 * parallel test run does not wait on it.
 */
#include "kernels/kernels.h"
#include "tests/unit/kltest.h"

#include <fcntl.h>
#include <sys/file.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define PROCS 2
#define THREADS 3
#define RUNS 4 /* per thread */

typedef struct counts {
  int in_flight, most_in_flight, runs, wrong;
} counts;
static counts *shared;

static int fake_run_gpu(void *ctx, const kl_run_job *job, const uint8_t *cubin,
                        size_t cubin_size, kl_run_report *rep, float *outs,
                        size_t n_outs, struct kl_result *out) {
  (void)ctx, (void)job, (void)cubin, (void)cubin_size, (void)outs, (void)n_outs,
      (void)out;
  int now = __atomic_add_fetch(&shared->in_flight, 1, __ATOMIC_SEQ_CST);
  int seen = __atomic_load_n(&shared->most_in_flight, __ATOMIC_SEQ_CST);
  while (now > seen &&
         !__atomic_compare_exchange_n(&shared->most_in_flight, &seen, now, 0,
                                      __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST)) {
  }
  struct timespec ts = {0, 5 * 1000 * 1000}; /* a run takes a while */
  nanosleep(&ts, NULL);
  rep->done = 1;
  __atomic_add_fetch(&shared->runs, 1, __ATOMIC_SEQ_CST);
  __atomic_sub_fetch(&shared->in_flight, 1, __ATOMIC_SEQ_CST);
  return 1;
}

static kl_executor ex = {NULL, NULL, NULL, fake_run_gpu, 0};

static void *evaluator_thread(void *arg) {
  (void)arg;
  kl_eval_options opts;
  memset(&opts, 0, sizeof opts);
  opts.exec = &ex;
  for (int i = 0; i < RUNS; i++) {
    kl_run_job job;
    kl_run_report rep;
    kl_result out;
    memset(&job, 0, sizeof job);
    memset(&rep, 0, sizeof rep);
    memset(&out, 0, sizeof out);
    float c = 0;
    if (kl_gpu_run(&opts, &job, NULL, 0, &rep, &c, 1, &out) != 1 || !rep.done)
      __atomic_add_fetch(&shared->wrong, 1, __ATOMIC_SEQ_CST);
  }
  return NULL;
}

static void one_lab(void) {
  pthread_t t[THREADS];
  for (int i = 0; i < THREADS; i++)
    pthread_create(&t[i], NULL, evaluator_thread, NULL);
  for (int i = 0; i < THREADS; i++)
    pthread_join(t[i], NULL);
}

int main(void) {
  char lock[] = "/tmp/kernlab-test-gpu-lock-XXXXXX";
  int fd = mkstemp(lock);
  if (fd >= 0) close(fd);
  setenv("KERNLAB_GPU_LOCK", lock, 1);
  shared = mmap(NULL, sizeof *shared, PROT_READ | PROT_WRITE,
                MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  CHECK(shared != MAP_FAILED, "shared counters");
  if (shared == MAP_FAILED) return kl_test_done("test_gpu_lock");
  memset(shared, 0, sizeof *shared);
  pid_t kids[PROCS];
  for (int p = 0; p < PROCS; p++)
    if ((kids[p] = fork()) == 0) {
      one_lab(); /* a lab process of its own: its own mutex, the file */
      _exit(0);
    }
  for (int p = 0; p < PROCS; p++) {
    int st = 0;
    waitpid(kids[p], &st, 0);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "lab %d: status 0x%x", p, st);
  }
  CHECK(shared->runs == PROCS * THREADS * RUNS && !shared->wrong,
        "every run reached the executor and returned its answer: %d of %d, "
        "%d wrong",
        shared->runs, PROCS * THREADS * RUNS, shared->wrong);
  CHECK(shared->most_in_flight == 1,
        "GPU runs in flight at once over %d processes: at most %d, expected "
        "1 (the lock)",
        PROCS, shared->most_in_flight);
  /* A lock held elsewhere: kl_gpu_lock says it waits, then waits until
   * the holder lets go. */
  int hold = open(lock, O_RDWR);
  CHECK(hold >= 0 && flock(hold, LOCK_EX) == 0, "holding the lock");
  int err[2];
  CHECK(pipe(err) == 0, "pipe");
  pid_t kid = fork();
  if (kid == 0) {
    dup2(err[1], 2);
    kl_gpu_lock();
    kl_gpu_unlock();
    _exit(0);
  }
  close(err[1]);
  char said[512] = "";
  struct pollfd pfd = {err[0], POLLIN, 0};
  ssize_t n = poll(&pfd, 1, 10000) == 1 /* before the release */
                  ? read(err[0], said, sizeof said - 1)
                  : 0;
  if (n > 0) said[n] = 0;
  int st = -1;
  CHECK(waitpid(kid, &st, WNOHANG) == 0, "it waits while the lock is held");
  CHECK(strstr(said, "waiting for the GPU") && strstr(said, lock),
        "it says it waits, and on which lock: %s", said);
  flock(hold, LOCK_UN);
  waitpid(kid, &st, 0);
  CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0,
        "it takes the lock once released: 0x%x", st);
  close(hold);
  close(err[0]);
  unlink(lock);
  return kl_test_done("test_gpu_lock");
}
