/*
 * lab/run_update.c — the GRPO update of one campaign step (lab/run_cmd.c
 * runs the loop; the math is policy/grpo.c's): the step's completions as
 * one padded batch, the policy's (and the reference's) per-token
 * log-probs, pl_grpo_loss's d loss / d logp through the weighted backward,
 * then AdamW, num_iterations times; and whether a step has anything to
 * learn from at all.
 */
#include "lab/run_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int lab_grpo_update(const lab_campaign *c, lab_policy *pol,
                    const int32_t *prompt, int plen, const pl_generation *gens,
                    int n_groups, const float *adv, update_out *u, char *why,
                    size_t whylen) {
  int G = c->group_size, B = n_groups * G, maxL = 1;
  for (int b = 0; b < B; b++) {
    int L = gens[b / G].lengths[b % G];
    if (L > maxL) maxL = L;
  }
  int T = plen + maxL - 1; /* inputs: prompt and all but the last token */
  size_t BT = (size_t)B * T;
  int32_t *x = malloc(BT * sizeof *x), *y = malloc(BT * sizeof *y);
  float *mask = calloc(BT, sizeof *mask), *logp = calloc(BT, sizeof *logp);
  float *old = calloc(BT, sizeof *old), *dl = calloc(BT, sizeof *dl);
  float *refp = c->grpo.beta > 0 ? calloc(BT, sizeof *refp) : NULL;
  uint8_t *trunc = malloc((size_t)B);
  int rc = PL_OK;
  if (!x || !y || !mask || !logp || !old || !dl || !trunc ||
      (c->grpo.beta > 0 && !refp)) {
    snprintf(why, whylen, "out of memory for a (%d,%d) update batch", B, T);
    rc = PL_EENV;
    goto done;
  }
  /* Row b: prompt, completion, <|pad|>. Position t predicts token t+1; a
   * completion token i sits at t+1 = plen+i. */
  for (int b = 0; b < B; b++) {
    const pl_generation *g = &gens[b / G];
    int row = b % G, L = g->lengths[row];
    const int32_t *ct = g->tokens + (size_t)row * g->max_new;
    trunc[b] = g->truncated[row];
    for (int t = 0; t < T; t++) {
      size_t k = (size_t)b * T + t;
      x[k] = t < plen ? prompt[t] : t - plen < L ? ct[t - plen] : PL_TOK_PAD;
      int i = t + 1 - plen; /* the completion token predicted here */
      if (i >= 0 && i < L) {
        y[k] = ct[i];
        mask[k] = 1;
        old[k] = g->logprobs[(size_t)row * g->max_new + i];
      } else {
        y[k] = -1;
      }
    }
  }
  const float *losses;
  if (refp) {
    float l = lab_policy_forward(pol, 1, x, y, B, T, &losses);
    if (!isfinite(l)) {
      snprintf(why, whylen, "the reference model's forward failed");
      rc = PL_EENV;
      goto done;
    }
    for (size_t k = 0; k < BT; k++)
      refp[k] = mask[k] ? -losses[k] : 0;
  }
  int sampler_old = c->sampling.temperature == 1.0f;
  for (int it = 0; it < c->num_iterations; it++) {
    float l = lab_policy_forward(pol, 0, x, y, B, T, &losses);
    if (!isfinite(l)) {
      snprintf(why, whylen, "the policy's forward gave a loss of %g", l);
      rc = PL_EENV;
      goto done;
    }
    for (size_t k = 0; k < BT; k++)
      logp[k] = mask[k] ? -losses[k] : 0;
    if (it == 0 && !sampler_old) memcpy(old, logp, BT * sizeof *old);
    rc = pl_grpo_loss(dl, &u->st, &c->grpo, logp, old, refp, adv, mask, trunc,
                      B, T, why, whylen);
    if (rc) goto done;
    lab_policy_zero_grad(pol);
    rc = lab_policy_backward(pol, dl);
    if (rc) {
      snprintf(why, whylen, "backward failed");
      goto done;
    }
    u->lr = pl_adamw_lr_at(&pol->opt->cfg, pol->opt->step);
    u->grad_norm = lab_policy_step(pol);
  }
done:
  free(x);
  free(y);
  free(mask);
  free(logp);
  free(old);
  free(dl);
  free(refp);
  free(trunc);
  return rc;
}

int lab_update_has_signal(const lab_campaign *c, const float *adv, int n) {
  if (c->grpo.beta > 0) return 1; /* the KL term pulls toward the reference */
  for (int k = 0; k < n; k++)
    if (adv[k] != 0.0f) return 1;
  return 0;
}

void lab_warn_unlearnt(int unscored, int flat, int steps_run) {
  if (unscored && unscored == steps_run)
    fprintf(stderr,
            "kernlab run: warning: no candidate was scored in any of the %d "
            "step(s) run (the reward formula failed on every candidate; see "
            "the messages above): the policy learnt nothing\n",
            steps_run);
  else if (unscored)
    fprintf(stderr,
            "kernlab run: warning: no candidate was scored in %d of the %d "
            "steps run (the reward formula failed on every candidate of "
            "those; see the messages above): the policy learnt nothing from "
            "them\n",
            unscored, steps_run);
  if (flat && flat == steps_run)
    fprintf(stderr,
            "kernlab run: warning: every group's rewards were equal in all of "
            "the %d step(s) run (nothing told one candidate from another: a "
            "formula that scores every failure alike, and nothing passed?): "
            "the policy learnt nothing\n",
            steps_run);
  else if (flat)
    fprintf(stderr,
            "kernlab run: warning: every group's rewards were equal in %d of "
            "the %d steps run: the policy learnt nothing from them\n",
            flat, steps_run);
}
