/*
 * tests/unit/test_sandbox_matmul.c — sbx_matmul (sandbox/matmul.c): a
 * candidate module behind many GEMMs in a confined worker, as --policy-matmul
 * runs it on the CPU.
 *
 *   - an honest kernel: C = A·B at several shapes, in any order (the memfd
 *     grows and shrinks back), equal to a double-precision reference within
 *     the fp32 tolerance;
 *   - a kernel that behaves on its first GEMM and opens a file for writing
 *     on its second (what a candidate that passed the checks might do
 *     later): that GEMM fails with killed:seccomp, the file is not created,
 *     and every later call fails at once with the same message;
 *   - a kernel that crashes on its second GEMM: crashed:<signal>;
 *   - a kernel that hangs on its second GEMM: a timeout within the
 *     deadline, the worker killed;
 *   - a kernel that writes just past C, or into A, on its second GEMM
 *     (what the harness flags canary_overwritten, input_mutated): that
 *     GEMM fails saying so, and the server ends;
 *   - a worker past its CPU budget (sbx_matmul_set_recycle, here 0 s) is
 *     replaced by a fresh one before the next GEMM, the module loaded
 *     again, and the answers stay right; a kernel that counts its calls
 *     sees the count start over (a fresh process);
 *   - a module that does not load: sbx_matmul_open refuses it;
 *   - no worker is left behind (sbx_spawn_count vs reaped).
 * The kernels are built with kl_emu_compile directly: the source scanner,
 * which would refuse their host code, is the lab's filter in front of this
 * sandbox, not part of it.
 */
#define _GNU_SOURCE
#include "kernels/kernels.h"
#include "sandbox/sandbox.h"
#include "tests/unit/kltest.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define KERNEL(PRELUDE, BODY)                                                  \
  PRELUDE "KL_LAUNCH(16, 16, 16, 16, 0);\n"                                    \
          "extern \"C\" __global__ void matmul(const float* A, const float* "  \
          "B, float* C, int M, int N, int K) {\n"                              \
          "  int r = blockIdx.y * 16 + threadIdx.y, c = blockIdx.x * 16 + "    \
          "threadIdx.x;\n"                                                     \
          "  if (r == 0 && c == 0) { " BODY " }\n"                             \
          "  if (r >= M || c >= N) return;\n"                                  \
          "  float acc = 0.0f;\n"                                              \
          "  for (int k = 0; k < K; k++) acc += A[r * K + k] * B[k * N + "     \
          "c];\n"                                                              \
          "  C[r * N + c] = acc;\n"                                            \
          "}\n"

/* Host code the emulator compiles (NVRTC never sees it): a call counter
 * shared by the kernel's blocks, and the misbehaviour on call two. The
 * emulator's build refuses libc imports (kernels/emu/emu_build.c), so the
 * host code makes raw x86-64 system calls, as a candidate past that wall
 * would. The counter lives in a page at a fixed address that the first
 * call maps (MAP_FIXED_NOREPLACE: later calls fail with EEXIST and find it
 * there): the module's own data is read-only, and a fresh worker process
 * starts again from one. */
#define SECOND_CALL_PRELUDE                                                    \
  "#ifndef __CUDA_ARCH__\n"                                                    \
  "static long kl_sys6(long n, long a, long b, long c, long d, long e,\n"      \
  "                    long f) {\n"                                            \
  "  register long r10 __asm__(\"r10\") = d;\n"                                \
  "  register long r8 __asm__(\"r8\") = e;\n"                                  \
  "  register long r9 __asm__(\"r9\") = f;\n"                                  \
  "  long r;\n"                                                                \
  "  __asm__ volatile(\"syscall\" : \"=a\"(r) : \"a\"(n), \"D\"(a), \"S\"(b)," \
  " \"d\"(c), \"r\"(r10), \"r\"(r8), \"r\"(r9) : \"rcx\", \"r11\", "           \
  "\"memory\");\n"                                                             \
  "  return r;\n"                                                              \
  "}\n"                                                                        \
  "static int kl_next_call() {\n"                                              \
  "  volatile int* p = (volatile int*)0x6b6c00000000ll;\n"                     \
  "  kl_sys6(9, (long)p, 4096, 3, 0x100022, -1, 0); /* mmap */\n"              \
  "  return ++*p;\n"                                                           \
  "}\n"                                                                        \
  "#endif\n"

static const char honest[] = KERNEL("", "");
static const char opens_later[] =
    KERNEL(SECOND_CALL_PRELUDE,
           "if (kl_next_call() == 2) kl_sys6(2, "
           "(long)\"/tmp/kernlab_sbx_matmul_leak\", 0101, 0644, 0, 0, 0);");
static const char crashes_later[] = KERNEL(
    SECOND_CALL_PRELUDE, "if (kl_next_call() == 2) *(volatile int*)0 = 1;");
static const char hangs_later[] = KERNEL(
    SECOND_CALL_PRELUDE,
    "if (kl_next_call() == 2) for (volatile int i = 0; i >= 0; i += 0) {}");

/* Writes the harness flags on a second GEMM: past C's end (inside the
 * canary band after it, where no page fault would tell), and into A. */
static const char writes_past_c_later[] = KERNEL(
    SECOND_CALL_PRELUDE, "if (kl_next_call() == 2) C[M * N + 5] = 7.0f;");
static const char writes_a_later[] = KERNEL(
    SECOND_CALL_PRELUDE, "if (kl_next_call() == 2) ((float*)A)[3] = 7.0f;");

static int build(const char *src, char *so, size_t so_len) {
  char why[600];
  int rc =
      kl_emu_compile(src, strlen(src), so, so_len, NULL, NULL, why, sizeof why);
  CHECK(rc == KL_OK, "build: %s", why);
  return rc;
}

/* C = A·B in double, then the fp32 tolerance of kernels.h per element. */
static int gemm_ok(const float *A, const float *B, const float *C, int M, int N,
                   int K) {
  for (int m = 0; m < M; m++)
    for (int n = 0; n < N; n++) {
      double s = 0, mag = 0;
      for (int k = 0; k < K; k++) {
        s += (double)A[m * K + k] * B[k * N + n];
        mag += fabs((double)A[m * K + k] * B[k * N + n]);
      }
      if (!(fabs(C[m * N + n] - s) <= 2 * KL_TOL_ELEM * mag + 1e-30)) return 0;
    }
  return 1;
}

static void run_shape(sbx_matmul *s, int M, int N, int K, uint64_t seed) {
  float *A = malloc(sizeof(float) * M * K), *B = malloc(sizeof(float) * K * N);
  float *C = malloc(sizeof(float) * M * N);
  kl_fill_random(A, (size_t)M * K, seed, 0);
  kl_fill_random(B, (size_t)K * N, seed, 1);
  char why[512];
  int rc = sbx_matmul_run(s, A, B, C, M, N, K, why, sizeof why);
  CHECK(rc == KL_OK, "honest %dx%dx%d: %s", M, N, K, why);
  CHECK(rc != KL_OK || gemm_ok(A, B, C, M, N, K), "honest %dx%dx%d: wrong C", M,
        N, K);
  free(A), free(B), free(C);
}

/* The first GEMM works, the second fails with `want` in the message, the
 * third fails at once with the same message. */
static void misbehaves_later(const char *src, const char *want,
                             double deadline_s) {
  char so[512], why[512], why2[512];
  if (build(src, so, sizeof so) != KL_OK) return;
  sbx_matmul *s = NULL;
  int rc = sbx_matmul_open(so, 0, 1, deadline_s, &s, why, sizeof why);
  CHECK(rc == KL_OK, "open: %s", why);
  if (rc != KL_OK) return;
  float A[16 * 16], B[16 * 16], C[16 * 16];
  kl_fill_random(A, 256, 3, 0);
  kl_fill_random(B, 256, 3, 1);
  CHECK(sbx_matmul_run(s, A, B, C, 16, 16, 16, why, sizeof why) == KL_OK &&
            gemm_ok(A, B, C, 16, 16, 16),
        "%s: the first GEMM: %s", want, why);
  struct timespec a, b;
  clock_gettime(CLOCK_MONOTONIC, &a);
  rc = sbx_matmul_run(s, A, B, C, 16, 16, 16, why, sizeof why);
  clock_gettime(CLOCK_MONOTONIC, &b);
  double took = (b.tv_sec - a.tv_sec) + (b.tv_nsec - a.tv_nsec) / 1e9;
  CHECK(rc == KL_EINPUT && strstr(why, want), "%s: second GEMM: rc %d '%s'",
        want, rc, why);
  CHECK(took < deadline_s + 5, "%s: took %.1f s (deadline %.0f s)", want, took,
        deadline_s);
  rc = sbx_matmul_run(s, A, B, C, 16, 16, 16, why2, sizeof why2);
  CHECK(rc == KL_EINPUT && !strcmp(why, why2),
        "%s: a dead server answers at once with its message: '%s'", want, why2);
  sbx_matmul_close(s);
  printf("test_sandbox_matmul: %s\n", why);
}

int main(int argc, char **argv) {
  if (argc > 1 && !strcmp(argv[1], "__worker"))
    return sbx_worker_main(argc - 1, argv + 1);
  char so[512], why[512];
  unlink("/tmp/kernlab_sbx_matmul_leak");
  if (build(honest, so, sizeof so) == KL_OK) {
    sbx_matmul *s = NULL;
    int rc = sbx_matmul_open(so, 0, 2, 30, &s, why, sizeof why);
    CHECK(rc == KL_OK, "open honest: %s", why);
    if (rc == KL_OK) {
      run_shape(s, 33, 17, 20, 1);
      run_shape(s, 96, 64, 80, 2); /* the memfd grows */
      run_shape(s, 1, 1, 1, 3);
      run_shape(s, 40, 50, 30, 4);
      CHECK(sbx_matmul_restarts(s) == 0, "no restart under the budget: %d",
            sbx_matmul_restarts(s));
      /* every request past the budget: a fresh worker each time */
      int spawned = sbx_spawn_count();
      sbx_matmul_set_recycle(s, 0);
      run_shape(s, 96, 64, 80, 5);
      run_shape(s, 33, 17, 20, 6);
      run_shape(s, 96, 64, 80, 7);
      CHECK(sbx_matmul_restarts(s) == 3 && sbx_spawn_count() == spawned + 3,
            "three fresh workers for three GEMMs past the budget: %d, %d",
            sbx_matmul_restarts(s), sbx_spawn_count() - spawned);
      sbx_matmul_close(s);
    }
  }
#if defined(__x86_64__) /* the misbehaving kernels' raw system calls */
  /* the kernel that misbehaves on its second call in a process: with a
   * fresh worker per GEMM, it never reaches its second call */
  if (build(crashes_later, so, sizeof so) == KL_OK) {
    sbx_matmul *s = NULL;
    int rc = sbx_matmul_open(so, 0, 1, 30, &s, why, sizeof why);
    CHECK(rc == KL_OK, "open crashes_later: %s", why);
    if (rc == KL_OK) {
      sbx_matmul_set_recycle(s, 0);
      for (int i = 0; i < 3; i++)
        run_shape(s, 16, 16, 16, 10 + (uint64_t)i);
      sbx_matmul_close(s);
    }
  }
  misbehaves_later(opens_later, "killed:seccomp:open", 30);
  CHECK(access("/tmp/kernlab_sbx_matmul_leak", F_OK) != 0,
        "the kernel created a file");
#if defined(__SANITIZE_ADDRESS__)
  /* AddressSanitizer's SEGV handler opens files in the worker: it traps */
  misbehaves_later(crashes_later, "killed:seccomp:", 30);
#else
  misbehaves_later(crashes_later, "crashed:SIGSEGV", 30);
#endif
  misbehaves_later(hangs_later, "timeout", 2);
  misbehaves_later(writes_past_c_later, "wrote outside C", 30);
  misbehaves_later(writes_a_later, "changed its input A or B", 30);
#else
  printf("test_sandbox_matmul: the misbehaving kernels make x86-64 system "
         "calls; skipped on this machine\n");
#endif
  sbx_matmul *none = NULL;
  int rc = sbx_matmul_open("/nonexistent/module.so", 0, 1, 10, &none, why,
                           sizeof why);
  CHECK(rc == KL_EINPUT && !none && why[0], "a missing module: rc %d '%s'", rc,
        why);
  /* every worker reaped: no child of this process is left */
  CHECK(waitpid(-1, NULL, WNOHANG) < 0, "a worker was left behind");
  return kl_test_done("test_sandbox_matmul");
}
