/*
 * policy/sampler.c — turns one row of logits into one token: temperature,
 * top-p (nucleus), min-p, then a draw from a seeded xoshiro256** stream.
 * It also reports the two log-probabilities GRPO cares about (see policy.h:
 * the policy's own log-prob under softmax(logits / T) with no truncation,
 * which is what the trainer recomputes, and the log-prob under the truncated
 * distribution actually drawn from).
 *
 * Everything here is a pure function of (logits, settings, rng state): no
 * globals, no time, no threads, the same tokens on every platform for the
 * same seed (the RNG is integer-only; the probabilities are computed in
 * double from fp32 logits with a fixed summation order). It does not run
 * the model and does not know about end tokens or length caps: generation
 * loops live with the model.
 *
 * Order of the filters follows HF transformers' `generate` (temperature,
 * top_p, min_p; see research/policy-anchors.md section 4). Both filters keep
 * a prefix of the tokens sorted by probability (descending, ties by lower
 * id), so the result is exactly the shorter of the two prefixes, each
 * measured on the full temperature-scaled distribution.
 */
#include "policy/policy.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- RNG: xoshiro256** seeded through splitmix64 ------------------------- */

/* splitmix64 step: the recommended way to expand one 64-bit seed into
 * xoshiro's 256-bit state (never all zero). */
static uint64_t splitmix64(uint64_t *x) {
  uint64_t z = (*x += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

static uint64_t rotl64(uint64_t x, int k) {
  return (x << k) | (x >> (64 - k));
}

void pl_rng_seed(pl_rng *rng, uint64_t seed) {
  pl_rng_seed_stream(rng, seed, 0);
}

void pl_rng_seed_stream(pl_rng *rng, uint64_t seed, uint64_t stream) {
  /* Mix the stream index through splitmix before combining, so that
   * (seed, stream) pairs close together land far apart. */
  uint64_t s = stream;
  uint64_t x = seed ^ splitmix64(&s);
  for (int i = 0; i < 4; i++)
    rng->s[i] = splitmix64(&x);
}

uint64_t pl_rng_next(pl_rng *rng) {
  uint64_t *s = rng->s;
  uint64_t result = rotl64(s[1] * 5, 7) * 9;
  uint64_t t = s[1] << 17;
  s[2] ^= s[0];
  s[3] ^= s[1];
  s[1] ^= s[2];
  s[0] ^= s[3];
  s[2] ^= t;
  s[3] = rotl64(s[3], 45);
  return result;
}

double pl_rng_uniform(pl_rng *rng) {
  /* The top 53 bits, exactly representable: a uniform double in [0, 1). */
  return (double)(pl_rng_next(rng) >> 11) * 0x1.0p-53;
}

/* ---- settings and errors ------------------------------------------------- */

pl_sampling pl_sampling_default(void) {
  pl_sampling s = {1.0f, 1.0f, 0.0f};
  return s;
}

int pl_sampling_validate(const pl_sampling *s, char *why, size_t whylen) {
  if (!s) return pl_fail(why, whylen, PL_EINPUT, "sampling settings: NULL");
  if (!(s->temperature >= 0.0f) || isinf(s->temperature))
    return pl_fail(why, whylen, PL_EINPUT,
                   "sampling: temperature = %g, expected a finite value >= 0 "
                   "(0 = greedy)",
                   (double)s->temperature);
  if (!(s->top_p > 0.0f && s->top_p <= 1.0f))
    return pl_fail(why, whylen, PL_EINPUT,
                   "sampling: top_p = %g, expected 0 < top_p <= 1 (1 = off)",
                   (double)s->top_p);
  if (!(s->min_p >= 0.0f && s->min_p <= 1.0f))
    return pl_fail(why, whylen, PL_EINPUT,
                   "sampling: min_p = %g, expected 0 <= min_p <= 1 (0 = off)",
                   (double)s->min_p);
  return PL_OK;
}

/* Finds the first maximum (ties: lowest id) and returns it, or returns -1
 * with the index of the first non-finite logit in *bad. */
static int scan_row(const float *logits, int vocab, int *bad) {
  int best = 0;
  for (int i = 0; i < vocab; i++) {
    if (!isfinite(logits[i])) {
      *bad = i;
      return -1;
    }
    if (logits[i] > logits[best]) best = i;
  }
  return best;
}

static int bad_logit(const float *logits, int bad, char *why, size_t whylen) {
  return pl_fail(why, whylen, PL_EINPUT,
                 "sampling: logit %d is %g; expected finite logits (mask a "
                 "token with a large negative finite value, e.g. -1e30)",
                 bad, (double)logits[bad]);
}

/* log Z for softmax(logits / T) with the maximum subtracted, in double:
 * returns log sum_i exp((l_i - l_max) / T). */
static double log_partition(const float *logits, int vocab, float lmax,
                            double inv_t) {
  double z = 0.0;
  for (int i = 0; i < vocab; i++)
    z += exp(((double)logits[i] - (double)lmax) * inv_t);
  return log(z);
}

int pl_token_logprob(const float *logits, int vocab, float temperature,
                     int token, float *logprob, char *why, size_t whylen) {
  if (!logits || vocab < 1)
    return pl_fail(why, whylen, PL_EINPUT, "logprob: vocab = %d, expected >= 1",
                   vocab);
  if (token < 0 || token >= vocab)
    return pl_fail(why, whylen, PL_EINPUT,
                   "logprob: token %d outside the vocab [0, %d)", token, vocab);
  if (!(temperature >= 0.0f) || isinf(temperature))
    return pl_fail(why, whylen, PL_EINPUT,
                   "logprob: temperature = %g, expected >= 0",
                   (double)temperature);
  int bad = 0, amax = scan_row(logits, vocab, &bad);
  if (amax < 0) return bad_logit(logits, bad, why, whylen);
  double inv_t = temperature > 0.0f ? 1.0 / (double)temperature : 1.0;
  double lz = log_partition(logits, vocab, logits[amax], inv_t);
  *logprob =
      (float)(((double)logits[token] - (double)logits[amax]) * inv_t - lz);
  return PL_OK;
}

/* ---- the filters --------------------------------------------------------- */

/* A candidate token: its weight w = exp((l - l_max) / T) (so the argmax has
 * w = 1 and p = w / Z) and its id. */
typedef struct {
  double w;
  int id;
} cand;

/* Scratch layout: w (vocab doubles), then cands (vocab cand). */
size_t pl_sample_scratch_bytes(int vocab) {
  if (vocab < 1) return 0;
  return (size_t)vocab * (sizeof(double) + sizeof(cand));
}

/* By weight descending, then id ascending: a total order, so qsort (not
 * stable) still gives one answer on every platform. */
static int cand_cmp(const void *a, const void *b) {
  const cand *x = a, *y = b;
  if (x->w > y->w) return -1;
  if (x->w < y->w) return 1;
  return (x->id > y->id) - (x->id < y->id);
}

/* Collects the tokens with w >= cut (and always the argmax), sorted. */
static int collect(const double *w, int vocab, int amax, double cut, cand *c) {
  int n = 0;
  for (int i = 0; i < vocab; i++)
    if (w[i] >= cut || i == amax) c[n++] = (cand){w[i], i};
  qsort(c, (size_t)n, sizeof *c, cand_cmp);
  return n;
}

/* Length of the nucleus inside the sorted prefix c[0..n): the smallest k
 * with sum_{j<k} w_j >= goal, or -1 when the prefix does not reach it. */
static int nucleus(const cand *c, int n, double goal) {
  double cum = 0.0;
  for (int k = 0; k < n; k++) {
    cum += c[k].w;
    if (cum >= goal) return k + 1;
  }
  return -1;
}

/* The truncated support for T > 0: fills c[0..*n_kept) with the kept tokens
 * sorted by weight, given w and Z = sum w.
 *
 * min-p keeps p_i >= min_p * p_max, i.e. w_i >= min_p since w_max = 1. Top-p
 * keeps the smallest sorted prefix whose mass reaches top_p * Z. Both are
 * prefixes of the same order, so the kept set is the shorter one. To avoid
 * sorting the whole vocab, the first pass only collects tokens that can be in
 * the nucleus: apart from the argmax, a nucleus member has
 * p > (1 - top_p) / (vocab - 1) (llama2.c's bound), loosened by 1e-6 for
 * rounding; if that pass falls short, the full min-p set is sorted instead,
 * so the answer never depends on the shortcut. */
static int truncate_support(const double *w, int vocab, int amax, double z,
                            const pl_sampling *s, cand *c) {
  double cut_m = (double)s->min_p;
  if (s->top_p >= 1.0f) return collect(w, vocab, amax, cut_m, c);
  double goal = (double)s->top_p * z;
  if (vocab > 1) {
    double cut_p =
        (1.0 - (double)s->top_p) / (double)(vocab - 1) * z * (1.0 - 1e-6);
    if (cut_p > cut_m) {
      int n = collect(w, vocab, amax, cut_p, c);
      int k = nucleus(c, n, goal);
      if (k > 0) return k;
    }
  }
  int n = collect(w, vocab, amax, cut_m, c);
  int k = nucleus(c, n, goal);
  return k > 0 ? k : n;
}

/* Shared front half of every entry point: checks the arguments and the row,
 * returns the argmax through *amax. */
static int check_row(const float *logits, int vocab, const pl_sampling *s,
                     int *amax, char *why, size_t whylen) {
  if (!logits || vocab < 1)
    return pl_fail(why, whylen, PL_EINPUT,
                   "sampling: vocab = %d, expected >= 1", vocab);
  int rc = pl_sampling_validate(s, why, whylen);
  if (rc) return rc;
  int bad = 0;
  *amax = scan_row(logits, vocab, &bad);
  if (*amax < 0) return bad_logit(logits, bad, why, whylen);
  return PL_OK;
}

/* Fills w[i] = exp((l_i - l_max) / T) and returns Z = sum w. */
static double weights(const float *logits, int vocab, int amax, double inv_t,
                      double *w) {
  double z = 0.0, lmax = (double)logits[amax];
  for (int i = 0; i < vocab; i++) {
    w[i] = exp(((double)logits[i] - lmax) * inv_t);
    z += w[i];
  }
  return z;
}

/* Scratch handling: use the caller's or allocate one for this call. */
static void *scratch_get(void *scratch, int vocab, void **owned) {
  *owned = NULL;
  if (scratch) return scratch;
  *owned = malloc(pl_sample_scratch_bytes(vocab));
  return *owned;
}

int pl_sampling_support(const float *logits, int vocab, const pl_sampling *s,
                        void *scratch, int *ids, double *probs, int *n_kept,
                        char *why, size_t whylen) {
  int amax = 0;
  int rc = check_row(logits, vocab, s, &amax, why, whylen);
  if (rc) return rc;
  if (s->temperature == 0.0f) {
    ids[0] = amax;
    if (probs) probs[0] = 1.0;
    *n_kept = 1;
    return PL_OK;
  }
  void *owned;
  double *w = scratch_get(scratch, vocab, &owned);
  if (!w) {
    pl_fail(why, whylen, PL_EINPUT, "sampling: out of memory for vocab %d",
            vocab);
    return PL_EENV;
  }
  cand *c = (cand *)(w + vocab);
  double z = weights(logits, vocab, amax, 1.0 / (double)s->temperature, w);
  int n = truncate_support(w, vocab, amax, z, s, c);
  double mass = 0.0;
  for (int k = 0; k < n; k++)
    mass += c[k].w;
  for (int k = 0; k < n; k++) {
    ids[k] = c[k].id;
    if (probs) probs[k] = c[k].w / mass;
  }
  *n_kept = n;
  free(owned);
  return PL_OK;
}

int pl_sample(const float *logits, int vocab, const pl_sampling *s, pl_rng *rng,
              void *scratch, pl_sample_out *out, char *why, size_t whylen) {
  int amax = 0;
  int rc = check_row(logits, vocab, s, &amax, why, whylen);
  if (rc) return rc;
  if (!rng || !out)
    return pl_fail(why, whylen, PL_EINPUT, "sampling: NULL rng or out");
  double lmax = (double)logits[amax];

  /* Greedy: no draw (the stream is not advanced); the policy log-prob is
   * taken at T = 1, the sampling distribution is a point mass. */
  if (s->temperature == 0.0f) {
    out->token = amax;
    out->logprob = (float)(-log_partition(logits, vocab, logits[amax], 1.0));
    out->logprob_sample = 0.0f;
    out->n_kept = 1;
    return PL_OK;
  }

  void *owned;
  double *w = scratch_get(scratch, vocab, &owned);
  if (!w) {
    pl_fail(why, whylen, PL_EINPUT, "sampling: out of memory for vocab %d",
            vocab);
    return PL_EENV;
  }
  double inv_t = 1.0 / (double)s->temperature;
  double z = weights(logits, vocab, amax, inv_t, w);
  double u = pl_rng_uniform(rng);
  int token = amax;
  double w_tok = 1.0, mass = z;

  if (s->top_p >= 1.0f && s->min_p <= 0.0f) {
    /* No truncation: inverse CDF over ids in order, no sort. Zero-weight
     * (underflowed) tokens can never be chosen: r < cum needs cum to grow. */
    double r = u * z, cum = 0.0;
    int last = amax;
    for (int i = 0; i < vocab; i++) {
      if (w[i] <= 0.0) continue;
      cum += w[i];
      last = i;
      if (r < cum) break;
    }
    token = last;
    w_tok = w[token];
    out->n_kept = vocab;
  } else {
    cand *c = (cand *)(w + vocab);
    int n = truncate_support(w, vocab, amax, z, s, c);
    mass = 0.0;
    for (int k = 0; k < n; k++)
      mass += c[k].w;
    double r = u * mass, cum = 0.0;
    int pick = 0; /* c[0] is the argmax, weight 1: a safe fallback */
    for (int k = 0; k < n; k++) {
      if (c[k].w <= 0.0) break; /* sorted: the rest weigh nothing too */
      cum += c[k].w;
      pick = k;
      if (r < cum) break;
    }
    token = c[pick].id;
    w_tok = c[pick].w;
    out->n_kept = n;
  }
  double lz = log(z);
  out->token = token;
  out->logprob = (float)(((double)logits[token] - lmax) * inv_t - lz);
  out->logprob_sample = (float)(log(w_tok) - log(mass));
  free(owned);
  return PL_OK;
}

int pl_sample_batch(const float *logits, int rows, int vocab,
                    const pl_sampling *s, pl_rng *rngs, void *scratch,
                    pl_sample_out *out, char *why, size_t whylen) {
  if (rows < 0)
    return pl_fail(why, whylen, PL_EINPUT, "sampling: rows = %d", rows);
  void *owned = NULL;
  if (!scratch && rows > 0) {
    scratch = owned = malloc(pl_sample_scratch_bytes(vocab > 0 ? vocab : 1));
    if (!scratch) {
      pl_fail(why, whylen, PL_EINPUT, "sampling: out of memory for vocab %d",
              vocab);
      return PL_EENV;
    }
  }
  int rc = PL_OK;
  for (int g = 0; g < rows && rc == PL_OK; g++) {
    /* logits row g: (rows, vocab) row-major */
    rc = pl_sample(logits + (size_t)g * (size_t)(vocab > 0 ? vocab : 0), vocab,
                   s, &rngs[g], scratch, &out[g], why, whylen);
    if (rc && why && whylen) {
      char inner[256];
      snprintf(inner, sizeof inner, "%s", why);
      snprintf(why, whylen, "row %d: %s", g, inner);
    }
  }
  free(owned);
  return rc;
}
