/*
 * tests/unit/test_policy_matmul.c — --policy-matmul (lab/policy_matmul.c,
 * and the packing path of policy/cuda: pcuda_set_matmul, pack.cu): the
 * policy's GEMMs through a kernel stored in a results file give what the
 * default path gives, and a file without a usable kernel is refused.
 *
 *   test_policy_matmul            on the CPU emulator (label unit)
 *   test_policy_matmul --device   on device 0 (label gpu; exit 77 with the
 *                                 reason where no device answers or the
 *                                 build has no fatbin)
 *
 * The results files are written here through the store's API with the
 * sources of kernels/seeds and tests/kernels: the verdicts in them (correct,
 * time, flags) are whatever the test says, which is how a forged or stale
 * file looks to the lab.
 *   1. selection: the fastest correct, unflagged row wins over a faster
 *      wrong one and a faster flagged one (lab_best_candidate).
 *   2. on the CPU: a tiny model (ragged sizes: d 32, d_ff 96, vocab 97,
 *      B 2 x T 9) through seed 05_blocktile_2d on the emulator, against the
 *      same model on BLAS: the loss of a forward, every gradient of a
 *      backward, the loss after one AdamW step, and a greedy generation
 *      (tokens equal, log-probs close).
 *   3. the device path's packing on the emulator backend of pcuda: the
 *      same kernel behind pcuda_set_matmul, against the tiled GEMM: strided
 *      and transposed operands with alpha and beta, then the model's
 *      forward and backward; pcuda's check of the first call of each shape
 *      keeps it, and drops a kernel wrong only at M == 2 at its first such
 *      call, that call getting the default's product.
 *   4. refusals, exit 2 with a sentence: a file with no correct kernel
 *      (only a wrong one, and a correct one that is flagged), a wrong
 *      kernel marked correct (a plain index bug, and an off-by-one that only
 *      ragged K exposes), one that does not compile, one whose text raises
 *      an anti-cheat flag now, a missing file.
 * --device does 2 and 4 with the pcuda model on the device and the kernel
 * compiled by NVRTC (pcuda_device_load_matmul), against cuBLAS.
 *
 * Tolerances (candidate vs default path; both fp32, they differ only in
 * summation order): losses within 1e-5 relative, gradients within 1e-4 of
 * the largest gradient, log-probs within 1e-4.
 */
#include "kltest.h"
#include "lab/lab.h"
#include "lab/policy_device.h"
#include "policy/cuda/pcuda.h"
#include "policy/policy.h"
#include "sandbox/sandbox.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define TOL_LOSS 1e-5
#define TOL_GRAD 1e-4
#define TOL_LOGPROB 1e-4

static const char *src_dir;
static char tmp_dir[512];

/* ---- results files ---- */

typedef struct entry {
  const char *file; /* relative to the source folder */
  int correct;
  double time_us;
  uint64_t flags;
} entry;

static char *read_source(const char *rel, size_t *len) {
  char path[1024], why[256], *src = NULL;
  snprintf(path, sizeof path, "%s/%s", src_dir, rel);
  if (kl_source_load(path, &src, len, why, sizeof why) != KL_OK) {
    fprintf(stderr, "test_policy_matmul: %s\n", why);
    return NULL;
  }
  return src;
}

/* Writes name (in the temp folder) with the entries; its path in path. */
static int write_results(const char *name, const entry *e, int n, char *path,
                         size_t pathlen) {
  snprintf(path, pathlen, "%s/%s", tmp_dir, name);
  unlink(path);
  res_campaign_meta meta = {.config = "-- test_policy_matmul",
                            .backend = "cpu-emu",
                            .device = "cpu-emu"};
  char why[512];
  int code;
  res_file *f = res_open_append(path, &meta, &code, why, sizeof why);
  CHECK(f, "%s: %s", path, why);
  if (!f) return -1;
  for (int i = 0; i < n; i++) {
    size_t len;
    char *src = read_source(e[i].file, &len);
    CHECK(src, "source %s", e[i].file);
    if (!src) continue;
    res_candidate c;
    memset(&c, 0, sizeof c);
    c.step = -1;
    c.group = c.sample = -1;
    snprintf(c.task, sizeof c.task, "fp32_256");
    snprintf(c.label, sizeof c.label, "%s", strrchr(e[i].file, '/') + 1);
    snprintf(c.backend, sizeof c.backend, "cpu-emu");
    snprintf(c.status, sizeof c.status, "%s", e[i].correct ? "ok" : "wrong");
    c.compiled = 1;
    c.correct = (uint8_t)e[i].correct;
    c.time_us = e[i].time_us;
    c.time_min_us = c.time_max_us = e[i].time_us;
    c.baseline_us = 5000;
    c.reward = NAN;
    c.flags = e[i].flags;
    c.shape_m = c.shape_n = c.shape_k = 256;
    CHECK(res_append_candidate(f, &c, src, len, NULL, 0, NULL, NULL, 0, NULL,
                               why, sizeof why) == RES_OK,
          "append %s: %s", e[i].file, why);
    free(src);
  }
  CHECK(res_close(f, why, sizeof why) == RES_OK, "close: %s", why);
  return 0;
}

static char good_h5[600];

static void check_selection(void) {
  const entry good[] = {
      {"tests/kernels/broken/wrong_index.cu", 0, 10, 0}, /* fastest, wrong */
      {"kernels/seeds/01_naive.cu", 1, 5000, 0},
      {"kernels/seeds/05_blocktile_2d.cu", 1, 400, 0}, /* the best */
      {"tests/kernels/honest/h04_smem_tile16.cu", 1, 100,
       (uint64_t)1 << KL_FLAG_CANARY_OVERWRITTEN}, /* faster, flagged */
  };
  write_results("good.h5", good, 4, good_h5, sizeof good_h5);
  int code;
  char why[512];
  res_reader *r = res_open_read(good_h5, &code, why, sizeof why);
  CHECK(r, "%s: %s", good_h5, why);
  if (!r) return;
  CHECK(lab_best_candidate(r) == 2, "best candidate %lld, expected 2",
        (long long)lab_best_candidate(r));
  res_reader_close(r);
}

/* ---- comparisons ---- */

static double max_abs(const float *x, size_t n) {
  double m = 0;
  for (size_t i = 0; i < n; i++)
    m = fmax(m, fabs(x[i]));
  return m;
}

static double max_diff(const float *x, const float *y, size_t n) {
  double m = 0;
  for (size_t i = 0; i < n; i++)
    m = fmax(m, fabs((double)x[i] - y[i]));
  return m;
}

static const pl_config tiny = {97, 32, 2, 4, 96, 16};
enum { B = 2, T = 9 };

static void batch(int32_t *x, int32_t *y) {
  uint32_t s = 11;
  for (int i = 0; i < B * T; i++) {
    s = s * 1664525u + 1013904223u;
    x[i] = (int32_t)((s >> 8) % (uint32_t)tiny.vocab);
  }
  for (int i = 0; i < B * T; i++)
    y[i] = (i + 1) % T ? x[i + 1] : -1;
}

/* What one path gives: loss, gradients, loss after an AdamW step, and a
 * greedy generation. */
typedef struct outcome {
  float loss, loss2;
  float *grads;
  pl_generation gen;
} outcome;

/* Runs the model on the CPU (ctx NULL) or through pcuda on ctx. */
static void run_model(pcuda_ctx *ctx, outcome *o, const char *label) {
  char why[256];
  pl_model m;
  memset(o, 0, sizeof *o);
  CHECK(pl_model_init(&m, &tiny, 3, why, sizeof why) == PL_OK, "%s", why);
  pl_adamw opt;
  pl_adamw_config ac = pl_adamw_defaults();
  ac.lr = 1e-2f;
  CHECK(pl_adamw_init(&opt, &m, &ac, why, sizeof why) == PL_OK, "%s", why);
  o->grads = calloc(m.num_params, sizeof(float));
  int32_t x[B * T], y[B * T];
  batch(x, y);
  const int32_t prompt[3] = {1, 5, 9};
  pl_sampling greedy = pl_sampling_default();
  greedy.temperature = 0;
  int rc;
  if (!ctx) {
    o->loss = pl_model_forward(&m, x, y, B, T);
    pl_model_zero_grad(&m);
    pl_model_backward(&m);
    memcpy(o->grads, m.grads_memory, m.num_params * sizeof(float));
    pl_adamw_step(&opt, &m);
    o->loss2 = pl_model_forward(&m, x, y, B, T);
    rc = pl_generate(&m, prompt, 3, 2, 6, -1, &greedy, 1, &o->gen, why,
                     sizeof why);
  } else {
    pcuda_model dm;
    pcuda_adamw dopt;
    CHECK(pcuda_model_init(&dm, ctx, &m, why, sizeof why) == PL_OK, "%s: %s",
          label, why);
    CHECK(pcuda_adamw_init(&dopt, &dm, &ac, why, sizeof why) == PL_OK, "%s: %s",
          label, why);
    o->loss = pcuda_model_forward(&dm, x, y, B, T);
    pcuda_model_zero_grad(&dm);
    pcuda_model_backward(&dm);
    pcuda_model_get_grads(&dm, o->grads);
    pcuda_adamw_step(&dopt, &dm);
    o->loss2 = pcuda_model_forward(&dm, x, y, B, T);
    rc = pcuda_generate(&dm, prompt, 3, 2, 6, -1, &greedy, 1, &o->gen, why,
                        sizeof why);
    CHECK(pcuda_status(ctx, why, sizeof why) == PL_OK, "%s: %s", label, why);
    pcuda_adamw_free(&dopt);
    pcuda_model_free(&dm);
  }
  CHECK(rc == PL_OK, "%s: generate: %s", label, why);
  pl_adamw_free(&opt);
  pl_model_free(&m);
}

static size_t n_params(void) {
  size_t s[PL_NUM_PARAM_TENSORS], n = 0;
  pl_param_sizes(&tiny, s);
  for (int i = 0; i < PL_NUM_PARAM_TENSORS; i++)
    n += s[i];
  return n;
}

/* The candidate's outcome against the default path's. */
static void compare(const outcome *def, const outcome *cand,
                    const char *label) {
  CHECK(isfinite(cand->loss) &&
            fabs(cand->loss - def->loss) <= TOL_LOSS * fmax(1, fabs(def->loss)),
        "%s: loss %.8g through the kernel, %.8g by default", label,
        (double)cand->loss, (double)def->loss);
  CHECK(isfinite(cand->loss2) && fabs(cand->loss2 - def->loss2) <=
                                     TOL_LOSS * fmax(1, fabs(def->loss2)),
        "%s: loss after a step %.8g through the kernel, %.8g by default", label,
        (double)cand->loss2, (double)def->loss2);
  size_t n = n_params();
  double gmax = max_abs(def->grads, n),
         gd = max_diff(def->grads, cand->grads, n);
  CHECK(gmax > 0 && gd <= TOL_GRAD * gmax,
        "%s: gradients differ by %.3g (largest %.3g)", label, gd, gmax);
  int same = def->gen.G == cand->gen.G;
  double lp = 0;
  for (int g = 0; same && g < def->gen.G; g++) {
    same = def->gen.lengths[g] == cand->gen.lengths[g];
    for (int i = 0; same && i < def->gen.lengths[g]; i++) {
      size_t k = (size_t)g * def->gen.max_new + i;
      same = def->gen.tokens[k] == cand->gen.tokens[k];
      lp = fmax(lp, fabs(def->gen.logprobs[k] - cand->gen.logprobs[k]));
    }
  }
  CHECK(same && lp <= TOL_LOGPROB,
        "%s: greedy generation: tokens %s, log-prob difference %.3g", label,
        same ? "equal" : "DIFFER", lp);
  printf("%s: loss %.6f vs %.6f, after a step %.6f vs %.6f, gradients "
         "within %.2g of %.2g, generation log-probs within %.2g\n",
         label, (double)cand->loss, (double)def->loss, (double)cand->loss2,
         (double)def->loss2, gd, gmax, lp);
}

static void outcome_free(outcome *o) {
  free(o->grads);
  pl_generation_free(&o->gen);
}

/* ---- 2. the CPU path ---- */

static void check_cpu(void) {
  outcome def, cand;
  run_model(NULL, &def, "cpu");
  lab_matmul *mm = NULL;
  char why[1024];
  int ex =
      lab_policy_matmul_open(good_h5, NULL, &tiny, B * T, &mm, why, sizeof why);
  CHECK(ex == LAB_EXIT_OK, "open %s: exit %d: %s", good_h5, ex, why);
  if (ex) {
    outcome_free(&def);
    return;
  }
  printf("cpu: %s\n", lab_policy_matmul_describe(mm));
  CHECK(strstr(lab_policy_matmul_describe(mm), "05_blocktile_2d.cu"),
        "describe: %s", lab_policy_matmul_describe(mm));
  run_model(NULL, &cand, "cpu, --policy-matmul");
  char line[512];
  CHECK(lab_policy_matmul_report(mm, line, sizeof line) == 0, "%s", line);
  long long calls = atoll(line);
  /* 2 forwards x 9 GEMMs, a backward x 18, and the generation's */
  CHECK(calls >= 2 * 9 + 18, "only %lld GEMMs went through it: %s", calls,
        line);
  printf("cpu: %s\n", line);
  lab_policy_matmul_close(mm);
  compare(&def, &cand, "cpu-emu kernel vs BLAS");
  outcome_free(&def);
  outcome_free(&cand);
}

/* ---- 3. the device path's packing, on the emulator backend ---- */

/* Operands handed to the candidate that were not 256-byte aligned. The
 * harness always passes cuMemAlloc's pointers, so a candidate may assume
 * the alignment (float4 loads after checking only its sizes); on a device a
 * misaligned one faults and poisons the context. The emulator would not. */
static int misaligned;

static int emu_runner(void *impl, const float *A, const float *B_, float *C,
                      int M, int N, int K, char *why, size_t whylen) {
  if ((uintptr_t)A % 256 || (uintptr_t)B_ % 256 || (uintptr_t)C % 256)
    misaligned++;
  return kl_emu_run(impl, A, B_, C, M, N, K, 0, why, whylen) == KL_OK ? 0 : -1;
}

/* emu_runner, but wrong when M == 2 (a two-row decode step: a shape the
 * lab's check before the first step need not try); counts its calls */
static int wrong_runs;
static int wrong_at_2(void *impl, const float *A, const float *B_, float *C,
                      int M, int N, int K, char *why, size_t whylen) {
  wrong_runs++;
  int rc = emu_runner(impl, A, B_, C, M, N, K, why, whylen);
  if (M == 2) /* emulator memory is host memory */
    for (int i = 0; i < N; i++)
      C[i] = -C[i];
  return rc;
}

/* pcuda's check of the first call of each shape (pcuda_set_matmul): an
 * honest kernel is checked once per shape and kept; one wrong at M == 2
 * is dropped at its first such call, which gets the default's product,
 * and later calls never reach it. */
static void check_first_calls(pcuda_ctx *ctx, kl_emu_module *mod) {
  char why[400];
  long long checked = -1;
  int dropped = pcuda_matmul_dropped(ctx, &checked, why, sizeof why);
  CHECK(!dropped && checked == 3,
        "the honest kernel: kept, 3 shapes checked (of 6 calls): %d %lld",
        dropped, checked);
  pcuda_set_matmul(ctx, wrong_at_2, mod);
  const int Ms[4] = {37, 2, 37, 5};
  for (int t = 0; t < 4; t++) {
    int M = Ms[t], N = 29, K = 45;
    float *a = pcuda_alloc(ctx, (size_t)M * K * 4);
    float *b = pcuda_alloc(ctx, (size_t)K * N * 4);
    float *c0 = pcuda_alloc(ctx, (size_t)M * N * 4);
    float *c1 = pcuda_alloc(ctx, (size_t)M * N * 4);
    kl_fill_random(a, (size_t)M * K, 11, 2 * (uint64_t)t);
    kl_fill_random(b, (size_t)K * N, 11, 2 * (uint64_t)t + 1);
    int before = wrong_runs;
    for (int use = 0; use < 2; use++)
      pcuda_linear_gemm(ctx, use, use ? c1 : c0, a, b, M, N, K, K, N, N, 0, 0,
                        1.0f, 0.0f);
    CHECK(pcuda_status(ctx, why, sizeof why) == PL_OK, "first calls: %s", why);
    double d = max_diff(c0, c1, (size_t)M * N), s = max_abs(c0, (size_t)M * N);
    CHECK(d <= 1e-5 * fmax(1, s),
          "call %d (M %d): the default's product, differs by %.3g", t, M, d);
    dropped = pcuda_matmul_dropped(ctx, &checked, why, sizeof why);
    CHECK(dropped == (t >= 1) && (t < 1 || strstr(why, "at 2x29x45")),
          "call %d (M %d): dropped %d: %s", t, M, dropped, dropped ? why : "");
    CHECK(wrong_runs - before == (t <= 1),
          "call %d: the kernel ran %d times (once up to its drop, then never)",
          t, wrong_runs - before);
    pcuda_free(ctx, a);
    pcuda_free(ctx, b);
    pcuda_free(ctx, c0);
    pcuda_free(ctx, c1);
  }
  pcuda_set_matmul(ctx, NULL, NULL);
}

/* The CPU hook's check of the first call of each shape (policy/
 * gemm_hook.c), mirroring pcuda's above: a hook wrong at M == 2 (BLAS's
 * product with its first row negated) is dropped at its first such call,
 * which gets BLAS's product, and is never called again. */
static int hook_calls;
static int hook_wrong_at_2(void *ctx, int trans_a, int trans_b, int M, int N,
                           int K, float alpha, const float *A, int lda,
                           const float *B, int ldb, float beta, float *C,
                           int ldc) {
  (void)ctx;
  hook_calls++;
  pl_blas_gemm(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
  if (M == 2)
    for (int n = 0; n < N; n++)
      C[n] = -C[n];
  return 0;
}

static int declined;
static int hook_declines_once(void *ctx, int trans_a, int trans_b, int M, int N,
                              int K, float alpha, const float *A, int lda,
                              const float *B, int ldb, float beta, float *C,
                              int ldc) {
  (void)ctx, (void)trans_a, (void)trans_b, (void)K, (void)alpha, (void)A;
  (void)lda, (void)B, (void)ldb, (void)beta;
  if (!declined++) return 1;
  for (int m = 0; m < M; m++)
    for (int n = 0; n < N; n++)
      C[(size_t)m * ldc + n] = 12345.0f;
  return 0;
}

static void check_cpu_first_calls(void) {
  pl_set_gemm_hook(hook_wrong_at_2, NULL);
  /* (M, beta): 37 twice with beta 0 (checked once), 37 with beta 1 (a new
   * kind), then 2 (wrong: dropped), then 5 (never reaches the hook) */
  const int Ms[5] = {37, 37, 37, 2, 5};
  const float betas[5] = {0, 0, 1, 0, 0};
  const int calls_after[5] = {1, 2, 3, 4, 4};
  const long long checked_after[5] = {1, 1, 2, 3, 3};
  for (int t = 0; t < 5; t++) {
    int M = Ms[t], N = 29, K = 45, ldc = N + 3;
    float *a = malloc((size_t)K * M * 4), *b = malloc((size_t)K * N * 4);
    float *c0 = malloc((size_t)M * ldc * 4), *c1 = malloc((size_t)M * ldc * 4);
    kl_fill_random(a, (size_t)K * M, 12, 3 * (uint64_t)t);
    kl_fill_random(b, (size_t)K * N, 12, 3 * (uint64_t)t + 1);
    kl_fill_random(c0, (size_t)M * ldc, 12, 3 * (uint64_t)t + 2);
    memcpy(c1, c0, (size_t)M * ldc * 4);
    /* A transposed (K, M), as in a weight gradient */
    pl_blas_gemm(1, 0, M, N, K, 0.5f, a, M, b, N, betas[t], c0, ldc);
    pl_linear_gemm(1, 0, M, N, K, 0.5f, a, M, b, N, betas[t], c1, ldc);
    CHECK(!memcmp(c0, c1, (size_t)M * ldc * 4),
          "call %d (M %d): BLAS's product, whatever the hook did", t, M);
    char why[800] = "";
    long long checked = -1;
    int dropped = pl_gemm_hook_dropped(&checked, why, sizeof why);
    CHECK(dropped == (t >= 3) && (t < 3 || strstr(why, "at 2x29x45 (weight "
                                                       "gradient)")),
          "call %d (M %d): dropped %d: %s", t, M, dropped, why);
    CHECK(checked == checked_after[t], "call %d: %lld shapes checked, not %lld",
          t, checked, checked_after[t]);
    CHECK(hook_calls == calls_after[t],
          "call %d: the hook ran %d times, not %d", t, hook_calls,
          calls_after[t]);
    if (t == 2) {
      /* the bound, against a direct sum in double */
      float *sb = malloc((size_t)M * ldc * 4);
      CHECK(pl_gemm_bound(1, 0, M, N, K, -0.5f, a, M, b, N, 2.0f, c0, sb,
                          ldc) == 0,
            "pl_gemm_bound");
      double worst = 0;
      for (int m = 0; m < M; m++)
        for (int n = 0; n < N; n++) {
          double want = 2.0 * fabs(c0[(size_t)m * ldc + n]);
          for (int k = 0; k < K; k++)
            want +=
                0.5 * fabs((double)a[(size_t)k * M + m] * b[(size_t)k * N + n]);
          double e = fabs(sb[(size_t)m * ldc + n] - want) / want;
          if (e > worst) worst = e;
        }
      CHECK(worst < 1e-5, "pl_gemm_bound: relative error %.3g", worst);
      free(sb);
    }
    free(a);
    free(b);
    free(c0);
    free(c1);
  }
  pl_set_gemm_hook(NULL, NULL);
  CHECK(!pl_gemm_hook_dropped(NULL, NULL, 0), "a new hook: nothing dropped");

  /* a hook that declines its first call and writes garbage after: the
   * shape was not checked, so its second call is, and the hook dropped */
  pl_set_gemm_hook(hook_declines_once, NULL);
  float a[6] = {1, 2, 3, 4, 5, 6}, b[6] = {1, 0, 0, 1, 1, 1}, c0[4], c1[4];
  for (int t = 0; t < 2; t++) {
    pl_blas_gemm(0, 0, 2, 2, 3, 1.0f, a, 3, b, 2, 0.0f, c0, 2);
    pl_linear_gemm(0, 0, 2, 2, 3, 1.0f, a, 3, b, 2, 0.0f, c1, 2);
    CHECK(!memcmp(c0, c1, sizeof c0), "call %d: BLAS's product (%g vs %g)",
          t + 1, c1[0], c0[0]);
  }
  char why2[800] = "";
  CHECK(pl_gemm_hook_dropped(NULL, why2, sizeof why2),
        "the garbage of the second call was caught: %s", why2);
  pl_set_gemm_hook(NULL, NULL);
}

static void check_packing(void) {
  char why[256];
  size_t len;
  char *src = read_source("kernels/seeds/05_blocktile_2d.cu", &len);
  if (!src) return;
  kl_emu_module *mod = NULL;
  CHECK(kl_emu_build(src, len, &mod, NULL, NULL, why, sizeof why) == KL_OK,
        "build: %s", why);
  free(src);
  pcuda_ctx *ctx = NULL;
  CHECK(pcuda_emu_open(&ctx, 0, why, sizeof why) == PL_OK, "%s", why);
  if (!mod || !ctx) {
    kl_emu_free(mod);
    pcuda_close(ctx);
    return;
  }
  /* one GEMM of each kind, strided, with alpha and beta */
  static const struct {
    int M, N, K, ta, tb, lda, ldb, ldc;
    float alpha, beta;
  } g[] = {{37, 29, 45, 0, 1, 50, 47, 33, 1.0f, 0.0f},
           {37, 29, 45, 1, 0, 41, 30, 29, 0.5f, 1.0f},
           {37, 29, 45, 1, 1, 40, 46, 31, -2.0f, 0.25f},
           {1, 67, 1, 0, 0, 1, 67, 67, 1.0f, 0.0f},
           {67, 1, 67, 0, 0, 67, 1, 1, 1.0f, 1.0f},
           /* contiguous, at odd offsets (below): packed only to align */
           {37, 29, 45, 0, 0, 45, 29, 29, 1.0f, 0.0f}};
  pcuda_set_matmul(ctx, emu_runner, mod);
  for (size_t i = 0; i < sizeof g / sizeof g[0]; i++) {
    size_t na = (size_t)(g[i].ta ? g[i].K : g[i].M) * g[i].lda;
    size_t nb = (size_t)(g[i].tb ? g[i].N : g[i].K) * g[i].ldb;
    size_t nc = (size_t)g[i].M * g[i].ldc;
    /* the last case's operands start 4, 12 and 20 bytes into theirs */
    size_t oa = 0, ob = 0, oc = 0;
    if (i + 1 == sizeof g / sizeof g[0]) oa = 1, ob = 3, oc = 5;
    float *a0 = pcuda_alloc(ctx, (na + oa) * 4);
    float *b0 = pcuda_alloc(ctx, (nb + ob) * 4);
    float *c00 = pcuda_alloc(ctx, (nc + oc) * 4);
    float *c10 = pcuda_alloc(ctx, (nc + oc) * 4);
    float *a = a0 + oa, *b = b0 + ob, *c0 = c00 + oc, *c1 = c10 + oc;
    kl_fill_random(a, na, 7, 2 * i); /* emulator memory is host memory */
    kl_fill_random(b, nb, 7, 2 * i + 1);
    kl_fill_random(c0, nc, 8, i);
    memcpy(c1, c0, nc * 4);
    for (int use = 0; use < 2; use++)
      pcuda_linear_gemm(ctx, use, use ? c1 : c0, a, b, g[i].M, g[i].N, g[i].K,
                        g[i].lda, g[i].ldb, g[i].ldc, g[i].ta, g[i].tb,
                        g[i].alpha, g[i].beta);
    CHECK(pcuda_status(ctx, why, sizeof why) == PL_OK, "gemm %zu: %s", i, why);
    double d = max_diff(c0, c1, nc), s = max_abs(c0, nc);
    CHECK(d <= 1e-5 * fmax(1, s),
          "gemm %zu (%dx%dx%d ta %d tb %d): differs "
          "by %.3g (largest %.3g)",
          i, g[i].M, g[i].N, g[i].K, g[i].ta, g[i].tb, d, s);
    pcuda_free(ctx, a0);
    pcuda_free(ctx, b0);
    pcuda_free(ctx, c00);
    pcuda_free(ctx, c10);
  }
  CHECK(misaligned == 0,
        "every operand the candidate got is 256-byte aligned: %d calls had "
        "one that is not",
        misaligned);
  check_first_calls(ctx, mod);
  pcuda_set_matmul(ctx, NULL, NULL);
  outcome def, cand;
  run_model(ctx, &def, "pcuda cpu-emu");
  pcuda_set_matmul(ctx, emu_runner, mod);
  misaligned = 0;
  run_model(ctx, &cand, "pcuda cpu-emu, candidate");
  pcuda_set_matmul(ctx, NULL, NULL);
  CHECK(misaligned == 0,
        "the model's GEMMs hand the candidate 256-byte aligned operands: %d "
        "calls had one that is not",
        misaligned);
  compare(&def, &cand, "pcuda cpu-emu: kernel (packed) vs tiled GEMM");
  outcome_free(&def);
  outcome_free(&cand);
  pcuda_close(ctx);
  kl_emu_free(mod);
}

/* ---- 4. refusals ---- */

static void expect_refusal(pcuda_ctx *ctx, const char *name, const entry *e,
                           int n, int want_exit, const char *want) {
  char path[600], why[1024];
  if (e)
    write_results(name, e, n, path, sizeof path);
  else
    snprintf(path, sizeof path, "%s/%s", tmp_dir, name);
  lab_matmul *mm = NULL;
  int ex =
      lab_policy_matmul_open(path, ctx, &tiny, B * T, &mm, why, sizeof why);
  CHECK(ex == want_exit && !mm && strstr(why, want) && strstr(why, path),
        "%s: exit %d (want %d), message '%s' (want '%s' and the path)", name,
        ex, want_exit, why, want);
  printf("refused %s: exit %d: %s\n", name, ex, why);
  lab_policy_matmul_close(mm);
}

static void check_refusals(pcuda_ctx *ctx) {
  const entry none[] = {{"tests/kernels/broken/wrong_index.cu", 0, 10, 0},
                        {"kernels/seeds/05_blocktile_2d.cu", 1, 400,
                         (uint64_t)1 << KL_FLAG_NONDETERMINISTIC}};
  expect_refusal(ctx, "none.h5", none, 2, LAB_EXIT_USAGE,
                 "no correct, unflagged kernel");
  const entry wrong[] = {{"tests/kernels/broken/wrong_index.cu", 1, 10, 0}};
  expect_refusal(ctx, "wrong.h5", wrong, 1, LAB_EXIT_USAGE,
                 "disagrees with the default path");
  const entry edge[] = {{"tests/kernels/broken/edge_off_by_one.cu", 1, 10, 0}};
  expect_refusal(ctx, "edge.h5", edge, 1, LAB_EXIT_USAGE,
                 "disagrees with the default path");
  const entry broken[] = {{"tests/kernels/broken/compile_error.cu", 1, 10, 0}};
  expect_refusal(ctx, "compile.h5", broken, 1, LAB_EXIT_USAGE,
                 ctx ? "NVRTC" : "does not build");
  const entry flagged[] = {{"tests/cheats/timer_clock64.cu", 1, 10, 0}};
  expect_refusal(ctx, "flagged.h5", flagged, 1, LAB_EXIT_USAGE,
                 "raises anti-cheat flags");
  expect_refusal(ctx, "missing.h5", NULL, 0, LAB_EXIT_USAGE, "missing.h5");
}

/* ---- --device ---- */

static int run_device(void) {
  char why[1024];
  pcuda_ctx *ctx = NULL;
  if (pcuda_device_open(&ctx, PCUDA_GEMM_AUTO, why, sizeof why) != PL_OK) {
    printf("SKIP: no device for the policy's CUDA runtime: %s\n", why);
    return 77;
  }
  if (kl_nvrtc_load(why, sizeof why) != KL_OK) {
    printf("SKIP: no NVRTC to compile the kernel: %s\n", why);
    pcuda_close(ctx);
    return 77;
  }
  printf("device: %s\n", pcuda_describe(ctx));
  check_selection();
  outcome def, cand;
  run_model(ctx, &def, "device");
  lab_matmul *mm = NULL;
  int ex =
      lab_policy_matmul_open(good_h5, ctx, &tiny, B * T, &mm, why, sizeof why);
  CHECK(ex == LAB_EXIT_OK, "open %s on the device: exit %d: %s", good_h5, ex,
        why);
  if (!ex) {
    printf("device: %s\n", lab_policy_matmul_describe(mm));
    run_model(ctx, &cand, "device, --policy-matmul");
    lab_policy_matmul_close(mm);
    compare(&def, &cand, "device: NVRTC kernel vs cuBLAS");
    outcome_free(&cand);
  }
  outcome_free(&def);
  check_refusals(ctx);
  pcuda_close(ctx);
  return kl_test_done("test_policy_matmul --device");
}

int main(int argc, char **argv) {
  /* The CPU path runs the kernel in a sandbox worker: this executable. */
  if (argc > 1 && !strcmp(argv[1], "__worker"))
    return sbx_worker_main(argc - 1, argv + 1);
  src_dir = getenv("KL_SOURCE_DIR");
  if (!src_dir) src_dir = ".";
  snprintf(tmp_dir, sizeof tmp_dir, "/tmp/test_policy_matmul.XXXXXX");
  if (!mkdtemp(tmp_dir)) {
    perror("mkdtemp");
    return 1;
  }
  int rc;
  if (argc > 1 && !strcmp(argv[1], "--device")) {
    rc = run_device();
  } else if (argc > 1) {
    fprintf(stderr, "usage: %s [--device]\n", argv[0]);
    rc = 2;
  } else {
    check_selection();
    check_cpu();
    check_cpu_first_calls();
    check_packing();
    check_refusals(NULL);
    rc = kl_test_done("test_policy_matmul");
  }
  char cmd[600];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp_dir);
  if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", tmp_dir);
  return rc;
}
