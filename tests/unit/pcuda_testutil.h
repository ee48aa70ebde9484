/*
 * tests/unit/pcuda_testutil.h — what test_policy_cuda.c (the fp32 path)
 * and test_policy_cuda_bf16.c (the bf16 path) share, so that both hold
 * their backend to the CPU model on the same ground:
 *   - the test's random numbers (pt_rnd) and the two configs (pt_suites:
 *     a tiny ragged one, a wide one past the kernels' block sizes);
 *   - the CPU model that carries signal on every path (pt_make_model) and
 *     its twin on the backend (pt_pcuda_model_init), a batch with masked
 *     targets (pt_make_batch), AdamW on both sides (pt_adamw_init);
 *   - the order and names in which gradients are compared
 *     (pt_for_each_grad_part);
 *   - ten training steps, each side on its own (pt_train);
 *   - main: the emulator by default, `--device` on device 0 with cuBLAS
 *     and then with the tiled GEMM, exit 77 with the reason where no device
 *     answers (pt_main).
 * What each test compares, and to which tolerance, stays in the test.
 *
 * Everything is static and counts its checks in kltest.h's counters, so
 * this header is included once per test executable, after kltest.h; no
 * source file goes with it (each tests/unit/test_*.c is its own program).
 */
#ifndef PCUDA_TESTUTIL_H
#define PCUDA_TESTUTIL_H

#include "kltest.h"
#include "policy/cuda/pcuda.h"
#include "policy/policy.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int pt_verbose; /* PCUDA_TEST_VERBOSE set: print every tensor */

/* xorshift64; one stream per test program, from a fixed seed */
static uint64_t pt_rng_state = 0x9e3779b97f4a7c15ull;
static inline uint32_t pt_rnd(void) {
  pt_rng_state ^= pt_rng_state << 13;
  pt_rng_state ^= pt_rng_state >> 7;
  pt_rng_state ^= pt_rng_state << 17;
  return (uint32_t)(pt_rng_state >> 11);
}

/* max|got - ref| / max|ref| over n floats (the absolute difference when ref
 * is all zero), or +inf when either side has a NaN or inf; *ref_max (when
 * given) gets max|ref|. Every comparison of a backend with its CPU twin is
 * held to a tolerance on this one measure. */
static inline double pt_rel_err(const float *got, const float *ref, size_t n,
                                double *ref_max) {
  double diff = 0.0, mx = 0.0;
  for (size_t i = 0; i < n; i++) {
    if (!isfinite(got[i]) || !isfinite(ref[i])) return INFINITY;
    diff = fmax(diff, fabs((double)got[i] - (double)ref[i]));
    mx = fmax(mx, fabs((double)ref[i]));
  }
  if (ref_max) *ref_max = mx;
  return mx > 0.0 ? diff / mx : diff;
}

/* ---- configs and models -------------------------------------------------- */

typedef struct pt_suite {
  const char *name;
  pl_config cfg;
  int B, T;
} pt_suite;

static const pt_suite pt_suites[] = {
    /* sizes no block or tile size divides; head size 8 */
    {"tiny",
     {.vocab = 37,
      .d_model = 24,
      .n_layers = 2,
      .n_heads = 3,
      .d_ff = 40,
      .max_seq = 9},
     2,
     7},
    /* rows wider than 128 threads (C 160, V 300; K = 160 in the GEMMs),
     * T 70: three of the attention kernels' 32-row tiles, head size 80:
     * three of their 32-dimension stages */
    {"wide",
     {.vocab = 300,
      .d_model = 160,
      .n_layers = 1,
      .n_heads = 2,
      .d_ff = 96,
      .max_seq = 72},
     1,
     70},
    /* many rows (BT 300: three of the RMSNorm weight gradient's 128-row
     * chunks, the last partial; four 32-row attention tiles), and a small
     * vocabulary, so that each token recurs often in the embedding's
     * backward */
    {"long",
     {.vocab = 23,
      .d_model = 40,
      .n_layers = 1,
      .n_heads = 2,
      .d_ff = 48,
      .max_seq = 100},
     3,
     100},
};
#define PT_NUM_SUITES ((int)(sizeof pt_suites / sizeof pt_suites[0]))

/* pl_model_init of cfg with seed, then q/k/v weights 10x the init's 0.02,
 * so that attention is peaked rather than uniform (the q and k gradients
 * are then not negligible next to v's). PL_OK, or the init's code after a
 * failed CHECK naming label. */
static inline int pt_model_init(pl_model *m, const pl_config *cfg,
                                uint64_t seed, const char *label) {
  char why[256];
  int rc = pl_model_init(m, cfg, seed, why, sizeof why);
  CHECK(rc == PL_OK, "%s: pl_model_init: %s", label, why);
  if (rc != PL_OK) return rc;
  for (size_t i = 0; i < m->param_sizes[2]; i++)
    m->params.wqkv[i] *= 10.0f;
  return PL_OK;
}

/* pt_model_init, plus a larger embedding (wte x5) for sharper logits and
 * norm weights in 0.5..1.5 (pt_rnd), so that every path carries signal. */
static inline int pt_make_model(pl_model *m, const pt_suite *s, uint64_t seed,
                                const char *label) {
  int rc = pt_model_init(m, &s->cfg, seed, label);
  if (rc != PL_OK) return rc;
  for (size_t i = 0; i < m->param_sizes[0]; i++)
    m->params.wte[i] *= 5.0f;
  for (size_t i = 0; i < m->param_sizes[1]; i++)
    m->params.rms_att[i] = 0.5f + (float)(pt_rnd() % 1000) / 1000.0f;
  for (size_t i = 0; i < m->param_sizes[4]; i++)
    m->params.rms_ffn[i] = 0.5f + (float)(pt_rnd() % 1000) / 1000.0f;
  for (size_t i = 0; i < m->param_sizes[7]; i++)
    m->params.rms_final[i] = 0.5f + (float)(pt_rnd() % 1000) / 1000.0f;
  return PL_OK;
}

/* m's twin on ctx: pcuda_model_init for PCUDA_DTYPE_FP32,
 * pcuda_model_init_dtype for any other dtype. On failure a failed CHECK
 * naming label, and m is freed (the caller then owns nothing). */
static inline int pt_pcuda_model_init(pcuda_model *dm, pcuda_ctx *ctx,
                                      pl_model *m, int dtype,
                                      const char *label) {
  char why[256];
  int rc = dtype == PCUDA_DTYPE_FP32
               ? pcuda_model_init(dm, ctx, m, why, sizeof why)
               : pcuda_model_init_dtype(dm, ctx, m, dtype, why, sizeof why);
  CHECK(rc == PL_OK, "%s: pcuda_model_init (%s): %s", label,
        pcuda_dtype_name(dtype), why);
  if (rc != PL_OK) pl_model_free(m);
  return rc;
}

/* Random tokens and targets in 0..V-1 (pt_rnd); targets 1 and BT-1 are
 * masked (-1), which counts for nothing. */
static inline void pt_make_batch(int32_t *tokens, int32_t *targets, int BT,
                                 int V) {
  for (int i = 0; i < BT; i++) {
    tokens[i] = (int32_t)(pt_rnd() % (uint32_t)V);
    targets[i] = (int32_t)(pt_rnd() % (uint32_t)V);
  }
  targets[1] = -1;
  targets[BT - 1] = -1;
}

/* AdamW with ac on the CPU (opt, for m) and on the backend (dopt, for dm),
 * each init a CHECK. */
static inline void pt_adamw_init(pl_adamw *opt, pcuda_adamw *dopt, pl_model *m,
                                 pcuda_model *dm, const pl_adamw_config *ac,
                                 const char *label) {
  char why[256];
  CHECK(pl_adamw_init(opt, m, ac, why, sizeof why) == PL_OK, "%s", why);
  CHECK(pcuda_adamw_init(dopt, dm, ac, why, sizeof why) == PL_OK, "%s: %s",
        label, why);
}

/* ---- gradients ----------------------------------------------------------- */

/* One part of the gradients: what ("label: dNAME[ PART] layer l"), and its
 * floats at [at, at + len) of grads_memory (the CPU's and the backend's
 * layouts are the same). */
typedef void (*pt_grad_part_fn)(void *arg, const char *what, size_t at,
                                size_t len);

/* Calls fn for every gradient tensor of m, stacked ones (rms_att .. w2,
 * (L, ...)) layer by layer, and the fused matrices part by part (wqkv's q,
 * k, v rows; w13's gate and up rows), so that a small part's error is not
 * measured against a larger part's scale. */
static inline void pt_for_each_grad_part(const pl_model *m, const char *label,
                                         pt_grad_part_fn fn, void *arg) {
  int L = m->cfg.n_layers;
  static const char *const qkv_parts[] = {"q", "k", "v"};
  static const char *const w13_parts[] = {"gate", "up"};
  char what[160];
  size_t off = 0;
  for (int t = 0; t < PL_NUM_PARAM_TENSORS; t++) {
    size_t n = m->param_sizes[t];
    int stacked = t >= 1 && t <= 6; /* rms_att .. w2 are (L, ...) */
    int layers = stacked ? L : 1;
    int parts = t == 2 ? 3 : t == 5 ? 2 : 1;
    size_t len = n / layers / parts;
    for (int l = 0; l < layers; l++)
      for (int k = 0; k < parts; k++) {
        size_t at = off + ((size_t)l * parts + k) * len;
        const char *part = t == 2 ? qkv_parts[k] : t == 5 ? w13_parts[k] : "";
        if (stacked)
          snprintf(what, sizeof what, "%s: d%s%s%s layer %d", label,
                   pl_param_names[t], *part ? " " : "", part, l);
        else
          snprintf(what, sizeof what, "%s: d%s", label, pl_param_names[t]);
        fn(arg, what, at, len);
      }
    off += n;
  }
}

/* ---- ten training steps ---------------------------------------------------
 * Both sides train from the same initial parameters (pt_model_init of the
 * tiny config, seed 4321), each on its own, on one batch (as llm.c's ten
 * steps): forward, zero_grad, backward (the mean loss for steps 0-4,
 * GRPO's weighted loss for steps 5-9), AdamW (lr 1e-2, clipping, warm-up
 * and decay). Nothing is copied between them after the start, so the
 * rounding differences compound as in a real run. */

typedef struct pt_train_spec {
  const char *prog;   /* the printed line's prefix: the test's name */
  int dtype;          /* the backend model's, PCUDA_DTYPE_* */
  const char *vs;     /* the printed losses: "backend / CPU" */
  int digits;         /* of the printed losses */
  double tol_loss;    /* every step's loss, relative to the CPU's */
  float tol_norm;     /* the gradient norm, relative; 0: only finite */
  double *worst_loss; /* raised to the worst loss error / tol_loss */
} pt_train_spec;

/* Every step's loss within tol_loss of the CPU's, the gradient norm as
 * spec says, and the loss falls over the first five steps on both sides. */
static inline void pt_train(pcuda_ctx *ctx, const char *backend,
                            const pt_train_spec *spec) {
  const pt_suite *s = &pt_suites[0];
  char why[256], label[96];
  snprintf(label, sizeof label, "%s/%s training", backend, s->name);
  int B = s->B, T = s->T, BT = B * T;
  pl_model m;
  pcuda_model dm;
  if (pt_model_init(&m, &s->cfg, 4321, label) != PL_OK) return;
  if (pt_pcuda_model_init(&dm, ctx, &m, spec->dtype, label) != PL_OK) return;
  pl_adamw_config ac = pl_adamw_defaults();
  ac.lr = 1e-2f;
  ac.warmup_steps = 2;
  ac.total_steps = 10;
  pl_adamw opt;
  pcuda_adamw dopt;
  pt_adamw_init(&opt, &dopt, &m, &dm, &ac, label);
  int32_t *tokens = malloc(BT * sizeof(int32_t));
  int32_t *targets = malloc(BT * sizeof(int32_t));
  float *adv = malloc(BT * sizeof(float));
  /* the batch from a seed of its own, whatever checks ran before */
  uint64_t saved = pt_rng_state;
  pt_rng_state = 0x5eed0000ull;
  pt_make_batch(tokens, targets, BT, s->cfg.vocab);
  pt_rng_state = saved;
  for (int i = 0; i < BT; i++)
    adv[i] = i % 3 == 0 ? -0.5f : 0.25f; /* d loss / d logp */
  float first = 0.0f, last = 0.0f, dfirst = 0.0f, dlast = 0.0f;
  printf("%s: %s: losses (%s):", spec->prog, label, spec->vs);
  for (int step = 0; step < 10; step++) {
    float loss = pl_model_forward(&m, tokens, targets, B, T);
    float dloss = pcuda_model_forward(&dm, tokens, targets, B, T);
    double err = fabs((double)dloss - loss) / fabs((double)loss);
    CHECK(isfinite(dloss) && err <= spec->tol_loss,
          "%s: step %d: loss %.9g on the backend, %.9g on the CPU (%.3g)",
          label, step, dloss, loss, err);
    if (err / spec->tol_loss > *spec->worst_loss)
      *spec->worst_loss = err / spec->tol_loss;
    printf(" %.*f/%.*f", spec->digits, dloss, spec->digits, loss);
    pl_model_zero_grad(&m);
    pcuda_model_zero_grad(&dm);
    if (step < 5) {
      pl_model_backward(&m);
      CHECK(pcuda_model_backward(&dm) == PL_OK, "%s: backward", label);
    } else {
      pl_model_backward_weighted(&m, adv);
      CHECK(pcuda_model_backward_weighted(&dm, adv) == PL_OK,
            "%s: weighted backward", label);
    }
    float norm = pl_adamw_step(&opt, &m);
    float dnorm = pcuda_adamw_step(&dopt, &dm);
    CHECK(isfinite(dnorm) && (spec->tol_norm <= 0.0f ||
                              fabsf(dnorm - norm) <= spec->tol_norm * norm),
          "%s: step %d: gradient norm %.9g on the backend, %.9g on the CPU",
          label, step, dnorm, norm);
    if (step == 0) first = loss, dfirst = dloss;
    if (step == 4) last = loss, dlast = dloss;
  }
  printf("\n");
  CHECK(last < first && dlast < dfirst,
        "%s: the loss did not fall (%g -> %g on the CPU, %g -> %g on the "
        "backend)",
        label, first, last, dfirst, dlast);
  CHECK(pcuda_status(ctx, why, sizeof why) == PL_OK, "%s: backend: %s", label,
        why);
  free(tokens);
  free(targets);
  free(adv);
  pl_adamw_free(&opt);
  pcuda_adamw_free(&dopt);
  pcuda_model_free(&dm);
  pl_model_free(&m);
}

/* ---- main ---------------------------------------------------------------- */

typedef struct pt_program {
  const char *name; /* "test_policy_cuda" */
  /* every check on one backend ("cpu-emu", "device", "device-tiled") */
  void (*run_all)(pcuda_ctx *ctx, const char *backend);
  void (*report)(void);     /* the worst errors, after every backend */
  void (*before_emu)(void); /* NULL, or checks run before the emulator's */
} pt_program;

/* The gpu-label mode: run_all on device 0 with cuBLAS GEMMs (where cuBLAS
 * loads), then with the tiled kernel; exit 77 with the reason when no
 * device answers. */
static inline int pt_run_device(const pt_program *p) {
  char why[256], name[128];
  pcuda_ctx *ctx = NULL;
  if (pcuda_device_open(&ctx, PCUDA_GEMM_AUTO, why, sizeof why) != PL_OK) {
    printf("SKIP: no device for the policy's CUDA runtime: %s\n", why);
    return 77;
  }
  p->run_all(ctx, "device");
  pcuda_close(ctx);
  CHECK(pcuda_device_open(&ctx, PCUDA_GEMM_TILED, why, sizeof why) == PL_OK,
        "second open (tiled GEMM): %s", why);
  if (ctx) {
    p->run_all(ctx, "device-tiled");
    pcuda_close(ctx);
  }
  p->report();
  snprintf(name, sizeof name, "%s --device", p->name);
  return kl_test_done(name);
}

/* main of a test: no argument, run_all on the CPU emulator (label unit);
 * --device, pt_run_device (label gpu). */
static inline int pt_main(int argc, char **argv, const pt_program *p) {
  pt_verbose = getenv("PCUDA_TEST_VERBOSE") != NULL;
  if (argc > 1 && !strcmp(argv[1], "--device")) return pt_run_device(p);
  if (argc > 1) {
    fprintf(stderr, "usage: %s [--device]\n", argv[0]);
    return 2;
  }
#ifdef PT_EMU_FMA
  /* the _fma variant's kernels use the FMA instructions (tests/CMakeLists) */
  if (!__builtin_cpu_supports("fma")) {
    printf("%s: skipped: this CPU has no FMA instructions\n", p->name);
    return 77;
  }
#endif
  if (p->before_emu) p->before_emu();
  char why[256];
  pcuda_ctx *ctx = NULL;
  int rc = pcuda_emu_open(&ctx, 0, why, sizeof why);
  CHECK(rc == PL_OK, "pcuda_emu_open: %s", why);
  if (rc != PL_OK) return kl_test_done(p->name);
  p->run_all(ctx, "cpu-emu");
  /* again with every block's threads resumed last first: a missing
   * barrier shows in one order or the other (pcuda_emu_set_reverse) */
  CHECK(pcuda_emu_set_reverse(ctx, 1) == PL_OK, "pcuda_emu_set_reverse");
  p->run_all(ctx, "cpu-emu-reverse");
  pcuda_close(ctx);
  p->report();
  return kl_test_done(p->name);
}

#endif
