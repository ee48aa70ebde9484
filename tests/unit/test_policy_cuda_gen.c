/*
 * tests/unit/test_policy_cuda_gen.c — sampling on the policy's CUDA runtime
 * (policy/cuda/pcuda_sample.c, pcuda_generate.c, sample.cu, kvcache.cu)
 * against the CPU reference (policy/sampler.c, policy/generate.c).
 *
 *   test_policy_cuda_gen            on the CPU emulator (label unit)
 *   test_policy_cuda_gen --device   on device 0 (label gpu); exit 77, with
 *                                   the reason, where no device answers or
 *                                   the build has no fatbin
 *
 * Three layers, each against its twin:
 *   1. the sampler alone: the same logits (uploaded bit for bit) and the
 *      same seeded pl_rng streams through pl_sample_batch and
 *      pcuda_sample_batch, 24 draws per row and setting, over rows built to
 *      hit every path (random, peaked, all ties, ties at the top with masked
 *      tokens, weights that underflow, one token) and settings (greedy,
 *      plain, top-p, min-p, both, a top-p that defeats the candidate
 *      shortcut). Tokens and n_kept must be equal, the two log-probs within
 *      1e-6 (the sums run in another order, at the 1e-16 level), and the
 *      streams must end in the same state (one draw per row and call,
 *      none when greedy). A NaN logit is refused naming row and index.
 *   2. the cached forward: a prefill, then decode steps with rows given out
 *      of order, logits within 1e-4 of max|logit| of pl_forward_cached's;
 *      and a long one past the attention kernel's chunk of 256 positions
 *      and its 128 threads (check_cached_long says how), head size 40.
 *   3. generation: pcuda_generate against pl_generate on a small model with
 *      peaked attention and sharp logits, 4 seeds x 5 sampling settings
 *      (greedy, plain, top-p, min-p, top-p + min-p), G 4, with an end
 *      token so that rows stop at different steps, plus a prompt that
 *      leaves room for fewer than max_new tokens (PL_STOP_MAX_SEQ). Tokens,
 *      lengths, stop reasons, truncation and the order of on_row calls must
 *      be equal; logprobs and logprobs_sample within 1e-4 (the logits differ
 *      at fp32 rounding: tiled GEMMs, trees of shuffles). Bad arguments
 *      give the CPU's code and the CPU's message, word for word.
 *   4. the lab's facade (lab/policy_device.c, compiled into this test):
 *      training steps, a reference forward and a generation through a
 *      lab_policy on the CPU and on the backend agree, and lab_policy_sync
 *      brings the backend's state back for checkpoints; where no device
 *      answers, --policy-device gpu is refused with the reason and auto
 *      falls back. --policy-dtype: bf16 is refused on the CPU and with
 *      --policy-matmul, falls back to fp32 with auto and no device, and a
 *      bf16 lab_policy on the backend trains, samples and syncs, its
 *      loss within bf16's error of the CPU's and not equal to it.
 * Equal tokens rest on the logits agreeing to rounding: a draw within
 * about 1e-6 of a CDF boundary could pick the neighbour. On the emulator
 * both paths are deterministic, so the pass/fail is fixed; measured there
 * (printed at the end): every token equal, log-prob error about 1e-6.
 */
#include "kltest.h"
#include "lab/lab.h"
#include "lab/policy_device.h"
#include "pcuda_testutil.h"
#include "policy/cuda/pcuda.h"
#include "policy/policy.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define TOL_SAMPLE_LOGPROB 1e-6
#define TOL_CACHED_LOGITS 1e-4
#define TOL_GEN_LOGPROB 1e-4

static double worst_sample, worst_logits, worst_gen;
static int gen_tokens_compared;

static uint64_t rng_state = 0x2545f4914f6cdd1dull;
static double rnd01(void) {
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 7;
  rng_state ^= rng_state << 17;
  return (double)(rng_state >> 11) * 0x1.0p-53;
}

/* ---- 1. the sampler alone ----------------------------------------------- */

#define SV 300 /* vocab of the sampler rows */
#define SROWS 6

/* Rows built to reach every path of the sampler. */
static void sampler_rows(float *logits /*(SROWS,SV)*/) {
  for (int i = 0; i < SV; i++) {
    logits[0 * SV + i] = (float)(3.0 * (rnd01() * 2 - 1)); /* random */
    logits[1 * SV + i] = (float)(rnd01() * 0.5);           /* peaked */
    logits[2 * SV + i] = 0.0f;                             /* all ties */
    logits[3 * SV + i] = (float)(rnd01() - 2.0);           /* ties on top */
    logits[4 * SV + i] = (float)(-900.0 * rnd01());        /* underflow */
    logits[5 * SV + i] = (float)(rnd01() * 0.01);          /* nearly flat */
  }
  logits[1 * SV + 17] = 9.0f;
  for (int i = 40; i < 50; i++) /* ties at the top, masked tokens */
    logits[3 * SV + i] = 1.5f;
  for (int i = 100; i < 140; i++)
    logits[3 * SV + i] = -1e30f;
  logits[4 * SV + 3] = 0.0f;
}

static void check_sampler(pcuda_ctx *ctx, const char *label) {
  static const pl_sampling settings[] = {
      {0.0f, 1.0f, 0.0f},   {1.0f, 1.0f, 0.0f},  {0.7f, 0.9f, 0.0f},
      {1.3f, 1.0f, 0.05f},  {1.0f, 0.5f, 0.1f},  {2.0f, 0.3f, 0.0f},
      {1.0f, 0.999f, 0.0f}, {0.05f, 1.0f, 0.0f}, {1.0f, 1.0f, 1.0f},
  };
  float *logits = malloc(SROWS * SV * sizeof(float));
  sampler_rows(logits);
  float *dev = pcuda_alloc(ctx, SROWS * SV * sizeof(float));
  pcuda_upload(ctx, dev, logits, SROWS * SV * sizeof(float));
  char why[256], dwhy[256];
  int n_draws = 0;
  for (size_t si = 0; si < sizeof settings / sizeof settings[0]; si++) {
    const pl_sampling *s = &settings[si];
    pl_rng cpu_rng[SROWS], dev_rng[SROWS];
    for (int r = 0; r < SROWS; r++) {
      pl_rng_seed_stream(&cpu_rng[r], 1000 + si, (uint64_t)r);
      dev_rng[r] = cpu_rng[r];
    }
    for (int draw = 0; draw < 24; draw++) {
      pl_sample_out co[SROWS], go[SROWS];
      int crc = pl_sample_batch(logits, SROWS, SV, s, cpu_rng, NULL, co, why,
                                sizeof why);
      int grc = pcuda_sample_batch(ctx, dev, SV, SROWS, SV, s, dev_rng, go,
                                   dwhy, sizeof dwhy);
      CHECK(crc == PL_OK && grc == PL_OK, "%s: sampler: rc %d/%d: %s / %s",
            label, crc, grc, why, dwhy);
      if (crc || grc) break;
      for (int r = 0; r < SROWS; r++) {
        n_draws++;
        CHECK(go[r].token == co[r].token && go[r].n_kept == co[r].n_kept,
              "%s: sampler setting %zu (T %g top_p %g min_p %g) row %d draw "
              "%d: token %d kept %d on the backend, %d kept %d on the CPU",
              label, si, (double)s->temperature, (double)s->top_p,
              (double)s->min_p, r, draw, go[r].token, go[r].n_kept, co[r].token,
              co[r].n_kept);
        double e =
            fmax(fabs((double)go[r].logprob - co[r].logprob),
                 fabs((double)go[r].logprob_sample - co[r].logprob_sample));
        CHECK(e <= TOL_SAMPLE_LOGPROB,
              "%s: sampler setting %zu row %d: log-prob %.9g/%.9g on the "
              "backend, %.9g/%.9g on the CPU",
              label, si, r, go[r].logprob, go[r].logprob_sample, co[r].logprob,
              co[r].logprob_sample);
        if (e / TOL_SAMPLE_LOGPROB > worst_sample)
          worst_sample = e / TOL_SAMPLE_LOGPROB;
      }
    }
    CHECK(!memcmp(cpu_rng, dev_rng, sizeof cpu_rng),
          "%s: sampler setting %zu: the RNG streams ended apart", label, si);
  }
  /* every row's first draws under a row stride of 0: all read row 1 */
  pl_sample_out go[3];
  pl_rng rngs[3];
  const pl_sampling plain = {1.0f, 1.0f, 0.0f};
  for (int r = 0; r < 3; r++)
    pl_rng_seed_stream(&rngs[r], 5, 0); /* the same stream thrice */
  CHECK(pcuda_sample_batch(ctx, dev + SV, 0, 3, SV, &plain, rngs, go, why,
                           sizeof why) == PL_OK &&
            go[0].token == go[1].token && go[1].token == go[2].token,
        "%s: row stride 0: %s", label, why);
  /* one token */
  pl_rng one;
  pl_rng_seed(&one, 1);
  CHECK(pcuda_sample_batch(ctx, dev, SV, 1, 1, &plain, &one, go, why,
                           sizeof why) == PL_OK &&
            go[0].token == 0 && go[0].n_kept == 1 && go[0].logprob == 0.0f,
        "%s: vocab 1: token %d kept %d logprob %g (%s)", label, go[0].token,
        go[0].n_kept, (double)go[0].logprob, why);
  /* a NaN: refused, naming the row and the index */
  float nan_row = NAN;
  pcuda_upload(ctx, dev + 2 * SV + 5, &nan_row, sizeof nan_row);
  pl_rng bad_rngs[SROWS];
  for (int r = 0; r < SROWS; r++)
    pl_rng_seed(&bad_rngs[r], 9);
  pl_sample_out bo[SROWS];
  int rc = pcuda_sample_batch(ctx, dev, SV, SROWS, SV, &plain, bad_rngs, bo,
                              why, sizeof why);
  CHECK(rc == PL_EINPUT && strstr(why, "row 2") && strstr(why, "logit 5"),
        "%s: a NaN logit: rc %d '%s'", label, rc, why);
  const pl_sampling bad = {1.0f, 0.0f, 0.0f};
  rc = pcuda_sample_batch(ctx, dev, SV, 1, SV, &bad, bad_rngs, bo, why,
                          sizeof why);
  CHECK(rc == PL_EINPUT && strstr(why, "top_p"), "%s: top_p 0: rc %d '%s'",
        label, rc, why);
  pcuda_free(ctx, dev);
  free(logits);
  CHECK(pcuda_status(ctx, why, sizeof why) == PL_OK, "%s: backend: %s", label,
        why);
  printf("test_policy_cuda_gen: %s: sampler: %d draws compared\n", label,
         n_draws);
}

/* ---- the model ----------------------------------------------------------- */

static const pl_config gen_cfg = {.vocab = 61,
                                  .d_model = 24,
                                  .n_layers = 2,
                                  .n_heads = 3,
                                  .d_ff = 40,
                                  .max_seq = 24};

/* A model whose attention is peaked and whose logits are sharp (the
 * init's 0.02 gives nearly uniform distributions, where every sampling
 * setting looks alike), and which does not just repeat itself. */
static int make_model(pl_model *m, pcuda_model *dm, pcuda_ctx *ctx,
                      const char *label) {
  char why[256];
  if (pl_model_init(m, &gen_cfg, 77, why, sizeof why) != PL_OK) {
    CHECK(0, "%s: pl_model_init: %s", label, why);
    return -1;
  }
  for (size_t i = 0; i < m->param_sizes[2]; i++)
    m->params.wqkv[i] *= 10.0f;
  for (size_t i = 0; i < m->param_sizes[0]; i++)
    m->params.wte[i] *= 10.0f;
  /* final norm weights of both signs: with the head tied to wte, a model
   * otherwise mostly repeats its last token */
  for (size_t i = 0; i < m->param_sizes[7]; i++)
    m->params.rms_final[i] =
        (float)((rnd01() < 0.5 ? -1 : 1) * (0.5 + rnd01()));
  if (pcuda_model_init(dm, ctx, m, why, sizeof why) != PL_OK) {
    CHECK(0, "%s: pcuda_model_init: %s", label, why);
    pl_model_free(m);
    return -1;
  }
  return 0;
}

/* ---- 2. the cached forward ------------------------------------------------
 */

static void check_cached_forward(pcuda_ctx *ctx, const pl_model *m,
                                 pcuda_model *dm, const char *label) {
  const int G = 3, P = 5, V = gen_cfg.vocab;
  char why[256], dwhy[256];
  pl_kv_cache kv;
  pcuda_kv_cache dkv;
  CHECK(pl_kv_cache_init(&kv, &m->cfg, G, 12, why, sizeof why) == PL_OK, "%s",
        why);
  int rc = pcuda_kv_cache_init(&dkv, ctx, &m->cfg, G, 12, dwhy, sizeof dwhy);
  CHECK(rc == PL_OK, "%s: pcuda_kv_cache_init: %s", label, dwhy);
  if (rc) {
    pl_kv_cache_free(&kv);
    return;
  }
  float *logits = malloc((size_t)G * P * V * sizeof(float));
  float *got = malloc((size_t)G * P * V * sizeof(float));
  int32_t prompt[5] = {1, 7, 19, 3, 42};
  /* prefill into row 1, copy to rows 0 and 2 */
  pl_forward_cached(m, &kv, prompt, (const int[]){1}, 1, P, 0, logits, why,
                    sizeof why);
  rc = pcuda_forward_cached(dm, &dkv, prompt, (const int[]){1}, 1, P, 0, dwhy,
                            sizeof dwhy);
  CHECK(rc == PL_OK, "%s: prefill: %s", label, dwhy);
  pcuda_download(ctx, got, dkv.logits, (size_t)P * V * sizeof(float));
  double e = pt_rel_err(got, logits, (size_t)P * V, NULL);
  CHECK(e <= TOL_CACHED_LOGITS, "%s: prefill logits: error %.3g", label, e);
  worst_logits = fmax(worst_logits, e / TOL_CACHED_LOGITS);
  for (int g = 0; g < G; g += 2) {
    pl_kv_cache_copy_prefix(&kv, 1, g, P);
    pcuda_kv_cache_copy_prefix(&dkv, 1, g, P);
  }
  /* three decode steps, rows out of order, different tokens per row */
  for (int step = 0; step < 3; step++) {
    int rows[3] = {2, 0, 1};
    int32_t feed[3] = {(int32_t)(5 + step), (int32_t)(30 + step), 60};
    pl_forward_cached(m, &kv, feed, rows, G, 1, P + step, logits, why,
                      sizeof why);
    rc = pcuda_forward_cached(dm, &dkv, feed, rows, G, 1, P + step, dwhy,
                              sizeof dwhy);
    CHECK(rc == PL_OK, "%s: decode step %d: %s", label, step, dwhy);
    pcuda_download(ctx, got, dkv.logits, (size_t)G * V * sizeof(float));
    e = pt_rel_err(got, logits, (size_t)G * V, NULL);
    CHECK(e <= TOL_CACHED_LOGITS, "%s: decode step %d logits: error %.3g",
          label, step, e);
    worst_logits = fmax(worst_logits, e / TOL_CACHED_LOGITS);
  }
  /* the CPU's checks and messages */
  int32_t bad_tok = V;
  rc = pl_forward_cached(m, &kv, &bad_tok, NULL, 1, 1, 0, logits, why,
                         sizeof why);
  int drc = pcuda_forward_cached(dm, &dkv, &bad_tok, NULL, 1, 1, 0, dwhy,
                                 sizeof dwhy);
  CHECK(rc == drc && !strcmp(why, dwhy), "%s: bad token: %d '%s' vs %d '%s'",
        label, drc, dwhy, rc, why);
  rc = pl_forward_cached(m, &kv, prompt, NULL, 1, 1, 12, logits, why,
                         sizeof why);
  drc =
      pcuda_forward_cached(dm, &dkv, prompt, NULL, 1, 1, 12, dwhy, sizeof dwhy);
  CHECK(rc == drc && !strcmp(why, dwhy), "%s: bad position: '%s' vs '%s'",
        label, dwhy, why);
  /* two batch rows into one cache row: refused on both sides, the same */
  int32_t two[2] = {5, 6};
  rc = pl_forward_cached(m, &kv, two, (const int[]){2, 2}, 2, 1, P + 3, logits,
                         why, sizeof why);
  drc = pcuda_forward_cached(dm, &dkv, two, (const int[]){2, 2}, 2, 1, P + 3,
                             dwhy, sizeof dwhy);
  CHECK(rc == PL_EINPUT && rc == drc && !strcmp(why, dwhy) &&
            strstr(why, "both 2"),
        "%s: duplicate rows: '%s' vs '%s'", label, dwhy, why);
  /* a cache longer than one block's shared memory could hold the scores
   * of (53,692 positions on sm_90, the limit before the attention split
   * its positions): accepted */
  pl_config long_cfg = m->cfg;
  long_cfg.max_seq = 60000;
  pcuda_kv_cache big;
  drc = pcuda_kv_cache_init(&big, ctx, &long_cfg, 1, 60000, dwhy, sizeof dwhy);
  CHECK(drc == PL_OK, "%s: max_seq 60000: %d '%s'", label, drc, dwhy);
  if (drc == PL_OK) pcuda_kv_cache_free(&big);
  free(logits);
  free(got);
  pl_kv_cache_free(&kv);
  pcuda_kv_cache_free(&dkv);
}

/* The cached forward past the attention kernel's chunk of 256 positions
 * and its 128 threads (each warp sums several positions per dimension),
 * head size 40 (two 32-dimension passes, the second partial), every way
 * attention_cached_kernel splits its work (pcuda_generate.c's
 * attention_splits):
 *   - a 500-token prefill of row 0: 1,000 (row, head) pairs, S = 1, each
 *     block walking its row's one or two chunks with the running softmax;
 *   - 20 more tokens at positions 500..519: 40 pairs, S = 3, the rows
 *     before position 512 having two chunks, fewer than S (the merge must
 *     read only those);
 *   - 90 more at positions 520..609: 180 pairs, S = 2 over three chunks,
 *     so split 0 takes chunks 0 and 2;
 *   - decode steps of rows 0 and 1 (the prefix copied) at positions 610 to
 *     613: 4 pairs, S = 3, a chunk per split, merged by
 *     attention_combine_kernel (13 launches per layer). */
/* The cached forward's scratch filled with NaN (0xff bytes) before a call,
 * so that a kernel reading a value this call did not write (a split of
 * the attention with none of the row's chunks, say) fails the comparison
 * instead of reading the last call's activations. */
static void poison_scratch(pcuda_ctx *ctx, pcuda_kv_cache *kv) {
  if (!kv->scratch) return;
  size_t bytes = kv->scratch_floats * sizeof(float);
  unsigned char *ff = malloc(bytes);
  if (!ff) return;
  memset(ff, 0xff, bytes);
  pcuda_upload(ctx, kv->scratch, ff, bytes);
  free(ff);
}

static void check_cached_long(pcuda_ctx *ctx, const char *label) {
  static const pl_config cfg = {.vocab = 29,
                                .d_model = 80,
                                .n_layers = 1,
                                .n_heads = 2,
                                .d_ff = 64,
                                .max_seq = 620};
  enum { G = 2, P = 610, STEPS = 4 };
  char why[256], dwhy[256];
  pl_model m;
  pcuda_model dm;
  if (pl_model_init(&m, &cfg, 5, why, sizeof why) != PL_OK) {
    CHECK(0, "%s: long: pl_model_init: %s", label, why);
    return;
  }
  for (size_t i = 0; i < m.param_sizes[2]; i++) /* peaked attention */
    m.params.wqkv[i] *= 10.0f;
  if (pcuda_model_init(&dm, ctx, &m, why, sizeof why) != PL_OK) {
    CHECK(0, "%s: long: pcuda_model_init: %s", label, why);
    pl_model_free(&m);
    return;
  }
  pl_kv_cache kv;
  pcuda_kv_cache dkv;
  int n_pos = P + STEPS;
  int have_kv = pl_kv_cache_init(&kv, &cfg, G, n_pos, why, sizeof why) == PL_OK;
  int have_dkv = pcuda_kv_cache_init(&dkv, ctx, &cfg, G, n_pos, dwhy,
                                     sizeof dwhy) == PL_OK;
  CHECK(have_kv && have_dkv, "%s: long: kv caches: %s / %s", label,
        have_kv ? "ok" : why, have_dkv ? "ok" : dwhy);
  float *logits = malloc((size_t)P * cfg.vocab * sizeof(float));
  float *got = malloc((size_t)P * cfg.vocab * sizeof(float));
  int32_t prompt[P];
  for (int i = 0; i < P; i++)
    prompt[i] = (int32_t)((i * 7 + 3) % cfg.vocab);
  if (have_kv && have_dkv && logits && got) {
    /* the prefill in three calls: 500 positions, 20, 90 */
    const int part_len[3] = {500, 20, 90}, part_pos0[3] = {0, 500, 520};
    for (int k = 0; k < 3; k++) {
      int T = part_len[k], pos0 = part_pos0[k];
      pl_forward_cached(&m, &kv, prompt + pos0, NULL, 1, T, pos0, logits, why,
                        sizeof why);
      poison_scratch(ctx, &dkv);
      int rc = pcuda_forward_cached(&dm, &dkv, prompt + pos0, NULL, 1, T, pos0,
                                    dwhy, sizeof dwhy);
      CHECK(rc == PL_OK, "%s: long: prefill %d: %s", label, k, dwhy);
      pcuda_download(ctx, got, dkv.logits,
                     (size_t)T * cfg.vocab * sizeof(float));
      double e = pt_rel_err(got, logits, (size_t)T * cfg.vocab, NULL);
      CHECK(e <= TOL_CACHED_LOGITS,
            "%s: long: prefill %d (positions %d..%d) logits: error %.3g", label,
            k, pos0, pos0 + T - 1, e);
      worst_logits = fmax(worst_logits, e / TOL_CACHED_LOGITS);
    }
    pl_kv_cache_copy_prefix(&kv, 0, 1, P);
    pcuda_kv_cache_copy_prefix(&dkv, 0, 1, P);
    for (int step = 0; step < STEPS; step++) {
      int32_t feed[G] = {(int32_t)step, (int32_t)(20 - step)};
      int pos0 = P + step;
      pl_forward_cached(&m, &kv, feed, NULL, G, 1, pos0, logits, why,
                        sizeof why);
      poison_scratch(ctx, &dkv);
      unsigned long launches = pcuda_launches(ctx);
      int rc = pcuda_forward_cached(&dm, &dkv, feed, NULL, G, 1, pos0, dwhy,
                                    sizeof dwhy);
      CHECK(rc == PL_OK, "%s: long: decode step %d: %s", label, step, dwhy);
      /* pcuda_launches: the embedding, 13 per layer (two norms, four
       * GEMMs, RoPE, the cache write, attention and the merge of its
       * splits, two residuals, SwiGLU), the final norm and the head */
      launches = pcuda_launches(ctx) - launches;
      CHECK(launches == 3 + 13 * (unsigned long)cfg.n_layers,
            "%s: long: a decode step counted %lu launches, expected %lu", label,
            launches, 3 + 13 * (unsigned long)cfg.n_layers);
      pcuda_download(ctx, got, dkv.logits,
                     (size_t)G * cfg.vocab * sizeof(float));
      double e = pt_rel_err(got, logits, (size_t)G * cfg.vocab, NULL);
      CHECK(e <= TOL_CACHED_LOGITS,
            "%s: long: decode step %d (position %d) logits: error %.3g", label,
            step, pos0, e);
      worst_logits = fmax(worst_logits, e / TOL_CACHED_LOGITS);
    }
  }
  free(logits);
  free(got);
  if (have_kv) pl_kv_cache_free(&kv);
  if (have_dkv) pcuda_kv_cache_free(&dkv);
  pcuda_model_free(&dm);
  pl_model_free(&m);
}

/* ---- 3. generation ---------------------------------------------------- */

typedef struct row_log {
  int order[64];
  int n;
} row_log;

static void log_row(void *ctx, const pl_generation *out, int row) {
  (void)out;
  row_log *l = ctx;
  if (l->n < 64) l->order[l->n++] = row;
}

static void compare_generation(const pl_generation *c, const pl_generation *d,
                               const row_log *cl, const row_log *dl,
                               const char *what) {
  int G = c->G, M = c->max_new;
  for (int g = 0; g < G; g++) {
    int same = c->lengths[g] == d->lengths[g] && c->stop[g] == d->stop[g] &&
               c->truncated[g] == d->truncated[g] &&
               !memcmp(c->tokens + (size_t)g * M, d->tokens + (size_t)g * M,
                       (size_t)M * sizeof(int32_t));
    CHECK(same,
          "%s row %d: length %d stop %d on the backend, %d stop %d on the "
          "CPU, tokens %s",
          what, g, d->lengths[g], d->stop[g], c->lengths[g], c->stop[g],
          same ? "equal" : "differ");
    for (int i = 0; i < M; i++) {
      size_t k = (size_t)g * M + i;
      double e =
          fmax(fabs((double)d->logprobs[k] - c->logprobs[k]),
               fabs((double)d->logprobs_sample[k] - c->logprobs_sample[k]));
      CHECK(e <= TOL_GEN_LOGPROB,
            "%s row %d token %d: logprob %.7g/%.7g on the backend, "
            "%.7g/%.7g on the CPU",
            what, g, i, d->logprobs[k], d->logprobs_sample[k], c->logprobs[k],
            c->logprobs_sample[k]);
      worst_gen = fmax(worst_gen, e / TOL_GEN_LOGPROB);
    }
    gen_tokens_compared += c->lengths[g];
  }
  CHECK(cl->n == G && dl->n == G &&
            !memcmp(cl->order, dl->order, (size_t)G * sizeof(int)),
        "%s: rows stopped in another order (%d and %d calls)", what, dl->n,
        cl->n);
}

static void check_generation(pcuda_model *dm, const pl_model *m,
                             const char *label) {
  static const pl_sampling settings[] = {
      {0.0f, 1.0f, 0.0f}, {1.0f, 1.0f, 0.0f},  {0.8f, 0.9f, 0.0f},
      {1.2f, 1.0f, 0.1f}, {0.9f, 0.7f, 0.05f},
  };
  int32_t prompt[6] = {2, 11, 5, 33, 8, 50};
  char why[256], dwhy[256], what[160];
  int eos_rows = 0;
  const pl_sampling plain = {1.0f, 1.0f, 0.0f}, bad_s = {-1.0f, 1.0f, 0.0f};
  for (uint64_t seed = 1; seed <= 4; seed++)
    for (size_t si = 0; si < sizeof settings / sizeof settings[0]; si++) {
      const pl_sampling *s = &settings[si];
      pl_generation cg, dg;
      row_log cl = {{0}, 0}, dl = {{0}, 0};
      /* a long prompt for seed 4: room for 24 - 16 = 8 < max_new tokens */
      int32_t long_prompt[16];
      for (int i = 0; i < 16; i++)
        long_prompt[i] = prompt[i % 6];
      const int32_t *pp = seed == 4 ? long_prompt : prompt;
      int plen = seed == 4 ? 16 : 6;
      /* the end token: row 1's 4th token in a run without one, so that row
       * 1 (at least) stops early and the others run on or stop elsewhere */
      int eos = -1;
      if (pl_generate(m, pp, plen, 4, 10, -1, s, seed, &cg, why, sizeof why) ==
          PL_OK) {
        eos = cg.tokens[10 + 3];
        pl_generation_free(&cg);
      }
      int crc = pl_generate_notify(m, pp, plen, 4, 10, eos, s, seed, &cg,
                                   log_row, &cl, why, sizeof why);
      int grc = pcuda_generate_notify(dm, pp, plen, 4, 10, eos, s, seed, &dg,
                                      log_row, &dl, dwhy, sizeof dwhy);
      snprintf(what, sizeof what,
               "%s: generate seed %llu T %g top_p %g min_p %g", label,
               (unsigned long long)seed, (double)s->temperature,
               (double)s->top_p, (double)s->min_p);
      CHECK(crc == PL_OK && grc == PL_OK, "%s: rc %d/%d: %s / %s", what, grc,
            crc, dwhy, why);
      if (crc || grc) continue;
      compare_generation(&cg, &dg, &cl, &dl, what);
      for (int g = 0; g < 4; g++) {
        eos_rows += cg.stop[g] == PL_STOP_EOS;
        if (seed == 4)
          CHECK(cg.stop[g] == PL_STOP_EOS || cg.stop[g] == PL_STOP_MAX_SEQ,
                "%s: row %d should stop at max_seq (stop %d)", what, g,
                cg.stop[g]);
      }
      pl_generation_free(&cg);
      pl_generation_free(&dg);
    }
  /* the test means something only if rows stop at different steps */
  CHECK(eos_rows > 0 && eos_rows < 4 * 4 * 5,
        "%s: %d of 80 rows stopped at their end token; expected some, not "
        "all",
        label, eos_rows);
  printf("test_policy_cuda_gen: %s: %d of 80 rows stopped at their end "
         "token\n",
         label, eos_rows);

  /* bad arguments: the CPU's code and message */
  struct {
    int G, max_new, plen, eos;
    const pl_sampling *s;
  } bad[] = {{0, 5, 6, 9, &plain},  {2, 0, 6, 9, &plain},
             {2, 5, 0, 9, &plain},  {2, 5, 24, 9, &plain},
             {2, 5, 6, 61, &plain}, {2, 5, 6, 9, &bad_s}};
  int32_t long_prompt[24] = {0};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    pl_generation cg, dg;
    const int32_t *pp = bad[i].plen == 24 ? long_prompt : prompt;
    int crc = pl_generate(m, pp, bad[i].plen, bad[i].G, bad[i].max_new,
                          bad[i].eos, bad[i].s, 1, &cg, why, sizeof why);
    int grc = pcuda_generate(dm, pp, bad[i].plen, bad[i].G, bad[i].max_new,
                             bad[i].eos, bad[i].s, 1, &dg, dwhy, sizeof dwhy);
    CHECK(crc == PL_EINPUT && grc == crc && !strcmp(why, dwhy),
          "%s: bad case %zu: %d '%s' on the backend, %d '%s' on the CPU", label,
          i, grc, dwhy, crc, why);
  }
}

/* ---- 4. the lab's facade (lab/policy_device.c) ----------------------------
 * What `kernlab prime` and `kernlab run` call: the same three training
 * steps, a reference forward and a generation through a lab_policy on the
 * CPU and one on the backend; then lab_policy_sync must bring the
 * backend's parameters and AdamW state back into the CPU structs that
 * checkpoints are written from. The lab_policy takes a context of its own
 * (lab_policy_close closes it), so the backend is opened again here. */
static void check_lab_policy(int on_device, const char *label) {
  char why[256];
  CHECK(lab_policy_device_parse("cpu") == LAB_POLICY_CPU &&
            lab_policy_device_parse("gpu") == LAB_POLICY_GPU &&
            lab_policy_device_parse("auto") == LAB_POLICY_AUTO &&
            lab_policy_device_parse("GPU") < 0 &&
            lab_policy_device_parse(NULL) < 0,
        "%s: lab_policy_device_parse", label);
  pcuda_ctx *probe = NULL;
  if (pcuda_device_open(&probe, PCUDA_GEMM_AUTO, why, sizeof why) == PL_OK) {
    pcuda_close(probe);
  } else { /* no device here: gpu fails with the reason, auto falls back */
    pcuda_ctx *got = NULL;
    int rc =
        lab_policy_device_open(LAB_POLICY_GPU, "test", &got, why, sizeof why);
    CHECK(rc == LAB_EXIT_ENV && !got && strstr(why, "--policy-device gpu"),
          "%s: gpu without a device: rc %d '%s'", label, rc, why);
    rc = lab_policy_device_open(LAB_POLICY_AUTO, "test", &got, why, sizeof why);
    CHECK(rc == LAB_EXIT_OK && !got, "%s: auto without a device: rc %d", label,
          rc);
  }
  pcuda_ctx *ctx = NULL;
  int rc = on_device ? pcuda_device_open(&ctx, PCUDA_GEMM_AUTO, why, sizeof why)
                     : pcuda_emu_open(&ctx, 0, why, sizeof why);
  CHECK(rc == PL_OK, "%s: open: %s", label, why);
  if (rc) return;
  pl_model cm, dm, ref;
  pl_adamw copt, dopt;
  pl_adamw_config ac = pl_adamw_defaults();
  ac.lr = 1e-2f;
  pl_model_init(&cm, &gen_cfg, 5, why, sizeof why);
  pl_model_init(&dm, &gen_cfg, 5, why, sizeof why);
  pl_model_init(&ref, &gen_cfg, 6, why, sizeof why);
  pl_adamw_init(&copt, &cm, &ac, why, sizeof why);
  pl_adamw_init(&dopt, &dm, &ac, why, sizeof why);
  lab_policy cp, dp;
  CHECK(lab_policy_init(&cp, NULL, PCUDA_DTYPE_FP32, &cm, &copt, &ref, why,
                        sizeof why) == 0 &&
            !strcmp(lab_policy_describe(&cp), "cpu"),
        "%s: lab_policy_init (cpu): %s", label, why);
  CHECK(lab_policy_init(&dp, ctx, PCUDA_DTYPE_FP32, &dm, &dopt, &ref, why,
                        sizeof why) == 0 &&
            strcmp(lab_policy_describe(&dp), "cpu"),
        "%s: lab_policy_init (backend): %s", label, why);
  enum { B = 2, T = 9 };
  /* what an update needs and has: the policy's activations and the
   * reference's, against this machine's memory or the backend's room; a
   * batch of 2^24 rows fits neither */
  double need = 0, room = 0;
  CHECK(lab_policy_batch_room(&cp, B, T, &need, &room, why, sizeof why) ==
                PL_OK &&
            need == 2 * pl_model_acts_bytes(&gen_cfg, B, T) &&
            room == (double)sysconf(_SC_PHYS_PAGES) * sysconf(_SC_PAGESIZE),
        "%s: lab_policy_batch_room (cpu): need %g, room %g", label, need, room);
  CHECK(lab_policy_batch_room(&dp, B, T, &need, &room, why, sizeof why) ==
                PL_OK &&
            need ==
                2 * pcuda_model_batch_bytes(&gen_cfg, PCUDA_DTYPE_FP32, B, T) &&
            room > need,
        "%s: lab_policy_batch_room (backend): need %g, room %g: %s", label,
        need, room, why);
  for (int side = 0; side < 2; side++) {
    lab_policy *p = side ? &dp : &cp;
    CHECK(lab_policy_batch_room(p, 1 << 24, gen_cfg.max_seq, &need, &room, why,
                                sizeof why) == PL_OK &&
              need > room && room > 0,
          "%s: 2^24 rows (%s): need %g, room %g", label,
          side ? "backend" : "cpu", need, room);
  }
  int32_t x[B * T], y[B * T];
  for (int i = 0; i < B * T; i++) {
    x[i] = (int32_t)(rnd01() * gen_cfg.vocab);
    y[i] = i % 4 == 0 ? -1 : (int32_t)(rnd01() * gen_cfg.vocab);
  }
  float adv[B * T];
  for (int i = 0; i < B * T; i++)
    adv[i] = (float)(rnd01() - 0.5);
  for (int step = 0; step < 3; step++) {
    const float *cl, *dl;
    float closs = lab_policy_forward(&cp, 0, x, y, B, T, &cl);
    float dloss = lab_policy_forward(&dp, 0, x, y, B, T, &dl);
    CHECK(fabsf(dloss - closs) <= 1e-4f * closs &&
              pt_rel_err(dl, cl, B * T, NULL) <= 1e-4,
          "%s: lab step %d: loss %.7g on the backend, %.7g on the CPU", label,
          step, dloss, closs);
    lab_policy_zero_grad(&cp);
    lab_policy_zero_grad(&dp);
    CHECK(lab_policy_backward(&cp, step == 2 ? adv : NULL) == PL_OK &&
              lab_policy_backward(&dp, step == 2 ? adv : NULL) == PL_OK,
          "%s: lab backward", label);
    float cn = lab_policy_step(&cp), dn = lab_policy_step(&dp);
    CHECK(fabsf(dn - cn) <= 1e-3f * cn && copt.step == step + 1 &&
              dopt.step == step + 1,
          "%s: lab AdamW step %d: norm %g / %g, steps %lld / %lld", label, step,
          dn, cn, (long long)dopt.step, (long long)copt.step);
  }
  const float *cl, *dl;
  float cr = lab_policy_forward(&cp, 1, x, y, B, T, &cl);
  float dr = lab_policy_forward(&dp, 1, x, y, B, T, &dl);
  CHECK(fabsf(dr - cr) <= 1e-4f * cr && pt_rel_err(dl, cl, B * T, NULL) <= 1e-4,
        "%s: the reference's forward: %.7g / %.7g", label, dr, cr);
  pl_generation cg, dg;
  const pl_sampling s = {0.9f, 0.95f, 0.0f};
  int32_t prompt[3] = {1, 2, 3};
  row_log clog = {{0}, 0}, dlog = {{0}, 0};
  int crc = lab_policy_generate(&cp, prompt, 3, 3, 6, -1, &s, 11, &cg, log_row,
                                &clog, why, sizeof why);
  int drc = lab_policy_generate(&dp, prompt, 3, 3, 6, -1, &s, 11, &dg, log_row,
                                &dlog, why, sizeof why);
  CHECK(crc == PL_OK && drc == PL_OK, "%s: lab generate: %s", label, why);
  if (!crc && !drc) {
    char what[96];
    snprintf(what, sizeof what, "%s: lab generate", label);
    compare_generation(&cg, &dg, &clog, &dlog, what);
    pl_generation_free(&cg);
    pl_generation_free(&dg);
  }
  /* sync: the backend's state lands in the CPU structs */
  float *before = malloc(dm.num_params * sizeof(float));
  memcpy(before, dm.params_memory, dm.num_params * sizeof(float));
  CHECK(lab_policy_sync(&dp, why, sizeof why) == PL_OK, "%s: sync: %s", label,
        why);
  CHECK(memcmp(before, dm.params_memory, dm.num_params * sizeof(float)) &&
            pt_rel_err(dm.params_memory, cm.params_memory, dm.num_params,
                       NULL) <= 1e-3 &&
            pt_rel_err(dopt.v, copt.v, dopt.n, NULL) <= 1e-3 && dopt.step == 3,
        "%s: after sync, the parameters and AdamW state are the backend's",
        label);
  free(before);
  lab_policy_close(&cp);
  lab_policy_close(&dp);
  pl_adamw_free(&copt);
  pl_adamw_free(&dopt);
  pl_model_free(&cm);
  pl_model_free(&dm);
  pl_model_free(&ref);
}

/* --policy-dtype in the lab's facade: what each (dtype, device mode,
 * device, --policy-matmul) gives, and a bf16 lab_policy on the backend
 * that trains, samples and says it is bf16. */
static void check_lab_dtype(int on_device, const char *label) {
  char why[256];
  CHECK(lab_policy_dtype_parse("fp32") == PCUDA_DTYPE_FP32 &&
            lab_policy_dtype_parse("bf16") == PCUDA_DTYPE_BF16 &&
            lab_policy_dtype_parse("fp16") < 0 &&
            lab_policy_dtype_parse(NULL) < 0,
        "%s: lab_policy_dtype_parse", label);
  int got = -1;
  CHECK(lab_policy_dtype_resolve(PCUDA_DTYPE_FP32, LAB_POLICY_CPU, NULL, 0,
                                 "test", &got, why,
                                 sizeof why) == LAB_EXIT_OK &&
            got == PCUDA_DTYPE_FP32,
        "%s: fp32 on the CPU", label);
  int rc = lab_policy_dtype_resolve(PCUDA_DTYPE_BF16, LAB_POLICY_CPU, NULL, 0,
                                    "test", &got, why, sizeof why);
  CHECK(rc == LAB_EXIT_USAGE && strstr(why, "needs the policy on a device"),
        "%s: bf16 with --policy-device cpu: rc %d '%s'", label, rc, why);
  rc = lab_policy_dtype_resolve(PCUDA_DTYPE_BF16, LAB_POLICY_AUTO, NULL, 0,
                                "test", &got, why, sizeof why);
  CHECK(rc == LAB_EXIT_OK && got == PCUDA_DTYPE_FP32,
        "%s: bf16 with auto and no device falls back to fp32: rc %d", label,
        rc);
  lab_policy none;
  pl_model m;
  pl_model_init(&m, &gen_cfg, 5, why, sizeof why);
  rc = lab_policy_init(&none, NULL, PCUDA_DTYPE_BF16, &m, NULL, NULL, why,
                       sizeof why);
  CHECK(rc == LAB_EXIT_USAGE && strstr(why, "bf16"),
        "%s: a bf16 lab_policy without a device: rc %d '%s'", label, rc, why);
  pcuda_ctx *ctx = NULL;
  rc = on_device ? pcuda_device_open(&ctx, PCUDA_GEMM_AUTO, why, sizeof why)
                 : pcuda_emu_open(&ctx, 0, why, sizeof why);
  CHECK(rc == PL_OK, "%s: open: %s", label, why);
  if (rc) {
    pl_model_free(&m);
    return;
  }
  rc = lab_policy_dtype_resolve(PCUDA_DTYPE_BF16, LAB_POLICY_GPU, ctx, 1,
                                "test", &got, why, sizeof why);
  CHECK(rc == LAB_EXIT_USAGE && strstr(why, "--policy-matmul"),
        "%s: bf16 with --policy-matmul: rc %d '%s'", label, rc, why);
  rc = lab_policy_dtype_resolve(PCUDA_DTYPE_BF16, LAB_POLICY_GPU, ctx, 0,
                                "test", &got, why, sizeof why);
  CHECK(rc == LAB_EXIT_OK && got == PCUDA_DTYPE_BF16,
        "%s: bf16 on the backend: rc %d", label, rc);
  pl_model ref;
  pl_model_init(&ref, &gen_cfg, 6, why, sizeof why);
  pl_adamw opt;
  pl_adamw_config ac = pl_adamw_defaults();
  pl_adamw_init(&opt, &m, &ac, why, sizeof why);
  lab_policy p;
  rc = lab_policy_init(&p, ctx, PCUDA_DTYPE_BF16, &m, &opt, &ref, why,
                       sizeof why);
  CHECK(rc == LAB_EXIT_OK && p.dm.dtype == PCUDA_DTYPE_BF16 &&
            p.dref.dtype == PCUDA_DTYPE_BF16 &&
            strstr(lab_policy_describe(&p), "bf16 GEMMs"),
        "%s: bf16 lab_policy: rc %d '%s' (%s)", label, rc, why,
        lab_policy_describe(&p));
  if (rc == LAB_EXIT_OK) {
    enum { B = 2, T = 9 };
    int32_t x[B * T], y[B * T];
    for (int i = 0; i < B * T; i++) {
      x[i] = (int32_t)(rnd01() * gen_cfg.vocab);
      y[i] = (int32_t)(rnd01() * gen_cfg.vocab);
    }
    const float *dl;
    float cpu = pl_model_forward(&m, x, y, B, T);
    float bf = lab_policy_forward(&p, 0, x, y, B, T, &dl);
    CHECK(fabsf(bf - cpu) <= 2e-3f * cpu && bf != cpu,
          "%s: bf16 lab forward: loss %.7g, fp32 CPU %.7g", label, bf, cpu);
    lab_policy_zero_grad(&p);
    CHECK(lab_policy_backward(&p, NULL) == PL_OK, "%s: bf16 backward", label);
    float norm = lab_policy_step(&p);
    CHECK(isfinite(norm) && norm > 0 && opt.step == 1,
          "%s: bf16 AdamW step: norm %g", label, norm);
    pl_generation g;
    const pl_sampling s = {1.0f, 1.0f, 0.0f};
    int32_t prompt[3] = {1, 2, 3};
    rc = lab_policy_generate(&p, prompt, 3, 2, 5, -1, &s, 3, &g, NULL, NULL,
                             why, sizeof why);
    CHECK(rc == PL_OK && g.lengths[0] == 5 && g.lengths[1] == 5,
          "%s: bf16 lab generate: %s", label, why);
    if (rc == PL_OK) pl_generation_free(&g);
    CHECK(lab_policy_sync(&p, why, sizeof why) == PL_OK, "%s: bf16 sync: %s",
          label, why);
  }
  lab_policy_close(&p); /* closes ctx */
  pl_adamw_free(&opt);
  pl_model_free(&ref);
  pl_model_free(&m);
}

static void run_all(pcuda_ctx *ctx, const char *label) {
  printf("test_policy_cuda_gen: backend %s\n", pcuda_describe(ctx));
  check_sampler(ctx, label);
  pl_model m;
  pcuda_model dm;
  if (make_model(&m, &dm, ctx, label)) return;
  check_cached_forward(ctx, &m, &dm, label);
  check_cached_long(ctx, label);
  check_generation(&dm, &m, label);
  char why[256];
  CHECK(pcuda_status(ctx, why, sizeof why) == PL_OK, "%s: backend: %s", label,
        why);
  pcuda_model_free(&dm);
  pl_model_free(&m);
}

static void report(void) {
  printf("test_policy_cuda_gen: worst error / tolerance: sampler log-probs "
         "%.3f, cached logits %.3f, generation log-probs %.3f; %d generated "
         "tokens compared\n",
         worst_sample, worst_logits, worst_gen, gen_tokens_compared);
}

int main(int argc, char **argv) {
  char why[256];
  pcuda_ctx *ctx = NULL;
  if (argc > 1 && !strcmp(argv[1], "--device")) {
    if (pcuda_device_open(&ctx, PCUDA_GEMM_AUTO, why, sizeof why) != PL_OK) {
      printf("SKIP: no device for the policy's CUDA runtime: %s\n", why);
      return 77;
    }
    run_all(ctx, "device");
    pcuda_close(ctx);
    check_lab_policy(1, "device");
    check_lab_dtype(1, "device");
    report();
    return kl_test_done("test_policy_cuda_gen --device");
  }
  if (argc > 1) {
    fprintf(stderr, "usage: %s [--device]\n", argv[0]);
    return 2;
  }
  int rc = pcuda_emu_open(&ctx, 0, why, sizeof why);
  CHECK(rc == PL_OK, "pcuda_emu_open: %s", why);
  if (rc != PL_OK) return kl_test_done("test_policy_cuda_gen");
  run_all(ctx, "cpu-emu");
  /* again with every block's threads resumed last first: a missing
   * barrier shows in one order or the other */
  CHECK(pcuda_emu_set_reverse(ctx, 1) == PL_OK, "pcuda_emu_set_reverse");
  run_all(ctx, "cpu-emu-reverse");
  pcuda_close(ctx);
  check_lab_policy(0, "cpu-emu");
  check_lab_dtype(0, "cpu-emu");
  report();
  return kl_test_done("test_policy_cuda_gen");
}
