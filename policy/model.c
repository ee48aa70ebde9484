/*
 * policy/model.c — the policy's decoder-only transformer, forward and
 * backward in fp32 on the CPU: the readable reference that policy/cuda/ will
 * mirror kernel by kernel, and that tests/python/test_policy_torch.py holds
 * against PyTorch.
 *
 * Layout (llm.c): each layer is a name_forward / name_backward pair, outputs
 * first, sizes last, shapes in the comments; parameters, gradients and
 * activations are one allocation each, with plain structs of pointers into
 * them (pl_params, pl_acts in policy.h). Parameter gradients accumulate
 * (+=); activation gradients overwrite, except the residual stream's.
 *
 * Every matmul, attention's included, goes through cblas_sgemm (OpenBLAS,
 * its threads use both cores); the element-wise loops are plain C. The
 * linear layers' GEMMs go through pl_linear_gemm, which a hook can take
 * over (policy.h; the lab's --policy-matmul); without one it is
 * cblas_sgemm. It does not do: a KV cache (the sampler's business),
 * dropout, biases, mixed precision, or anything but temperature-1 logits.
 */
#include "policy/policy.h"

#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define RMS_EPS 1e-5f
#define ROPE_THETA 10000.0

const char *const pl_param_names[PL_NUM_PARAM_TENSORS] = {
    "wte", "rms_att", "wqkv", "wo", "rms_ffn", "w13", "w2", "rms_final"};

int pl_default_ff(int d_model) {
  int ff = (int)((8.0 * d_model / 3.0) / 32.0 + 0.5) * 32;
  return ff < 32 ? 32 : ff;
}

int pl_config_check(const pl_config *c, char *why, size_t why_len) {
  const char *bad = NULL;
  if (c->vocab <= 0)
    bad = "vocab must be > 0";
  else if (c->d_model <= 0)
    bad = "d_model must be > 0";
  else if (c->n_layers <= 0)
    bad = "n_layers must be > 0";
  else if (c->n_heads <= 0)
    bad = "n_heads must be > 0";
  else if (c->d_model % c->n_heads)
    bad = "d_model must be a multiple of n_heads";
  else if ((c->d_model / c->n_heads) % 2)
    bad = "head size must be even (RoPE)";
  else if (c->d_ff <= 0)
    bad = "d_ff must be > 0";
  else if (c->max_seq <= 0)
    bad = "max_seq must be > 0";
  if (!bad) return PL_OK;
  snprintf(why, why_len,
           "model config: %s (vocab %d, d_model %d, n_layers %d,"
           " n_heads %d, d_ff %d, max_seq %d)",
           bad, c->vocab, c->d_model, c->n_layers, c->n_heads, c->d_ff,
           c->max_seq);
  return PL_EINPUT;
}

void pl_param_sizes(const pl_config *c, size_t s[PL_NUM_PARAM_TENSORS]) {
  size_t V = c->vocab, C = c->d_model, L = c->n_layers, F = c->d_ff;
  s[0] = V * C;         /* wte */
  s[1] = L * C;         /* rms_att */
  s[2] = L * 3 * C * C; /* wqkv */
  s[3] = L * C * C;     /* wo */
  s[4] = L * C;         /* rms_ffn */
  s[5] = L * 2 * F * C; /* w13 */
  s[6] = L * C * F;     /* w2 */
  s[7] = C;             /* rms_final */
}

int pl_param_decays(int tensor) {
  return tensor == 2 || tensor == 3 || tensor == 5 || tensor == 6;
}

/* Points the eight tensors of p into memory, in pl_params order. */
static void point_params(pl_params *p, float *memory,
                         const size_t s[PL_NUM_PARAM_TENSORS]) {
  float **ptrs[PL_NUM_PARAM_TENSORS] = {&p->wte, &p->rms_att,  &p->wqkv,
                                        &p->wo,  &p->rms_ffn,  &p->w13,
                                        &p->w2,  &p->rms_final};
  for (int i = 0; i < PL_NUM_PARAM_TENSORS; i++) {
    *ptrs[i] = memory;
    memory += s[i];
  }
}

void pl_set_num_threads(int n) {
  openblas_set_num_threads(n);
}

/* The linear layers' GEMM hook (policy.h); NULL: cblas_sgemm. */
static pl_gemm_hook gemm_hook;
static void *gemm_hook_ctx;

void pl_set_gemm_hook(pl_gemm_hook fn, void *ctx) {
  gemm_hook = fn;
  gemm_hook_ctx = ctx;
}

void pl_linear_gemm(int trans_a, int trans_b, int M, int N, int K, float alpha,
                    const float *A, int lda, const float *B, int ldb,
                    float beta, float *C, int ldc) {
  if (gemm_hook && gemm_hook(gemm_hook_ctx, trans_a, trans_b, M, N, K, alpha, A,
                             lda, B, ldb, beta, C, ldc) == 0)
    return;
  cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
              trans_b ? CblasTrans : CblasNoTrans, M, N, K, alpha, A, lda, B,
              ldb, beta, C, ldc);
}

/* ------------------------------------------------------------------------ */
/* deterministic init: splitmix64 -> uniform -> Box-Muller normal */

static uint64_t splitmix64(uint64_t *state) {
  uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

/* uniform in (0, 1]: 53 random bits, never 0 (log below) */
static double uniform01(uint64_t *state) {
  return ((splitmix64(state) >> 11) + 1) * (1.0 / 9007199254740992.0);
}

static void fill_normal(float *out, size_t n, float std, uint64_t *state) {
  for (size_t i = 0; i < n; i += 2) {
    double r = sqrt(-2.0 * log(uniform01(state)));
    double a = 6.283185307179586 * uniform01(state);
    out[i] = (float)(std * r * cos(a));
    if (i + 1 < n) out[i + 1] = (float)(std * r * sin(a));
  }
}

int pl_model_init(pl_model *m, const pl_config *cfg, uint64_t seed, char *why,
                  size_t why_len) {
  memset(m, 0, sizeof *m);
  int rc = pl_config_check(cfg, why, why_len);
  if (rc != PL_OK) return rc;
  m->cfg = *cfg;
  pl_param_sizes(cfg, m->param_sizes);
  for (int i = 0; i < PL_NUM_PARAM_TENSORS; i++)
    m->num_params += m->param_sizes[i];
  int hs = cfg->d_model / cfg->n_heads;
  size_t rope_n = (size_t)cfg->max_seq * (hs / 2);
  m->params_memory = malloc(m->num_params * sizeof(float));
  m->grads_memory = calloc(m->num_params, sizeof(float));
  m->rope_cos = malloc(rope_n * sizeof(float));
  m->rope_sin = malloc(rope_n * sizeof(float));
  if (!m->params_memory || !m->grads_memory || !m->rope_cos || !m->rope_sin) {
    pl_model_free(m);
    snprintf(why, why_len, "model: out of memory for %zu parameters",
             m->num_params);
    return PL_EENV;
  }
  point_params(&m->params, m->params_memory, m->param_sizes);
  point_params(&m->grads, m->grads_memory, m->param_sizes);

  /* matrices ~ N(0, 0.02); wo and w2 (they write into the residual stream)
   * ~ N(0, 0.02/sqrt(2L)); norm weights 1. One generator, tensor order. */
  uint64_t state = seed;
  float std = 0.02f, res_std = 0.02f / sqrtf(2.0f * cfg->n_layers);
  const size_t *s = m->param_sizes;
  pl_params *p = &m->params;
  fill_normal(p->wte, s[0], std, &state);
  fill_normal(p->wqkv, s[2], std, &state);
  fill_normal(p->wo, s[3], res_std, &state);
  fill_normal(p->w13, s[5], std, &state);
  fill_normal(p->w2, s[6], res_std, &state);
  for (size_t i = 0; i < s[1]; i++)
    p->rms_att[i] = 1.0f;
  for (size_t i = 0; i < s[4]; i++)
    p->rms_ffn[i] = 1.0f;
  for (size_t i = 0; i < s[7]; i++)
    p->rms_final[i] = 1.0f;

  /* RoPE tables: angle(pos, i) = pos * theta^(-2i/hs), in double */
  for (int pos = 0; pos < cfg->max_seq; pos++)
    for (int i = 0; i < hs / 2; i++) {
      double a = pos * pow(ROPE_THETA, -2.0 * i / hs);
      m->rope_cos[(size_t)pos * (hs / 2) + i] = (float)cos(a);
      m->rope_sin[(size_t)pos * (hs / 2) + i] = (float)sin(a);
    }
  m->mean_loss = -1.0f;
  return PL_OK;
}

void pl_model_free(pl_model *m) {
  free(m->params_memory);
  free(m->grads_memory);
  free(m->rope_cos);
  free(m->rope_sin);
  free(m->acts_memory);
  free(m->tokens);
  free(m->targets);
  memset(m, 0, sizeof *m);
}

void pl_model_zero_grad(pl_model *m) {
  memset(m->grads_memory, 0, m->num_params * sizeof(float));
}

/* ------------------------------------------------------------------------ */
/* activations */

/* Points the activation tensors into memory (NULL: just count) for (B,T);
 * returns the number of floats they need. */
static size_t point_acts(pl_acts *a, float *memory, const pl_config *c, int B,
                         int T) {
  size_t BT = (size_t)B * T, C = c->d_model, L = c->n_layers, V = c->vocab;
  size_t F = c->d_ff, NH = c->n_heads;
  struct {
    float **ptr;
    size_t n;
  } t[] = {
      {&a->encoded, BT * C},
      {&a->ln1, L * BT * C},
      {&a->ln1_rstd, L * BT},
      {&a->qkv, L * BT * 3 * C},
      {&a->att, L * B * NH * T * T},
      {&a->atty, L * BT * C},
      {&a->res_att, L * BT * C},
      {&a->ln2, L * BT * C},
      {&a->ln2_rstd, L * BT},
      {&a->h13, L * BT * 2 * F},
      {&a->hmul, L * BT * F},
      {&a->res_ffn, L * BT * C},
      {&a->lnf, BT * C},
      {&a->lnf_rstd, BT},
      {&a->logits, BT * V},
      {&a->lse, BT},
      {&a->losses, BT},
      {&a->dlogits, BT * V},
      {&a->dres, BT * C},
      {&a->dln, BT * C},
      {&a->datty, BT * C},
      {&a->dqkv, BT * 3 * C},
      {&a->dh13, BT * 2 * F},
      {&a->dhmul, BT * F},
      {&a->datt, (size_t)T * T},
  };
  size_t total = 0;
  for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
    if (memory) *t[i].ptr = memory + total;
    total += t[i].n;
  }
  return total;
}

/* Makes room for a (B,T) batch: the activations grow, never shrink. */
static int ensure_acts(pl_model *m, int B, int T) {
  if (m->acts_memory && m->B == B && m->T == T) return PL_OK;
  size_t need = point_acts(&m->acts, NULL, &m->cfg, B, T);
  if (need > m->acts_capacity) {
    free(m->acts_memory);
    m->acts_memory = malloc(need * sizeof(float));
    m->acts_capacity = m->acts_memory ? need : 0;
  }
  size_t BT = (size_t)B * T;
  if (!m->tokens || (size_t)m->B * m->T < BT) {
    free(m->tokens);
    free(m->targets);
    m->tokens = malloc(BT * sizeof(int32_t));
    m->targets = malloc(BT * sizeof(int32_t));
  }
  if (!m->acts_memory || !m->tokens || !m->targets) {
    m->B = m->T = 0;
    return PL_EENV;
  }
  point_acts(&m->acts, m->acts_memory, &m->cfg, B, T);
  m->B = B;
  m->T = T;
  return PL_OK;
}

/* ------------------------------------------------------------------------ */
/* layers */

/* out[bt,:] = wte[tokens[bt],:] */
static void embedding_forward(float *out /*(BT,C)*/, const int32_t *tokens,
                              const float *wte /*(V,C)*/, size_t BT, int C) {
  for (size_t bt = 0; bt < BT; bt++)
    memcpy(out + bt * C, wte + (size_t)tokens[bt] * C, C * sizeof(float));
}

static void embedding_backward(float *dwte /*(V,C)*/,
                               const float *dout /*(BT,C)*/,
                               const int32_t *tokens, size_t BT, int C) {
  for (size_t bt = 0; bt < BT; bt++) {
    float *row = dwte + (size_t)tokens[bt] * C;
    const float *d = dout + bt * C;
    for (int i = 0; i < C; i++)
      row[i] += d[i];
  }
}

/* out = x * rstd * w, rstd = 1/sqrt(mean(x^2) + eps), per row */
static void rmsnorm_forward(float *out /*(N,C)*/, float *rstd /*(N)*/,
                            const float *inp /*(N,C)*/, const float *w /*(C)*/,
                            size_t N, int C) {
  for (size_t n = 0; n < N; n++) {
    const float *x = inp + n * C;
    float *o = out + n * C;
    float ss = 0.0f;
    for (int i = 0; i < C; i++)
      ss += x[i] * x[i];
    float r = 1.0f / sqrtf(ss / C + RMS_EPS);
    for (int i = 0; i < C; i++)
      o[i] = x[i] * r * w[i];
    rstd[n] = r;
  }
}

/* With g = dout * w and r = rstd (dr/dx_i = -r^3 x_i / C):
 *   dx_i += r g_i - r^3 x_i (g . x) / C;   dw_i += dout_i x_i r.
 * dinp accumulates: it is the residual stream's gradient. */
static void rmsnorm_backward(float *dinp /*(N,C)*/, float *dw /*(C)*/,
                             const float *dout /*(N,C)*/,
                             const float *inp /*(N,C)*/, const float *w,
                             const float *rstd /*(N)*/, size_t N, int C) {
  for (size_t n = 0; n < N; n++) {
    const float *x = inp + n * C, *d = dout + n * C;
    float *dx = dinp + n * C;
    float r = rstd[n], gx = 0.0f;
    for (int i = 0; i < C; i++)
      gx += d[i] * w[i] * x[i];
    float k = r * r * r * gx / C;
    for (int i = 0; i < C; i++) {
      dx[i] += r * d[i] * w[i] - k * x[i];
      dw[i] += d[i] * x[i] * r;
    }
  }
}

/* out = inp · w^T (w stored (OC,IC), PyTorch's Linear without bias) */
static void matmul_forward(float *out /*(N,OC)*/, const float *inp /*(N,IC)*/,
                           const float *w /*(OC,IC)*/, size_t N, int IC,
                           int OC) {
  pl_linear_gemm(0, 1, (int)N, OC, IC, 1.0f, inp, IC, w, IC, 0.0f, out, OC);
}

/* dinp = dout · w (overwritten); dw += dout^T · inp */
static void matmul_backward(float *dinp /*(N,IC)*/, float *dw /*(OC,IC)*/,
                            const float *dout /*(N,OC)*/,
                            const float *inp /*(N,IC)*/,
                            const float *w /*(OC,IC)*/, size_t N, int IC,
                            int OC) {
  pl_linear_gemm(0, 0, (int)N, IC, OC, 1.0f, dout, OC, w, IC, 0.0f, dinp, IC);
  pl_linear_gemm(1, 0, OC, IC, (int)N, 1.0f, dout, OC, inp, IC, 1.0f, dw, IC);
}

/* Rotates q and k of every head in place: the interleaved pair
 * (x[2i], x[2i+1]) of head dimension turns by angle(t, i). dir = +1 is the
 * forward rotation, -1 its transpose (the backward of a rotation). */
static void rope_apply(float *qkv /*(B,T,3C)*/, const float *cos_t,
                       const float *sin_t /*(max_seq,hs/2)*/, int B, int T,
                       int C, int NH, float dir) {
  int hs = C / NH, half = hs / 2;
  for (int b = 0; b < B; b++)
    for (int t = 0; t < T; t++) {
      float *row = qkv + ((size_t)b * T + t) * 3 * C;
      const float *ct = cos_t + (size_t)t * half,
                  *st = sin_t + (size_t)t * half;
      for (int part = 0; part < 2; part++) /* q, then k */
        for (int h = 0; h < NH; h++) {
          float *x = row + part * C + h * hs;
          for (int i = 0; i < half; i++) {
            float c = ct[i], s = dir * st[i];
            float x0 = x[2 * i], x1 = x[2 * i + 1];
            x[2 * i] = x0 * c - x1 * s;
            x[2 * i + 1] = x0 * s + x1 * c;
          }
        }
    }
}

/* Causal attention per (b,h): S = Q K^T / sqrt(hs), P = softmax over t2 <= t
 * (zero above the diagonal), Y = P V. Q, K, V are column blocks of qkv,
 * read in place through the leading dimension 3C. */
static void attention_forward(float *out /*(B,T,C)*/, float *att /*(B,NH,T,T)*/,
                              const float *qkv /*(B,T,3C)*/, int B, int T,
                              int C, int NH) {
  int hs = C / NH, C3 = 3 * C;
  float scale = 1.0f / sqrtf((float)hs);
  for (int b = 0; b < B; b++)
    for (int h = 0; h < NH; h++) {
      const float *q = qkv + (size_t)b * T * C3 + h * hs;
      const float *k = q + C, *v = q + 2 * C;
      float *p = att + ((size_t)b * NH + h) * T * T;
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, T, T, hs, scale, q,
                  C3, k, C3, 0.0f, p, T);
      for (int t = 0; t < T; t++) {
        float *row = p + (size_t)t * T, mx = row[0], sum = 0.0f;
        for (int t2 = 1; t2 <= t; t2++)
          mx = row[t2] > mx ? row[t2] : mx;
        for (int t2 = 0; t2 <= t; t2++) {
          row[t2] = expf(row[t2] - mx);
          sum += row[t2];
        }
        for (int t2 = 0; t2 <= t; t2++)
          row[t2] /= sum;
        for (int t2 = t + 1; t2 < T; t2++)
          row[t2] = 0.0f;
      }
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, T, hs, T, 1.0f, p,
                  T, v, C3, 0.0f, out + (size_t)b * T * C + h * hs, C);
    }
}

/* dP = dY V^T; dV = P^T dY; dS = P * (dP - rowsum(P * dP));
 * dQ = dS K / sqrt(hs); dK = dS^T Q / sqrt(hs). dqkv is overwritten. */
static void attention_backward(float *dqkv /*(B,T,3C)*/,
                               float *dp /*(T,T) scratch*/,
                               const float *dout /*(B,T,C)*/,
                               const float *qkv /*(B,T,3C)*/,
                               const float *att /*(B,NH,T,T)*/, int B, int T,
                               int C, int NH) {
  int hs = C / NH, C3 = 3 * C;
  float scale = 1.0f / sqrtf((float)hs);
  for (int b = 0; b < B; b++)
    for (int h = 0; h < NH; h++) {
      size_t off = (size_t)b * T * C3 + h * hs;
      const float *q = qkv + off, *k = q + C, *v = q + 2 * C;
      float *dq = dqkv + off, *dk = dq + C, *dv = dq + 2 * C;
      const float *p = att + ((size_t)b * NH + h) * T * T;
      const float *dy = dout + (size_t)b * T * C + h * hs;
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, T, T, hs, 1.0f, dy,
                  C, v, C3, 0.0f, dp, T);
      cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, T, hs, T, 1.0f, p, T,
                  dy, C, 0.0f, dv, C3);
      for (int t = 0; t < T; t++) {
        const float *pr = p + (size_t)t * T;
        float *dr = dp + (size_t)t * T, dot = 0.0f;
        for (int t2 = 0; t2 <= t; t2++)
          dot += pr[t2] * dr[t2];
        for (int t2 = 0; t2 <= t; t2++)
          dr[t2] = pr[t2] * (dr[t2] - dot);
        for (int t2 = t + 1; t2 < T; t2++)
          dr[t2] = 0.0f;
      }
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, T, hs, T, scale,
                  dp, T, k, C3, 0.0f, dq, C3);
      cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, T, hs, T, scale, dp,
                  T, q, C3, 0.0f, dk, C3);
    }
}

/* out = silu(gate) * up, gate = h13[n, 0:F], up = h13[n, F:2F] */
static void swiglu_forward(float *out /*(N,F)*/, const float *h13 /*(N,2F)*/,
                           size_t N, int F) {
  for (size_t n = 0; n < N; n++) {
    const float *g = h13 + n * 2 * F, *u = g + F;
    float *o = out + n * F;
    for (int i = 0; i < F; i++)
      o[i] = g[i] / (1.0f + expf(-g[i])) * u[i];
  }
}

/* silu'(g) = sig(g) (1 + g (1 - sig(g))); dh13 is overwritten */
static void swiglu_backward(float *dh13 /*(N,2F)*/, const float *dout /*(N,F)*/,
                            const float *h13 /*(N,2F)*/, size_t N, int F) {
  for (size_t n = 0; n < N; n++) {
    const float *g = h13 + n * 2 * F, *u = g + F, *d = dout + n * F;
    float *dg = dh13 + n * 2 * F, *du = dg + F;
    for (int i = 0; i < F; i++) {
      float sig = 1.0f / (1.0f + expf(-g[i]));
      du[i] = d[i] * g[i] * sig;
      dg[i] = d[i] * u[i] * sig * (1.0f + g[i] * (1.0f - sig));
    }
  }
}

/* out = a + b */
static void residual_forward(float *out, const float *a, const float *b,
                             size_t n) {
  for (size_t i = 0; i < n; i++)
    out[i] = a[i] + b[i];
}

/* lse[bt] = log sum exp(logits[bt,:]); losses[bt] = lse - logits[target]
 * (0 where target == -1). Returns the sum of losses; *count the positions. */
static double crossentropy_forward(float *losses /*(BT)*/, float *lse /*(BT)*/,
                                   const float *logits /*(BT,V)*/,
                                   const int32_t *targets /*(BT) or NULL*/,
                                   size_t BT, int V, size_t *count) {
  double total = 0.0;
  *count = 0;
  for (size_t bt = 0; bt < BT; bt++) {
    const float *z = logits + bt * V;
    float mx = z[0], sum = 0.0f;
    for (int i = 1; i < V; i++)
      mx = z[i] > mx ? z[i] : mx;
    for (int i = 0; i < V; i++)
      sum += expf(z[i] - mx);
    lse[bt] = mx + logf(sum);
    losses[bt] = 0.0f;
    if (targets && targets[bt] >= 0) {
      losses[bt] = lse[bt] - z[targets[bt]];
      total += losses[bt];
      (*count)++;
    }
  }
  return total;
}

/* dlogits[bt,:] = (softmax(logits[bt,:]) - onehot(target)) * dloss[bt], and
 * 0 where target == -1. */
static void crossentropy_softmax_backward(float *dlogits /*(BT,V)*/,
                                          const float *dloss /*(BT)*/,
                                          const float *logits /*(BT,V)*/,
                                          const float *lse /*(BT)*/,
                                          const int32_t *targets /*(BT)*/,
                                          size_t BT, int V) {
  for (size_t bt = 0; bt < BT; bt++) {
    float *d = dlogits + bt * V;
    const float *z = logits + bt * V;
    if (targets[bt] < 0 || dloss[bt] == 0.0f) {
      memset(d, 0, V * sizeof(float));
      continue;
    }
    for (int i = 0; i < V; i++)
      d[i] = expf(z[i] - lse[bt]) * dloss[bt];
    d[targets[bt]] -= dloss[bt];
  }
}

/* ------------------------------------------------------------------------ */
/* the model */

float pl_model_forward(pl_model *m, const int32_t *tokens,
                       const int32_t *targets, int B, int T) {
  const pl_config *c = &m->cfg;
  int C = c->d_model, L = c->n_layers, NH = c->n_heads, F = c->d_ff;
  int V = c->vocab;
  if (B <= 0 || T <= 0 || T > c->max_seq) {
    fprintf(stderr,
            "pl_model_forward: batch (B=%d, T=%d) out of range "
            "(max_seq %d)\n",
            B, T, c->max_seq);
    return NAN;
  }
  size_t BT = (size_t)B * T;
  for (size_t i = 0; i < BT; i++)
    if (tokens[i] < 0 || tokens[i] >= V ||
        (targets && (targets[i] < -1 || targets[i] >= V))) {
      fprintf(stderr,
              "pl_model_forward: token or target %d at %zu outside "
              "[0,%d)\n",
              tokens[i] < 0 || tokens[i] >= V ? tokens[i] : targets[i], i, V);
      return NAN;
    }
  if (ensure_acts(m, B, T) != PL_OK) {
    fprintf(stderr, "pl_model_forward: out of memory for B=%d T=%d\n", B, T);
    return NAN;
  }
  memcpy(m->tokens, tokens, BT * sizeof(int32_t));
  if (targets)
    memcpy(m->targets, targets, BT * sizeof(int32_t));
  else
    for (size_t i = 0; i < BT; i++)
      m->targets[i] = -1;
  m->has_targets = targets != NULL;

  pl_params *p = &m->params;
  pl_acts *a = &m->acts;
  embedding_forward(a->encoded, tokens, p->wte, BT, C);
  for (int l = 0; l < L; l++) {
    /* this layer's slices of the stacked parameters and activations */
    const float *res_in = l == 0 ? a->encoded : a->res_ffn + (l - 1) * BT * C;
    const float *rms_att = p->rms_att + (size_t)l * C;
    const float *wqkv = p->wqkv + (size_t)l * 3 * C * C;
    const float *wo = p->wo + (size_t)l * C * C;
    const float *rms_ffn = p->rms_ffn + (size_t)l * C;
    const float *w13 = p->w13 + (size_t)l * 2 * F * C;
    const float *w2 = p->w2 + (size_t)l * C * F;
    float *ln1 = a->ln1 + l * BT * C, *ln1_rstd = a->ln1_rstd + l * BT;
    float *qkv = a->qkv + l * BT * 3 * C;
    float *att = a->att + (size_t)l * B * NH * T * T;
    float *atty = a->atty + l * BT * C, *res_att = a->res_att + l * BT * C;
    float *ln2 = a->ln2 + l * BT * C, *ln2_rstd = a->ln2_rstd + l * BT;
    float *h13 = a->h13 + l * BT * 2 * F, *hmul = a->hmul + l * BT * F;
    float *res_ffn = a->res_ffn + l * BT * C;

    rmsnorm_forward(ln1, ln1_rstd, res_in, rms_att, BT, C);
    matmul_forward(qkv, ln1, wqkv, BT, C, 3 * C);
    rope_apply(qkv, m->rope_cos, m->rope_sin, B, T, C, NH, 1.0f);
    attention_forward(atty, att, qkv, B, T, C, NH);
    matmul_forward(a->dln, atty, wo, BT, C, C); /* dln: scratch */
    residual_forward(res_att, res_in, a->dln, BT * C);
    rmsnorm_forward(ln2, ln2_rstd, res_att, rms_ffn, BT, C);
    matmul_forward(h13, ln2, w13, BT, C, 2 * F);
    swiglu_forward(hmul, h13, BT, F);
    matmul_forward(a->dln, hmul, w2, BT, F, C);
    residual_forward(res_ffn, res_att, a->dln, BT * C);
  }
  rmsnorm_forward(a->lnf, a->lnf_rstd, a->res_ffn + (L - 1) * BT * C,
                  p->rms_final, BT, C);
  matmul_forward(a->logits, a->lnf, p->wte, BT, C, V); /* tied head */
  size_t count;
  double total = crossentropy_forward(a->losses, a->lse, a->logits, targets, BT,
                                      V, &count);
  m->mean_loss = !targets ? -1.0f : count ? (float)(total / count) : 0.0f;
  return m->mean_loss;
}

/* Backward from dloss[bt] = d loss / d (-logp[bt]) (the losses buffer's
 * gradient), through every layer, accumulating into m->grads. */
static void model_backward(pl_model *m, const float *dloss /*(BT)*/) {
  const pl_config *c = &m->cfg;
  int C = c->d_model, L = c->n_layers, NH = c->n_heads, F = c->d_ff;
  int V = c->vocab, B = m->B, T = m->T;
  size_t BT = (size_t)B * T;
  pl_params *p = &m->params, *g = &m->grads;
  pl_acts *a = &m->acts;

  crossentropy_softmax_backward(a->dlogits, dloss, a->logits, a->lse,
                                m->targets, BT, V);
  /* head: dlnf = dlogits · wte (into dln), dwte += dlogits^T · lnf */
  matmul_backward(a->dln, g->wte, a->dlogits, a->lnf, p->wte, BT, C, V);
  memset(a->dres, 0, BT * C * sizeof(float));
  rmsnorm_backward(a->dres, g->rms_final, a->dln, a->res_ffn + (L - 1) * BT * C,
                   p->rms_final, a->lnf_rstd, BT, C);
  for (int l = L - 1; l >= 0; l--) {
    const float *res_in = l == 0 ? a->encoded : a->res_ffn + (l - 1) * BT * C;
    const float *rms_att = p->rms_att + (size_t)l * C;
    const float *wqkv = p->wqkv + (size_t)l * 3 * C * C;
    const float *wo = p->wo + (size_t)l * C * C;
    const float *rms_ffn = p->rms_ffn + (size_t)l * C;
    const float *w13 = p->w13 + (size_t)l * 2 * F * C;
    const float *w2 = p->w2 + (size_t)l * C * F;
    float *d_rms_att = g->rms_att + (size_t)l * C;
    float *dwqkv = g->wqkv + (size_t)l * 3 * C * C;
    float *dwo = g->wo + (size_t)l * C * C;
    float *d_rms_ffn = g->rms_ffn + (size_t)l * C;
    float *dw13 = g->w13 + (size_t)l * 2 * F * C;
    float *dw2 = g->w2 + (size_t)l * C * F;
    const float *ln1 = a->ln1 + l * BT * C, *ln1_rstd = a->ln1_rstd + l * BT;
    const float *qkv = a->qkv + l * BT * 3 * C;
    const float *att = a->att + (size_t)l * B * NH * T * T;
    const float *atty = a->atty + l * BT * C;
    const float *res_att = a->res_att + l * BT * C;
    const float *ln2 = a->ln2 + l * BT * C, *ln2_rstd = a->ln2_rstd + l * BT;
    const float *h13 = a->h13 + l * BT * 2 * F, *hmul = a->hmul + l * BT * F;

    /* MLP: dres is d/d res_ffn here, and flows straight to res_att too */
    matmul_backward(a->dhmul, dw2, a->dres, hmul, w2, BT, F, C);
    swiglu_backward(a->dh13, a->dhmul, h13, BT, F);
    matmul_backward(a->dln, dw13, a->dh13, ln2, w13, BT, C, 2 * F);
    rmsnorm_backward(a->dres, d_rms_ffn, a->dln, res_att, rms_ffn, ln2_rstd, BT,
                     C);
    /* attention: dres is now d/d res_att */
    matmul_backward(a->datty, dwo, a->dres, atty, wo, BT, C, C);
    attention_backward(a->dqkv, a->datt, a->datty, qkv, att, B, T, C, NH);
    rope_apply(a->dqkv, m->rope_cos, m->rope_sin, B, T, C, NH, -1.0f);
    matmul_backward(a->dln, dwqkv, a->dqkv, ln1, wqkv, BT, C, 3 * C);
    rmsnorm_backward(a->dres, d_rms_att, a->dln, res_in, rms_att, ln1_rstd, BT,
                     C);
  }
  embedding_backward(g->wte, a->dres, m->tokens, BT, C);
}

int pl_model_backward(pl_model *m) {
  if (!m->acts_memory || !m->has_targets) {
    fprintf(stderr, "pl_model_backward: needs a forward with targets first\n");
    return PL_EINPUT;
  }
  size_t BT = (size_t)m->B * m->T, count = 0;
  for (size_t i = 0; i < BT; i++)
    count += m->targets[i] >= 0;
  if (!count) return PL_OK; /* the mean over nothing: no gradient */
  /* the mean loss: each counted position's dloss is 1/count */
  float *dloss = malloc(BT * sizeof(float));
  if (!dloss) return PL_EENV;
  for (size_t i = 0; i < BT; i++)
    dloss[i] = m->targets[i] >= 0 ? 1.0f / (float)count : 0.0f;
  model_backward(m, dloss);
  free(dloss);
  return PL_OK;
}

int pl_model_backward_weighted(pl_model *m, const float *dloss_dlogp) {
  if (!m->acts_memory || !m->has_targets) {
    fprintf(stderr, "pl_model_backward_weighted: needs a forward with "
                    "targets first\n");
    return PL_EINPUT;
  }
  size_t BT = (size_t)m->B * m->T;
  float *dloss = malloc(BT * sizeof(float));
  if (!dloss) return PL_EENV;
  /* loss gradient w.r.t. -logp is minus the one w.r.t. logp */
  for (size_t i = 0; i < BT; i++)
    dloss[i] = m->targets[i] >= 0 ? -dloss_dlogp[i] : 0.0f;
  model_backward(m, dloss);
  free(dloss);
  return PL_OK;
}
