/*
 * tests/unit/test_sampler.c — policy/sampler.c: the RNG against values from
 * an independent Python implementation, greedy and its ties, log-probs
 * against hand computation, the exact sets min-p and top-p keep (and the
 * shortcut in top-p against a brute-force reference on random rows), the
 * drawn frequencies against the distribution (200k draws, 4 sigma),
 * reproducibility, the batched helper, and bad input. It does not run a
 * model.
 */
#include "policy/policy.h"
#include "kltest.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static char why[512];

/* logits = log(p): softmax gives back p (T = 1). */
static void logits_of(const double *p, int n, float *out) {
  for (int i = 0; i < n; i++)
    out[i] = (float)log(p[i]);
}

static int support(const float *l, int n, pl_sampling s, int *ids,
                   double *probs) {
  int k = -1;
  int rc = pl_sampling_support(l, n, &s, NULL, ids, probs, &k, why, sizeof why);
  CHECK(rc == PL_OK, "support: %s", why);
  return k;
}

static void test_rng(void) {
  /* Frozen from a Python splitmix64 + xoshiro256** (same on every
   * platform: integer arithmetic only). */
  pl_rng r;
  pl_rng_seed(&r, 42);
  CHECK(pl_rng_next(&r) == 0x1ff785474f113b15ull, "seed 42 draw 1");
  CHECK(pl_rng_next(&r) == 0x4b7867ceff5d8325ull, "seed 42 draw 2");
  CHECK(pl_rng_next(&r) == 0x90ca7a95a9909966ull, "seed 42 draw 3");
  pl_rng_seed_stream(&r, 42, 7);
  CHECK(pl_rng_next(&r) == 0x24bfb39aeb008c15ull, "seed 42 stream 7");
  pl_rng_seed(&r, 1);
  double lo = 1, hi = 0;
  for (int i = 0; i < 100000; i++) {
    double u = pl_rng_uniform(&r);
    lo = u < lo ? u : lo;
    hi = u > hi ? u : hi;
  }
  CHECK(lo >= 0 && lo < 1e-3 && hi < 1 && hi > 1 - 1e-3, "uniform [%g, %g]", lo,
        hi);
}

static void test_greedy(void) {
  float l[5] = {0.5f, 3.0f, -1.0f, 3.0f, 2.0f};
  pl_sampling s = {0.0f, 0.5f, 0.2f};
  pl_rng r, r0;
  pl_rng_seed(&r, 9);
  r0 = r;
  pl_sample_out o;
  CHECK(pl_sample(l, 5, &s, &r, NULL, &o, why, sizeof why) == PL_OK, "%s", why);
  CHECK(o.token == 1, "greedy tie goes to the lowest id, got %d", o.token);
  CHECK(memcmp(&r, &r0, sizeof r) == 0, "greedy must not advance the rng");
  CHECK(o.logprob_sample == 0.0f && o.n_kept == 1, "greedy point mass");
  double lse = log(exp(0.5) + 2 * exp(3.0) + exp(-1.0) + exp(2.0));
  CHECK(fabs(o.logprob - (3.0 - lse)) < 1e-6, "greedy logprob %g vs %g",
        (double)o.logprob, 3.0 - lse);
}

static void test_logprob_exact(void) {
  float l[4] = {1, 2, 3, 4};
  float lp;
  /* Hand values: log-sum-exp(1,2,3,4) = 4.4401896985611957. */
  CHECK(pl_token_logprob(l, 4, 1.0f, 0, &lp, why, sizeof why) == PL_OK, "%s",
        why);
  CHECK(fabs(lp - -3.4401896985611957) < 1e-6, "T=1 token 0: %.9g", lp);
  CHECK(pl_token_logprob(l, 4, 1.0f, 3, &lp, why, sizeof why) == PL_OK, "%s",
        why);
  CHECK(fabs(lp - -0.4401896985611957) < 1e-6, "T=1 token 3: %.9g", lp);
  /* T = 2 divides the logits: log softmax(0.5,1,1.5,2)[2]. */
  CHECK(pl_token_logprob(l, 4, 2.0f, 2, &lp, why, sizeof why) == PL_OK, "%s",
        why);
  CHECK(fabs(lp - -1.2873386716983295) < 1e-6, "T=2 token 2: %.9g", lp);
  CHECK(pl_token_logprob(l, 4, 1.0f, 4, &lp, why, sizeof why) == PL_EINPUT,
        "token out of range");

  /* A truncated draw: p = (.5,.3,.15,.05), top_p .79 keeps {0,1}, q = p/.8.
   * logprob is the policy's (untruncated), logprob_sample the draw's. */
  double p[4] = {0.5, 0.3, 0.15, 0.05};
  float lg[4];
  logits_of(p, 4, lg);
  pl_sampling s = {1.0f, 0.79f, 0.0f};
  pl_rng r;
  pl_rng_seed(&r, 3);
  int seen[4] = {0};
  for (int i = 0; i < 200; i++) {
    pl_sample_out o;
    CHECK(pl_sample(lg, 4, &s, &r, NULL, &o, why, sizeof why) == PL_OK, "%s",
          why);
    seen[o.token]++;
    CHECK(o.n_kept == 2, "n_kept %d", o.n_kept);
    CHECK(fabs(o.logprob - log(p[o.token])) < 1e-6, "logprob %g",
          (double)o.logprob);
    CHECK(fabs(o.logprob_sample - log(p[o.token] / 0.8)) < 1e-6,
          "logprob_sample %g", (double)o.logprob_sample);
    float again;
    pl_token_logprob(lg, 4, 1.0f, o.token, &again, why, sizeof why);
    CHECK(again == o.logprob, "pl_token_logprob agrees with pl_sample");
  }
  CHECK(seen[0] && seen[1] && !seen[2] && !seen[3], "drew %d %d %d %d", seen[0],
        seen[1], seen[2], seen[3]);
}

static void test_min_p(void) {
  /* p_max = .4; min_p .25 -> threshold .1: keep .4 .21 .2 .1001, drop the
   * rest, .0999 included. */
  /* (Not summing to 1 is fine: softmax renormalises, ratios stay.) */
  double p[7] = {0.2, 0.4, 0.0999, 0.21, 0.1001, 0.04, 0.01};
  float l[7];
  logits_of(p, 7, l);
  int ids[7];
  double q[7];
  int k = support(l, 7, (pl_sampling){1.0f, 1.0f, 0.25f}, ids, q);
  int want[4] = {1, 3, 0, 4};
  CHECK(k == 4, "min-p kept %d, want 4", k);
  for (int i = 0; i < 4 && i < k; i++)
    CHECK(ids[i] == want[i], "min-p kept[%d] = %d, want %d", i, ids[i],
          want[i]);
  double mass = 0.4 + 0.21 + 0.2 + 0.1001;
  CHECK(fabs(q[0] - 0.4 / mass) < 1e-6, "renormalised q0 %g", q[0]);
  /* min_p 1 keeps only the maxima; min_p 0 keeps everything. */
  CHECK(support(l, 7, (pl_sampling){1.0f, 1.0f, 1.0f}, ids, q) == 1 &&
            ids[0] == 1,
        "min_p 1");
  CHECK(support(l, 7, (pl_sampling){1.0f, 1.0f, 0.0f}, ids, q) == 7,
        "min_p 0 keeps all");
  /* Temperature first: at T = 0.5 the ratios p_i / p_max are squared,
   * .21/.4 = .525 -> .276 and .2/.4 = .5 -> .25, so min_p .3 keeps the max
   * alone (at T = 1 it would keep three) and min_p .26 keeps two. */
  CHECK(support(l, 7, (pl_sampling){0.5f, 1.0f, 0.3f}, ids, q) == 1,
        "min-p is measured after temperature");
  CHECK(support(l, 7, (pl_sampling){0.5f, 1.0f, 0.26f}, ids, q) == 2,
        "min-p after temperature keeps .4 and .21");
}

static void test_top_p(void) {
  double p[4] = {0.15, 0.5, 0.05, 0.3};
  float l[4];
  logits_of(p, 4, l);
  int ids[4];
  double q[4];
  CHECK(support(l, 4, (pl_sampling){1.0f, 0.79f, 0.0f}, ids, q) == 2 &&
            ids[0] == 1 && ids[1] == 3,
        "top_p .79 keeps {1,3}");
  CHECK(support(l, 4, (pl_sampling){1.0f, 0.81f, 0.0f}, ids, q) == 3 &&
            ids[2] == 0,
        "top_p .81 keeps {1,3,0}");
  CHECK(support(l, 4, (pl_sampling){1.0f, 1.0f, 0.0f}, ids, q) == 4,
        "top_p 1 keeps all");
  CHECK(support(l, 4, (pl_sampling){1.0f, 1e-6f, 0.0f}, ids, q) == 1 &&
            ids[0] == 1 && q[0] == 1.0,
        "tiny top_p keeps the argmax alone");
  /* Ties sort by id: uniform over 5, top_p .5 -> 3 tokens, ids 0,1,2. */
  float u[5] = {0, 0, 0, 0, 0};
  int k = support(u, 5, (pl_sampling){1.0f, 0.5f, 0.0f}, ids, q);
  CHECK(k == 3 && ids[0] == 0 && ids[1] == 1 && ids[2] == 2,
        "uniform top_p .5 keeps ids 0,1,2 (k=%d)", k);
  CHECK(support(u, 5, (pl_sampling){1.0f, 1e-6f, 0.0f}, ids, q) == 1 &&
            ids[0] == 0,
        "uniform tiny top_p keeps id 0");
  /* Both filters: the shorter prefix. top_p .81 keeps 3, min_p .5 (ratio
   * .3/.5 = .6 ok, .15/.5 = .3 not) keeps 2. */
  CHECK(support(l, 4, (pl_sampling){1.0f, 0.81f, 0.5f}, ids, q) == 2,
        "top-p and min-p: the shorter prefix");
  CHECK(support(l, 4, (pl_sampling){1.0f, 0.6f, 0.1f}, ids, q) == 2,
        "top-p shorter than min-p");
}

/* Brute force: sort every token by (p desc, id asc) in double, walk. */
static int reference_support(const float *l, int n, pl_sampling s, int *ids) {
  double mx = l[0];
  for (int i = 1; i < n; i++)
    mx = l[i] > mx ? l[i] : mx;
  double *w = malloc(sizeof(double) * (size_t)n), z = 0;
  for (int i = 0; i < n; i++) {
    w[i] = exp(((double)l[i] - mx) / (double)s.temperature);
    z += w[i];
    ids[i] = i;
  }
  for (int i = 1; i < n; i++) /* insertion sort: obviously right */
    for (int j = i;
         j > 0 && (w[ids[j]] > w[ids[j - 1]] ||
                   (w[ids[j]] == w[ids[j - 1]] && ids[j] < ids[j - 1]));
         j--) {
      int t = ids[j];
      ids[j] = ids[j - 1];
      ids[j - 1] = t;
    }
  int km = 0;
  while (km < n && w[ids[km]] >= (double)s.min_p)
    km++;
  int kp = n;
  if (s.top_p < 1.0f) {
    double cum = 0;
    for (int k = 0; k < n; k++) {
      cum += w[ids[k]];
      if (cum >= (double)s.top_p * z) {
        kp = k + 1;
        break;
      }
    }
  }
  free(w);
  return km < kp ? km : kp;
}

static void test_support_random(void) {
  enum { N = 1000 };
  float l[N];
  int ids[N], ref[N];
  pl_rng r;
  pl_rng_seed(&r, 77);
  float tops[] = {0.05f, 0.5f, 0.9f, 0.99f, 1.0f};
  float mins[] = {0.0f, 0.01f, 0.2f};
  float temps[] = {0.3f, 1.0f, 2.5f};
  int bad = 0;
  for (int trial = 0; trial < 12; trial++) {
    double spread = 1.0 + 2 * trial; /* from flat rows to peaked ones */
    for (int i = 0; i < N; i++)
      l[i] = (float)(spread * (pl_rng_uniform(&r) - 0.5));
    if (trial % 5 == 0) l[N / 2] = l[N / 3]; /* a tie somewhere */
    for (int a = 0; a < 5; a++)
      for (int b = 0; b < 3; b++)
        for (int c = 0; c < 3; c++) {
          pl_sampling s = {temps[c], tops[a], mins[b]};
          int k = support(l, N, s, ids, NULL);
          int kr = reference_support(l, N, s, ref);
          if (k != kr || memcmp(ids, ref, sizeof(int) * (size_t)k) != 0) bad++;
        }
  }
  CHECK(bad == 0, "%d of 540 supports differ from the brute force", bad);
}

/* 200k draws: every count within 4 sigma of N*q, nothing outside the
 * support, and the drawn logprob_sample equal to log q. */
static void check_frequencies(const float *l, int n, pl_sampling s,
                              const char *name) {
  enum { DRAWS = 200000 };
  int ids[16];
  double q[16], want[16] = {0};
  int k = support(l, n, s, ids, q);
  for (int i = 0; i < k; i++)
    want[ids[i]] = q[i];
  long count[16] = {0};
  pl_rng r;
  pl_rng_seed(&r, 2024);
  char scratch[1024];
  CHECK(pl_sample_scratch_bytes(n) <= sizeof scratch, "scratch size");
  int lp_bad = 0;
  double chi2 = 0;
  for (int d = 0; d < DRAWS; d++) {
    pl_sample_out o;
    if (pl_sample(l, n, &s, &r, scratch, &o, why, sizeof why) != PL_OK) {
      CHECK(0, "%s: %s", name, why);
      return;
    }
    count[o.token]++;
    if (want[o.token] > 0 && fabs(o.logprob_sample - log(want[o.token])) > 1e-5)
      lp_bad++;
  }
  for (int i = 0; i < n; i++) {
    double mu = DRAWS * want[i], sd = sqrt(DRAWS * want[i] * (1 - want[i]));
    if (want[i] == 0) {
      CHECK(count[i] == 0, "%s: token %d outside the support drawn %ld times",
            name, i, count[i]);
      continue;
    }
    CHECK(fabs(count[i] - mu) <= 4 * sd + 1e-9,
          "%s: token %d drawn %ld times, expected %.0f +- %.0f", name, i,
          count[i], mu, sd);
    chi2 += (count[i] - mu) * (count[i] - mu) / mu;
  }
  CHECK(lp_bad == 0, "%s: %d draws with logprob_sample != log q", name, lp_bad);
  /* k-1 degrees of freedom, k <= 8: chi2 > 30 has p < 1e-4. */
  CHECK(chi2 < 30, "%s: chi-square %.1f over %d tokens", name, chi2, k);
}

static void test_frequencies(void) {
  float l[8] = {1.0f, 2.5f, 0.2f, -1.0f, 2.0f, 0.0f, 1.5f, -3.0f};
  check_frequencies(l, 8, (pl_sampling){1.0f, 1.0f, 0.0f}, "plain");
  check_frequencies(l, 8, (pl_sampling){0.7f, 1.0f, 0.0f}, "T=0.7");
  check_frequencies(l, 8, (pl_sampling){1.3f, 0.9f, 0.0f}, "T=1.3 top_p .9");
  check_frequencies(l, 8, (pl_sampling){1.0f, 1.0f, 0.1f}, "min_p .1");
  check_frequencies(l, 8, (pl_sampling){1.0f, 0.95f, 0.05f}, "both");
}

static void test_reproducible(void) {
  float l[50];
  pl_rng r;
  pl_rng_seed(&r, 5);
  for (int i = 0; i < 50; i++)
    l[i] = (float)(4 * pl_rng_uniform(&r));
  pl_sampling s = {0.9f, 0.95f, 0.02f};
  int a[200], b[200], c[200];
  pl_rng ra, rb, rc;
  pl_rng_seed(&ra, 123);
  pl_rng_seed(&rb, 123);
  pl_rng_seed_stream(&rc, 123, 1);
  for (int i = 0; i < 200; i++) {
    pl_sample_out o;
    pl_sample(l, 50, &s, &ra, NULL, &o, why, sizeof why);
    a[i] = o.token;
    pl_sample(l, 50, &s, &rb, NULL, &o, why, sizeof why);
    b[i] = o.token;
    pl_sample(l, 50, &s, &rc, NULL, &o, why, sizeof why);
    c[i] = o.token;
  }
  CHECK(memcmp(a, b, sizeof a) == 0, "same seed, same tokens");
  CHECK(memcmp(a, c, sizeof a) != 0, "another stream, other tokens");
}

static void test_batch(void) {
  enum { G = 4, V = 10 };
  float l[G * V];
  pl_rng r;
  pl_rng_seed(&r, 8);
  for (int i = 0; i < G * V; i++)
    l[i] = (float)(3 * pl_rng_uniform(&r));
  pl_sampling s = {1.0f, 0.9f, 0.05f};
  pl_rng rows[G], single[G];
  for (int g = 0; g < G; g++) {
    pl_rng_seed_stream(&rows[g], 99, (uint64_t)g);
    single[g] = rows[g];
  }
  pl_sample_out ob[G];
  for (int step = 0; step < 20; step++) {
    CHECK(pl_sample_batch(l, G, V, &s, rows, NULL, ob, why, sizeof why) ==
              PL_OK,
          "%s", why);
    for (int g = 0; g < G; g++) {
      pl_sample_out o;
      pl_sample(l + g * V, V, &s, &single[g], NULL, &o, why, sizeof why);
      CHECK(o.token == ob[g].token && o.logprob == ob[g].logprob,
            "batch row %d step %d differs from a single call", g, step);
    }
  }
  l[2 * V + 7] = NAN;
  CHECK(pl_sample_batch(l, G, V, &s, rows, NULL, ob, why, sizeof why) ==
                PL_EINPUT &&
            strstr(why, "row 2: ") && strstr(why, "logit 7"),
        "bad row named: %s", why);
}

static void test_bad_input(void) {
  float l[3] = {0, 1, 2};
  pl_rng r;
  pl_rng_seed(&r, 1);
  pl_sample_out o;
  pl_sampling s = pl_sampling_default();
  float bad_vals[3] = {NAN, INFINITY, -INFINITY};
  for (int i = 0; i < 3; i++) {
    l[1] = bad_vals[i];
    CHECK(pl_sample(l, 3, &s, &r, NULL, &o, why, sizeof why) == PL_EINPUT &&
              strstr(why, "logit 1"),
          "non-finite logit %g rejected: %s", (double)bad_vals[i], why);
    float lp;
    CHECK(pl_token_logprob(l, 3, 1.0f, 0, &lp, why, sizeof why) == PL_EINPUT,
          "pl_token_logprob rejects %g", (double)bad_vals[i]);
  }
  l[1] = 1;
  struct {
    pl_sampling s;
    const char *field;
  } cases[] = {{{-1.0f, 1.0f, 0.0f}, "temperature"},
               {{NAN, 1.0f, 0.0f}, "temperature"},
               {{INFINITY, 1.0f, 0.0f}, "temperature"},
               {{1.0f, 0.0f, 0.0f}, "top_p"},
               {{1.0f, 1.5f, 0.0f}, "top_p"},
               {{1.0f, NAN, 0.0f}, "top_p"},
               {{1.0f, 1.0f, -0.1f}, "min_p"},
               {{1.0f, 1.0f, 2.0f}, "min_p"}};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
    CHECK(pl_sample(l, 3, &cases[i].s, &r, NULL, &o, why, sizeof why) ==
                  PL_EINPUT &&
              strstr(why, cases[i].field),
          "case %zu names %s: %s", i, cases[i].field, why);
  CHECK(pl_sample(l, 0, &s, &r, NULL, &o, why, sizeof why) == PL_EINPUT,
        "vocab 0");
  /* A very negative finite logit is a mask, not an error. */
  float masked[3] = {-1e30f, 0.0f, -FLT_MAX};
  for (int i = 0; i < 100; i++) {
    CHECK(pl_sample(masked, 3, &s, &r, NULL, &o, why, sizeof why) == PL_OK &&
              o.token == 1 && o.logprob == 0.0f,
          "masked tokens are never drawn");
  }
}

static void test_vocab_one(void) {
  float l[1] = {-7.0f};
  pl_rng r;
  pl_rng_seed(&r, 1);
  pl_sampling ss[3] = {
      {1.0f, 1.0f, 0.0f}, {0.0f, 1.0f, 0.0f}, {0.5f, 0.1f, 0.9f}};
  for (int i = 0; i < 3; i++) {
    pl_sample_out o;
    CHECK(pl_sample(l, 1, &ss[i], &r, NULL, &o, why, sizeof why) == PL_OK &&
              o.token == 0 && o.logprob == 0.0f && o.logprob_sample == 0.0f &&
              o.n_kept == 1,
          "vocab 1, case %d: token %d logprob %g", i, o.token,
          (double)o.logprob);
  }
}

int main(void) {
  test_rng();
  test_greedy();
  test_logprob_exact();
  test_min_p();
  test_top_p();
  test_support_random();
  test_frequencies();
  test_reproducible();
  test_batch();
  test_bad_input();
  test_vocab_one();
  return kl_test_done("test_sampler");
}
