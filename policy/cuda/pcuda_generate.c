/*
 * policy/cuda/pcuda_generate.c — sampling-time inference on a CUDA
 * backend: policy/generate.c function by function. The KV cache
 * (pcuda_kv_cache, the CPU's (L,G,max_seq,C) layout), the cached forward
 * (the layers of pcuda_model_forward on token rows at positions pos0.., with
 * attention reading the cache: kv_cache_write_kernel, then
 * attention_cached_kernel, its positions split over blocks when the
 * (row, head) pairs are few and merged by attention_combine_kernel,
 * policy/cuda/kvcache.cu),
 * and batched generation of G completions of one prompt with the device
 * sampler (pcuda_sample.c).
 *
 * Generation follows pl_generate_notify step by step: the same checks and
 * messages, the prompt prefilled once into row 0 and its keys and values
 * copied to every row, every row's first token drawn from the prompt's last
 * logits (the sampler reads that one row for all G, row_stride 0, instead
 * of the CPU's copies), then one batch per step of the last token of every
 * unfinished row, the same stop rules, the same output. Each row's pl_rng
 * stays on the host (pl_rng_seed_stream(seed, g)); its draw goes to the
 * kernel (pcuda_sample.c says why).
 *
 * What stays on the backend: the parameters, the cache, the activations,
 * the logits. What crosses per decode step: the fed tokens and their rows
 * (up), the draws (up), four numbers per row (down).
 *
 * The layers the cached forward shares with the training forward (the
 * GEMMs in the model's dtype among them) are launched through
 * pcuda_model.c's launchers (pcuda_internal.h); RoPE at a position is its
 * own, below.
 */
#include "policy/cuda/pcuda_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ELEM_THREADS 256u
#define ATT_THREADS (PCUDA_ATT_WARPS * 32u) /* attention_cached_kernel's */
/* The blocks a cached attention launch aims for: two per SM of an H200
 * (132 SMs). Fewer (row, head) pairs than this get their positions split
 * over more blocks (attention_splits). */
#define ATT_TARGET_BLOCKS 264

static pcuda_dim dim1(unsigned x) {
  return (pcuda_dim){x, 1, 1};
}

/* ------------------------------------------------------------------------ */
/* the cache */

int pcuda_kv_cache_init(pcuda_kv_cache *kv, pcuda_ctx *ctx,
                        const pl_config *cfg, int G, int max_seq, char *why,
                        size_t whylen) {
  memset(kv, 0, sizeof *kv);
  int rc = pl_kv_cache_check(cfg, G, max_seq, why, whylen);
  if (rc) return rc;
  kv->ctx = ctx;
  kv->L = cfg->n_layers;
  kv->G = G;
  kv->max_seq = max_seq;
  kv->C = cfg->d_model;
  size_t n = (size_t)kv->L * G * max_seq * kv->C;
  kv->memory = pcuda_alloc(ctx, 2 * n * sizeof(float));
  if (!kv->memory) {
    char err[256] = "";
    pcuda_status(ctx, err, sizeof err);
    memset(kv, 0, sizeof *kv);
    return pl_fail(why, whylen, PL_EENV,
                   "kv cache: %zu floats (L %d, G %d, max_seq %d, C %d) on the "
                   "backend: %s",
                   2 * n, cfg->n_layers, G, max_seq, cfg->d_model, err);
  }
  kv->k = kv->memory;
  kv->v = kv->memory + n;
  return PL_OK;
}

void pcuda_kv_cache_free(pcuda_kv_cache *kv) {
  if (kv->ctx) {
    pcuda_free(kv->ctx, kv->memory);
    pcuda_free(kv->ctx, kv->scratch);
  }
  free(kv->host_ids);
  memset(kv, 0, sizeof *kv);
}

int pcuda_kv_cache_copy_prefix(pcuda_kv_cache *kv, int src, int dst,
                               int n_pos) {
  if (src < 0 || src >= kv->G || dst < 0 || dst >= kv->G || n_pos < 0 ||
      n_pos > kv->max_seq)
    return PL_EINPUT;
  if (src == dst || n_pos == 0) return PL_OK;
  int L = kv->L, G = kv->G, max_seq = kv->max_seq, C = kv->C;
  void *args[] = {&kv->k, &kv->v, &L, &G, &max_seq, &C, &src, &dst, &n_pos};
  return pcuda_launch(kv->ctx, PCUDA_K_kv_cache_copy_kernel,
                      dim1(pcuda_blocks((size_t)L * n_pos * C, ELEM_THREADS)),
                      dim1(ELEM_THREADS), 0, args);
}

/* S, the blocks over which attention_cached_kernel splits the chunks of
 * each of the N*NH (row, head) pairs: enough for ATT_TARGET_BLOCKS blocks
 * in all, at most one per chunk of the longest row (positions
 * 0..pos0+T-1). A prefill (N large) gets S = 1: no partials to merge, and
 * the scratch stays linear in N. */
static int attention_splits(size_t N, int NH, int pos0, int T) {
  size_t pairs = N * (size_t)NH;
  int chunks = (pos0 + T + PCUDA_ATT_CHUNK - 1) / PCUDA_ATT_CHUNK;
  size_t want = (ATT_TARGET_BLOCKS + pairs - 1) / pairs;
  return want < (size_t)chunks ? (int)want : chunks;
}

/* The cached forward's activations for N token rows (generate.c's
 * fwd_scratch, plus rstd for the RMSNorm kernel, the logits, the token and
 * row ids, and the attention's S splits per (row, head) when S > 1), in
 * one device allocation grown on demand. */
typedef struct fwd_scratch {
  float *x, *ln, *rstd, *qkv, *atty, *tmp, *h13, *hmul, *logits, *att_part;
  int32_t *tokens, *rows;
} fwd_scratch;

static size_t scratch_floats(const pl_config *c, size_t N, int S) {
  size_t C = c->d_model, F = c->d_ff, V = c->vocab, NH = c->n_heads;
  /* x ln qkv atty tmp: 7C; h13 hmul: 3F; rstd; logits; tokens and rows
   * (at most N each) as one float slot per id; then per split of every
   * (row, head) hs + 2 floats (attention_cached_kernel says which) */
  size_t part = S > 1 ? (size_t)S * (C + 2 * NH) : 0;
  return N * (7 * C + 3 * F + 1 + V + 2 + part);
}

static int scratch_for(pcuda_kv_cache *kv, const pl_config *c, size_t N, int S,
                       fwd_scratch *s) {
  size_t need = scratch_floats(c, N, S);
  if (need > kv->scratch_floats) {
    pcuda_free(kv->ctx, kv->scratch);
    kv->scratch = pcuda_alloc(kv->ctx, need * sizeof(float));
    kv->scratch_floats = kv->scratch ? need : 0;
    if (!kv->scratch) return PL_EENV;
  }
  if (kv->host_cap < 2 * N) {
    free(kv->host_ids);
    kv->host_ids = malloc(2 * N * sizeof(int32_t));
    kv->host_cap = kv->host_ids ? 2 * N : 0;
    if (!kv->host_ids) return PL_EENV;
  }
  size_t C = c->d_model, F = c->d_ff, V = c->vocab;
  float *p = kv->scratch;
  s->x = p, p += N * C;
  s->ln = p, p += N * C;
  s->rstd = p, p += N;
  s->qkv = p, p += N * 3 * C;
  s->atty = p, p += N * C;
  s->tmp = p, p += N * C;
  s->h13 = p, p += N * 2 * F;
  s->hmul = p, p += N * F;
  s->logits = p, p += N * V;
  s->tokens = (int32_t *)p, p += 2 * N;
  s->rows = s->tokens + N;
  s->att_part = p;
  return PL_OK;
}

/* ------------------------------------------------------------------------ */
/* layers the cached forward launches its own way (the others:
 * pcuda_model.c's launchers) */

/* q and k of token row b*T + t rotated to position pos0 + t */
static void rope_apply(pcuda_ctx *ctx, float *qkv /*(B,T,3C)*/,
                       const float *cos_t, const float *sin_t, int B, int T,
                       int C, int NH, int pos0) {
  float dir = 1.0f;
  void *args[] = {&qkv, &cos_t, &sin_t, &B, &T, &C, &NH, &pos0, &dir};
  pcuda_launch(ctx, PCUDA_K_rope_apply_kernel,
               dim1(pcuda_blocks((size_t)B * T * C, ELEM_THREADS)),
               dim1(ELEM_THREADS), 0, args);
}

/* ------------------------------------------------------------------------ */
/* the cached forward */

int pcuda_forward_cached(pcuda_model *dm, pcuda_kv_cache *kv,
                         const int32_t *tokens, const int *rows, int B, int T,
                         int pos0, char *why, size_t whylen) {
  const pl_config *c = &dm->cfg;
  int C = c->d_model, L = c->n_layers, NH = c->n_heads, F = c->d_ff;
  int V = c->vocab, max_seq = kv->max_seq;
  pcuda_ctx *ctx = dm->ctx;
  int rc = pl_forward_cached_check(c, kv->L, kv->C, kv->G, kv->max_seq, tokens,
                                   rows, B, T, pos0, why, whylen);
  if (rc) return rc;
  size_t N = (size_t)B * T;
  int S = attention_splits(N, NH, pos0, T);
  fwd_scratch s;
  if (scratch_for(kv, c, N, S, &s) != PL_OK ||
      pcuda_bf16_ensure_scratch_rows(dm, N) != PL_OK) {
    char err[256] = "out of memory";
    pcuda_status(ctx, err, sizeof err);
    return pl_fail(why, whylen, PL_EENV, "forward_cached: %zu token rows: %s",
                   N, err);
  }
  /* token row n = b*T + t is row rows[b]'s token at position pos0 + t */
  int32_t *ids = kv->host_ids;
  memcpy(ids, tokens, N * sizeof(int32_t));
  for (int b = 0; b < B; b++)
    ids[N + b] = rows ? rows[b] : b;
  pcuda_upload(ctx, s.tokens, ids, (N + B) * sizeof(int32_t));

  const pl_params *p = &dm->params;
  int n_rows = (int)N;
  pcuda_embedding_forward(ctx, s.x, s.tokens, p->wte, n_rows, C);
  for (int l = 0; l < L; l++) {
    const float *wqkv = p->wqkv + (size_t)l * 3 * C * C;
    const float *wo = p->wo + (size_t)l * C * C;
    const float *w13 = p->w13 + (size_t)l * 2 * F * C;
    const float *w2 = p->w2 + (size_t)l * C * F;
    /* this layer's cache, (G,max_seq,C) */
    float *kc = kv->k + (size_t)l * kv->G * max_seq * C;
    float *vc = kv->v + (size_t)l * kv->G * max_seq * C;

    pcuda_rmsnorm_forward(ctx, s.ln, s.rstd, s.x, p->rms_att + (size_t)l * C,
                          n_rows, C);
    pcuda_linear_forward(dm, s.qkv, s.ln, wqkv, n_rows, C, 3 * C);
    /* RoPE, then k and v into the cache, for all N rows before any query
     * reads them (a prefill's query t reads keys pos0..pos0+t) */
    rope_apply(ctx, s.qkv, dm->rope_cos, dm->rope_sin, B, T, C, NH, pos0);
    void *wargs[] = {&kc, &vc, &s.qkv, &s.rows, &B, &T, &pos0, &max_seq, &C};
    pcuda_launch(ctx, PCUDA_K_kv_cache_write_kernel,
                 dim1(pcuda_blocks(N * C, ELEM_THREADS)), dim1(ELEM_THREADS), 0,
                 wargs);
    void *aargs[] = {&s.atty, &s.att_part, &s.qkv,   &kc, &vc, &s.rows, &B,
                     &T,      &pos0,       &max_seq, &C,  &NH, &S};
    pcuda_launch(ctx, PCUDA_K_attention_cached_kernel,
                 dim1((unsigned)(N * NH * S)), dim1(ATT_THREADS), 0, aargs);
    if (S > 1) {
      void *cargs[] = {&s.atty, &s.att_part, &n_rows, &T, &pos0, &C, &NH, &S};
      pcuda_launch(ctx, PCUDA_K_attention_combine_kernel,
                   dim1(pcuda_blocks(N * C, ELEM_THREADS)), dim1(ELEM_THREADS),
                   0, cargs);
    }
    pcuda_linear_forward(dm, s.tmp, s.atty, wo, n_rows, C, C);
    pcuda_residual_forward(ctx, s.x, s.x, s.tmp, N * C);
    pcuda_rmsnorm_forward(ctx, s.ln, s.rstd, s.x, p->rms_ffn + (size_t)l * C,
                          n_rows, C);
    pcuda_linear_forward(dm, s.h13, s.ln, w13, n_rows, C, 2 * F);
    pcuda_swiglu_forward(ctx, s.hmul, s.h13, n_rows, F);
    pcuda_linear_forward(dm, s.tmp, s.hmul, w2, n_rows, F, C);
    pcuda_residual_forward(ctx, s.x, s.x, s.tmp, N * C);
  }
  pcuda_rmsnorm_forward(ctx, s.ln, s.rstd, s.x, p->rms_final, n_rows, C);
  pcuda_linear_forward(dm, s.logits, s.ln, p->wte, n_rows, C,
                       V); /* tied head */
  kv->logits = s.logits;
  char err[256];
  if (pcuda_status(ctx, err, sizeof err) != PL_OK)
    return pl_fail(why, whylen, PL_EENV, "forward_cached: %s", err);
  return PL_OK;
}

/* ------------------------------------------------------------------------ */
/* batched generation */

int pcuda_generate(pcuda_model *dm, const int32_t *prompt, int prompt_len,
                   int G, int max_new, int eos_id, const pl_sampling *sampling,
                   uint64_t seed, pl_generation *out, char *why,
                   size_t whylen) {
  return pcuda_generate_notify(dm, prompt, prompt_len, G, max_new, eos_id,
                               sampling, seed, out, NULL, NULL, why, whylen);
}

int pcuda_generate_notify(pcuda_model *dm, const int32_t *prompt,
                          int prompt_len, int G, int max_new, int eos_id,
                          const pl_sampling *sampling, uint64_t seed,
                          pl_generation *out, pl_row_done_fn on_row, void *ctx,
                          char *why, size_t whylen) {
  const pl_config *c = &dm->cfg;
  int V = c->vocab, P = prompt_len;
  memset(out, 0, sizeof *out);
  int rc = pl_generate_check(c, prompt, P, G, max_new, eos_id, sampling, why,
                             whylen);
  if (rc) return rc;

  /* as the CPU: prompt + completion fit in max_seq; the last token is
   * never fed back, so the cache needs P + cap - 1 positions */
  int cap = max_new < c->max_seq - P ? max_new : c->max_seq - P;
  pcuda_kv_cache kv;
  rc = pcuda_kv_cache_init(&kv, dm->ctx, c, G, P + cap - 1, why, whylen);
  if (rc) return rc;
  pcuda_sampler sm;
  rc = pcuda_sampler_init(&sm, dm->ctx, G, V, why, whylen);
  if (rc) {
    pcuda_kv_cache_free(&kv);
    return rc;
  }
  pl_rng *rngs = malloc((size_t)G * sizeof *rngs);
  int *active = malloc((size_t)G * sizeof *active);
  int32_t *feed = malloc((size_t)G * sizeof *feed);
  pl_sample_out *so = malloc((size_t)G * sizeof *so);
  if (!rngs || !active || !feed || !so ||
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
  rc = pcuda_forward_cached(dm, &kv, prompt, NULL, 1, P, 0, why, whylen);
  if (rc) goto done;
  for (int g = 1; g < G; g++)
    pcuda_kv_cache_copy_prefix(&kv, 0, g, P);
  /* every row's first token comes from the prompt's last logits */
  const float *logits = kv.logits + (size_t)(P - 1) * V;
  size_t stride = 0;

  int n_active = G;
  for (int i = 0; n_active > 0; i++) {
    /* logits row b belongs to row active[b]; all sit at step i */
    for (int b = 0; b < n_active; b++)
      sm.u_host[b] =
          sampling->temperature > 0.0f ? pl_rng_uniform(&rngs[active[b]]) : 0.0;
    rc = pcuda_sampler_run(&sm, logits, stride, n_active, sampling, so, why,
                           whylen);
    if (rc) goto done;
    int kept = 0;
    for (int b = 0; b < n_active; b++) {
      int g = active[b];
      if (!pl_generation_record(out, g, i, &so[b], eos_id, cap)) {
        active[kept] = g;
        feed[kept++] = so[b].token;
      } else if (on_row) {
        on_row(ctx, out, g);
      }
    }
    n_active = kept;
    if (!n_active) break;
    /* token i of each live row sits at position P + i */
    rc = pcuda_forward_cached(dm, &kv, feed, active, n_active, 1, P + i, why,
                              whylen);
    if (rc) goto done;
    logits = kv.logits;
    stride = (size_t)V;
  }
  rc = PL_OK;

done:
  if (rc) pl_generation_free(out);
  pcuda_sampler_free(&sm);
  pcuda_kv_cache_free(&kv);
  free(rngs);
  free(active);
  free(feed);
  free(so);
  return rc;
}
