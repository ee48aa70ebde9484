/*
 * tests/unit/test_gpu_lock.c — kl_gpu_run holds the lab's GPU lock: GPU
 * runs from many evaluation threads (a campaign's slots, `eval --jobs`)
 * reach the executor one at a time, so no candidate is timed while another
 * runs on the device. An executor that stands in for the run-gpu worker
 * counts the runs in flight; no device is needed for the lock itself.
 */
#include "kernels/kernels.h"
#include "tests/unit/kltest.h"

#include <pthread.h>
#include <string.h>
#include <time.h>

#define THREADS 6
#define RUNS 4 /* per thread */

static int in_flight, most_in_flight, runs;

static int fake_run_gpu(void *ctx, const kl_run_job *job, const uint8_t *cubin,
                        size_t cubin_size, kl_run_report *rep, float *outs,
                        size_t n_outs, struct kl_result *out) {
  (void)ctx, (void)job, (void)cubin, (void)cubin_size, (void)outs, (void)n_outs,
      (void)out;
  int now = __atomic_add_fetch(&in_flight, 1, __ATOMIC_SEQ_CST);
  int seen = __atomic_load_n(&most_in_flight, __ATOMIC_SEQ_CST);
  while (now > seen &&
         !__atomic_compare_exchange_n(&most_in_flight, &seen, now, 0,
                                      __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST)) {
  }
  struct timespec ts = {0, 5 * 1000 * 1000}; /* a run takes a while */
  nanosleep(&ts, NULL);
  rep->done = 1;
  __atomic_add_fetch(&runs, 1, __ATOMIC_SEQ_CST);
  __atomic_sub_fetch(&in_flight, 1, __ATOMIC_SEQ_CST);
  return 1;
}

static kl_executor ex = {NULL, NULL, NULL, fake_run_gpu};

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
      __atomic_add_fetch(&runs, 1000, __ATOMIC_SEQ_CST); /* a wrong return */
  }
  return NULL;
}

int main(void) {
  pthread_t t[THREADS];
  for (int i = 0; i < THREADS; i++)
    pthread_create(&t[i], NULL, evaluator_thread, NULL);
  for (int i = 0; i < THREADS; i++)
    pthread_join(t[i], NULL);
  CHECK(runs == THREADS * RUNS,
        "every run reached the executor and returned its answer: %d of %d",
        runs, THREADS * RUNS);
  CHECK(most_in_flight == 1,
        "GPU runs in flight at once: at most %d, expected 1 (the lock)",
        most_in_flight);
  return kl_test_done("test_gpu_lock");
}
