/*
 * tests/unit/test_policy_cuda.c — the policy's CUDA runtime (policy/cuda/)
 * against its CPU reference (policy/model.c, policy/adamw.c): the same
 * model, the same batch, through both paths.
 *
 *   test_policy_cuda            the kernels on the CPU emulator (label unit,
 *                               so it also runs under ASan/UBSan), twice:
 *                               each block's threads resumed from thread 0
 *                               up, then from the last down, so that a
 *                               missing barrier shows in one of the two
 *                               (removing the one between the attention
 *                               forward's softmax and its P V is caught by
 *                               the second only)
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
 * cpu-emu: about 1e-7). Three configs: a tiny ragged one (sizes that are
 * not multiples of any block size, masked targets), a wider one whose rows
 * exceed the row kernels' 128 threads and whose sequence spans three of the
 * attention kernels' 32-row tiles (the last one partial), with a head size
 * (80) that takes three 32-dimension stages, and a long one (300 token
 * rows: three of the RMSNorm weight gradient's 128-row chunks; a vocabulary
 * of 23, so the embedding's backward sums many positions per token).
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
#include "pcuda_testutil.h"
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
  double ref_max = 0.0, err = pt_rel_err(got, ref, n, &ref_max);
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
  if (pt_verbose) printf("  %-56s %.3g\n", what, err);
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

/* Every gradient part (pt_for_each_grad_part) within TOL_GRAD. */
typedef struct grad_pair {
  pcuda_ctx *ctx;
  const float *cpu, *gpu;
} grad_pair;

static void part_agrees(void *arg, const char *what, size_t at, size_t len) {
  const grad_pair *g = arg;
  agrees(g->ctx, what, g->gpu + at, g->cpu + at, len, TOL_GRAD, &worst_grad, 0);
}

static void compare_grads(pcuda_ctx *ctx, const pl_model *m,
                          const pcuda_model *dm, const char *label) {
  grad_pair g = {ctx, m->grads_memory, dm->grads_memory};
  pt_for_each_grad_part(m, label, part_agrees, &g);
}

/* ---- one config --------------------------------------------------------- */

/* Forward (with and without targets), backward (mean, weighted, then
 * accumulated), the control, and AdamW, on one config. */
static void run_suite(pcuda_ctx *ctx, const pt_suite *s, const char *backend) {
  char why[256], label[96];
  snprintf(label, sizeof label, "%s/%s", backend, s->name);
  int B = s->B, T = s->T, BT = B * T, V = s->cfg.vocab;
  pl_model m;
  pcuda_model dm;
  /* peaked attention, sharp logits, non-trivial norm weights */
  if (pt_make_model(&m, s, 1234, label) != PL_OK) return;
  if (pt_pcuda_model_init(&dm, ctx, &m, PCUDA_DTYPE_FP32, label) != PL_OK)
    return;
  int32_t *tokens = malloc(BT * sizeof(int32_t));
  int32_t *targets = malloc(BT * sizeof(int32_t));
  float *w = malloc(BT * sizeof(float));
  float *params = malloc(m.num_params * sizeof(float));
  pt_make_batch(tokens, targets, BT, V);
  for (int i = 0; i < BT; i++)
    w[i] = ((float)(pt_rnd() % 2001) - 1000.0f) / 1000.0f; /* advantages */

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
  pt_adamw_init(&opt, &dopt, &m, &dm, &ac, label);
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

/* Ten training steps (pt_train): every step's loss within TOL_TRAIN_LOSS
 * (relative) of the CPU's, the gradient norms within 1e-3, and the loss
 * must fall. */
#define TOL_TRAIN_LOSS 1e-4
static double worst_train;

static void run_training(pcuda_ctx *ctx, const char *backend) {
  const pt_train_spec spec = {.prog = "test_policy_cuda",
                              .dtype = PCUDA_DTYPE_FP32,
                              .vs = "backend / CPU",
                              .digits = 6,
                              .tol_loss = TOL_TRAIN_LOSS,
                              .tol_norm = 1e-3f,
                              .worst_loss = &worst_train};
  pt_train(ctx, backend, &spec);
}

static void run_all(pcuda_ctx *ctx, const char *backend) {
  printf("test_policy_cuda: backend %s\n", pcuda_describe(ctx));
  for (int i = 0; i < PT_NUM_SUITES; i++)
    run_suite(ctx, &pt_suites[i], backend);
  run_training(ctx, backend);
}

static void report_worst(void) {
  printf("test_policy_cuda: worst error / tolerance: forward %.3f, gradients "
         "%.3f, AdamW %.3f, training losses %.3f\n",
         worst_forward, worst_grad, worst_adamw, worst_train);
}

/* Without a device the device backend fails with a sentence, not a loader
 * error: this binary links no CUDA library. */
static void probe_device(void) {
  char why[256];
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
}

int main(int argc, char **argv) {
  const pt_program program = {"test_policy_cuda", run_all, report_worst,
                              probe_device};
  return pt_main(argc, argv, &program);
}
