/*
 * tests/unit/test_policy_cuda.c — the policy's CUDA runtime (policy/cuda/)
 * against its CPU reference (policy/model.c, policy/adamw.c): the same
 * model, the same batch, through both paths.
 *
 *   test_policy_cuda            the kernels on the CPU emulator (label unit,
 *                               so it also runs under ASan/UBSan)
 *   test_policy_cuda --device   the same checks on device 0 through the
 *                               driver API, once with cuBLAS GEMMs and once
 *                               with the tiled kernel (label gpu); exit 77,
 *                               with the reason, where no device answers or
 *                               the build has no fatbin
 *
 * The CPU's layer functions are static inside model.c, so each kernel is
 * held to its twin through what the model exposes: after a forward, every
 * forward activation of pl_acts (embedding, RMSNorm outputs and rstd, qkv
 * after RoPE, attention probabilities and output, residuals, SwiGLU, logits,
 * log-sum-exp, per-token losses) and the mean loss; after a backward (mean
 * loss, then GRPO's weighted one, then accumulation on top), every
 * parameter gradient, layer by layer; then three AdamW steps (gradient norm,
 * parameters, m and v); then ten training steps on each side independently
 * (forward, backward of the mean loss and then of GRPO's weighted loss,
 * AdamW), whose losses must stay within 1e-4 of the CPU's (measured on
 * cpu-emu: about 1e-7). Two configs: a tiny ragged one (sizes that are not
 * multiples of any block size, masked targets) and a wider one whose rows
 * exceed the row kernels' 128 threads and whose sequence exceeds the
 * attention kernels' 64.
 *
 * Tolerance: a tensor passes when max|gpu - cpu| <= tol * max|cpu| (its
 * largest reference value, so near-zero elements do not blow up a relative
 * error), with tol 1e-4 for the forward, 3e-4 for gradients and 1e-5 for
 * AdamW's parameters and state (each AdamW step starts both sides from the
 * CPU's parameters and gradients, so only the update itself is compared).
 * Fused gradients are compared part by part (q, k, v; gate, up), layer by
 * layer, so that a small part is not measured against a larger one's
 * scale. The two paths sum in different orders (trees of shuffles, tiled
 * GEMMs; cuBLAS and FMAs on a device), so they agree to fp32 rounding, not
 * bit for bit. Measured on cpu-emu (printed at the end as error /
 * tolerance; PCUDA_TEST_VERBOSE=1 prints every tensor): at most about 3e-6
 * forward, 5e-6 gradients, 0 AdamW; the margins leave room for a device's
 * cuBLAS and FMAs. The checks are real: the test model's q/k/v weights are
 * scaled up so attention is peaked (with the init's 0.02, attention is
 * nearly uniform and the q/k gradients vanish next to v's: a 1% error in dK
 * then passed; now it fails the dwqkv, drms_att and dwte checks), and a
 * control run changes one weight of the last layer by +1 on the backend
 * only and requires the comparison to miss by more than 10x the tolerance
 * (it misses by about 300x-3000x).
 */
#include "kltest.h"
#include "policy/cuda/pcuda.h"
#include "policy/policy.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TOL_FORWARD 1e-4
#define TOL_GRAD 3e-4
#define TOL_ADAMW 1e-5

static double worst_forward, worst_grad, worst_adamw; /* error / tolerance */
static int verbose; /* PCUDA_TEST_VERBOSE set: print every tensor's error */

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static uint32_t rnd(void) {
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 7;
  rng_state ^= rng_state << 17;
  return (uint32_t)(rng_state >> 11);
}

/* max|got - ref| / max|ref|, or +inf when got has a NaN/inf; *ref_max gets
 * max|ref|. */
static double rel_err(const float *got, const float *ref, size_t n,
                      double *ref_max) {
  double diff = 0.0, mx = 0.0;
  for (size_t i = 0; i < n; i++) {
    if (!isfinite(got[i]) || !isfinite(ref[i])) return INFINITY;
    double d = fabs((double)got[i] - (double)ref[i]);
    if (d > diff) diff = d;
    if (fabs((double)ref[i]) > mx) mx = fabs((double)ref[i]);
  }
  *ref_max = mx;
  return mx > 0.0 ? diff / mx : diff;
}

/* Downloads n floats at dev and holds them to ref within tol; returns 1 when
 * they agree, and raises *worst (if given) to error / tol. quiet: no CHECK,
 * *worst is set to this error / tol (the control run expects a miss). */
static int agrees(pcuda_ctx *ctx, const char *what, const float *dev,
                  const float *ref, size_t n, double tol, double *worst,
                  int quiet) {
  float *got = malloc(n * sizeof(float));
  if (!got) {
    CHECK(0, "%s: out of memory", what);
    return 0;
  }
  int rc = pcuda_download(ctx, got, dev, n * sizeof(float));
  double ref_max = 0.0, err = rel_err(got, ref, n, &ref_max);
  free(got);
  if (quiet) {
    if (worst) *worst = err / tol;
    return rc == PL_OK && err <= tol;
  }
  CHECK(rc == PL_OK, "%s: download failed", what);
  /* a tensor of zeros would pass anything: every tensor compared here is
   * expected to carry signal */
  CHECK(ref_max > 0.0, "%s: the reference is all zeros", what);
  CHECK(err <= tol, "%s: max|gpu-cpu| / max|cpu| = %.3g > %.1g (max|cpu| %.3g)",
        what, err, tol, ref_max);
  if (verbose) printf("  %-56s %.3g\n", what, err);
  if (worst && err / tol > *worst) *worst = err / tol;
  return rc == PL_OK && err <= tol;
}

/* ---- forward ------------------------------------------------------------ */

typedef struct tensor {
  const char *name;
  const float *cpu;
  const float *gpu;
  size_t n;
} tensor;

/* The forward activations of pl_acts, paired with pcuda_acts. */
static int forward_tensors(tensor *t, const pl_model *m, const pcuda_model *dm,
                           int B, int T) {
  const pl_config *c = &m->cfg;
  size_t BT = (size_t)B * T, C = c->d_model, L = c->n_layers, V = c->vocab;
  size_t F = c->d_ff, NH = c->n_heads;
  const pl_acts *a = &m->acts;
  const pcuda_acts *g = &dm->acts;
  tensor all[] = {
      {"encoded", a->encoded, g->encoded, BT * C},
      {"ln1", a->ln1, g->ln1, L * BT * C},
      {"ln1_rstd", a->ln1_rstd, g->ln1_rstd, L * BT},
      {"qkv (after RoPE)", a->qkv, g->qkv, L * BT * 3 * C},
      {"att", a->att, g->att, L * B * NH * T * T},
      {"atty", a->atty, g->atty, L * BT * C},
      {"res_att", a->res_att, g->res_att, L * BT * C},
      {"ln2", a->ln2, g->ln2, L * BT * C},
      {"ln2_rstd", a->ln2_rstd, g->ln2_rstd, L * BT},
      {"h13", a->h13, g->h13, L * BT * 2 * F},
      {"hmul (SwiGLU)", a->hmul, g->hmul, L * BT * F},
      {"res_ffn", a->res_ffn, g->res_ffn, L * BT * C},
      {"lnf", a->lnf, g->lnf, BT * C},
      {"lnf_rstd", a->lnf_rstd, g->lnf_rstd, BT},
      {"logits", a->logits, g->logits, BT * V},
      {"lse", a->lse, g->lse, BT},
      {"losses", a->losses, g->losses, BT},
  };
  memcpy(t, all, sizeof all);
  return (int)(sizeof all / sizeof all[0]);
}

static void compare_forward(pcuda_ctx *ctx, const pl_model *m,
                            const pcuda_model *dm, int B, int T,
                            const char *label) {
  tensor t[32];
  int n = forward_tensors(t, m, dm, B, T);
  char what[160];
  for (int i = 0; i < n; i++) {
    snprintf(what, sizeof what, "%s: forward %s", label, t[i].name);
    agrees(ctx, what, t[i].gpu, t[i].cpu, t[i].n, TOL_FORWARD, &worst_forward,
           0);
  }
}

/* ---- gradients ---------------------------------------------------------- */

/* Every gradient tensor, stacked ones layer by layer, and the fused
 * matrices part by part (wqkv's q, k, v rows; w13's gate and up rows), so
 * that a small part's error is not measured against a larger part's
 * scale. */
static void compare_grads(pcuda_ctx *ctx, const pl_model *m,
                          const pcuda_model *dm, const char *label) {
  const float *cpu = m->grads_memory, *gpu = dm->grads_memory;
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
        agrees(ctx, what, gpu + at, cpu + at, len, TOL_GRAD, &worst_grad, 0);
      }
    off += n;
  }
}

/* ---- one config --------------------------------------------------------- */

typedef struct suite {
  const char *name;
  pl_config cfg;
  int B, T;
} suite;

static void make_batch(int32_t *tokens, int32_t *targets, int BT, int V) {
  for (int i = 0; i < BT; i++) {
    tokens[i] = (int32_t)(rnd() % (uint32_t)V);
    targets[i] = (int32_t)(rnd() % (uint32_t)V);
  }
  targets[1] = -1; /* masked positions count for nothing */
  targets[BT - 1] = -1;
}

/* Forward (with and without targets), backward (mean, weighted, then
 * accumulated), the control, and AdamW, on one config. */
static void run_suite(pcuda_ctx *ctx, const suite *s, const char *backend) {
  char why[256], label[96];
  snprintf(label, sizeof label, "%s/%s", backend, s->name);
  int B = s->B, T = s->T, BT = B * T, V = s->cfg.vocab;
  pl_model m;
  pcuda_model dm;
  int rc = pl_model_init(&m, &s->cfg, 1234, why, sizeof why);
  CHECK(rc == PL_OK, "%s: pl_model_init: %s", label, why);
  if (rc != PL_OK) return;
  /* Larger q/k/v weights than the init's 0.02, so attention is peaked
   * rather than uniform (the q and k gradients are then not negligible
   * next to v's), a larger embedding for sharper logits, and non-trivial
   * norm weights, so every path carries signal. */
  for (size_t i = 0; i < m.param_sizes[2]; i++)
    m.params.wqkv[i] *= 10.0f;
  for (size_t i = 0; i < m.param_sizes[0]; i++)
    m.params.wte[i] *= 5.0f;
  for (size_t i = 0; i < m.param_sizes[1]; i++)
    m.params.rms_att[i] = 0.5f + (float)(rnd() % 1000) / 1000.0f;
  for (size_t i = 0; i < m.param_sizes[4]; i++)
    m.params.rms_ffn[i] = 0.5f + (float)(rnd() % 1000) / 1000.0f;
  for (size_t i = 0; i < m.param_sizes[7]; i++)
    m.params.rms_final[i] = 0.5f + (float)(rnd() % 1000) / 1000.0f;
  rc = pcuda_model_init(&dm, ctx, &m, why, sizeof why);
  CHECK(rc == PL_OK, "%s: pcuda_model_init: %s", label, why);
  if (rc != PL_OK) {
    pl_model_free(&m);
    return;
  }
  int32_t *tokens = malloc(BT * sizeof(int32_t));
  int32_t *targets = malloc(BT * sizeof(int32_t));
  float *w = malloc(BT * sizeof(float));
  float *params = malloc(m.num_params * sizeof(float));
  make_batch(tokens, targets, BT, V);
  for (int i = 0; i < BT; i++)
    w[i] = ((float)(rnd() % 2001) - 1000.0f) / 1000.0f; /* advantages */

  /* forward with targets: the loss and every activation */
  float loss = pl_model_forward(&m, tokens, targets, B, T);
  float dloss = pcuda_model_forward(&dm, tokens, targets, B, T);
  CHECK(isfinite(dloss) && fabsf(dloss - loss) <= 1e-5f * fabsf(loss),
        "%s: loss %.9g on the backend, %.9g on the CPU", label, dloss, loss);
  compare_forward(ctx, &m, &dm, B, T, label);

  /* the same forward again: the same bits (no atomics, fixed trees) */
  float *logits1 = malloc((size_t)BT * V * sizeof(float));
  float *logits2 = malloc((size_t)BT * V * sizeof(float));
  pcuda_download(ctx, logits1, dm.acts.logits, (size_t)BT * V * sizeof(float));
  pcuda_model_forward(&dm, tokens, targets, B, T);
  pcuda_download(ctx, logits2, dm.acts.logits, (size_t)BT * V * sizeof(float));
  CHECK(!memcmp(logits1, logits2, (size_t)BT * V * sizeof(float)),
        "%s: two forwards differ", label);
  free(logits1);
  free(logits2);

  /* backward of the mean loss: every gradient */
  CHECK(pl_model_backward(&m) == PL_OK, "%s: pl_model_backward", label);
  CHECK(pcuda_model_backward(&dm) == PL_OK, "%s: pcuda_model_backward", label);
  compare_grads(ctx, &m, &dm, label);

  /* GRPO's weighted backward from zero, then the mean loss's added on top
   * (gradients accumulate) */
  char sub[128];
  pl_model_zero_grad(&m);
  pcuda_model_zero_grad(&dm);
  CHECK(pl_model_backward_weighted(&m, w) == PL_OK, "%s: weighted", label);
  CHECK(pcuda_model_backward_weighted(&dm, w) == PL_OK, "%s: weighted", label);
  snprintf(sub, sizeof sub, "%s weighted", label);
  compare_grads(ctx, &m, &dm, sub);
  pl_model_backward(&m);
  pcuda_model_backward(&dm);
  snprintf(sub, sizeof sub, "%s weighted+mean", label);
  compare_grads(ctx, &m, &dm, sub);

  /* forward without targets: -1 on both sides, same logits; a backward
   * then refuses */
  CHECK(pl_model_forward(&m, tokens, NULL, B, T) == -1.0f, "%s: cpu", label);
  CHECK(pcuda_model_forward(&dm, tokens, NULL, B, T) == -1.0f,
        "%s: forward without targets should return -1", label);
  snprintf(sub, sizeof sub, "%s no targets: logits", label);
  agrees(ctx, sub, dm.acts.logits, m.acts.logits, (size_t)BT * V, TOL_FORWARD,
         &worst_forward, 0);
  CHECK(pcuda_model_backward(&dm) == PL_EINPUT,
        "%s: backward after a forward without targets", label);

  /* bad input: NAN, as the CPU's */
  tokens[0] = V;
  CHECK(isnan(pcuda_model_forward(&dm, tokens, targets, B, T)),
        "%s: token out of range accepted", label);
  tokens[0] = 0;
  CHECK(isnan(pcuda_model_forward(&dm, tokens, targets, B, s->cfg.max_seq + 1)),
        "%s: T > max_seq accepted", label);

  /* The control: one value weight of the last layer moves on the backend
   * only; the comparison must see it in that layer's qkv and in the
   * logits, by a wide margin. */
  pcuda_model_get_params(&dm, params);
  int C = s->cfg.d_model;
  size_t at = m.param_sizes[0] + m.param_sizes[1] +
              (size_t)(s->cfg.n_layers - 1) * 3 * C * C + (size_t)2 * C * C;
  params[at] += 1.0f;
  pcuda_model_set_params(&dm, params);
  pl_model_forward(&m, tokens, targets, B, T);
  pcuda_model_forward(&dm, tokens, targets, B, T);
  size_t qkv_n = (size_t)BT * 3 * C, last = (s->cfg.n_layers - 1) * qkv_n;
  double seen_qkv = 0.0, seen_logits = 0.0;
  agrees(ctx, "control", dm.acts.qkv + last, m.acts.qkv + last, qkv_n,
         TOL_FORWARD, &seen_qkv, 1);
  agrees(ctx, "control", dm.acts.logits, m.acts.logits, (size_t)BT * V,
         TOL_FORWARD, &seen_logits, 1);
  CHECK(seen_qkv > 10.0 && seen_logits > 10.0,
        "%s: a changed weight went unnoticed: error/tolerance %.3g in qkv, "
        "%.3g in the logits",
        label, seen_qkv, seen_logits);
  printf("test_policy_cuda: %s: control (one weight +1): error/tolerance "
         "%.3g in qkv, %.3g in the logits\n",
         label, seen_qkv, seen_logits);
  params[at] -= 1.0f;
  pcuda_model_set_params(&dm, params);

  /* AdamW: three steps, clipping active (a small clip), warm-up then
   * decay, weight decay on the matrices only. Both sides start each step
   * from the CPU's parameters and gradients, so that this holds the AdamW
   * kernels alone to their twin (the gradients were compared above; with
   * Adam, a gradient at rounding-noise level can flip an update's sign). */
  pl_adamw_config ac = pl_adamw_defaults();
  ac.lr = 1e-2f;
  ac.grad_clip = 0.05f;
  ac.warmup_steps = 1;
  ac.total_steps = 3;
  pl_adamw opt;
  pcuda_adamw dopt;
  CHECK(pl_adamw_init(&opt, &m, &ac, why, sizeof why) == PL_OK, "%s", why);
  CHECK(pcuda_adamw_init(&dopt, &dm, &ac, why, sizeof why) == PL_OK, "%s: %s",
        label, why);
  pl_adamw_config bad = ac;
  bad.beta1 = 1.5f;
  pcuda_adamw tmp;
  CHECK(pcuda_adamw_init(&tmp, &dm, &bad, why, sizeof why) == PL_EINPUT &&
            strstr(why, "beta1"),
        "%s: bad AdamW config accepted (%s)", label, why);
  size_t pbytes = m.num_params * sizeof(float);
  for (int step = 0; step < 3; step++) {
    pl_model_forward(&m, tokens, targets, B, T);
    pl_model_zero_grad(&m);
    pl_model_backward(&m);
    pcuda_upload(ctx, dm.params_memory, m.params_memory, pbytes);
    pcuda_upload(ctx, dm.grads_memory, m.grads_memory, pbytes);
    float norm = pl_adamw_step(&opt, &m);
    float dnorm = pcuda_adamw_step(&dopt, &dm);
    CHECK(isfinite(dnorm) && fabsf(dnorm - norm) <= 1e-6f * norm,
          "%s: AdamW step %d: gradient norm %.9g on the backend, %.9g on the "
          "CPU",
          label, step, dnorm, norm);
    CHECK(norm > ac.grad_clip, "%s: clipping not exercised (norm %g)", label,
          norm);
    snprintf(sub, sizeof sub, "%s: AdamW step %d params", label, step);
    agrees(ctx, sub, dm.params_memory, m.params_memory, m.num_params, TOL_ADAMW,
           &worst_adamw, 0);
    snprintf(sub, sizeof sub, "%s: AdamW step %d m", label, step);
    agrees(ctx, sub, dopt.m, opt.m, m.num_params, TOL_ADAMW, &worst_adamw, 0);
    snprintf(sub, sizeof sub, "%s: AdamW step %d v", label, step);
    agrees(ctx, sub, dopt.v, opt.v, m.num_params, TOL_ADAMW, &worst_adamw, 0);
  }
  CHECK(dopt.step == 3, "%s: AdamW step count %lld", label,
        (long long)dopt.step);
  pl_adamw_free(&opt);
  pcuda_adamw_free(&dopt);

  CHECK(pcuda_status(ctx, why, sizeof why) == PL_OK, "%s: backend: %s", label,
        why);
  free(tokens);
  free(targets);
  free(w);
  free(params);
  pcuda_model_free(&dm);
  pl_model_free(&m);
}

static const suite suites[] = {
    /* sizes no block size divides; head size 8 */
    {"tiny",
     {.vocab = 37,
      .d_model = 24,
      .n_layers = 2,
      .n_heads = 3,
      .d_ff = 40,
      .max_seq = 9},
     2,
     7},
    /* rows wider than 128 threads (C 160, V 300), T 70 > 64 threads */
    {"wide",
     {.vocab = 300,
      .d_model = 160,
      .n_layers = 1,
      .n_heads = 2,
      .d_ff = 96,
      .max_seq = 72},
     1,
     70},
};

/* ---- ten training steps --------------------------------------------------
 * Both sides train from the same initial parameters, each on its own, on
 * one batch (as llm.c's ten steps): forward, zero_grad, backward
 * (the mean loss for steps 0-4, GRPO's weighted loss for steps 5-9), AdamW
 * (lr 1e-2, clipping, warm-up and decay). Nothing is copied between them
 * after the start, so the rounding differences compound as in a real run;
 * every step's loss must stay within TOL_TRAIN_LOSS (relative) of the
 * CPU's, and the loss must fall. */
#define TOL_TRAIN_LOSS 1e-4
static double worst_train;

static void run_training(pcuda_ctx *ctx, const char *backend) {
  const suite *s = &suites[0];
  char why[256], label[96];
  snprintf(label, sizeof label, "%s/%s training", backend, s->name);
  int B = s->B, T = s->T, BT = B * T, V = s->cfg.vocab;
  pl_model m;
  pcuda_model dm;
  int rc = pl_model_init(&m, &s->cfg, 4321, why, sizeof why);
  CHECK(rc == PL_OK, "%s: pl_model_init: %s", label, why);
  if (rc != PL_OK) return;
  for (size_t i = 0; i < m.param_sizes[2]; i++)
    m.params.wqkv[i] *= 10.0f;
  rc = pcuda_model_init(&dm, ctx, &m, why, sizeof why);
  CHECK(rc == PL_OK, "%s: pcuda_model_init: %s", label, why);
  if (rc != PL_OK) {
    pl_model_free(&m);
    return;
  }
  pl_adamw_config ac = pl_adamw_defaults();
  ac.lr = 1e-2f;
  ac.warmup_steps = 2;
  ac.total_steps = 10;
  pl_adamw opt;
  pcuda_adamw dopt;
  CHECK(pl_adamw_init(&opt, &m, &ac, why, sizeof why) == PL_OK, "%s", why);
  CHECK(pcuda_adamw_init(&dopt, &dm, &ac, why, sizeof why) == PL_OK, "%s: %s",
        label, why);
  int32_t *tokens = malloc(BT * sizeof(int32_t));
  int32_t *targets = malloc(BT * sizeof(int32_t));
  float *adv = malloc(BT * sizeof(float));
  float first = 0.0f, last = 0.0f;
  printf("test_policy_cuda: %s: losses (backend / CPU):", label);
  make_batch(tokens, targets, BT, V);
  for (int i = 0; i < BT; i++)
    adv[i] = i % 3 == 0 ? -0.5f : 0.25f; /* d loss / d logp */
  for (int step = 0; step < 10; step++) {
    float loss = pl_model_forward(&m, tokens, targets, B, T);
    float dloss = pcuda_model_forward(&dm, tokens, targets, B, T);
    double err = fabs((double)dloss - loss) / fabs((double)loss);
    CHECK(isfinite(dloss) && err <= TOL_TRAIN_LOSS,
          "%s: step %d: loss %.9g on the backend, %.9g on the CPU (%.3g)",
          label, step, dloss, loss, err);
    if (err / TOL_TRAIN_LOSS > worst_train) worst_train = err / TOL_TRAIN_LOSS;
    printf(" %.6f/%.6f", dloss, loss);
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
    CHECK(isfinite(dnorm) && fabsf(dnorm - norm) <= 1e-3f * norm,
          "%s: step %d: gradient norm %.9g on the backend, %.9g on the CPU",
          label, step, dnorm, norm);
    if (step == 0) first = loss;
    if (step == 4) last = loss;
  }
  printf("\n");
  CHECK(last < first, "%s: the loss did not fall (%g -> %g)", label, first,
        last);
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

static void run_all(pcuda_ctx *ctx, const char *backend) {
  printf("test_policy_cuda: backend %s\n", pcuda_describe(ctx));
  for (size_t i = 0; i < sizeof suites / sizeof suites[0]; i++)
    run_suite(ctx, &suites[i], backend);
  run_training(ctx, backend);
}

static void report_worst(void) {
  printf("test_policy_cuda: worst error / tolerance: forward %.3f, gradients "
         "%.3f, AdamW %.3f, training losses %.3f\n",
         worst_forward, worst_grad, worst_adamw, worst_train);
}

/* The gpu-label mode: exit 77 with the reason when no device answers. */
static int run_device(void) {
  char why[256];
  pcuda_ctx *ctx = NULL;
  if (pcuda_device_open(&ctx, PCUDA_GEMM_AUTO, why, sizeof why) != PL_OK) {
    printf("SKIP: no device for the policy's CUDA runtime: %s\n", why);
    return 77;
  }
  run_all(ctx, "device");
  pcuda_close(ctx);
  CHECK(pcuda_device_open(&ctx, PCUDA_GEMM_TILED, why, sizeof why) == PL_OK,
        "second open (tiled GEMM): %s", why);
  if (ctx) {
    run_all(ctx, "device-tiled");
    pcuda_close(ctx);
  }
  report_worst();
  return kl_test_done("test_policy_cuda --device");
}

int main(int argc, char **argv) {
  verbose = getenv("PCUDA_TEST_VERBOSE") != NULL;
  if (argc > 1 && !strcmp(argv[1], "--device")) return run_device();
  if (argc > 1) {
    fprintf(stderr, "usage: %s [--device]\n", argv[0]);
    return 2;
  }
  char why[256];
  /* Without a device the device backend fails with a sentence, not a
   * loader error: this binary links no CUDA library. */
  pcuda_ctx *dev = NULL;
  int rc = pcuda_device_open(&dev, PCUDA_GEMM_AUTO, why, sizeof why);
  if (rc == PL_OK) {
    printf("test_policy_cuda: a device answers (%s)\n", pcuda_describe(dev));
    pcuda_close(dev);
  } else {
    CHECK(rc == PL_EENV && why[0] && !dev, "device open: rc %d '%s'", rc, why);
    printf("test_policy_cuda: device backend here: %s\n", why);
  }
  printf("test_policy_cuda: fatbin %s\n",
         pcuda_has_fatbin() ? "embedded (nvcc)" : "absent (no nvcc)");

  pcuda_ctx *ctx = NULL;
  rc = pcuda_emu_open(&ctx, 0, why, sizeof why);
  CHECK(rc == PL_OK, "pcuda_emu_open: %s", why);
  if (rc != PL_OK) return kl_test_done("test_policy_cuda");
  run_all(ctx, "cpu-emu");
  pcuda_close(ctx);
  report_worst();
  return kl_test_done("test_policy_cuda");
}
