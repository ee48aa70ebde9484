/*
 * policy/grpo.c — the GRPO math as pure functions: group-relative
 * advantages from rewards, and the clipped-surrogate + k3-KL loss with its
 * per-token gradient d loss / d logp (the input of
 * pl_model_backward_weighted). Formulas and aggregation rules are in
 * policy/policy.h (GRPO section); they are TRL GRPOTrainer's, token-level
 * importance sampling only.
 *
 * Everything is computed in double from float inputs, so the only error
 * against the float64 golden values is the rounding of the inputs and of
 * the float outputs. Not here: sequence-level ratios (GSPO), cispo/sapo,
 * entropy masks, vLLM importance-sampling corrections, the model itself.
 */
#include "policy/policy.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* TRL adds this to the std so that a group of equal rewards gives A = 0
 * rather than 0/0. */
#define GRPO_STD_EPS 1e-4

pl_grpo_config pl_grpo_defaults(void) {
  pl_grpo_config c = {
      .loss_type = PL_GRPO_LOSS_DAPO,
      .scale_rewards = PL_GRPO_SCALE_GROUP,
      .beta = 0.0,
      .eps_low = 0.2,
      .eps_high = 0.2,
      .max_completion_length = 512,
      .mask_truncated = 0,
      .grad_accum_steps = 1,
      .num_items = 0.0,
  };
  return c;
}

int pl_grpo_config_check(const pl_grpo_config *c, char *why, size_t why_len) {
  const char *bad = NULL;
  if (c->loss_type < PL_GRPO_LOSS_GRPO || c->loss_type > PL_GRPO_LOSS_DAPO)
    bad = "loss_type must be grpo, bnpo, dr_grpo or dapo";
  else if (c->scale_rewards < PL_GRPO_SCALE_GROUP ||
           c->scale_rewards > PL_GRPO_SCALE_NONE)
    bad = "scale_rewards must be group, batch or none";
  else if (!(c->beta >= 0.0 && isfinite(c->beta)))
    bad = "beta must be a finite number >= 0";
  else if (!(c->eps_low >= 0.0 && c->eps_low < 1.0))
    bad = "eps_low not in [0,1)";
  else if (!(c->eps_high >= 0.0 && isfinite(c->eps_high)))
    bad = "eps_high must be a finite number >= 0";
  else if (c->max_completion_length < 1)
    bad = "max_completion_length must be >= 1";
  else if (c->grad_accum_steps < 0)
    bad = "grad_accum_steps must be >= 0 (0 means 1)";
  else if (!(c->num_items >= 0.0 && isfinite(c->num_items)))
    bad = "num_items must be a finite number >= 0 (0: this call's tokens)";
  if (!bad) return PL_OK;
  snprintf(why, why_len, "grpo config: %s", bad);
  return PL_EINPUT;
}

/* Mean and Bessel-corrected std of the non-NaN values of x (n,). *count is
 * how many there were; std is NaN when fewer than 2 (as torch's std). */
static void nan_mean_std(const double *x, int n, double *mean, double *std,
                         int *count) {
  double sum = 0.0;
  int k = 0;
  for (int i = 0; i < n; i++)
    if (!isnan(x[i])) {
      sum += x[i];
      k++;
    }
  *count = k;
  *mean = k ? sum / k : NAN;
  /* One correction pass (the residuals' mean): the plain sum of k equal
   * values can round, leaving r - mean ~ 1e-16, which the division by
   * (std + 1e-4) blows up to ~1e-12, a nonzero advantage for a group with
   * no signal. Corrected, equal values give exactly their value. */
  double resid = 0.0;
  for (int i = 0; i < n; i++)
    if (!isnan(x[i])) resid += x[i] - *mean;
  if (k) *mean += resid / k;
  double ss = 0.0;
  for (int i = 0; i < n; i++)
    if (!isnan(x[i])) ss += (x[i] - *mean) * (x[i] - *mean);
  *std = k >= 2 ? sqrt(ss / (k - 1)) : NAN;
}

int pl_grpo_advantages(float *adv, const double *rewards, int n_groups, int G,
                       int scale_rewards, char *why, size_t why_len) {
  if (n_groups < 1 || G < 1) {
    snprintf(why, why_len,
             "grpo advantages: need n_groups >= 1 and G >= 1, got %d and %d",
             n_groups, G);
    return PL_EINPUT;
  }
  if (scale_rewards < PL_GRPO_SCALE_GROUP ||
      scale_rewards > PL_GRPO_SCALE_NONE) {
    snprintf(why, why_len,
             "grpo advantages: scale_rewards must be group, batch or none "
             "(got %d)",
             scale_rewards);
    return PL_EINPUT;
  }
  int n = n_groups * G, count;
  double batch_mean, batch_std;
  nan_mean_std(rewards, n, &batch_mean, &batch_std, &count);
  for (int g = 0; g < n_groups; g++) {
    const double *r = rewards + (size_t)g * G; /* this group's G rewards */
    double mean, std;
    nan_mean_std(r, G, &mean, &std, &count);
    if (scale_rewards == PL_GRPO_SCALE_BATCH) std = batch_std;
    for (int j = 0; j < G; j++) {
      double a = r[j] - mean;
      if (scale_rewards != PL_GRPO_SCALE_NONE) a /= std + GRPO_STD_EPS;
      /* NaN reward, or a std over < 2 rewards: no signal (TRL's nan -> 0) */
      adv[(size_t)g * G + j] = isnan(a) ? 0.0f : (float)a;
    }
  }
  return PL_OK;
}

int pl_grpo_loss(float *dloss_dlogp, pl_grpo_stats *stats,
                 const pl_grpo_config *cfg, const float *logp,
                 const float *old_logp, const float *ref_logp,
                 const float *advantages, const float *mask,
                 const uint8_t *truncated, int B, int T, char *why,
                 size_t why_len) {
  int rc = pl_grpo_config_check(cfg, why, why_len);
  if (rc != PL_OK) return rc;
  if (B < 1 || T < 1) {
    snprintf(why, why_len, "grpo loss: need B >= 1 and T >= 1, got %d and %d",
             B, T);
    return PL_EINPUT;
  }
  if (cfg->beta > 0.0 && !ref_logp) {
    snprintf(why, why_len,
             "grpo loss: beta is %g but ref_logp is NULL (the KL needs the "
             "reference model's log-probs)",
             cfg->beta);
    return PL_EINPUT;
  }
  const int use_kl = cfg->beta > 0.0;
  const double beta = cfg->beta;
  const double lo = 1.0 - cfg->eps_low, hi = 1.0 + cfg->eps_high;
  const double accum = cfg->grad_accum_steps > 1 ? cfg->grad_accum_steps : 1;

  /* Pass 1: the mask each row really has (truncation zeroes a row) and the
   * totals the normalisers need. */
  double total_mask = 0.0;
  for (int b = 0; b < B; b++) {
    if (cfg->mask_truncated && truncated && truncated[b]) continue;
    for (int t = 0; t < T; t++)
      total_mask += mask[(size_t)b * T + t];
  }

  /* Pass 2: per-token loss and gradient, weighted by the aggregation. */
  double loss_pg = 0.0, loss_kl = 0.0;
  double kl_sum = 0.0, ratio_sum = 0.0, clip_lo = 0.0, clip_hi = 0.0;
  for (int b = 0; b < B; b++) {
    const size_t row = (size_t)b * T; /* offset of completion b's tokens */
    const int dropped = cfg->mask_truncated && truncated && truncated[b];
    double row_mask = 0.0;
    for (int t = 0; t < T; t++)
      row_mask += mask[row + t];
    /* weight of one token's L in the aggregated loss */
    double w;
    switch (cfg->loss_type) {
    case PL_GRPO_LOSS_GRPO:
      w = 1.0 / ((double)B * fmax(row_mask, 1.0) * accum);
      break;
    case PL_GRPO_LOSS_BNPO:
      w = 1.0 / (fmax(total_mask, 1.0) * accum);
      break;
    case PL_GRPO_LOSS_DR_GRPO:
      w = 1.0 / ((double)B * cfg->max_completion_length * accum);
      break;
    default: /* PL_GRPO_LOSS_DAPO */
      w = 1.0 / fmax(cfg->num_items > 0.0 ? cfg->num_items : total_mask, 1.0);
      break;
    }
    const double A = advantages[b];
    for (int t = 0; t < T; t++) {
      const size_t i = row + t;
      const double m = dropped ? 0.0 : mask[i];
      if (m == 0.0) {
        dloss_dlogp[i] = 0.0f;
        continue;
      }
      const double l = logp[i];
      const double rho = old_logp ? exp(l - (double)old_logp[i]) : 1.0;
      const int is_low = A < 0.0 && rho < lo;
      const int is_high = A > 0.0 && rho > hi;
      const double rho_c = rho < lo ? lo : (rho > hi ? hi : rho);
      const double surr = fmin(rho * A, rho_c * A);
      double g = (is_low || is_high) ? 0.0 : -rho * A; /* d(-surr)/dl */
      double kl = 0.0;
      if (use_kl) {
        const double d = (double)ref_logp[i] - l; /* l_ref - l */
        kl = exp(d) - d - 1.0;
        g += beta * (1.0 - exp(d));
      }
      loss_pg += w * m * -surr;
      loss_kl += w * m * beta * kl;
      dloss_dlogp[i] = (float)(w * m * g);
      kl_sum += m * kl;
      ratio_sum += m * rho;
      clip_lo += m * is_low;
      clip_hi += m * is_high;
    }
  }

  memset(stats, 0, sizeof *stats);
  stats->policy_loss = loss_pg;
  stats->kl_loss = loss_kl;
  stats->loss = loss_pg + loss_kl;
  stats->active_tokens = total_mask;
  if (total_mask > 0.0) {
    stats->kl_mean = kl_sum / total_mask;
    stats->ratio_mean = ratio_sum / total_mask;
    stats->clip_low = clip_lo / total_mask;
    stats->clip_high = clip_hi / total_mask;
    stats->clip_fraction = stats->clip_low + stats->clip_high;
  }
  return PL_OK;
}
