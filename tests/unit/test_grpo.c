/*
 * tests/unit/test_grpo.c — the GRPO math (policy/grpo.c) against golden
 * values and against itself:
 *   - tests/data/grpo_golden.json: 24 cases (every loss_type x
 *     scale_rewards, each with and without KL + clip-higher), float64
 *     PyTorch. Advantages, loss and every d loss / d logp must match.
 *   - edge cases: equal rewards, NaN rewards, G = 1, truncation masking,
 *     old_logp NULL, dapo's num_items and grad accumulation, bad configs;
 *   - d loss / d logp against central differences of the loss itself;
 *   - the chain into the model: dloss_dlogp through
 *     pl_model_backward_weighted against finite differences of the total
 *     GRPO loss in the parameters, on a tiny transformer.
 *
 * Tolerances (double arithmetic inside, inputs and outputs rounded to
 * float, so errors are a few float ulps of the inputs; measured worst is
 * printed):
 *   advantages   |c - g| <= 1e-6 * max(|g|, 1)
 *   loss         |c - g| <= 1e-6 * max(|g|, 1e-3)
 *   dloss_dlogp  |c - g| <= 1e-6 * max(|g|, max_t |g_t|)   per case
 */
#include "json_min.h"
#include "kltest.h"
#include "policy/policy.h"

#include <math.h>
#include <string.h>

static const char *const loss_names[] = {"grpo", "bnpo", "dr_grpo", "dapo"};
static const char *const scale_names[] = {"group", "batch", "none"};

static int name_index(const char *const *names, int n, const char *s) {
  for (int i = 0; i < n; i++)
    if (s && !strcmp(names[i], s)) return i;
  return -1;
}

/* Copies a (rows, cols) JSON array of numbers into out; 0 on a bad shape. */
static int read_matrix(const jm_node *a, int rows, int cols, float *out) {
  if (!a || a->type != JM_ARR || a->n != rows) return 0;
  for (int r = 0; r < rows; r++) {
    const jm_node *row = jm_at(a, r);
    if (!row || row->type != JM_ARR || row->n != cols) return 0;
    for (int c = 0; c < cols; c++) {
      const jm_node *v = jm_at(row, c);
      if (!v || v->type != JM_NUM) return 0;
      out[r * cols + c] = (float)v->num;
    }
  }
  return 1;
}

static const char *str(const jm_node *o, const char *key) {
  const jm_node *v = jm_get(o, key);
  return v && v->type == JM_STR ? v->str : NULL;
}

static double num(const jm_node *o, const char *key) {
  const jm_node *v = jm_get(o, key);
  return v && v->type == JM_NUM ? v->num : NAN;
}

enum { MAXB = 64, MAXT = 64 };

static void test_golden(const char *path) {
  jm_node *root = jm_parse_file(path);
  CHECK(root != NULL, "cannot read %s", path);
  if (!root) return;
  const int n_groups = (int)num(root, "num_prompts");
  const int G = (int)num(root, "group_size");
  const int Lmax = (int)num(root, "max_completion_length");
  const int B = n_groups * G, T = Lmax;
  CHECK(B >= 1 && B <= MAXB && T >= 1 && T <= MAXT, "sizes %d x %d", B, T);
  if (!(B >= 1 && B <= MAXB && T >= 1 && T <= MAXT)) {
    jm_free(root);
    return;
  }
  static float mask[MAXB * MAXT], logp[MAXB * MAXT], old[MAXB * MAXT],
      ref[MAXB * MAXT], want_grad[MAXB * MAXT], grad[MAXB * MAXT];
  int ok = read_matrix(jm_get(root, "mask"), B, T, mask) &&
           read_matrix(jm_get(root, "logp"), B, T, logp) &&
           read_matrix(jm_get(root, "old_logp"), B, T, old) &&
           read_matrix(jm_get(root, "ref_logp"), B, T, ref);
  CHECK(ok, "%s: mask/logp/old_logp/ref_logp not (%d,%d) arrays", path, B, T);
  double rewards[MAXB];
  const jm_node *jr = jm_get(root, "rewards");
  CHECK(jr && jr->n == B, "%s: rewards not (%d,)", path, B);
  for (int i = 0; i < B && jr && jr->n == B; i++)
    rewards[i] = jm_at(jr, i)->num;
  const jm_node *cases = jm_get(root, "cases");
  CHECK(cases && cases->type == JM_ARR && cases->n > 0, "%s: no cases", path);
  if (!ok || !cases || !jr || jr->n != B) {
    jm_free(root);
    return;
  }

  int seen[4][3][2] = {{{0}}}; /* loss_type x scale x (beta > 0) */
  double worst_adv = 0, worst_loss = 0, worst_grad = 0;
  for (int c = 0; c < cases->n; c++) {
    const jm_node *k = jm_at(cases, c);
    char why[256] = "";
    pl_grpo_config cfg = pl_grpo_defaults();
    cfg.loss_type = name_index(loss_names, 4, str(k, "loss_type"));
    cfg.scale_rewards = name_index(scale_names, 3, str(k, "scale_rewards"));
    cfg.beta = num(k, "beta");
    cfg.eps_low = num(k, "eps_low");
    cfg.eps_high = num(k, "eps_high");
    cfg.max_completion_length = Lmax;
    CHECK(cfg.loss_type >= 0 && cfg.scale_rewards >= 0, "case %d: names", c);
    if (cfg.loss_type < 0 || cfg.scale_rewards < 0) continue;
    seen[cfg.loss_type][cfg.scale_rewards][cfg.beta > 0]++;

    float adv[MAXB];
    CHECK(pl_grpo_advantages(adv, rewards, n_groups, G, cfg.scale_rewards, why,
                             sizeof why) == PL_OK,
          "case %d: %s", c, why);
    const jm_node *ja = jm_get(k, "advantages");
    for (int i = 0; i < B; i++) {
      double g = jm_at(ja, i)->num, err = fabs(adv[i] - g);
      double rel = err / fmax(fabs(g), 1.0);
      if (rel > worst_adv) worst_adv = rel;
      CHECK(rel <= 1e-6, "case %d (%s/%s): advantage %d is %.9g, golden %.9g",
            c, loss_names[cfg.loss_type], scale_names[cfg.scale_rewards], i,
            adv[i], g);
    }

    pl_grpo_stats st;
    CHECK(pl_grpo_loss(grad, &st, &cfg, logp, old, ref, adv, mask, NULL, B, T,
                       why, sizeof why) == PL_OK,
          "case %d: %s", c, why);
    double want = num(k, "loss");
    double rel = fabs(st.loss - want) / fmax(fabs(want), 1e-3);
    if (rel > worst_loss) worst_loss = rel;
    CHECK(rel <= 1e-6, "case %d (%s/%s beta %g): loss %.12g, golden %.12g", c,
          loss_names[cfg.loss_type], scale_names[cfg.scale_rewards], cfg.beta,
          st.loss, want);
    CHECK(fabs(st.loss - st.policy_loss - st.kl_loss) <= 1e-12,
          "case %d: loss != policy + kl", c);
    CHECK((cfg.beta > 0) == (st.kl_mean > 0), "case %d: kl_mean %g", c,
          st.kl_mean);

    CHECK(read_matrix(jm_get(k, "dloss_dlogp"), B, T, want_grad),
          "case %d: dloss_dlogp not (%d,%d)", c, B, T);
    double gmax = 0;
    for (int i = 0; i < B * T; i++)
      gmax = fmax(gmax, fabs(want_grad[i]));
    for (int i = 0; i < B * T; i++) {
      double r = fabs(grad[i] - want_grad[i]) / fmax(fabs(want_grad[i]), gmax);
      if (r > worst_grad) worst_grad = r;
      CHECK(r <= 1e-6, "case %d (%s/%s): dloss_dlogp[%d,%d] %.9g, golden %.9g",
            c, loss_names[cfg.loss_type], scale_names[cfg.scale_rewards], i / T,
            i % T, grad[i], want_grad[i]);
      if (mask[i] == 0) CHECK(grad[i] == 0.0f, "case %d: masked grad", c);
    }
  }
  for (int l = 0; l < 4; l++)
    for (int s = 0; s < 3; s++)
      for (int kl = 0; kl < 2; kl++)
        CHECK(seen[l][s][kl] == 1, "golden: %s/%s beta%s seen %d times",
              loss_names[l], scale_names[s], kl ? ">0" : "=0", seen[l][s][kl]);
  printf("golden: %d cases; worst relative error: advantages %.2e, loss "
         "%.2e, dloss_dlogp %.2e\n",
         cases->n, worst_adv, worst_loss, worst_grad);
  jm_free(root);
}

/* A small fixed batch for the edge-case tests: B=4 completions, T=5. */
enum { EB = 4, ET = 5 };
static float e_logp[EB * ET], e_old[EB * ET], e_ref[EB * ET], e_mask[EB * ET];
static const float e_adv[EB] = {1.0f, -0.5f, 0.25f, -1.5f};
static void make_edge_batch(void) {
  for (int i = 0; i < EB * ET; i++) {
    e_logp[i] = -0.1f - 0.37f * (float)(i % 7);
    e_old[i] = e_logp[i] + 0.45f * sinf((float)i * 2.1f);
    e_ref[i] = e_logp[i] - 0.3f * cosf((float)i * 0.9f);
    e_mask[i] = (i % ET) < 5 - (i / ET) ? 1.0f : 0.0f; /* lengths 5,4,3,2 */
  }
}

static double edge_loss(const pl_grpo_config *cfg, const float *logp,
                        const float *mask, const uint8_t *trunc, float *grad,
                        pl_grpo_stats *st) {
  char why[256];
  int rc = pl_grpo_loss(grad, st, cfg, logp, e_old, e_ref, e_adv, mask, trunc,
                        EB, ET, why, sizeof why);
  CHECK(rc == PL_OK, "%s", why);
  return st->loss;
}

static void test_advantage_edges(void) {
  char why[256];
  float adv[6];
  /* a group of equal rewards carries no signal, whatever the scaling */
  const double r[6] = {1, 1, 1, 0, 2, 4};
  for (int s = 0; s < 3; s++) {
    CHECK(pl_grpo_advantages(adv, r, 2, 3, s, why, sizeof why) == PL_OK, "%s",
          why);
    CHECK(adv[0] == 0 && adv[1] == 0 && adv[2] == 0, "%s: equal group %g",
          scale_names[s], adv[0]);
  }
  /* equal rewards whose plain sum rounds: still exactly 0 */
  double r8[8];
  for (int i = 0; i < 8; i++)
    r8[i] = 1.31441649;
  float adv8[8];
  for (int s = 0; s < 3; s++) {
    pl_grpo_advantages(adv8, r8, 1, 8, s, why, sizeof why);
    for (int i = 0; i < 8; i++)
      CHECK(adv8[i] == 0.0f, "%s: equal rewards, adv %g", scale_names[s],
            adv8[i]);
  }
  /* group std of {0,2,4} = 2 (Bessel): A = (4-2)/(2+1e-4) */
  pl_grpo_advantages(adv, r, 2, 3, PL_GRPO_SCALE_GROUP, why, sizeof why);
  CHECK(fabs(adv[5] - 2.0 / (2.0 + 1e-4)) < 1e-7, "ddof 1: %.9g", adv[5]);
  /* NaN rewards: left out of mean and std, advantage 0 */
  const double rn[4] = {1, NAN, 3, 5};
  pl_grpo_advantages(adv, rn, 1, 4, PL_GRPO_SCALE_GROUP, why, sizeof why);
  CHECK(adv[1] == 0 && fabs(adv[3] - 2.0 / (2.0 + 1e-4)) < 1e-7,
        "NaN reward: %g %g", adv[1], adv[3]);
  /* G = 1: no baseline, A = 0 for every scaling */
  const double r1[2] = {3, -1};
  for (int s = 0; s < 3; s++) {
    pl_grpo_advantages(adv, r1, 2, 1, s, why, sizeof why);
    CHECK(adv[0] == 0 && adv[1] == 0, "G=1 %s: %g %g", scale_names[s], adv[0],
          adv[1]);
  }
  CHECK(pl_grpo_advantages(adv, r, 0, 3, 0, why, sizeof why) == PL_EINPUT &&
            strstr(why, "n_groups"),
        "n_groups 0: %s", why);
  CHECK(pl_grpo_advantages(adv, r, 2, 3, 7, why, sizeof why) == PL_EINPUT &&
            strstr(why, "scale_rewards"),
        "scale 7: %s", why);
}

static void test_loss_edges(void) {
  char why[256];
  float g1[EB * ET], g2[EB * ET];
  pl_grpo_stats s1, s2;
  pl_grpo_config cfg = pl_grpo_defaults();
  cfg.beta = 0.04;
  cfg.eps_high = 0.28;
  cfg.max_completion_length = ET;

  /* truncation masking = zeroing that row's mask */
  for (int lt = 0; lt < 4; lt++) {
    cfg.loss_type = lt;
    cfg.mask_truncated = 1;
    const uint8_t trunc[EB] = {0, 1, 0, 0};
    double a = edge_loss(&cfg, e_logp, e_mask, trunc, g1, &s1);
    float m2[EB * ET];
    memcpy(m2, e_mask, sizeof m2);
    for (int t = 0; t < ET; t++)
      m2[1 * ET + t] = 0;
    cfg.mask_truncated = 0;
    double b = edge_loss(&cfg, e_logp, m2, NULL, g2, &s2);
    CHECK(a == b && !memcmp(g1, g2, sizeof g1), "%s: truncation %g vs %g",
          loss_names[lt], a, b);
    CHECK(s1.active_tokens == 10, "active tokens %g", s1.active_tokens);
    /* ... and ignored unless mask_truncated */
    double c = edge_loss(&cfg, e_logp, e_mask, trunc, g2, &s2);
    CHECK(c != a && s2.active_tokens == 14, "%s: truncated without the flag",
          loss_names[lt]);
  }

  /* old_logp NULL is old_logp = logp: ratio 1, nothing clipped */
  cfg.loss_type = PL_GRPO_LOSS_BNPO;
  CHECK(pl_grpo_loss(g1, &s1, &cfg, e_logp, NULL, e_ref, e_adv, e_mask, NULL,
                     EB, ET, why, sizeof why) == PL_OK,
        "%s", why);
  CHECK(pl_grpo_loss(g2, &s2, &cfg, e_logp, e_logp, e_ref, e_adv, e_mask, NULL,
                     EB, ET, why, sizeof why) == PL_OK,
        "%s", why);
  CHECK(s1.loss == s2.loss && !memcmp(g1, g2, sizeof g1) &&
            s1.ratio_mean == 1.0 && s1.clip_fraction == 0,
        "old NULL: %g vs %g", s1.loss, s2.loss);

  /* this batch clips on both sides; the fractions add up */
  edge_loss(&cfg, e_logp, e_mask, NULL, g1, &s1);
  CHECK(s1.clip_low > 0 && s1.clip_high > 0 &&
            s1.clip_fraction == s1.clip_low + s1.clip_high,
        "clip low %g high %g", s1.clip_low, s1.clip_high);

  /* dapo = bnpo on one micro-batch; num_items rescales; accumulation
   * divides grpo/bnpo/dr_grpo but not dapo */
  cfg.loss_type = PL_GRPO_LOSS_BNPO;
  double bnpo = edge_loss(&cfg, e_logp, e_mask, NULL, g1, &s1);
  cfg.loss_type = PL_GRPO_LOSS_DAPO;
  double dapo = edge_loss(&cfg, e_logp, e_mask, NULL, g2, &s2);
  CHECK(fabs(bnpo - dapo) <= 1e-15 * fabs(bnpo), "dapo %g bnpo %g", dapo, bnpo);
  cfg.num_items = 4 * 14;
  cfg.grad_accum_steps = 4;
  double dapo4 = edge_loss(&cfg, e_logp, e_mask, NULL, g2, &s2);
  CHECK(fabs(dapo4 - dapo / 4) <= 1e-15 * fabs(dapo), "dapo num_items %g",
        dapo4);
  for (int lt = 0; lt < 3; lt++) {
    cfg.loss_type = lt;
    cfg.grad_accum_steps = 1;
    double one = edge_loss(&cfg, e_logp, e_mask, NULL, g1, &s1);
    cfg.grad_accum_steps = 4;
    double four = edge_loss(&cfg, e_logp, e_mask, NULL, g2, &s2);
    CHECK(fabs(four - one / 4) <= 1e-15 * fabs(one), "%s accum: %g vs %g",
          loss_names[lt], four, one);
  }
  /* dr_grpo's normaliser is B * max_completion_length, not B * T (the
   * golden file cannot tell them apart: there T = max_completion_length) */
  cfg.grad_accum_steps = 1;
  cfg.num_items = 0;
  cfg.loss_type = PL_GRPO_LOSS_BNPO;
  double bn = edge_loss(&cfg, e_logp, e_mask, NULL, g1, &s1);
  cfg.loss_type = PL_GRPO_LOSS_DR_GRPO;
  cfg.max_completion_length = 16;
  double dr = edge_loss(&cfg, e_logp, e_mask, NULL, g2, &s2);
  CHECK(fabs(dr - bn * s1.active_tokens / (EB * 16)) <= 1e-15 * fabs(bn),
        "dr_grpo normaliser: %g vs bnpo %g", dr, bn);
  cfg.max_completion_length = ET;
  /* an all-masked batch: loss 0, no NaN anywhere */
  float zero[EB * ET] = {0};
  for (int lt = 0; lt < 4; lt++) {
    cfg.loss_type = lt;
    cfg.num_items = 0;
    double z = edge_loss(&cfg, e_logp, zero, NULL, g1, &s1);
    CHECK(z == 0 && s1.kl_mean == 0 && s1.clip_fraction == 0, "%s empty: %g",
          loss_names[lt], z);
  }

  /* bad arguments name the field; nothing written */
  cfg = pl_grpo_defaults();
  cfg.beta = 0.1;
  g1[0] = 42.0f;
  CHECK(pl_grpo_loss(g1, &s1, &cfg, e_logp, e_old, NULL, e_adv, e_mask, NULL,
                     EB, ET, why, sizeof why) == PL_EINPUT &&
            strstr(why, "ref_logp") && g1[0] == 42.0f,
        "beta without ref: %s", why);
  pl_grpo_config c2 = pl_grpo_defaults();
  c2.loss_type = 9;
  CHECK(pl_grpo_config_check(&c2, why, sizeof why) == PL_EINPUT &&
            strstr(why, "loss_type"),
        "%s", why);
  c2 = pl_grpo_defaults();
  c2.eps_low = 1.5;
  CHECK(pl_grpo_config_check(&c2, why, sizeof why) == PL_EINPUT &&
            strstr(why, "eps_low"),
        "%s", why);
  c2 = pl_grpo_defaults();
  c2.beta = -1;
  CHECK(pl_grpo_config_check(&c2, why, sizeof why) == PL_EINPUT &&
            strstr(why, "beta"),
        "%s", why);
  c2 = pl_grpo_defaults();
  c2.max_completion_length = 0;
  CHECK(pl_grpo_config_check(&c2, why, sizeof why) == PL_EINPUT &&
            strstr(why, "max_completion_length"),
        "%s", why);
  c2 = pl_grpo_defaults();
  CHECK(pl_grpo_loss(g1, &s1, &c2, e_logp, e_old, NULL, e_adv, e_mask, NULL, 0,
                     ET, why, sizeof why) == PL_EINPUT,
        "B = 0");
}

/* d loss / d logp against central differences of the loss in each logp
 * (the loss is piecewise smooth; the batch keeps every ratio at least 0.02
 * from a clip boundary, so a step of 1e-3 crosses none). */
static void test_logp_gradient(void) {
  float grad[EB * ET], tmp[EB * ET], lp[EB * ET];
  pl_grpo_stats st;
  double worst = 0;
  for (int lt = 0; lt < 4; lt++) {
    pl_grpo_config cfg = pl_grpo_defaults();
    cfg.loss_type = lt;
    cfg.beta = 0.04;
    cfg.eps_high = 0.28;
    cfg.max_completion_length = 8;
    edge_loss(&cfg, e_logp, e_mask, NULL, grad, &st);
    for (int i = 0; i < EB * ET; i++) {
      double rho = exp((double)e_logp[i] - e_old[i]);
      CHECK(e_mask[i] == 0 ||
                (fabs(rho - 0.8) > 0.02 && fabs(rho - 1.28) > 0.02),
            "token %d: ratio %g near a boundary", i, rho);
      memcpy(lp, e_logp, sizeof lp);
      const float h = 1e-3f;
      lp[i] = e_logp[i] + h;
      double up = edge_loss(&cfg, lp, e_mask, NULL, tmp, &st);
      lp[i] = e_logp[i] - h;
      double dn = edge_loss(&cfg, lp, e_mask, NULL, tmp, &st);
      double fd = (up - dn) / ((double)(e_logp[i] + h) - (e_logp[i] - h));
      double err = fabs(fd - grad[i]);
      if (err > worst) worst = err;
      CHECK(err <= 1e-6 + 1e-5 * fabs(fd), "%s: token %d fd %.9g grad %.9g",
            loss_names[lt], i, fd, grad[i]);
    }
  }
  printf("d loss / d logp vs central differences: worst abs error %.2e\n",
         worst);
}

/* The whole chain on a tiny model: logp = -losses of a forward, the GRPO
 * loss of it, dloss_dlogp into pl_model_backward_weighted; the parameter
 * gradient along random directions must match central differences of the
 * total GRPO loss (Richardson-extrapolated; tolerance as test_model.c's). */
enum { MB = 2, MT = 7 };
static const pl_config tiny = {.vocab = 16,
                               .d_model = 16,
                               .n_layers = 2,
                               .n_heads = 2,
                               .d_ff = 32,
                               .max_seq = 8};
static uint64_t rng_state = 777;
static uint32_t rnd(void) {
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 7;
  rng_state ^= rng_state << 17;
  return (uint32_t)(rng_state >> 11);
}

typedef struct {
  const pl_grpo_config *cfg;
  int32_t tokens[MB * MT], targets[MB * MT];
  float mask[MB * MT], old[MB * MT], ref[MB * MT], adv[MB];
} chain_batch;

static pl_grpo_stats chain_stats; /* of the last chain_loss */

/* Forward, then the GRPO loss of the model's log-probs; dloss (may be
 * NULL) receives d loss / d logp. */
static double chain_loss(pl_model *m, const chain_batch *cb, float *dloss) {
  float logp[MB * MT], scratch[MB * MT];
  char why[256];
  pl_grpo_stats st;
  pl_model_forward(m, cb->tokens, cb->targets, MB, MT);
  for (int i = 0; i < MB * MT; i++)
    logp[i] = -m->acts.losses[i];
  int rc =
      pl_grpo_loss(dloss ? dloss : scratch, &st, cb->cfg, logp, cb->old,
                   cb->ref, cb->adv, cb->mask, NULL, MB, MT, why, sizeof why);
  CHECK(rc == PL_OK, "%s", why);
  chain_stats = st;
  return st.loss;
}

static void test_model_chain(void) {
  char why[256];
  pl_model m;
  CHECK(pl_model_init(&m, &tiny, 5, why, sizeof why) == PL_OK, "%s", why);
  for (size_t i = 0; i < m.num_params; i++)
    m.params_memory[i] *= 3.0f;
  chain_batch cb;
  for (int i = 0; i < MB * MT; i++) {
    cb.tokens[i] = (int32_t)(rnd() % tiny.vocab);
    cb.targets[i] = (int32_t)(rnd() % tiny.vocab);
  }
  /* the completion: positions 2.. of row 0, 1..4 of row 1 (targets -1
   * elsewhere: the prompt and padding) */
  for (int i = 0; i < MB * MT; i++) {
    int b = i / MT, t = i % MT;
    int on = b == 0 ? t >= 2 : (t >= 1 && t <= 4);
    if (!on) cb.targets[i] = -1;
    cb.mask[i] = on ? 1.0f : 0.0f;
  }
  cb.adv[0] = 0.8f;
  cb.adv[1] = -1.1f;
  /* old log-probs: the current ones shifted so that the ratios are
   * exp(+-0.1) (inside the clip range) or exp(+-0.5) (clipped where the
   * advantage's sign says so, unclipped otherwise): far from 0.8, 1.28 */
  pl_grpo_config cfg = pl_grpo_defaults();
  cfg.beta = 0.04;
  cfg.eps_high = 0.28;
  cfg.max_completion_length = MT;
  cb.cfg = &cfg;
  pl_model_forward(&m, cb.tokens, cb.targets, MB, MT);
  static const float shift[4] = {0.1f, -0.1f, 0.5f, -0.5f};
  for (int i = 0; i < MB * MT; i++) {
    float lp = cb.mask[i] ? -m.acts.losses[i] : 0.0f;
    cb.old[i] = lp - shift[i % 4];
    cb.ref[i] = lp + 0.2f * (float)((int)(rnd() % 5) - 2);
  }

  double worst = 0;
  float dloss[MB * MT];
  for (int lt = 0; lt < 4; lt++) {
    cfg.loss_type = lt;
    for (int t = 0; t < PL_NUM_PARAM_TENSORS; t++) {
      size_t off = 0;
      for (int i = 0; i < t; i++)
        off += m.param_sizes[i];
      size_t n = m.param_sizes[t];
      float *p = m.params_memory + off, *g = m.grads_memory + off;
      pl_model_zero_grad(&m);
      chain_loss(&m, &cb, dloss);
      CHECK(chain_stats.clip_low > 0 && chain_stats.clip_high > 0 &&
                chain_stats.clip_fraction < 1,
            "chain batch: clip low %g high %g", chain_stats.clip_low,
            chain_stats.clip_high);
      CHECK(pl_model_backward_weighted(&m, dloss) == PL_OK, "backward");
      float *d = calloc(n, sizeof(float));
      for (int k = 0; k < 16; k++)
        d[rnd() % n] = rnd() & 1 ? 1.0f : -1.0f;
      double an = 0;
      for (size_t i = 0; i < n; i++)
        an += (double)g[i] * d[i];
      double fdx[2];
      for (int e = 0; e < 2; e++) {
        float eps = e ? 1e-3f : 2e-3f;
        double f[2];
        for (int s = 0; s < 2; s++) {
          float sign = s ? -1.0f : 1.0f;
          for (size_t i = 0; i < n; i++)
            p[i] += sign * eps * d[i];
          f[s] = chain_loss(&m, &cb, NULL);
          for (size_t i = 0; i < n; i++)
            p[i] -= sign * eps * d[i];
        }
        fdx[e] = (f[0] - f[1]) / (2.0 * eps);
      }
      double fd = (4.0 * fdx[1] - fdx[0]) / 3.0;
      double tol = 2e-2 * fabs(an) + 2e-4, err = fabs(fd - an);
      if (err / tol > worst) worst = err / tol;
      CHECK(err <= tol, "%s chain, %s: finite difference %.6g, backward %.6g",
            loss_names[lt], pl_param_names[t], fd, an);
      free(d);
    }
  }
  printf("model chain: worst error / tolerance %.3f\n", worst);
  pl_model_free(&m);
}

int main(int argc, char **argv) {
  char path[4096];
  if (argc > 1) {
    snprintf(path, sizeof path, "%s", argv[1]);
  } else {
    const char *root = getenv("KL_SOURCE_DIR");
    snprintf(path, sizeof path, "%s/tests/data/grpo_golden.json",
             root ? root : ".");
  }
  test_golden(path);
  make_edge_batch();
  test_advantage_edges();
  test_loss_edges();
  test_logp_gradient();
  test_model_chain();
  return kl_test_done("test_grpo");
}
