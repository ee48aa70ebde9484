/*
 * tests/unit/test_model.c — the policy transformer and AdamW on their own:
 * gradients against finite differences on a tiny config (the mean loss and
 * the GRPO-weighted loss), causality, masking, determinism of the init,
 * accumulation, bad input, and the optimiser's schedule, decay and descent;
 * a sequence longer than one attention block against a direct computation.
 * The comparison with PyTorch is tests/python/test_policy_torch.py.
 *
 * Finite differences are taken along random +-1 directions, one parameter
 * tensor at a time, with central differences in fp32 (eps 1e-3): the loss
 * change then sums many elements and stands well above fp32 rounding. A
 * tensor passes when |fd - g.d| <= 2e-2 |g.d| + 2e-3.
 */
#include "kltest.h"
#include "policy/policy.h"

#include <math.h>
#include <string.h>

enum { B = 2, T = 7 };
#ifndef SCALE
#define SCALE 3.0f
#endif
static const pl_config tiny = {.vocab = 16,
                               .d_model = 16,
                               .n_layers = 2,
                               .n_heads = 2,
                               .d_ff = 32,
                               .max_seq = 8};

static uint64_t rng = 12345;
static uint32_t rnd(void) {
  rng ^= rng << 13;
  rng ^= rng >> 7;
  rng ^= rng << 17;
  return (uint32_t)(rng >> 11);
}

static void make_batch(int32_t *tokens, int32_t *targets, int V) {
  for (int i = 0; i < B * T; i++) {
    tokens[i] = (int32_t)(rnd() % V);
    targets[i] = (int32_t)(rnd() % V);
  }
  targets[3] = -1; /* masked positions count for nothing */
  targets[B * T - 1] = -1;
}

/* The weighted objective sum_t w_t logp_t, from the forward's losses. */
static double weighted_objective(pl_model *m, const float *w) {
  double s = 0.0;
  for (int i = 0; i < B * T; i++)
    if (m->targets[i] >= 0) s -= (double)w[i] * m->acts.losses[i];
  return s;
}

/* The objective (mean loss, or the weighted one when w != NULL) at the
 * current parameters. */
static double objective(pl_model *m, const int32_t *tokens,
                        const int32_t *targets, const float *w) {
  float loss = pl_model_forward(m, tokens, targets, B, T);
  return w ? weighted_objective(m, w) : loss;
}

/* Central difference of the objective along d (n floats at p) with step
 * eps. */
static double central_difference(pl_model *m, float *p, const float *d,
                                 size_t n, float eps, const int32_t *tokens,
                                 const int32_t *targets, const float *w) {
  double f[2];
  for (int s = 0; s < 2; s++) {
    float sign = s ? -1.0f : 1.0f;
    for (size_t i = 0; i < n; i++)
      p[i] += sign * eps * d[i];
    f[s] = objective(m, tokens, targets, w);
    for (size_t i = 0; i < n; i++)
      p[i] -= sign * eps * d[i];
  }
  return (f[0] - f[1]) / (2.0 * eps);
}

static double worst_ratio = 0.0; /* error / tolerance, for the log */

/* Directional check of tensor t: d is +-1 on 16 random elements (0
 * elsewhere), the finite difference Richardson-extrapolated from steps
 * 2e-3 and 1e-3 (the eps^2 error cancels). w NULL: the mean loss. */
static void check_direction(pl_model *m, int t, const int32_t *tokens,
                            const int32_t *targets, const float *w) {
  size_t off = 0;
  for (int i = 0; i < t; i++)
    off += m->param_sizes[i];
  size_t n = m->param_sizes[t];
  float *p = m->params_memory + off, *g = m->grads_memory + off;
  float *d = calloc(n, sizeof(float));

  pl_model_zero_grad(m);
  pl_model_forward(m, tokens, targets, B, T);
  if (w)
    pl_model_backward_weighted(m, w);
  else
    pl_model_backward(m);
  for (int k = 0; k < 16; k++)
    d[rnd() % n] = rnd() & 1 ? 1.0f : -1.0f;
  double an = 0.0;
  for (size_t i = 0; i < n; i++)
    an += (double)g[i] * d[i];
  double d1 = central_difference(m, p, d, n, 2e-3f, tokens, targets, w);
  double d2 = central_difference(m, p, d, n, 1e-3f, tokens, targets, w);
  double fd = (4.0 * d2 - d1) / 3.0;
  double tol = 2e-2 * fabs(an) + 2e-3, err = fabs(fd - an);
  if (err / tol > worst_ratio) worst_ratio = err / tol;
  CHECK(err <= tol, "%s gradient %s: finite difference %.6g, backward %.6g",
        w ? "weighted" : "mean-loss", pl_param_names[t], fd, an);
  free(d);
}

static void test_config(void) {
  char why[256];
  pl_config c = tiny;
  CHECK(pl_config_check(&c, why, sizeof why) == PL_OK, "%s", why);
  c.n_heads = 3;
  CHECK(pl_config_check(&c, why, sizeof why) == PL_EINPUT, "C %% NH");
  CHECK(strstr(why, "n_heads") != NULL, "why names the field: %s", why);
  c = tiny;
  c.n_heads = 16; /* head size 1: odd */
  CHECK(pl_config_check(&c, why, sizeof why) == PL_EINPUT, "odd head size");
  c = tiny;
  c.vocab = 0;
  pl_model m;
  CHECK(pl_model_init(&m, &c, 1, why, sizeof why) == PL_EINPUT, "vocab 0");
  CHECK(pl_default_ff(256) == 672, "8*256/3 -> %d", pl_default_ff(256));
  CHECK(pl_default_ff(384) == 1024, "8*384/3 -> %d", pl_default_ff(384));
}

static void test_init(void) {
  char why[256];
  pl_model a, b, c;
  pl_config big = tiny;
  big.d_model = 64;
  big.d_ff = 128;
  CHECK(pl_model_init(&a, &big, 7, why, sizeof why) == PL_OK, "%s", why);
  CHECK(pl_model_init(&b, &big, 7, why, sizeof why) == PL_OK, "%s", why);
  CHECK(pl_model_init(&c, &big, 8, why, sizeof why) == PL_OK, "%s", why);
  CHECK(!memcmp(a.params_memory, b.params_memory, a.num_params * sizeof(float)),
        "same seed, same weights");
  CHECK(memcmp(a.params_memory, c.params_memory, a.num_params * sizeof(float)),
        "other seed, other weights");
  size_t s[PL_NUM_PARAM_TENSORS], total = 0;
  pl_param_sizes(&big, s);
  for (int i = 0; i < PL_NUM_PARAM_TENSORS; i++)
    total += s[i];
  CHECK(total == a.num_params, "num_params %zu", a.num_params);
  double sw = 0, so = 0;
  for (size_t i = 0; i < s[2]; i++)
    sw += a.params.wqkv[i] * a.params.wqkv[i];
  for (size_t i = 0; i < s[3]; i++)
    so += a.params.wo[i] * a.params.wo[i];
  sw = sqrt(sw / s[2]);
  so = sqrt(so / s[3]);
  CHECK(fabs(sw - 0.02) < 0.001, "wqkv std %g, want 0.02", sw);
  CHECK(fabs(so - 0.01) < 0.0007, "wo std %g, want 0.02/sqrt(4)", so);
  CHECK(a.params.rms_att[0] == 1.0f && a.params.rms_final[63] == 1.0f,
        "norm weights start at 1");
  pl_model_free(&a);
  pl_model_free(&b);
  pl_model_free(&c);
}

static void test_forward(void) {
  char why[256];
  pl_model m;
  CHECK(pl_model_init(&m, &tiny, 1, why, sizeof why) == PL_OK, "%s", why);
  int32_t tokens[B * T], targets[B * T];
  make_batch(tokens, targets, tiny.vocab);
  float loss = pl_model_forward(&m, tokens, targets, B, T);
  CHECK(fabsf(loss - logf(16.0f)) < 0.05f, "loss at init %g ~ log V", loss);
  CHECK(pl_model_forward(&m, tokens, NULL, B, T) == -1.0f, "no targets: -1");
  CHECK(pl_model_backward(&m) == PL_EINPUT, "backward needs targets");

  /* the loss is the mean over unmasked positions of lse - z[target] */
  pl_model_forward(&m, tokens, targets, B, T);
  double sum = 0;
  int n = 0;
  for (int i = 0; i < B * T; i++) {
    if (targets[i] < 0) {
      CHECK(m.acts.losses[i] == 0.0f, "masked loss %d", i);
      continue;
    }
    const float *z = m.acts.logits + (size_t)i * tiny.vocab;
    double se = 0;
    for (int v = 0; v < tiny.vocab; v++)
      se += exp(z[v]);
    sum += log(se) - z[targets[i]];
    n++;
  }
  CHECK(fabs(sum / n - m.mean_loss) < 1e-5, "mean loss %g vs %g", sum / n,
        m.mean_loss);

  /* causality: changing token 5 of row 0 leaves positions 0..4 alone */
  float *before = malloc(sizeof(float) * B * T * tiny.vocab);
  memcpy(before, m.acts.logits, sizeof(float) * B * T * tiny.vocab);
  tokens[5] = (tokens[5] + 1) % tiny.vocab;
  pl_model_forward(&m, tokens, targets, B, T);
  CHECK(!memcmp(before, m.acts.logits, sizeof(float) * 5 * tiny.vocab),
        "positions before 5 do not see token 5");
  CHECK(memcmp(before + 5 * tiny.vocab, m.acts.logits + 5 * tiny.vocab,
               sizeof(float) * tiny.vocab),
        "position 5 sees token 5");
  free(before);

  /* bad input: NAN, no crash */
  tokens[0] = 99;
  CHECK(isnan(pl_model_forward(&m, tokens, targets, B, T)), "token >= V");
  tokens[0] = 0;
  CHECK(isnan(pl_model_forward(&m, tokens, targets, B, 9)), "T > max_seq");

  /* a smaller batch after a bigger one reuses the memory */
  float l1 = pl_model_forward(&m, tokens, targets, 1, 4);
  CHECK(isfinite(l1) && m.B == 1 && m.T == 4, "B=1 T=4 after B=2 T=7");
  pl_model_free(&m);
}

static void test_gradients(void) {
  char why[256];
  pl_model m;
  CHECK(pl_model_init(&m, &tiny, 3, why, sizeof why) == PL_OK, "%s", why);
  /* larger weights than the 0.02 init, so every path carries signal */
  for (size_t i = 0; i < m.num_params; i++)
    m.params_memory[i] *= SCALE;
  for (int i = 0; i < tiny.d_model * tiny.n_layers; i++) {
    m.params.rms_att[i] = 1.0f + 0.1f * (float)(i % 5);
    m.params.rms_ffn[i] = 1.0f - 0.05f * (float)(i % 3);
  }
  int32_t tokens[B * T], targets[B * T];
  make_batch(tokens, targets, tiny.vocab);
  float w[B * T];
  for (int i = 0; i < B * T; i++)
    w[i] = (float)((int)(rnd() % 200) - 100) / 50;

  for (int t = 0; t < PL_NUM_PARAM_TENSORS; t++)
    for (int rep = 0; rep < 3; rep++) {
      check_direction(&m, t, tokens, targets, NULL);
      check_direction(&m, t, tokens, targets, w);
    }
  printf("finite differences: worst error / tolerance %.3f\n", worst_ratio);

  /* backward_weighted with w = -1/N is the mean loss's backward */
  int count = 0;
  for (int i = 0; i < B * T; i++)
    count += targets[i] >= 0;
  float wm[B * T];
  for (int i = 0; i < B * T; i++)
    wm[i] = -1.0f / count;
  float *g1 = malloc(m.num_params * sizeof(float));
  pl_model_zero_grad(&m);
  pl_model_forward(&m, tokens, targets, B, T);
  pl_model_backward(&m);
  memcpy(g1, m.grads_memory, m.num_params * sizeof(float));
  pl_model_zero_grad(&m);
  pl_model_backward_weighted(&m, wm);
  float worst = 0, gmax = 0;
  for (size_t i = 0; i < m.num_params; i++) {
    worst = fmaxf(worst, fabsf(g1[i] - m.grads_memory[i]));
    gmax = fmaxf(gmax, fabsf(g1[i]));
  }
  CHECK(worst <= 1e-6f * gmax, "weighted(-1/N) vs mean: %g of %g", worst, gmax);

  /* gradients accumulate; zero_grad clears */
  pl_model_backward(&m);
  worst = 0;
  for (size_t i = 0; i < m.num_params; i++)
    worst = fmaxf(worst, fabsf(m.grads_memory[i] - 2.0f * g1[i]));
  CHECK(worst <= 1e-5f * gmax, "two backwards = twice the gradient (%g)",
        worst);
  pl_model_zero_grad(&m);
  int zero = 1;
  for (size_t i = 0; i < m.num_params; i++)
    zero &= m.grads_memory[i] == 0;
  CHECK(zero, "zero_grad");
  free(g1);
  pl_model_free(&m);
}

/* A longer sequence than one attention block (policy/model.c's ATT_BLOCK,
 * 64): T = 150 is blocks of 64, 64 and 22, d_ff 70 leaves a tail of the
 * 4-lane loops, and the batch is big enough that the pool splits the
 * GEMMs. Attention's output and probabilities against a direct per-row
 * computation from the same q, k, v; gradients against finite
 * differences (mean loss); threads 1 vs 2 agree. */
enum { LB = 2, LT = 150 };
static const pl_config longer = {.vocab = 96,
                                 .d_model = 64,
                                 .n_layers = 1,
                                 .n_heads = 2,
                                 .d_ff = 70,
                                 .max_seq = LT};

static double long_loss(pl_model *m, const int32_t *tok, const int32_t *tgt) {
  return pl_model_forward(m, tok, tgt, LB, LT);
}

static void test_long_blocks(void) {
  char why[256];
  pl_model m;
  CHECK(pl_model_init(&m, &longer, 9, why, sizeof why) == PL_OK, "%s", why);
  for (size_t i = 0; i < m.num_params; i++)
    m.params_memory[i] *= SCALE;
  static int32_t tok[LB * LT], tgt[LB * LT];
  for (int i = 0; i < LB * LT; i++) {
    tok[i] = (int32_t)(rnd() % longer.vocab);
    tgt[i] = i % 11 == 5 ? -1 : (int32_t)(rnd() % longer.vocab);
  }
  float loss = (float)long_loss(&m, tok, tgt);
  CHECK(isfinite(loss), "loss %g", loss);

  /* attention of layer 0, row by row in double */
  int C = longer.d_model, NH = longer.n_heads, hs = C / NH;
  const float *qkv = m.acts.qkv, *y = m.acts.atty, *att = m.acts.att;
  double worst_y = 0, worst_p = 0, ymax = 0;
  int above = 0;
  double *pr = malloc(sizeof(double) * LT);
  for (int b = 0; b < LB; b++)
    for (int h = 0; h < NH; h++)
      for (int t = 0; t < LT; t++) {
        const float *q = qkv + ((size_t)b * LT + t) * 3 * C + h * hs;
        double mx = -1e300, sum = 0;
        for (int t2 = 0; t2 <= t; t2++) {
          const float *k = qkv + ((size_t)b * LT + t2) * 3 * C + C + h * hs;
          double s = 0;
          for (int i = 0; i < hs; i++)
            s += (double)q[i] * k[i];
          pr[t2] = s / sqrt((double)hs);
          mx = pr[t2] > mx ? pr[t2] : mx;
        }
        for (int t2 = 0; t2 <= t; t2++)
          sum += pr[t2] = exp(pr[t2] - mx);
        const float *prow = att + (((size_t)b * NH + h) * LT + t) * LT;
        for (int t2 = 0; t2 < LT; t2++) {
          if (t2 > t) {
            above += prow[t2] != 0.0f;
            continue;
          }
          double d = fabs(pr[t2] / sum - prow[t2]);
          worst_p = d > worst_p ? d : worst_p;
        }
        for (int i = 0; i < hs; i++) {
          double yi = 0;
          for (int t2 = 0; t2 <= t; t2++)
            yi += pr[t2] / sum *
                  qkv[((size_t)b * LT + t2) * 3 * C + 2 * C + h * hs + i];
          double d = fabs(yi - y[((size_t)b * LT + t) * C + h * hs + i]);
          worst_y = d > worst_y ? d : worst_y;
          ymax = fabs(yi) > ymax ? fabs(yi) : ymax;
        }
      }
  free(pr);
  CHECK(worst_p < 1e-6, "attention probabilities off by %g", worst_p);
  CHECK(worst_y < 1e-5 * ymax, "attention output off by %g of %g", worst_y,
        ymax);
  CHECK(!above, "%d probabilities above the diagonal not 0", above);

  /* gradients: mean loss along +-1 directions, as check_direction */
  for (int t = 0; t < PL_NUM_PARAM_TENSORS; t++) {
    size_t off = 0;
    for (int i = 0; i < t; i++)
      off += m.param_sizes[i];
    size_t n = m.param_sizes[t];
    float *p = m.params_memory + off, *g = m.grads_memory + off;
    float *d = calloc(n, sizeof(float));
    pl_model_zero_grad(&m);
    long_loss(&m, tok, tgt);
    pl_model_backward(&m);
    for (int k = 0; k < 16; k++)
      d[rnd() % n] = rnd() & 1 ? 1.0f : -1.0f;
    double an = 0.0, fdv[2];
    for (size_t i = 0; i < n; i++)
      an += (double)g[i] * d[i];
    for (int e = 0; e < 2; e++) {
      float eps = e ? 1e-3f : 2e-3f;
      double f[2];
      for (int s = 0; s < 2; s++) {
        float sign = s ? -1.0f : 1.0f;
        for (size_t i = 0; i < n; i++)
          p[i] += sign * eps * d[i];
        f[s] = long_loss(&m, tok, tgt);
        for (size_t i = 0; i < n; i++)
          p[i] -= sign * eps * d[i];
      }
      fdv[e] = (f[0] - f[1]) / (2.0 * eps);
    }
    double fd = (4.0 * fdv[1] - fdv[0]) / 3.0;
    double tol = 2e-2 * fabs(an) + 2e-3, err = fabs(fd - an);
    if (err / tol > worst_ratio) worst_ratio = err / tol;
    CHECK(err <= tol, "T=%d gradient %s: finite difference %.6g, backward %.6g",
          LT, pl_param_names[t], fd, an);
    free(d);
  }

  /* one thread: the same logits and gradients up to summation order */
  pl_model_zero_grad(&m);
  long_loss(&m, tok, tgt);
  pl_model_backward(&m);
  size_t nl = (size_t)LB * LT * longer.vocab;
  float *l2 = malloc(sizeof(float) * nl),
        *g2 = malloc(sizeof(float) * m.num_params);
  memcpy(l2, m.acts.logits, sizeof(float) * nl);
  memcpy(g2, m.grads_memory, sizeof(float) * m.num_params);
  pl_set_num_threads(1);
  pl_model_zero_grad(&m);
  long_loss(&m, tok, tgt);
  pl_model_backward(&m);
  pl_set_num_threads(2);
  double wl = 0, wg = 0, gmax = 0;
  for (size_t i = 0; i < nl; i++)
    wl = fmax(wl, fabs(l2[i] - m.acts.logits[i]));
  for (size_t i = 0; i < m.num_params; i++) {
    wg = fmax(wg, fabs(g2[i] - m.grads_memory[i]));
    gmax = fmax(gmax, fabs(g2[i]));
  }
  CHECK(wl < 1e-4, "logits with 1 vs 2 threads differ by %g", wl);
  CHECK(wg <= 1e-5 * gmax, "gradients with 1 vs 2 threads: %g of %g", wg, gmax);
  free(l2);
  free(g2);
  pl_model_free(&m);
}

static void test_adamw(void) {
  char why[256];
  pl_adamw_config c = pl_adamw_defaults();
  c.lr = 1.0f;
  c.warmup_steps = 10;
  c.total_steps = 110;
  c.final_lr_frac = 0.1f;
  CHECK(fabsf(pl_adamw_lr_at(&c, 0) - 0.1f) < 1e-6f, "warm-up step 0");
  CHECK(fabsf(pl_adamw_lr_at(&c, 9) - 1.0f) < 1e-6f, "warm-up end");
  CHECK(fabsf(pl_adamw_lr_at(&c, 60) - 0.55f) < 1e-6f, "cosine midpoint");
  CHECK(fabsf(pl_adamw_lr_at(&c, 110) - 0.1f) < 1e-6f, "end");
  CHECK(fabsf(pl_adamw_lr_at(&c, 500) - 0.1f) < 1e-6f, "flat after");
  c.schedule = PL_SCHED_LINEAR;
  CHECK(fabsf(pl_adamw_lr_at(&c, 35) - 0.775f) < 1e-6f, "linear quarter");

  pl_model m;
  pl_adamw opt;
  CHECK(pl_model_init(&m, &tiny, 5, why, sizeof why) == PL_OK, "%s", why);
  c = pl_adamw_defaults();
  c.beta2 = 1.5f;
  CHECK(pl_adamw_init(&opt, &m, &c, why, sizeof why) == PL_EINPUT, "beta2");
  CHECK(strstr(why, "beta2") != NULL, "why: %s", why);

  /* zero gradients: only decay moves weights, and only the matrices */
  c = pl_adamw_defaults();
  c.warmup_steps = 0;
  c.lr = 0.1f;
  c.weight_decay = 0.5f;
  CHECK(pl_adamw_init(&opt, &m, &c, why, sizeof why) == PL_OK, "%s", why);
  float wte0 = m.params.wte[3], wo0 = m.params.wo[3];
  float norm = pl_adamw_step(&opt, &m);
  CHECK(norm == 0.0f, "zero grads, norm %g", norm);
  CHECK(m.params.wte[3] == wte0, "no decay on the embedding");
  CHECK(m.params.rms_att[0] == 1.0f, "no decay on norms");
  CHECK(fabsf(m.params.wo[3] - wo0 * 0.95f) <= 1e-7f, "wo decays by lr*wd");
  pl_adamw_free(&opt);

  /* descent on a fixed batch, clipping on */
  c = pl_adamw_defaults();
  c.lr = 1e-2f;
  c.warmup_steps = 2;
  c.total_steps = 30;
  CHECK(pl_adamw_init(&opt, &m, &c, why, sizeof why) == PL_OK, "%s", why);
  int32_t tokens[B * T], targets[B * T];
  make_batch(tokens, targets, tiny.vocab);
  float first = 0, last = 0;
  for (int s = 0; s < 30; s++) {
    pl_model_zero_grad(&m);
    last = pl_model_forward(&m, tokens, targets, B, T);
    if (!s) first = last;
    pl_model_backward(&m);
    pl_adamw_step(&opt, &m);
  }
  CHECK(opt.step == 30, "step count %lld", (long long)opt.step);
  CHECK(last < 0.5f * first, "loss %g -> %g over 30 steps", first, last);
  pl_adamw_free(&opt);
  pl_model_free(&m);
}

int main(void) {
  pl_set_num_threads(2);
  test_config();
  test_init();
  test_forward();
  test_gradients();
  worst_ratio = 0.0;
  test_long_blocks();
  printf("with T=%d: worst error / tolerance %.3f\n", LT, worst_ratio);
  test_adamw();
  return kl_test_done("test_model");
}
