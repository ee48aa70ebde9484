/*
 * tests/unit/test_run_fork.c — the evaluation without a sandbox (exec NULL:
 * NVRTC here, runs in a forked child via kl_run_in_fork): an honest kernel
 * is correct and timed, a crashing one is crashed:SIGSEGV, a hanging one is
 * a timeout, and the evaluation itself survives all three. The later runs
 * (one seed) take their references from the cache and still judge.
 */
#include "kernels/kernels.h"
#include "tests/unit/kltest.h"

#include <string.h>

#define KERNEL(BODY)                                                           \
  "KL_LAUNCH(16, 16, 16, 16, 0);\n"                                            \
  "extern \"C\" __global__ void matmul(const float* A, const float* B, "       \
  "float* C, int M, int N, int K) {\n"                                         \
  "  int r = blockIdx.y * 16 + threadIdx.y, c = blockIdx.x * 16 + "            \
  "threadIdx.x;\n"                                                             \
  "  if (r >= M || c >= N) return;\n"                                          \
  "  float acc = 0.0f;\n"                                                      \
  "  for (int k = 0; k < K; k++) acc += A[r * K + k] * B[k * N + c];\n"        \
  "  " BODY "\n"                                                               \
  "  C[r * N + c] = acc;\n"                                                    \
  "}\n"

static void eval(const char *src, kl_result *r) {
  kl_eval_options o;
  kl_eval_defaults(&o);
  o.backend = "cpu-emu";
  o.shapes[0] = (kl_shape){32, 32, 32};
  o.n_shapes = 1;
  o.seed = 7;
  o.threads = 1;
  o.run_deadline_s = 3;
  o.max_samples = 5;
  o.time_budget_ms = 10;
  kl_eval_source("t.cu", src, strlen(src), &o, r);
}

int main(void) {
  static kl_result r;
  eval(KERNEL(""), &r);
  CHECK(r.correct && !strcmp(r.status, "ok") && r.time_us > 0, "honest: %s %s",
        r.status, r.error);
  eval(KERNEL("if (r == 0 && c == 0) *(volatile int*)0 = 1;"), &r);
#if defined(__SANITIZE_ADDRESS__)
  /* AddressSanitizer catches the SEGV in the child and exits instead. */
  CHECK(!strcmp(r.status, "crashed:SIGSEGV") ||
            !strcmp(r.status, "crashed:exit"),
        "crash: %s %s", r.status, r.error);
#else
  CHECK(!strcmp(r.status, "crashed:SIGSEGV"), "crash: %s %s", r.status,
        r.error);
#endif
  eval(KERNEL(
           "if (r == 0 && c == 0) for (volatile int i = 0; i >= 0; i += 0) {}"),
       &r);
  CHECK(!strcmp(r.status, "timeout"), "hang: %s %s", r.status, r.error);
  int64_t hits = kl_reference_cache_hits();
  eval(KERNEL(""), &r);
  CHECK(r.correct, "still evaluates after the failures: %s", r.status);
  /* the same seed: its references came from the cache, and still judge
   * (kernels/check.c) */
  CHECK(kl_reference_cache_hits() > hits, "no reference cache hit");
  double err = r.max_rel_err;
  eval(KERNEL("if (r == 3 && c == 5) acc += 1.0f;"), &r);
  CHECK(!r.correct && !strcmp(r.status, "wrong"),
        "a wrong kernel against cached references: %s", r.status);
  eval(KERNEL(""), &r);
  CHECK(r.correct && r.max_rel_err == err,
        "cached references give the same verdict: %g vs %g", r.max_rel_err,
        err);
  return kl_test_done("test_run_fork");
}
