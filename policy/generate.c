/*
 * policy/generate.c — sampling-time inference: the model's forward with a
 * KV cache, and batched generation of G completions of one prompt, each
 * drawn with its own RNG stream (what GRPO's rollouts need: tokens, the
 * per-token log-probs pl_sample reports, lengths, and whether a row ran out
 * of room before its end token).
 *
 * The per-token math mirrors policy/model.c operation by operation
 * (RMSNorm, the (N,IC)·(OC,IC)^T matmuls through pl_linear_gemm, interleaved
 * RoPE from the model's tables, causal softmax in float with the maximum
 * subtracted, SwiGLU, the tied head), so the cached logits equal the full
 * forward's up to float summation order; tests/unit/test_generate.c holds
 * them to 1e-4. Only the attention differs in shape: a query at position p
 * reads keys and values 0..p from the cache (cblas_sgemv) instead of a
 * (T,T) score matrix.
 *
 * It does not: keep activations for a backward (the trainer re-runs
 * pl_model_forward on prompt + completion), batch different prompts, or
 * run rows at different positions in one call (every row of a decode step
 * sits at the same position, since the prompt is shared).
 */
#include "policy/policy.h"

#include <cblas.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define RMS_EPS 1e-5f /* as policy/model.c */

int pl_fail(char *why, size_t whylen, int rc, const char *fmt, ...) {
  if (why && whylen) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, whylen, fmt, ap);
    va_end(ap);
  }
  return rc;
}

/* ------------------------------------------------------------------------ */
/* the checks and bookkeeping pcuda_generate.c shares (policy.h) */

int pl_kv_cache_check(const pl_config *cfg, int G, int max_seq, char *why,
                      size_t whylen) {
  if (G < 1)
    return pl_fail(why, whylen, PL_EINPUT, "kv cache: G = %d, expected >= 1",
                   G);
  if (max_seq < 1 || max_seq > cfg->max_seq)
    return pl_fail(
        why, whylen, PL_EINPUT,
        "kv cache: max_seq = %d, expected 1..%d (the model's max_seq)", max_seq,
        cfg->max_seq);
  return PL_OK;
}

int pl_forward_cached_check(const pl_config *cfg, int L, int C, int G,
                            int max_seq, const int32_t *tokens, const int *rows,
                            int B, int T, int pos0, char *why, size_t whylen) {
  if (L != cfg->n_layers || C != cfg->d_model)
    return pl_fail(why, whylen, PL_EINPUT,
                   "forward_cached: cache is for L %d, C %d; model has L %d, "
                   "C %d",
                   L, C, cfg->n_layers, cfg->d_model);
  if (B < 1 || B > G || T < 1 || pos0 < 0 || pos0 + T > max_seq)
    return pl_fail(why, whylen, PL_EINPUT,
                   "forward_cached: B %d, T %d at position %d out of range "
                   "(cache: G %d rows, max_seq %d)",
                   B, T, pos0, G, max_seq);
  for (int b = 0; b < B; b++) {
    int r = rows ? rows[b] : b;
    if (r < 0 || r >= G)
      return pl_fail(why, whylen, PL_EINPUT,
                     "forward_cached: rows[%d] = %d outside the cache's [0,%d)",
                     b, r, G);
    /* Two batch rows into one cache row would write the same keys twice:
     * the CPU keeps the last, a device whichever block ran last. */
    for (int a = 0; rows && a < b; a++)
      if (rows[a] == r)
        return pl_fail(why, whylen, PL_EINPUT,
                       "forward_cached: rows[%d] and rows[%d] are both %d; "
                       "expected distinct cache rows",
                       a, b, r);
  }
  size_t N = (size_t)B * T;
  for (size_t n = 0; n < N; n++)
    if (tokens[n] < 0 || tokens[n] >= cfg->vocab)
      return pl_fail(why, whylen, PL_EINPUT,
                     "forward_cached: token %d at %zu outside [0,%d)",
                     tokens[n], n, cfg->vocab);
  return PL_OK;
}

int pl_generate_check(const pl_config *c, const int32_t *prompt, int P, int G,
                      int max_new, int eos_id, const pl_sampling *sampling,
                      char *why, size_t whylen) {
  int V = c->vocab;
  if (G < 1)
    return pl_fail(why, whylen, PL_EINPUT,
                   "generate: G = %d sequences, expected >= 1", G);
  if (max_new < 1)
    return pl_fail(why, whylen, PL_EINPUT,
                   "generate: max_new = %d tokens, expected >= 1", max_new);
  if (!prompt || P < 1)
    return pl_fail(why, whylen, PL_EINPUT,
                   "generate: prompt of %d tokens, expected at least 1", P);
  if (P >= c->max_seq)
    return pl_fail(why, whylen, PL_EINPUT,
                   "generate: prompt of %d tokens leaves no room in the "
                   "model's max_seq %d (expected prompt_len < max_seq)",
                   P, c->max_seq);
  for (int i = 0; i < P; i++)
    if (prompt[i] < 0 || prompt[i] >= V)
      return pl_fail(why, whylen, PL_EINPUT,
                     "generate: prompt token %d at %d outside the vocab [0,%d)",
                     prompt[i], i, V);
  if (eos_id < -1 || eos_id >= V)
    return pl_fail(why, whylen, PL_EINPUT,
                   "generate: eos_id = %d, expected -1 (none) or a token in "
                   "[0,%d)",
                   eos_id, V);
  return pl_sampling_validate(sampling, why, whylen);
}

int pl_generation_record(pl_generation *out, int g, int i,
                         const pl_sample_out *so, int eos_id, int cap) {
  size_t cell = (size_t)g * out->max_new + i;
  out->tokens[cell] = so->token;
  out->logprobs[cell] = so->logprob;
  out->logprobs_sample[cell] = so->logprob_sample;
  out->lengths[g] = i + 1;
  if (so->token == eos_id)
    out->stop[g] = PL_STOP_EOS;
  else if (i + 1 == (out->max_new_asked ? out->max_new_asked : out->max_new))
    out->stop[g] = PL_STOP_MAX_NEW;
  else if (i + 1 == cap)
    out->stop[g] = PL_STOP_MAX_SEQ;
  else
    return 0;
  out->truncated[g] = out->stop[g] != PL_STOP_EOS;
  return 1;
}

/* ------------------------------------------------------------------------ */
/* the cache */

int pl_kv_cache_init(pl_kv_cache *kv, const pl_config *cfg, int G, int max_seq,
                     char *why, size_t whylen) {
  memset(kv, 0, sizeof *kv);
  int rc = pl_kv_cache_check(cfg, G, max_seq, why, whylen);
  if (rc) return rc;
  kv->L = cfg->n_layers;
  kv->G = G;
  kv->max_seq = max_seq;
  kv->C = cfg->d_model;
  size_t n = (size_t)kv->L * G * max_seq * kv->C;
  kv->memory = malloc(2 * n * sizeof(float));
  if (!kv->memory)
    return pl_fail(why, whylen, PL_EENV,
                   "kv cache: out of memory for %zu floats (L %d, G %d, "
                   "max_seq %d, C %d)",
                   2 * n, kv->L, G, max_seq, kv->C);
  kv->k = kv->memory;
  kv->v = kv->memory + n;
  return PL_OK;
}

void pl_kv_cache_free(pl_kv_cache *kv) {
  free(kv->memory);
  free(kv->scratch);
  memset(kv, 0, sizeof *kv);
}

/* Where the key of (layer l, row g, position t) starts: (L,G,max_seq,C). */
static size_t kv_offset(const pl_kv_cache *kv, int l, int g, int t) {
  return (((size_t)l * kv->G + g) * kv->max_seq + t) * kv->C;
}

int pl_kv_cache_copy_prefix(pl_kv_cache *kv, int src, int dst, int n_pos) {
  if (src < 0 || src >= kv->G || dst < 0 || dst >= kv->G || n_pos < 0 ||
      n_pos > kv->max_seq)
    return PL_EINPUT;
  if (src == dst || n_pos == 0) return PL_OK;
  size_t bytes = (size_t)n_pos * kv->C * sizeof(float);
  for (int l = 0; l < kv->L; l++) {
    memcpy(kv->k + kv_offset(kv, l, dst, 0), kv->k + kv_offset(kv, l, src, 0),
           bytes);
    memcpy(kv->v + kv_offset(kv, l, dst, 0), kv->v + kv_offset(kv, l, src, 0),
           bytes);
  }
  return PL_OK;
}

/* The forward's scratch for N token rows, one allocation grown on demand:
 * x (N,C) residual, ln (N,C), qkv (N,3C), atty (N,C), tmp (N,C),
 * h13 (N,2F), hmul (N,F), att (max_seq) one query's scores. */
typedef struct {
  float *x, *ln, *qkv, *atty, *tmp, *h13, *hmul, *att;
} fwd_scratch;

static int scratch_for(pl_kv_cache *kv, const pl_config *c, size_t N,
                       fwd_scratch *s) {
  size_t C = c->d_model, F = c->d_ff;
  size_t need = N * (7 * C + 3 * F) + kv->max_seq;
  if (need > kv->scratch_cap) {
    free(kv->scratch);
    kv->scratch = malloc(need * sizeof(float));
    kv->scratch_cap = kv->scratch ? need : 0;
    if (!kv->scratch) return PL_EENV;
  }
  float *p = kv->scratch;
  s->x = p, p += N * C;
  s->ln = p, p += N * C;
  s->qkv = p, p += N * 3 * C;
  s->atty = p, p += N * C;
  s->tmp = p, p += N * C;
  s->h13 = p, p += N * 2 * F;
  s->hmul = p, p += N * F;
  s->att = p;
  return PL_OK;
}

/* ------------------------------------------------------------------------ */
/* per-token layers (model.c's, restated: they are static there) */

/* out = x * rstd * w, rstd = 1/sqrt(mean(x^2) + eps), per row */
static void rmsnorm(float *out /*(N,C)*/, const float *inp /*(N,C)*/,
                    const float *w /*(C)*/, size_t N, int C) {
  for (size_t n = 0; n < N; n++) {
    const float *x = inp + n * C;
    float *o = out + n * C;
    float ss = 0.0f;
    for (int i = 0; i < C; i++)
      ss += x[i] * x[i];
    float r = 1.0f / sqrtf(ss / C + RMS_EPS);
    for (int i = 0; i < C; i++)
      o[i] = x[i] * r * w[i];
  }
}

/* out = inp · w^T (w stored (OC,IC)) */
static void matmul(float *out /*(N,OC)*/, const float *inp /*(N,IC)*/,
                   const float *w /*(OC,IC)*/, size_t N, int IC, int OC) {
  pl_linear_gemm(0, 1, (int)N, OC, IC, 1.0f, inp, IC, w, IC, 0.0f, out, OC);
}

/* Rotates q and k (the first two C-blocks of one qkv row) of every head by
 * position pos: interleaved pairs (2i, 2i+1), angle pos * theta^(-2i/hs). */
static void rope_row(float *row /*(3C)*/, const float *cos_t,
                     const float *sin_t /*(max_seq,hs/2)*/, int pos, int C,
                     int NH) {
  int hs = C / NH, half = hs / 2;
  const float *ct = cos_t + (size_t)pos * half,
              *st = sin_t + (size_t)pos * half;
  for (int part = 0; part < 2; part++) /* q, then k */
    for (int h = 0; h < NH; h++) {
      float *x = row + part * C + h * hs;
      for (int i = 0; i < half; i++) {
        float c = ct[i], s = st[i];
        float x0 = x[2 * i], x1 = x[2 * i + 1];
        x[2 * i] = x0 * c - x1 * s;
        x[2 * i + 1] = x0 * s + x1 * c;
      }
    }
}

/* One query against the cached keys and values 0..pos of one row, every
 * head: y_h = softmax(K_h q_h / sqrt(hs)) V_h. kc, vc point at the row's
 * position 0 in one layer ((max_seq,C), rows of stride C). */
static void attention_query(float *y /*(C)*/, float *att /*(pos+1) scratch*/,
                            const float *q /*(C)*/, const float *kc,
                            const float *vc, int pos, int C, int NH) {
  int hs = C / NH, n = pos + 1;
  float scale = 1.0f / sqrtf((float)hs);
  for (int h = 0; h < NH; h++) {
    cblas_sgemv(CblasRowMajor, CblasNoTrans, n, hs, scale, kc + h * hs, C,
                q + h * hs, 1, 0.0f, att, 1);
    float mx = att[0], sum = 0.0f;
    for (int t = 1; t < n; t++)
      mx = att[t] > mx ? att[t] : mx;
    for (int t = 0; t < n; t++) {
      att[t] = expf(att[t] - mx);
      sum += att[t];
    }
    for (int t = 0; t < n; t++)
      att[t] /= sum;
    cblas_sgemv(CblasRowMajor, CblasTrans, n, hs, 1.0f, vc + h * hs, C, att, 1,
                0.0f, y + h * hs, 1);
  }
}

/* out = silu(gate) * up, gate = h13[n, 0:F], up = h13[n, F:2F] */
static void swiglu(float *out /*(N,F)*/, const float *h13 /*(N,2F)*/, size_t N,
                   int F) {
  for (size_t n = 0; n < N; n++) {
    const float *g = h13 + n * 2 * F, *u = g + F;
    float *o = out + n * F;
    for (int i = 0; i < F; i++)
      o[i] = g[i] / (1.0f + expf(-g[i])) * u[i];
  }
}

/* x += d */
static void residual_add(float *x, const float *d, size_t n) {
  for (size_t i = 0; i < n; i++)
    x[i] = x[i] + d[i];
}

/* ------------------------------------------------------------------------ */
/* the cached forward */

int pl_forward_cached(const pl_model *m, pl_kv_cache *kv, const int32_t *tokens,
                      const int *rows, int B, int T, int pos0, float *logits,
                      char *why, size_t whylen) {
  const pl_config *c = &m->cfg;
  int C = c->d_model, L = c->n_layers, NH = c->n_heads, F = c->d_ff;
  int V = c->vocab;
  int rc = pl_forward_cached_check(c, kv->L, kv->C, kv->G, kv->max_seq, tokens,
                                   rows, B, T, pos0, why, whylen);
  if (rc) return rc;
  size_t N = (size_t)B * T;
  fwd_scratch s;
  if (scratch_for(kv, c, N, &s) != PL_OK)
    return pl_fail(why, whylen, PL_EENV,
                   "forward_cached: out of memory for %zu token rows", N);

  const pl_params *p = &m->params;
  /* token row n = b*T + t is row rows[b]'s token at position pos0 + t */
  for (size_t n = 0; n < N; n++)
    memcpy(s.x + n * C, p->wte + (size_t)tokens[n] * C, C * sizeof(float));
  for (int l = 0; l < L; l++) {
    const float *wqkv = p->wqkv + (size_t)l * 3 * C * C;
    const float *wo = p->wo + (size_t)l * C * C;
    const float *w13 = p->w13 + (size_t)l * 2 * F * C;
    const float *w2 = p->w2 + (size_t)l * C * F;

    rmsnorm(s.ln, s.x, p->rms_att + (size_t)l * C, N, C);
    matmul(s.qkv, s.ln, wqkv, N, C, 3 * C);
    /* RoPE, then k and v into the cache, for all N rows before any query
     * reads them (a prefill's query t reads keys pos0..pos0+t) */
    for (int b = 0; b < B; b++)
      for (int t = 0; t < T; t++) {
        float *row = s.qkv + ((size_t)b * T + t) * 3 * C;
        rope_row(row, m->rope_cos, m->rope_sin, pos0 + t, C, NH);
        size_t off = kv_offset(kv, l, rows ? rows[b] : b, pos0 + t);
        memcpy(kv->k + off, row + C, C * sizeof(float));
        memcpy(kv->v + off, row + 2 * C, C * sizeof(float));
      }
    for (int b = 0; b < B; b++) {
      size_t off0 = kv_offset(kv, l, rows ? rows[b] : b, 0);
      for (int t = 0; t < T; t++) {
        size_t n = (size_t)b * T + t;
        attention_query(s.atty + n * C, s.att, s.qkv + n * 3 * C, kv->k + off0,
                        kv->v + off0, pos0 + t, C, NH);
      }
    }
    matmul(s.tmp, s.atty, wo, N, C, C);
    residual_add(s.x, s.tmp, N * C);
    rmsnorm(s.ln, s.x, p->rms_ffn + (size_t)l * C, N, C);
    matmul(s.h13, s.ln, w13, N, C, 2 * F);
    swiglu(s.hmul, s.h13, N, F);
    matmul(s.tmp, s.hmul, w2, N, F, C);
    residual_add(s.x, s.tmp, N * C);
  }
  rmsnorm(s.ln, s.x, p->rms_final, N, C);
  matmul(logits, s.ln, p->wte, N, C, V); /* tied head */
  return PL_OK;
}

/* ------------------------------------------------------------------------ */
/* batched generation */

void pl_generation_free(pl_generation *g) {
  free(g->memory);
  memset(g, 0, sizeof *g);
}

int pl_generation_alloc(pl_generation *out, int G, int max_new) {
  size_t cells = (size_t)G * max_new;
  size_t bytes = cells * (sizeof(int32_t) + 2 * sizeof(float)) +
                 (size_t)G * (2 * sizeof(int32_t) + sizeof(uint8_t));
  char *mem = calloc(1, bytes);
  if (!mem) return PL_EENV;
  memset(out, 0, sizeof *out);
  out->memory = mem;
  out->G = G;
  out->max_new = max_new;
  out->tokens = (int32_t *)mem;
  out->logprobs = (float *)(out->tokens + cells);
  out->logprobs_sample = out->logprobs + cells;
  out->lengths = (int32_t *)(out->logprobs_sample + cells);
  out->stop = out->lengths + G;
  out->truncated = (uint8_t *)(out->stop + G);
  for (size_t i = 0; i < cells; i++)
    out->tokens[i] = -1;
  return PL_OK;
}

int pl_generate(const pl_model *m, const int32_t *prompt, int prompt_len, int G,
                int max_new, int eos_id, const pl_sampling *sampling,
                uint64_t seed, pl_generation *out, char *why, size_t whylen) {
  return pl_generate_notify(m, prompt, prompt_len, G, max_new, eos_id, sampling,
                            seed, out, NULL, NULL, why, whylen);
}

int pl_generate_notify(const pl_model *m, const int32_t *prompt, int prompt_len,
                       int G, int max_new, int eos_id,
                       const pl_sampling *sampling, uint64_t seed,
                       pl_generation *out, pl_row_done_fn on_row, void *ctx,
                       char *why, size_t whylen) {
  const pl_config *c = &m->cfg;
  int V = c->vocab, P = prompt_len;
  memset(out, 0, sizeof *out);
  int rc = pl_generate_check(c, prompt, P, G, max_new, eos_id, sampling, why,
                             whylen);
  if (rc) return rc;

  /* A row holds at most room tokens: prompt + completion fit in max_seq,
   * so the trainer can run pl_model_forward on the whole sequence. The
   * last token is never fed back, so the cache needs P + cap - 1. */
  int cap = max_new < c->max_seq - P ? max_new : c->max_seq - P;
  pl_kv_cache kv;
  rc = pl_kv_cache_init(&kv, c, G, P + cap - 1, why, whylen);
  if (rc) return rc;
  int rows_max = P > G ? P : G;
  float *logits = malloc((size_t)rows_max * V * sizeof(float));
  void *scratch = malloc(pl_sample_scratch_bytes(V));
  pl_rng *rngs = malloc((size_t)G * sizeof *rngs);
  int *active = malloc((size_t)G * sizeof *active);
  int32_t *feed = malloc((size_t)G * sizeof *feed);
  if (!logits || !scratch || !rngs || !active || !feed ||
      pl_generation_alloc(out, G, cap) != PL_OK) {
    rc = pl_fail(why, whylen, PL_EENV,
                 "generate: out of memory for G %d, vocab %d, max_new %d", G, V,
                 max_new);
    goto done;
  }
  out->max_new_asked = max_new;
  for (int g = 0; g < G; g++) {
    pl_rng_seed_stream(&rngs[g], seed, (uint64_t)g);
    active[g] = g;
  }

  /* prefill once into row 0, then share its keys and values */
  rc = pl_forward_cached(m, &kv, prompt, NULL, 1, P, 0, logits, why, whylen);
  if (rc) goto done;
  for (int g = 1; g < G; g++)
    pl_kv_cache_copy_prefix(&kv, 0, g, P);
  /* every row's first token comes from the prompt's last logits */
  for (int g = 1; g < G; g++)
    memcpy(logits + (size_t)g * V, logits + (size_t)(P - 1) * V,
           V * sizeof(float));
  if (P > 1) memcpy(logits, logits + (size_t)(P - 1) * V, V * sizeof(float));

  int n_active = G;
  for (int i = 0; n_active > 0; i++) {
    /* logits row b belongs to row active[b]; all sit at step i */
    int kept = 0;
    for (int b = 0; b < n_active; b++) {
      int g = active[b];
      pl_sample_out so;
      const float *row = logits + (size_t)b * V;
      rc = pl_sample(row, V, sampling, &rngs[g], scratch, &so, why, whylen);
      /* a non-finite logit here is the model's (weights or activations
       * that overflow), not a caller's mask: say so rather than the
       * sampler, which blames its input (the sampler scans the row
       * already; only a failure is scanned again) */
      for (int v = 0; rc && v < V; v++)
        if (!isfinite(row[v])) {
          rc = pl_fail(why, whylen, PL_EINPUT,
                       "sampling: the model's logit %d is %g at row %d, "
                       "token %d: its weights or activations overflow "
                       "(a diverged or damaged checkpoint)",
                       v, (double)row[v], g, i);
          break;
        }
      if (rc) goto done;
      if (!pl_generation_record(out, g, i, &so, eos_id, cap)) {
        active[kept] = g;
        feed[kept++] = so.token;
      } else if (on_row) {
        on_row(ctx, out, g);
      }
    }
    n_active = kept;
    if (!n_active) break;
    /* token i of each live row sits at position P + i */
    rc = pl_forward_cached(m, &kv, feed, active, n_active, 1, P + i, logits,
                           why, whylen);
    if (rc) goto done;
  }
  rc = PL_OK;

done:
  if (rc) pl_generation_free(out);
  pl_kv_cache_free(&kv);
  free(logits);
  free(scratch);
  free(rngs);
  free(active);
  free(feed);
  return rc;
}
