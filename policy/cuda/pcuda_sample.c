/*
 * policy/cuda/pcuda_sample.c — the host half of the device sampler
 * (policy/cuda/sample.cu): pl_sample_batch of policy/sampler.c for rows
 * whose logits are already on the backend, so a decode step downloads a
 * few numbers per row instead of a (rows,V) block of logits.
 *
 * The RNG stays on the host: the row's pl_rng draws u with pl_rng_uniform
 * exactly when pl_sample would (once per row and call, none when greedy),
 * and the kernel uses it as pl_sample uses its own draw. A fixed seed so
 * walks the same xoshiro256** stream on both paths, and the device picks
 * the CPU's token unless u lands within summation-order rounding (about
 * 1e-16) of a boundary of the cumulative distribution (sample.cu says
 * which sums differ). One difference in failure: every row's u is drawn
 * before the kernel looks at the logits, so after a non-finite logit the
 * later rows' streams have advanced too (pl_sample_batch stops at the bad
 * row); the caller fails either way.
 *
 * Scratch (the weights, the sorted candidates, the draws and the results)
 * is one device allocation per sampler, sized for rows x vocab.
 */
#include "policy/cuda/pcuda_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SAMPLE_THREADS 256u /* a multiple of 32, <= SAMPLE_MAX_THREADS */

static int fail_input(char *why, size_t whylen, const char *msg, int value) {
  snprintf(why, whylen, msg, value);
  return PL_EINPUT;
}

int pcuda_sampler_init(pcuda_sampler *sm, pcuda_ctx *ctx, int rows, int vocab,
                       char *why, size_t whylen) {
  memset(sm, 0, sizeof *sm);
  if (rows < 1) return fail_input(why, whylen, "sampling: rows = %d", rows);
  if (vocab < 1)
    return fail_input(why, whylen, "sampling: vocab = %d, expected >= 1",
                      vocab);
  int p2 = 1;
  while (p2 < vocab)
    p2 <<= 1;
  size_t R = (size_t)rows, V = (size_t)vocab, P2 = (size_t)p2;
  /* doubles: w (R,V), cw (R,P2), uniform (R); then int32: cid (R,P2),
   * token (R), n_kept (R); then float: logprob (R), logprob_sample (R) */
  size_t bytes = (R * V + R * P2 + R) * sizeof(double) +
                 (R * P2 + 2 * R) * sizeof(int32_t) + 2 * R * sizeof(float);
  sm->ctx = ctx;
  sm->rows = rows;
  sm->vocab = vocab;
  sm->vocab_p2 = p2;
  sm->memory = pcuda_alloc(ctx, bytes);
  sm->host =
      malloc(R * (sizeof(double) + 2 * sizeof(int32_t) + 2 * sizeof(float)));
  if (!sm->memory || !sm->host) {
    int rc = pcuda_status(ctx, why, whylen);
    if (rc == PL_OK)
      snprintf(why, whylen, "sampling: out of memory for %d rows of %d", rows,
               vocab);
    pcuda_sampler_free(sm);
    return PL_EENV;
  }
  double *d = sm->memory;
  sm->w = d;
  sm->cw = d + R * V;
  sm->uniform = d + R * V + R * P2;
  int32_t *i = (int32_t *)(d + R * V + R * P2 + R);
  sm->cid = i;
  sm->token = i + R * P2;
  sm->n_kept = i + R * P2 + R;
  sm->logprob = (float *)(i + R * P2 + 2 * R);
  sm->logprob_sample = sm->logprob + R;
  sm->u_host = sm->host;
  sm->token_host = (int32_t *)(sm->u_host + R);
  sm->n_kept_host = sm->token_host + R;
  sm->logprob_host = (float *)(sm->n_kept_host + R);
  sm->logprob_sample_host = sm->logprob_host + R;
  return PL_OK;
}

void pcuda_sampler_free(pcuda_sampler *sm) {
  if (sm->ctx) pcuda_free(sm->ctx, sm->memory);
  free(sm->host);
  memset(sm, 0, sizeof *sm);
}

int pcuda_sampler_run(pcuda_sampler *sm, const float *logits, size_t row_stride,
                      int rows, const pl_sampling *s, pl_sample_out *out,
                      char *why, size_t whylen) {
  pcuda_ctx *ctx = sm->ctx;
  if (rows < 0 || rows > sm->rows)
    return fail_input(why, whylen, "sampling: rows = %d out of range", rows);
  if (!rows) return PL_OK;
  int rc = pl_sampling_validate(s, why, whylen);
  if (rc) return rc;
  int V = sm->vocab, Vp2 = sm->vocab_p2;
  size_t R = (size_t)rows;
  float temperature = s->temperature, top_p = s->top_p, min_p = s->min_p;
  pcuda_upload(ctx, sm->uniform, sm->u_host, R * sizeof(double));
  void *args[] = {&sm->token,  &sm->n_kept,  &sm->logprob, &sm->logprob_sample,
                  &sm->w,      &sm->cw,      &sm->cid,     &logits,
                  &row_stride, &sm->uniform, &rows,        &V,
                  &Vp2,        &temperature, &top_p,       &min_p};
  pcuda_launch(ctx, PCUDA_K_sample_kernel, (pcuda_dim){(unsigned)rows, 1, 1},
               (pcuda_dim){SAMPLE_THREADS, 1, 1}, 0, args);
  /* token, n_kept, logprob and logprob_sample lie back to back, (rows)
   * slots of 4 bytes each, on both sides: one copy brings all four */
  rc = pcuda_download(ctx, sm->token_host, sm->token,
                      4 * (size_t)sm->rows * sizeof(int32_t));
  if (rc != PL_OK) return pcuda_status(ctx, why, whylen);
  for (int b = 0; b < rows; b++) {
    if (sm->token_host[b] < 0) {
      /* the CPU's message (check_row), with the row in front */
      int bad = sm->n_kept_host[b];
      float value = 0.0f;
      pcuda_download(ctx, &value, logits + (size_t)b * row_stride + bad,
                     sizeof value);
      snprintf(why, whylen,
               "row %d: sampling: logit %d is %g; expected finite logits "
               "(mask a token with a large negative finite value, e.g. "
               "-1e30)",
               b, bad, (double)value);
      return PL_EINPUT;
    }
    out[b].token = sm->token_host[b];
    out[b].n_kept = sm->n_kept_host[b];
    out[b].logprob = sm->logprob_host[b];
    out[b].logprob_sample = sm->logprob_sample_host[b];
  }
  return PL_OK;
}

int pcuda_sample_batch(pcuda_ctx *ctx, const float *logits, size_t row_stride,
                       int rows, int vocab, const pl_sampling *s, pl_rng *rngs,
                       pl_sample_out *out, char *why, size_t whylen) {
  if (rows < 0) return fail_input(why, whylen, "sampling: rows = %d", rows);
  if (!rows) return PL_OK;
  int rc = pl_sampling_validate(s, why, whylen);
  if (rc) return rc;
  pcuda_sampler sm;
  rc = pcuda_sampler_init(&sm, ctx, rows, vocab, why, whylen);
  if (rc) return rc;
  for (int b = 0; b < rows; b++) /* pl_sample's one draw per row */
    sm.u_host[b] = s->temperature > 0.0f ? pl_rng_uniform(&rngs[b]) : 0.0;
  rc = pcuda_sampler_run(&sm, logits, row_stride, rows, s, out, why, whylen);
  pcuda_sampler_free(&sm);
  return rc;
}
