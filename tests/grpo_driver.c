/*
 * tests/grpo_driver.c — runs policy/grpo.c on a batch a test wrote, for
 * tests/python/test_grpo_torch.py to compare with PyTorch. Not a tool:
 * no validation beyond what the library does.
 *
 * usage: grpo_driver IN OUT
 * IN, little-endian:
 *   int32 header[9]: n_groups, G, T, loss_type, scale_rewards,
 *                    mask_truncated, max_completion_length,
 *                    grad_accum_steps, flags (bit 0: old_logp given,
 *                    bit 1: ref_logp given)
 *   float64 beta, eps_low, eps_high, num_items
 *   float64 rewards (B)               B = n_groups * G
 *   float32 logp, old_logp, ref_logp, mask (B,T) each (all four present)
 *   uint8 truncated (B)
 * OUT:
 *   int32 rc (PL_OK or the error), then on PL_OK:
 *   float32 advantages (B), float32 dloss_dlogp (B,T),
 *   float64 stats: loss, policy_loss, kl_loss, kl_mean, ratio_mean,
 *                  clip_low, clip_high, clip_fraction, active_tokens
 */
#include "policy/policy.h"

#include <stdio.h>
#include <stdlib.h>

static int read_all(FILE *f, void *p, size_t size, size_t n) {
  return fread(p, size, n, f) == n;
}

int main(int argc, char **argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: grpo_driver IN OUT\n");
    return 2;
  }
  FILE *in = fopen(argv[1], "rb");
  if (!in) {
    fprintf(stderr, "%s: cannot open\n", argv[1]);
    return 2;
  }
  int32_t h[9];
  double fl[4]; /* beta, eps_low, eps_high, num_items */
  if (!read_all(in, h, sizeof h[0], 9) || !read_all(in, fl, sizeof fl[0], 4) ||
      h[0] < 1 || h[1] < 1 || h[2] < 1) {
    fprintf(stderr, "%s: bad header\n", argv[1]);
    return 2;
  }
  const int n_groups = h[0], G = h[1], T = h[2], B = n_groups * G;
  const size_t BT = (size_t)B * T;
  double *rewards = malloc(B * sizeof(double));
  float *buf = malloc(6 * BT * sizeof(float) + B * sizeof(float));
  uint8_t *trunc = malloc(B);
  float *logp = buf, *old = buf + BT, *ref = buf + 2 * BT, *mask = buf + 3 * BT,
        *dloss = buf + 4 * BT, *adv = buf + 6 * BT;
  if (!read_all(in, rewards, sizeof(double), B) ||
      !read_all(in, buf, sizeof(float), 4 * BT) || !read_all(in, trunc, 1, B)) {
    fprintf(stderr, "%s: short file\n", argv[1]);
    return 2;
  }
  fclose(in);

  pl_grpo_config cfg = pl_grpo_defaults();
  cfg.loss_type = h[3];
  cfg.scale_rewards = h[4];
  cfg.mask_truncated = h[5];
  cfg.max_completion_length = h[6];
  cfg.grad_accum_steps = h[7];
  cfg.beta = fl[0];
  cfg.eps_low = fl[1];
  cfg.eps_high = fl[2];
  cfg.num_items = fl[3];
  char why[256] = "";
  pl_grpo_stats st;
  int32_t rc = pl_grpo_advantages(adv, rewards, n_groups, G, cfg.scale_rewards,
                                  why, sizeof why);
  if (rc == PL_OK)
    rc = pl_grpo_loss(dloss, &st, &cfg, logp, h[8] & 1 ? old : NULL,
                      h[8] & 2 ? ref : NULL, adv, mask, trunc, B, T, why,
                      sizeof why);
  if (rc != PL_OK) fprintf(stderr, "grpo_driver: %s\n", why);

  FILE *out = fopen(argv[2], "wb");
  if (!out) {
    fprintf(stderr, "%s: cannot create\n", argv[2]);
    return 2;
  }
  fwrite(&rc, sizeof rc, 1, out);
  if (rc == PL_OK) {
    const double s[9] = {st.loss,      st.policy_loss,   st.kl_loss,
                         st.kl_mean,   st.ratio_mean,    st.clip_low,
                         st.clip_high, st.clip_fraction, st.active_tokens};
    fwrite(adv, sizeof(float), B, out);
    fwrite(dloss, sizeof(float), BT, out);
    fwrite(s, sizeof(double), 9, out);
  }
  int bad = ferror(out);
  if (fclose(out) || bad) return 2;
  free(rewards);
  free(buf);
  free(trunc);
  return 0;
}
