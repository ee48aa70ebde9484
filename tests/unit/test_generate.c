/*
 * tests/unit/test_generate.c — policy/generate.c against the full forward
 * (policy/model.c) on a tiny random model whose weights are scaled so the
 * logits are O(1) (init's 0.02 would make an absolute tolerance
 * meaningless): the KV-cache logits at every position for three different
 * continuations of a shared prompt (1e-4 abs), reproducibility by seed,
 * greedy = argmax of the full forward, the returned log-probs = log_softmax
 * of the full forward at the sampled tokens, eos / max_new / max_seq stops,
 * and bad input. Last, the sampling speed of the bench model (d 256, 4
 * layers, vocab 2048, G 8, 256 new tokens), printed, not asserted.
 */
#include "policy/policy.h"
#include "kltest.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static char why[512];

static const pl_config tiny = {.vocab = 64,
                               .d_model = 32,
                               .n_layers = 2,
                               .n_heads = 4,
                               .d_ff = 96,
                               .max_seq = 40};

static uint64_t lcg = 12345;
static float uniform(float a) { /* in [-a, a] */
  lcg = lcg * 6364136223846793005ull + 1442695040888963407ull;
  return a * (2.0f * (float)((lcg >> 40) * (1.0 / 16777216.0)) - 1.0f);
}

/* A tiny model with O(1) logits: wte ~ U(-1,1), matrices U(+-sqrt(3/in)),
 * norm weights U(0.5,1.5). */
static void tiny_model(pl_model *m) {
  int rc = pl_model_init(m, &tiny, 7, why, sizeof why);
  CHECK(rc == PL_OK, "init: %s", why);
  int C = tiny.d_model, F = tiny.d_ff;
  float *t[PL_NUM_PARAM_TENSORS] = {m->params.wte,     m->params.rms_att,
                                    m->params.wqkv,    m->params.wo,
                                    m->params.rms_ffn, m->params.w13,
                                    m->params.w2,      m->params.rms_final};
  float scale[PL_NUM_PARAM_TENSORS] = {1.0f,
                                       0.5f,
                                       sqrtf(3.0f / C),
                                       sqrtf(3.0f / C),
                                       0.5f,
                                       sqrtf(3.0f / C),
                                       sqrtf(3.0f / F),
                                       0.5f};
  for (int i = 0; i < PL_NUM_PARAM_TENSORS; i++) {
    int norm = i == 1 || i == 4 || i == 7;
    for (size_t j = 0; j < m->param_sizes[i]; j++)
      t[i][j] = (norm ? 1.0f : 0.0f) + uniform(scale[i]);
  }
}

static void random_tokens(int32_t *out, int n, int V) {
  for (int i = 0; i < n; i++) {
    lcg = lcg * 6364136223846793005ull + 1442695040888963407ull;
    out[i] = (int32_t)((lcg >> 33) % (uint64_t)V);
  }
}

/* (1) prefill a shared prompt into row 0, copy it to rows 1 and 2, then
 * decode three different continuations one token at a time (all rows in one
 * batch, and also a batch of rows {2, 0} to exercise rows[]); every
 * position's logits against pl_model_forward on the whole sequence. */
static void test_cache_matches_full(pl_model *m) {
  enum { P = 7, N = 20, G = 3 };
  int V = tiny.vocab, T = P + N;
  int32_t seq[G][P + N];
  random_tokens(seq[0], T, V);
  for (int g = 1; g < G; g++) {
    memcpy(seq[g], seq[0], P * sizeof(int32_t));
    random_tokens(seq[g] + P, N, V);
  }
  /* the full forward, all three rows at once */
  float full = pl_model_forward(m, &seq[0][0], NULL, G, T);
  CHECK(full == -1.0f, "full forward failed");
  float *ref = malloc(sizeof(float) * G * T * V);
  memcpy(ref, m->acts.logits, sizeof(float) * G * T * V);

  pl_kv_cache kv;
  int rc = pl_kv_cache_init(&kv, &tiny, G, T, why, sizeof why);
  CHECK(rc == PL_OK, "cache init: %s", why);
  float *lg = malloc(sizeof(float) * T * V);
  double worst = 0.0;
  rc = pl_forward_cached(m, &kv, seq[0], NULL, 1, P, 0, lg, why, sizeof why);
  CHECK(rc == PL_OK, "prefill: %s", why);
  for (int t = 0; t < P; t++)
    for (int v = 0; v < V; v++)
      for (int g = 0; g < G; g++) {
        double d = fabs(lg[t * V + v] - ref[((size_t)g * T + t) * V + v]);
        worst = d > worst ? d : worst;
      }
  for (int g = 1; g < G; g++)
    CHECK(pl_kv_cache_copy_prefix(&kv, 0, g, P) == PL_OK, "copy row %d", g);
  for (int t = P; t < T; t++) {
    int32_t tok[G];
    int rows[G] = {0, 1, 2};
    int B = G;
    if (t % 2) { /* odd steps: rows 0 and 2 as a batch of {2, 0}, then 1 */
      rows[0] = 2, rows[1] = 0, B = 2;
    }
    for (int b = 0; b < B; b++)
      tok[b] = seq[rows[b]][t];
    rc = pl_forward_cached(m, &kv, tok, rows, B, 1, t, lg, why, sizeof why);
    CHECK(rc == PL_OK, "decode t=%d: %s", t, why);
    if (B == 2) {
      int one = 1;
      rc = pl_forward_cached(m, &kv, &seq[1][t], &one, 1, 1, t, lg + 2 * V, why,
                             sizeof why);
      CHECK(rc == PL_OK, "decode row 1 t=%d: %s", t, why);
      rows[2] = 1;
    }
    for (int b = 0; b < G; b++)
      for (int v = 0; v < V; v++) {
        double d = fabs(lg[b * V + v] - ref[((size_t)rows[b] * T + t) * V + v]);
        worst = d > worst ? d : worst;
      }
  }
  double mag = 0.0;
  for (size_t i = 0; i < (size_t)G * T * V; i++)
    mag = fabs(ref[i]) > mag ? fabs(ref[i]) : mag;
  printf("cached vs full logits: max |diff| %.3g over %d positions x %d rows "
         "(max |logit| %.2f)\n",
         worst, T, G, mag);
  CHECK(worst < 1e-4, "cached logits differ from the full forward by %g",
        worst);
  CHECK(mag > 1.0, "logits too small (%g) for the tolerance to mean much", mag);
  free(lg);
  free(ref);
  pl_kv_cache_free(&kv);
}

/* Runs pl_generate and checks it succeeded. */
static pl_generation gen(pl_model *m, const int32_t *prompt, int P, int G,
                         int max_new, int eos, pl_sampling s, uint64_t seed) {
  pl_generation out;
  int rc = pl_generate(m, prompt, P, G, max_new, eos, &s, seed, &out, why,
                       sizeof why);
  CHECK(rc == PL_OK, "generate: %s", why);
  return out;
}

/* The full forward of prompt + row g's completion; logits in m->acts. */
static int full_forward(pl_model *m, const int32_t *prompt, int P,
                        const pl_generation *o, int g, int32_t *buf) {
  int n = o->lengths[g];
  memcpy(buf, prompt, P * sizeof(int32_t));
  memcpy(buf + P, o->tokens + (size_t)g * o->max_new, n * sizeof(int32_t));
  pl_model_forward(m, buf, NULL, 1, P + n);
  return n;
}

/* (2) same seed, same everything; another seed, other tokens; and a row's
 * tokens do not depend on how many rows run beside it. */
static void test_reproducible(pl_model *m) {
  int32_t prompt[5];
  random_tokens(prompt, 5, tiny.vocab);
  pl_sampling s = pl_sampling_default();
  pl_generation a = gen(m, prompt, 5, 4, 20, -1, s, 99);
  pl_generation b = gen(m, prompt, 5, 4, 20, -1, s, 99);
  pl_generation c = gen(m, prompt, 5, 4, 20, -1, s, 100);
  pl_generation d = gen(m, prompt, 5, 2, 20, -1, s, 99);
  size_t cells = 4 * 20;
  CHECK(!memcmp(a.tokens, b.tokens, cells * sizeof(int32_t)),
        "same seed, other tokens");
  CHECK(!memcmp(a.logprobs, b.logprobs, cells * sizeof(float)),
        "same seed, other logprobs");
  CHECK(memcmp(a.tokens, c.tokens, cells * sizeof(int32_t)),
        "seeds 99 and 100 gave the same tokens");
  CHECK(!memcmp(a.tokens, d.tokens, 2 * 20 * sizeof(int32_t)),
        "rows 0-1 change with G (4 vs 2)");
  int same_rows = 0;
  for (int g = 1; g < 4; g++)
    same_rows += !memcmp(a.tokens, a.tokens + g * 20, 20 * sizeof(int32_t));
  CHECK(same_rows == 0, "%d rows equal row 0: streams not independent",
        same_rows);
  pl_generation_free(&a);
  pl_generation_free(&b);
  pl_generation_free(&c);
  pl_generation_free(&d);
}

/* (3) greedy = argmax of the full forward at every step; (4) log-probs =
 * log_softmax(full logits / T) at the sampled tokens, for greedy, T = 1
 * and a truncated T = 0.7, top-p 0.9, min-p 0.05. */
static void test_against_full(pl_model *m) {
  int V = tiny.vocab, P = 6;
  int32_t prompt[6], buf[64];
  random_tokens(prompt, P, V);
  pl_sampling settings[3] = {
      {0.0f, 1.0f, 0.0f}, {1.0f, 1.0f, 0.0f}, {0.7f, 0.9f, 0.05f}};
  double worst = 0.0;
  for (int k = 0; k < 3; k++) {
    pl_generation o = gen(m, prompt, P, 3, 25, -1, settings[k], 5 + k);
    for (int g = 0; g < 3; g++) {
      int n = full_forward(m, prompt, P, &o, g, buf);
      CHECK(n == 25, "length %d", n);
      for (int i = 0; i < n; i++) {
        const float *row = m->acts.logits + (size_t)(P - 1 + i) * V;
        int tok = o.tokens[g * 25 + i];
        if (k == 0) {
          int best = 0;
          for (int v = 1; v < V; v++)
            best = row[v] > row[best] ? v : best;
          CHECK(tok == best, "greedy row %d step %d: %d, argmax %d", g, i, tok,
                best);
        }
        float lp = 0.0f;
        pl_token_logprob(row, V, settings[k].temperature, tok, &lp, why,
                         sizeof why);
        double d = fabs(lp - o.logprobs[g * 25 + i]);
        worst = d > worst ? d : worst;
      }
    }
    if (k == 0)
      CHECK(!memcmp(o.tokens, o.tokens + 25, 25 * sizeof(int32_t)),
            "greedy rows differ");
    pl_generation_free(&o);
  }
  printf("generated logprobs vs full forward: max |diff| %.3g\n", worst);
  CHECK(worst < 1e-4, "logprobs differ from the full forward by %g", worst);
}

/* (5) eos stops a row (kept as its last token), max_new truncates and flags
 * it, and max_seq caps prompt + completion. */
static void test_stops(pl_model *m) {
  int V = tiny.vocab, P = 4;
  int32_t prompt[4];
  random_tokens(prompt, P, V);
  pl_sampling s = pl_sampling_default();
  pl_generation free_run = gen(m, prompt, P, 4, 12, -1, s, 3);
  for (int g = 0; g < 4; g++) {
    CHECK(free_run.lengths[g] == 12 && free_run.truncated[g] &&
              free_run.stop[g] == PL_STOP_MAX_NEW,
          "row %d: length %d truncated %d stop %d", g, free_run.lengths[g],
          free_run.truncated[g], free_run.stop[g]);
    CHECK(free_run.tokens[g * 12 + 11] >= 0, "row %d last token", g);
  }
  /* eos = row 0's token at step 3: row 0 stops there; every row stops at
   * its first eos or runs to max_new, and the tokens before agree with the
   * free run (same streams) */
  int eos = free_run.tokens[3];
  pl_generation o = gen(m, prompt, P, 4, 12, eos, s, 3);
  for (int g = 0; g < 4; g++) {
    int first = -1;
    for (int i = 0; i < 12 && first < 0; i++)
      if (free_run.tokens[g * 12 + i] == eos) first = i;
    int want = first < 0 ? 12 : first + 1;
    CHECK(o.lengths[g] == want, "row %d: length %d, expected %d", g,
          o.lengths[g], want);
    CHECK(o.truncated[g] == (first < 0), "row %d: truncated %d", g,
          o.truncated[g]);
    CHECK(o.stop[g] == (first < 0 ? PL_STOP_MAX_NEW : PL_STOP_EOS),
          "row %d: stop %d", g, o.stop[g]);
    CHECK(!memcmp(o.tokens + g * 12, free_run.tokens + g * 12,
                  want * sizeof(int32_t)),
          "row %d tokens before eos differ", g);
    if (want < 12)
      CHECK(o.tokens[g * 12 + want] == -1 && o.logprobs[g * 12 + want] == 0,
            "row %d: past the length not cleared", g);
  }
  CHECK(o.lengths[0] <= 4 && o.stop[0] == PL_STOP_EOS, "row 0 stop %d at %d",
        o.stop[0], o.lengths[0]);
  pl_generation_free(&o);
  pl_generation_free(&free_run);

  /* max_seq 40: a 30-token prompt leaves 10 */
  int32_t long_prompt[30];
  random_tokens(long_prompt, 30, V);
  o = gen(m, long_prompt, 30, 2, 50, -1, s, 4);
  for (int g = 0; g < 2; g++)
    CHECK(o.lengths[g] == 10 && o.truncated[g] && o.stop[g] == PL_STOP_MAX_SEQ,
          "row %d: length %d stop %d", g, o.lengths[g], o.stop[g]);
  /* rows hold the room max_seq leaves, not the 50 asked for */
  CHECK(o.max_new == 10 && o.max_new_asked == 50, "stride %d, asked %d",
        o.max_new, o.max_new_asked);
  pl_generation_free(&o);
  /* asked for exactly the room: that is max-tokens, as before */
  o = gen(m, long_prompt, 30, 2, 10, -1, s, 4);
  CHECK(o.lengths[0] == 10 && o.stop[0] == PL_STOP_MAX_NEW,
        "exactly the room: length %d stop %d", o.lengths[0], o.stop[0]);
  pl_generation_free(&o);
  /* a 39-token prompt leaves exactly one */
  int32_t p39[39];
  random_tokens(p39, 39, V);
  o = gen(m, p39, 39, 2, 5, -1, s, 4);
  CHECK(o.lengths[0] == 1 && o.stop[0] == PL_STOP_MAX_SEQ, "39: %d %d",
        o.lengths[0], o.stop[0]);
  pl_generation_free(&o);
}

/* Expects pl_generate to fail with PL_EINPUT and a message containing
 * what. */
static void expect_bad(pl_model *m, const int32_t *prompt, int P, int G,
                       int max_new, int eos, pl_sampling s, const char *what) {
  pl_generation o;
  why[0] = 0;
  int rc =
      pl_generate(m, prompt, P, G, max_new, eos, &s, 1, &o, why, sizeof why);
  CHECK(rc == PL_EINPUT, "%s: rc %d", what, rc);
  CHECK(strstr(why, what) != NULL, "message '%s' lacks '%s'", why, what);
  CHECK(o.memory == NULL, "%s: output left allocated", what);
}

/* (6) bad inputs */
static void test_bad_input(pl_model *m) {
  int32_t prompt[41] = {0};
  pl_sampling s = pl_sampling_default();
  expect_bad(m, prompt, 41, 2, 5, -1, s, "max_seq 40");
  expect_bad(m, prompt, 40, 2, 5, -1, s, "leaves no room");
  expect_bad(m, prompt, 4, 0, 5, -1, s, "G = 0");
  expect_bad(m, prompt, 4, -3, 5, -1, s, "G = -3");
  expect_bad(m, prompt, 4, 2, 0, -1, s, "max_new = 0");
  expect_bad(m, prompt, 0, 2, 5, -1, s, "prompt of 0 tokens");
  expect_bad(m, prompt, 4, 2, 5, 64, s, "eos_id = 64");
  expect_bad(m, NULL, 4, 2, 5, -1, s, "prompt");
  prompt[2] = 64;
  expect_bad(m, prompt, 4, 2, 5, -1, s, "prompt token 64 at 2");
  prompt[2] = 0;
  pl_sampling bad = {-1.0f, 1.0f, 0.0f};
  expect_bad(m, prompt, 4, 2, 5, -1, bad, "temperature");

  pl_kv_cache kv;
  CHECK(pl_kv_cache_init(&kv, &tiny, 0, 10, why, sizeof why) == PL_EINPUT &&
            strstr(why, "G = 0"),
        "cache G 0: %s", why);
  CHECK(pl_kv_cache_init(&kv, &tiny, 2, 41, why, sizeof why) == PL_EINPUT &&
            strstr(why, "max_seq = 41"),
        "cache max_seq 41: %s", why);
  CHECK(pl_kv_cache_init(&kv, &tiny, 2, 10, why, sizeof why) == PL_OK, "%s",
        why);
  float lg[64 * 11];
  int32_t tok[11] = {0};
  int row = 2;
  CHECK(pl_forward_cached(m, &kv, tok, NULL, 1, 11, 0, lg, why, sizeof why) ==
            PL_EINPUT,
        "11 tokens into 10 positions");
  CHECK(pl_forward_cached(m, &kv, tok, &row, 1, 1, 0, lg, why, sizeof why) ==
                PL_EINPUT &&
            strstr(why, "rows[0] = 2"),
        "row 2 of 2: %s", why);
  int same[2] = {1, 1};
  CHECK(pl_forward_cached(m, &kv, tok, same, 2, 1, 0, lg, why, sizeof why) ==
                PL_EINPUT &&
            strstr(why, "rows[0] and rows[1] are both 1"),
        "two batch rows into cache row 1: %s", why);
  CHECK(pl_kv_cache_copy_prefix(&kv, 0, 2, 3) == PL_EINPUT, "copy to row 2");
  pl_kv_cache_free(&kv);

  /* a model whose logits are not finite (as a final norm weight that
   * overflowed leaves them): refused naming the model, not the sampler's
   * input */
  float keep = m->params.rms_final[0];
  m->params.rms_final[0] = NAN;
  expect_bad(m, prompt, 4, 2, 5, -1, s, "the model's logit");
  m->params.rms_final[0] = keep;
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Sampling speed of the bench model: G=8 rows, 256 new tokens after a
 * 64-token prompt, no end token. Printed; tests/bench/bench_policy.c has
 * the same line. Skipped when KL_TEST_QUICK is set. */
static void time_bench_model(void) {
  if (getenv("KL_TEST_QUICK")) return;
  pl_config cfg = {.vocab = 2048,
                   .d_model = 256,
                   .n_layers = 4,
                   .n_heads = 4,
                   .d_ff = pl_default_ff(256),
                   .max_seq = 512};
  pl_model m;
  if (pl_model_init(&m, &cfg, 1, why, sizeof why) != PL_OK) return;
  pl_set_num_threads(2);
  int32_t prompt[64];
  random_tokens(prompt, 64, cfg.vocab);
  pl_sampling s = pl_sampling_default();
  double t0 = now_s();
  pl_generation o = gen(&m, prompt, 64, 8, 256, -1, s, 1);
  double dt = now_s() - t0;
  long n = 0;
  for (int g = 0; g < 8; g++)
    n += o.lengths[g];
  printf("sampling: %ld tokens (G 8 x 256 after a 64-token prompt, d 256, 4 "
         "layers, vocab 2048, 2 threads) in %.2f s: %.0f tokens/s\n",
         n, dt, n / dt);
  pl_generation_free(&o);
  pl_model_free(&m);
}

/* (4b) pl_generate_notify: every row is reported once, when it stops, with
 * its final length, in the order the rows stopped; the tokens are those of
 * pl_generate. */
typedef struct seen {
  int n, rows[8], len_at[8], order_len[8];
} seen;
static void on_row(void *ctx, const pl_generation *o, int row) {
  seen *s = ctx;
  if (s->n < 8) {
    s->rows[s->n] = row;
    s->order_len[s->n] = o->lengths[row];
  }
  s->n++;
  if (row >= 0 && row < 8) s->len_at[row] = o->lengths[row];
}

static void test_notify(pl_model *m) {
  int V = tiny.vocab, P = 4, G = 6;
  int32_t prompt[4];
  random_tokens(prompt, P, V);
  pl_sampling s = pl_sampling_default();
  pl_generation free_run = gen(m, prompt, P, G, 16, -1, s, 5);
  int eos = free_run.tokens[2]; /* row 0 stops early */
  pl_generation a = gen(m, prompt, P, G, 16, eos, s, 5);
  seen sn;
  memset(&sn, 0, sizeof sn);
  pl_generation b;
  int rc = pl_generate_notify(m, prompt, P, G, 16, eos, &s, 5, &b, on_row, &sn,
                              why, sizeof why);
  CHECK(rc == PL_OK, "generate_notify: %s", why);
  CHECK(sn.n == G, "%d notifications for %d rows", sn.n, G);
  int mask = 0;
  for (int i = 0; i < sn.n && i < 8; i++) {
    mask |= 1 << sn.rows[i];
    if (i)
      CHECK(sn.order_len[i] >= sn.order_len[i - 1],
            "row %d (length %d) reported after row %d (length %d)", sn.rows[i],
            sn.order_len[i], sn.rows[i - 1], sn.order_len[i - 1]);
  }
  CHECK(mask == (1 << G) - 1, "rows reported: mask %#x", mask);
  for (int g = 0; g < G; g++)
    CHECK(sn.len_at[g] == b.lengths[g] && b.lengths[g] == a.lengths[g],
          "row %d: length %d when reported, %d at the end, %d without notify",
          g, sn.len_at[g], b.lengths[g], a.lengths[g]);
  CHECK(!memcmp(a.tokens, b.tokens, (size_t)G * 16 * sizeof(int32_t)),
        "notify changed the tokens");
  CHECK(sn.order_len[0] < 16, "row 0 should stop early at the eos");
  pl_generation_free(&free_run);
  pl_generation_free(&a);
  pl_generation_free(&b);
}

int main(void) {
  pl_model m;
  tiny_model(&m);
  test_cache_matches_full(&m);
  test_reproducible(&m);
  test_against_full(&m);
  test_stops(&m);
  test_notify(&m);
  test_bad_input(&m);
  pl_model_free(&m);
  time_bench_model();
  return kl_test_done("test_generate");
}
