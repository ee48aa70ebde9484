/*
 * policy/adamw.c — AdamW for the policy: the learning-rate schedule, clipping
 * by the global gradient norm, and the update, written to match
 * torch.optim.AdamW + torch.nn.utils.clip_grad_norm_ step for step (the
 * cross-check in tests/python/test_policy_torch.py holds it to that).
 *
 * Weight decay is decoupled and applies only to the matrices inside the
 * blocks (pl_param_decays): not to RMSNorm weights, and not to the tied
 * embedding/head. State (m, v) is one allocation. The norm and the update
 * split the parameters over the policy's pool (policy/parallel.c). Not
 * here: fp16/bf16 master weights, ZeRO sharding, outlier skipping.
 */
#include "policy/policy.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

pl_adamw_config pl_adamw_defaults(void) {
  pl_adamw_config c = {
      .lr = 3e-4f,
      .beta1 = 0.9f,
      .beta2 = 0.95f,
      .eps = 1e-8f,
      .weight_decay = 0.1f,
      .grad_clip = 1.0f,
      .warmup_steps = 100,
      .total_steps = 1000,
      .final_lr_frac = 0.1f,
      .schedule = PL_SCHED_COSINE,
  };
  return c;
}

/* Warm-up: lr·(step+1)/warmup for step < warmup (so the first update is not
 * wasted at lr 0). Then the decay fraction f goes 0 -> 1 over
 * [warmup, total]; lr_min + (lr - lr_min)·k(f) with k = (1 + cos(pi f))/2
 * (cosine) or 1 - f (linear); lr_min after total_steps. */
float pl_adamw_lr_at(const pl_adamw_config *c, int64_t step) {
  if (step < c->warmup_steps)
    return c->lr * (float)(step + 1) / (float)c->warmup_steps;
  double lr_min = (double)c->lr * c->final_lr_frac;
  if (step >= c->total_steps) return (float)lr_min;
  double f = (double)(step - c->warmup_steps) /
             (double)(c->total_steps - c->warmup_steps);
  double k =
      c->schedule == PL_SCHED_LINEAR ? 1.0 - f : 0.5 * (1.0 + cos(M_PI * f));
  return (float)(lr_min + (c->lr - lr_min) * k);
}

static int adamw_config_check(const pl_adamw_config *c, char *why,
                              size_t why_len) {
  const char *bad = NULL;
  if (!(c->lr >= 0.0f))
    bad = "lr must be >= 0";
  else if (!(c->beta1 >= 0.0f && c->beta1 < 1.0f))
    bad = "beta1 not in [0,1)";
  else if (!(c->beta2 >= 0.0f && c->beta2 < 1.0f))
    bad = "beta2 not in [0,1)";
  else if (!(c->eps > 0.0f))
    bad = "eps must be > 0";
  else if (!(c->weight_decay >= 0.0f))
    bad = "weight_decay must be >= 0";
  else if (c->warmup_steps < 0)
    bad = "warmup_steps must be >= 0";
  else if (c->total_steps < c->warmup_steps)
    bad = "total_steps must be >= warmup_steps";
  else if (!(c->final_lr_frac >= 0.0f && c->final_lr_frac <= 1.0f))
    bad = "final_lr_frac not in [0,1]";
  else if (c->schedule != PL_SCHED_COSINE && c->schedule != PL_SCHED_LINEAR)
    bad = "schedule must be PL_SCHED_COSINE or PL_SCHED_LINEAR";
  if (!bad) return PL_OK;
  snprintf(why, why_len, "adamw config: %s", bad);
  return PL_EINPUT;
}

int pl_adamw_init(pl_adamw *opt, const pl_model *m, const pl_adamw_config *cfg,
                  char *why, size_t why_len) {
  memset(opt, 0, sizeof *opt);
  int rc = adamw_config_check(cfg, why, why_len);
  if (rc != PL_OK) return rc;
  opt->cfg = *cfg;
  opt->n = m->num_params;
  opt->state_memory = calloc(2 * opt->n, sizeof(float));
  if (!opt->state_memory) {
    snprintf(why, why_len, "adamw: out of memory for %zu parameters", opt->n);
    return PL_EENV;
  }
  opt->m = opt->state_memory;
  opt->v = opt->state_memory + opt->n;
  return PL_OK;
}

void pl_adamw_free(pl_adamw *opt) {
  free(opt->state_memory);
  memset(opt, 0, sizeof *opt);
}

/* what the pool's slices of one step share */
typedef struct {
  pl_adamw *opt;
  pl_model *m;
  double sq[PL_POOL_MAX]; /* each slot's sum of squared gradients */
  float clip, lr, bc1, bc2;
} step_args;

static void sum_squares(void *ctx, size_t begin, size_t end, int slot) {
  step_args *a = ctx;
  const float *g = a->m->grads_memory;
  double sq = 0.0;
  for (size_t i = begin; i < end; i++)
    sq += (double)g[i] * g[i];
  a->sq[slot] = sq;
}

/* the update of elements [begin, end), each tensor's decay by its index */
static void update(void *ctx, size_t begin, size_t end, int slot) {
  step_args *a = ctx;
  const pl_adamw_config *c = &a->opt->cfg;
  const float *grads = a->m->grads_memory;
  float *params = a->m->params_memory, *m1 = a->opt->m, *v1 = a->opt->v;
  float clip = a->clip, lr = a->lr, bc1 = a->bc1, bc2 = a->bc2;
  (void)slot;
  size_t off = 0;
  for (int t = 0; t < PL_NUM_PARAM_TENSORS; t++) {
    size_t lo = off, hi = off + a->m->param_sizes[t];
    off = hi;
    lo = lo > begin ? lo : begin;
    hi = hi < end ? hi : end;
    float wd = pl_param_decays(t) ? c->weight_decay : 0.0f;
    for (size_t i = lo; i < hi; i++) {
      float gi = grads[i] * clip;
      float mi = m1[i] = c->beta1 * m1[i] + (1.0f - c->beta1) * gi;
      float vi = v1[i] = c->beta2 * v1[i] + (1.0f - c->beta2) * gi * gi;
      float mhat = mi / bc1, vhat = vi / bc2;
      params[i] -= lr * (mhat / (sqrtf(vhat) + c->eps) + wd * params[i]);
    }
  }
}

float pl_adamw_step(pl_adamw *opt, pl_model *m) {
  const pl_adamw_config *c = &opt->cfg;
  step_args a = {.opt = opt, .m = m};

  /* the global L2 norm, summed in double per slice, then over the slices
   * in order; clip like clip_grad_norm_ */
  int slots = pl_parallel_for(sum_squares, &a, opt->n, 1 << 16);
  double sq = 0.0;
  for (int k = 0; k < slots; k++)
    sq += a.sq[k];
  float norm = (float)sqrt(sq);
  float clip = 1.0f;
  if (c->grad_clip > 0.0f && norm > c->grad_clip)
    clip = c->grad_clip / (norm + 1e-6f);

  a.clip = clip;
  a.lr = pl_adamw_lr_at(c, opt->step);
  opt->step++;
  a.bc1 = 1.0f - powf(c->beta1, (float)opt->step);
  a.bc2 = 1.0f - powf(c->beta2, (float)opt->step);
  pl_parallel_for(update, &a, opt->n, 1 << 16);
  return norm;
}
