/*
 * tests/unit/test_sandbox.c — the run-cpu-emu profile really confines: in a
 * forked child confined with sbx_confine, allowed work (memory, time)
 * succeeds and each forbidden syscall (a new thread among them) ends the
 * process with SBX_TRAP_EXIT and the syscall's number in the shared trap
 * slot; so does a thread that was running before the filter, as the
 * emulator's pool, OpenBLAS's and CUDA's threads are (TSYNC). And what the
 * run-gpu worker does after its filter without a device (the median of 200
 * timing samples; fresh inputs and the launch checks on threads; their secret
 * seeds, from getrandom) runs under the run-gpu profile.
 */
#define _GNU_SOURCE
#include "kernels/kernels.h"
#include "sandbox/sandbox.h"
#include "tests/unit/kltest.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

typedef void (*action)(void);

static void *thread_body(void *arg) {
  return arg;
}

static void allowed_work(void) {
  void *p = malloc(64 << 20);
  memset(p, 1, 64 << 20);
  free(p);
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
}
/* run-cpu-emu lets no thread start (the emulator's start before it). */
static void do_thread(void) {
  pthread_t t;
  if (pthread_create(&t, NULL, thread_body, NULL) == 0) pthread_join(t, NULL);
}
/* What a thread of OpenBLAS's pool does first (its constructor starts the
 * pool as the binary loads, so a thread may run only after the filter):
 * bind its own buffer's memory policy (MPOL_PREFERRED, no nodes). */
static void do_mbind(void) {
  size_t len = 2 << 20;
  void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                 -1, 0);
  if (p == MAP_FAILED) _exit(3);
  syscall(SYS_mbind, p, len, 1 /* MPOL_PREFERRED */, NULL, 0UL, 0U);
  munmap(p, len);
}
static void do_open(void) {
  open("/tmp/kernlab_sbx_test", O_WRONLY | O_CREAT, 0644);
}
static void do_socket(void) {
  socket(AF_INET, SOCK_STREAM, 0);
}
static void do_fork(void) {
  fork();
}
static void do_exec(void) {
  execl("/bin/true", "true", (char *)NULL);
}
static void do_sigsys_handler(void) {
  signal(SIGSYS, SIG_IGN);
}
/* The signal with bit 32 set: the kernel reads an int, SIGSYS (the
 * sandbox review: a filter comparing 64 bits let it through). Raw, as a
 * candidate would: glibc's wrapper takes an int. */
static void do_sigsys_high_bits(void) {
  struct {
    void (*handler)(int);
    unsigned long flags;
    void (*restorer)(void);
    unsigned long mask;
  } act = {SIG_IGN, 0, NULL, 0};
  syscall(SYS_rt_sigaction, (long)SIGSYS | 1l << 32, &act, NULL, 8);
}
/* Other signals' handlers stay allowed (glibc's thread cancellation), on
 * each side of SIGSYS. */
static void do_other_handlers(void) {
  if (signal(SIGUSR1, SIG_IGN) == SIG_ERR ||
      signal(SIGRTMIN + 1, SIG_IGN) == SIG_ERR ||
      signal(SIGRTMAX, SIG_IGN) == SIG_ERR)
    _exit(4);
}
/* x32's openat (x86-64's number with bit 30): a foreign ABI to the filter,
 * which traps like any refused call instead of killing the thread alone */
static void do_x32_call(void) {
  syscall(0x40000000l | SYS_openat, AT_FDCWD, "/etc/hostname", O_RDONLY);
}
static void do_kill_parent(void) {
  kill(getppid(), SIGKILL);
}

/* The run-gpu worker's median of a full timing run (200 samples) after
 * its filter (kernels/gpu_run.c calls kl_stats_median): with glibc's qsort
 * that made a sysinfo call and trapped. */
static void gpu_median(void) {
  double v[200];
  for (int i = 0; i < 200; i++)
    v[i] = (double)((i * 7919) % 200);
  if (kl_stats_median(v, 200) != 99.5) _exit(3);
}
/* The run-gpu worker's checks on a timed launch after its filter
 * (kernels/gpu_run.c: fresh inputs and kl_verify_launch, both on threads):
 * thread creation must pass, and an honest product pass the checks. */
static void gpu_launch_checks(void) {
  /* 2^20 elements: each pass is worth 4 threads (kernels/pace.c's split) */
  enum { D = 1024 };
  static float A[D * D], B[D * D], C[D * D], d[D];
  static double scratch[3 * D];
  kl_fill_random_mt(A, D * D, 1, 0, 4);
  kl_fill_random_mt(d, D, 1, 1, 4);
  for (int i = 0; i < D; i++) /* B = diag(d): C = A B without a GEMM */
    B[i * D + i] = d[i];
  for (int i = 0; i < D * D; i++)
    C[i] = A[i] * d[i % D];
  kl_pace_result res = {0};
  uint64_t rng = 7;
  kl_verify_launch((kl_shape){D, D, D}, A, B, C, scratch, &rng, 1, 4, &res);
  if (res.flags) _exit(3);
}
/* The run-gpu worker's seeds after its filter (kernels/gpu_run.c:
 * time_target's rng and each timed launch's fresh inputs come from
 * kl_secret_seed, which calls getrandom). */
static void gpu_secret_seed(void) {
  volatile uint64_t s = kl_secret_seed() ^ kl_secret_seed();
  (void)s;
}
/* What the run-gpu allowlist lets the driver do for a new pinned or shared
 * allocation after the filter (infra-anchors 1.5.2): a memfd, grown and
 * sealed. A file limit of 0 would make the growth a SIGXFSZ crash. */
static void gpu_driver_memfd(void) {
  int fd = memfd_create("cuda-pinned", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fd < 0) _exit(4);
  if (ftruncate(fd, 64 << 20) != 0) _exit(5);
  if (fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK) != 0) _exit(6);
  close(fd);
}
static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}
static void libc_qsort_200(void) {
  double v[200];
  for (int i = 0; i < 200; i++)
    v[i] = (double)((i * 7919) % 200);
  qsort(v, 200, sizeof *v, cmp_double);
}

/* A read-only open after the run-gpu filter: still a trap, named. */
static void read_proc(void) {
  open("/proc/self/status", O_RDONLY);
}
/* A driver thread naming itself after the filter: refused, not fatal. */
static void name_thread(void) {
  char path[64];
  snprintf(path, sizeof path, "/proc/self/task/%ld/comm", (long)gettid());
  int fd = open(path, O_WRONLY);
  _exit(fd < 0 && errno == EACCES ? 0 : 4);
}

static sbx_profile_id confine_as = SBX_RUN_CPU_EMU;

/* Runs act confined in a child; returns its wait status and the slot. */
static int run_confined(action act, int *slot) {
  volatile int *shared = mmap(NULL, 4096, PROT_READ | PROT_WRITE,
                              MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  *shared = -1;
  pid_t pid = fork();
  if (pid == 0) {
    char why[256];
    if (sbx_confine(confine_as, shared, -1, why, sizeof why) < 0) {
      fprintf(stderr, "confine: %s\n", why);
      _exit(2);
    }
    act();
    _exit(0);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  *slot = *shared;
  munmap((void *)shared, 4096);
  return status;
}

/* A thread started before the filter (as the emulator's pool threads and
 * CUDA's are) is held to it too: confined after it started, it opens a
 * socket. */
static int early_go[2];
static void *early_thread(void *arg) {
  char c;
  if (read(early_go[0], &c, 1) != 1) return arg;
  socket(AF_INET, SOCK_STREAM, 0);
  return arg;
}
static int run_early_thread(sbx_profile_id id, int *slot) {
  volatile int *shared = mmap(NULL, 4096, PROT_READ | PROT_WRITE,
                              MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  *shared = -1;
  pid_t pid = fork();
  if (pid == 0) {
    pthread_t t;
    char why[256];
    if (pipe(early_go) != 0 ||
        pthread_create(&t, NULL, early_thread, NULL) != 0)
      _exit(3);
    if (sbx_confine(id, shared, -1, why, sizeof why) < 0) {
      fprintf(stderr, "confine: %s\n", why);
      _exit(2);
    }
    if (write(early_go[1], "x", 1) != 1) _exit(3);
    pthread_join(t, NULL);
    _exit(0);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  *slot = *shared;
  munmap((void *)shared, 4096);
  return status;
}

/* Under the compile profile: reads pass, and an open that would write,
 * create or truncate fails with EACCES, the worker alive (NVRTC's own
 * cache opened a file for writing at each compile on the H200 machine;
 * a trap there killed every GPU compile). Exit 0: as expected. */
static void compile_opens(void) {
  static const int refused[] = {O_WRONLY | O_CREAT, O_RDWR, O_RDONLY | O_CREAT,
                                O_RDONLY | O_TRUNC, O_RDONLY | O_APPEND};
  for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
    int fd = open("/tmp/kernlab_sbx_compile_test", refused[i], 0600);
    if (fd >= 0 || errno != EACCES) _exit(10 + (int)i);
  }
  int fd = openat(AT_FDCWD, "/etc/hostname", O_RDONLY | O_CLOEXEC);
  if (fd < 0) _exit(20);
  close(fd);
  _exit(0);
}

/* The compile profile's RLIMIT_AS is 4 GiB above what the worker had
 * reserved before its confinement (sandbox.c): a child that reserved 6 GiB
 * first (address space only) may still map 1 GiB after, and not 5 more. An
 * absolute 4 GiB refused the 1 GiB (on the H200 machine NVRTC's cuInit
 * reserves 12 GiB, and every seed's compile ended `oom`). Exit 0: as
 * expected. */
static int run_headroom(void) {
  pid_t pid = fork();
  if (pid == 0) {
    char why[256];
    void *mine = mmap(NULL, 6ull << 30, PROT_NONE,
                      MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (mine == MAP_FAILED) _exit(3);
    if (sbx_confine(SBX_COMPILE, NULL, -1, why, sizeof why) < 0) {
      fprintf(stderr, "confine: %s\n", why);
      _exit(2);
    }
    void *one = mmap(NULL, 1ull << 30, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (one == MAP_FAILED) _exit(4);
#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
    void *five = mmap(NULL, 5ull << 30, PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (five != MAP_FAILED) _exit(5);
#endif
    _exit(0);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return status;
}

static void expect_trap(const char *what, action act, const char *syscall) {
  int slot, st = run_confined(act, &slot);
  CHECK(WIFEXITED(st) && WEXITSTATUS(st) == SBX_TRAP_EXIT,
        "%s: expected the trap exit, got status 0x%x", what, st);
  CHECK(slot >= 0 && !strcmp(sbx_syscall_name(slot), syscall),
        "%s: trapped syscall %d (%s), expected %s", what, slot,
        slot >= 0 ? sbx_syscall_name(slot) : "-", syscall);
}

int main(void) {
  int slot, st = run_confined(allowed_work, &slot);
  CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0 && slot == -1,
        "allowed work must run: status 0x%x, slot %d", st, slot);
  static const sbx_profile_id binders[3] = {SBX_RUN_CPU_EMU, SBX_COMPILE,
                                            SBX_RUN_GPU};
  for (int i = 0; i < 3; i++) {
    confine_as = binders[i];
    st = run_confined(do_mbind, &slot);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0 && slot == -1,
          "profile %d: OpenBLAS's mbind must run: status 0x%x, slot %d (%s)",
          (int)binders[i], st, slot, slot >= 0 ? sbx_syscall_name(slot) : "-");
  }
  confine_as = SBX_COMPILE;
  unlink("/tmp/kernlab_sbx_compile_test");
  st = run_confined(compile_opens, &slot);
  CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0 && slot == -1,
        "compile profile: writes must fail with EACCES, reads pass: status "
        "0x%x (exit 10+i: refused open i not EACCES; 20: read failed), "
        "trapped %s",
        st, slot >= 0 ? sbx_syscall_name(slot) : "nothing");
  CHECK(access("/tmp/kernlab_sbx_compile_test", F_OK) != 0,
        "compile profile: the file was created");
  confine_as = SBX_RUN_CPU_EMU;
  st = run_headroom();
  CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0,
        "compile profile: RLIMIT_AS must be 4 GiB above the worker's own "
        "reservations: status 0x%x (exit 4: 1 GiB refused after 6 GiB "
        "reserved; 5: 5 GiB more allowed)",
        st);
  unlink("/tmp/kernlab_sbx_test");
  expect_trap("open for write", do_open, "openat");
  CHECK(access("/tmp/kernlab_sbx_test", F_OK) != 0, "the file was created");
  expect_trap("socket", do_socket, "socket");
  expect_trap("fork", do_fork, "clone");
  /* glibc blocks signals around clone, so the kernel kills with SIGSYS
   * before the handler can say which call: either end is a trap. */
  st = run_confined(do_thread, &slot);
  CHECK((WIFSIGNALED(st) && WTERMSIG(st) == SIGSYS) ||
            (WIFEXITED(st) && WEXITSTATUS(st) == SBX_TRAP_EXIT &&
             !strcmp(sbx_syscall_name(slot), "clone")),
        "a thread: expected a clone trap, got status 0x%x", st);
  static const sbx_profile_id synced[3] = {SBX_RUN_CPU_EMU, SBX_RUN_GPU,
                                           SBX_COMPILE};
  for (int i = 0; i < 3; i++) {
    st = run_early_thread(synced[i], &slot);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == SBX_TRAP_EXIT && slot >= 0 &&
              !strcmp(sbx_syscall_name(slot), "socket"),
          "profile %d: a thread started before the filter must trap on "
          "socket: status 0x%x, slot %d (%s)",
          (int)synced[i], st, slot, slot >= 0 ? sbx_syscall_name(slot) : "-");
  }
  expect_trap("exec", do_exec, "execve");
  expect_trap("replace the SIGSYS handler", do_sigsys_handler, "rt_sigaction");
  expect_trap("replace the SIGSYS handler, high bits set", do_sigsys_high_bits,
              "rt_sigaction");
  st = run_confined(do_other_handlers, &slot);
  CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0 && slot == -1,
        "handlers of other signals: allowed: status 0x%x, slot %d (%s)", st,
        slot, slot >= 0 ? sbx_syscall_name(slot) : "-");
#if defined(__x86_64__)
  expect_trap("an x32 system call", do_x32_call, "x32-openat");
#endif
  expect_trap("signal the parent", do_kill_parent, "getppid");
  /* run-gpu: the timing summary's sort needs no syscall; glibc's qsort
   * does on this glibc (said, not checked: another glibc may not) */
  confine_as = SBX_RUN_GPU;
  st = run_confined(gpu_median, &slot);
  CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0 && slot == -1,
        "run-gpu: the median of 200 samples: status 0x%x, slot %d (%s)", st,
        slot, slot >= 0 ? sbx_syscall_name(slot) : "-");
  st = run_confined(gpu_launch_checks, &slot);
  CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0 && slot == -1,
        "run-gpu: fresh inputs and the launch checks on 4 threads: status "
        "0x%x, slot %d (%s)",
        st, slot, slot >= 0 ? sbx_syscall_name(slot) : "-");
  st = run_confined(gpu_secret_seed, &slot);
  CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0 && slot == -1,
        "run-gpu: a timed launch's secret seed (kl_secret_seed, getrandom): "
        "status 0x%x, slot %d (%s)",
        st, slot, slot >= 0 ? sbx_syscall_name(slot) : "-");
  st = run_confined(gpu_driver_memfd, &slot);
  CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0 && slot == -1,
        "run-gpu: a driver's memfd grown to 64 MiB and sealed: status 0x%x "
        "(SIGXFSZ is %d), slot %d (%s)",
        st, SIGXFSZ, slot, slot >= 0 ? sbx_syscall_name(slot) : "-");
  st = run_confined(name_thread, &slot);
  CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0 && slot == -1,
        "run-gpu: opening a thread's comm fails with EACCES and the worker "
        "lives on: status 0x%x, slot %d",
        st, slot);
  expect_trap("run-gpu: a read-only open", read_proc, "openat");
  st = run_confined(libc_qsort_200, &slot);
  printf("test_sandbox: under run-gpu, glibc's qsort of 200 doubles %s\n",
         slot >= 0 ? sbx_syscall_name(slot) : "made no trapped call");
  confine_as = SBX_RUN_CPU_EMU;
  /* --explain names the profile and every allowed syscall's reason. */
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  CHECK(sbx_explain(f, 1) == 0, "explain failed");
  fclose(f);
  CHECK(strstr(buf, "run-cpu-emu") && strstr(buf, "CLONE_THREAD only") &&
            strstr(buf, "RLIMIT_AS"),
        "explain output lacks the profile table");
  CHECK(strstr(buf, "environment: only PATH,") &&
            strstr(buf, "less AWS_* and names with TOKEN,"),
        "explain output lacks the run workers' environment rules");
  free(buf);
  return kl_test_done("test_sandbox");
}
