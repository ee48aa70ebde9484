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
 * Every matmul, attention's included, goes through cblas_sgemm. The linear
 * layers' GEMMs are OpenBLAS-threaded and go through pl_linear_gemm, which
 * a hook can take over (policy.h; the lab's --policy-matmul); without one
 * it is cblas_sgemm. Everything between them runs on the same cores
 * through the policy's pool (policy/parallel.c): the element-wise loops
 * split their rows, and attention splits its (batch, head) pairs, each
 * thread running single-threaded GEMMs over the causal blocks only. exp
 * in the hot loops is a polynomial over GCC/Clang vectors (vexp4, ~2 ulp). It
 * does not do: a KV cache (the sampler's business), dropout, biases, mixed
 * precision, or anything but temperature-1 logits.
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
  pl_pool_set_threads(n);
}

/* The linear layers' GEMM hook (policy.h); NULL: cblas_sgemm. */
static pl_gemm_hook gemm_hook;
static void *gemm_hook_ctx;

void pl_set_gemm_hook(pl_gemm_hook fn, void *ctx) {
  gemm_hook = fn;
  gemm_hook_ctx = ctx;
}

/* One GEMM split over the pool: slices of GEMM_UNIT rows of C (split_m)
 * or columns, each a single-threaded cblas_sgemm on its part of A or B. */
#define GEMM_UNIT 16
typedef struct {
  int trans_a, trans_b, M, N, K, lda, ldb, ldc, split_m;
  float alpha, beta;
  const float *A, *B;
  float *C;
} gemm_args;

static void gemm_slice(void *ctx, size_t begin, size_t end, int slot) {
  const gemm_args *g = ctx;
  int lim = g->split_m ? g->M : g->N;
  int b0 = (int)begin * GEMM_UNIT;
  int nb = ((int)end * GEMM_UNIT < lim ? (int)end * GEMM_UNIT : lim) - b0;
  const float *A = g->A, *B = g->B;
  float *C = g->C;
  int M = g->M, N = g->N;
  (void)slot;
  if (g->split_m) {
    A += g->trans_a ? (size_t)b0 : (size_t)b0 * g->lda;
    C += (size_t)b0 * g->ldc;
    M = nb;
  } else {
    B += g->trans_b ? (size_t)b0 * g->ldb : (size_t)b0;
    C += b0;
    N = nb;
  }
  cblas_sgemm(CblasRowMajor, g->trans_a ? CblasTrans : CblasNoTrans,
              g->trans_b ? CblasTrans : CblasNoTrans, M, N, g->K, g->alpha, A,
              g->lda, B, g->ldb, g->beta, C, g->ldc);
}

/* The pool's threads split the linear GEMMs themselves (OpenBLAS runs one
 * thread, policy/parallel.c): no OpenBLAS helper spins on a core the
 * element-wise loops need. Below 2^20 multiply-adds (a sampling step's
 * small rows) one call. */
void pl_linear_gemm(int trans_a, int trans_b, int M, int N, int K, float alpha,
                    const float *A, int lda, const float *B, int ldb,
                    float beta, float *C, int ldc) {
  if (gemm_hook && gemm_hook(gemm_hook_ctx, trans_a, trans_b, M, N, K, alpha, A,
                             lda, B, ldb, beta, C, ldc) == 0)
    return;
  gemm_args g = {trans_a, trans_b, M,     N,    K, lda, ldb,
                 ldc,     M >= N,  alpha, beta, A, B,   C};
  int along = g.split_m ? M : N;
  if ((double)M * N * K < (double)(1 << 20) || along < 2 * GEMM_UNIT) {
    gemm_slice(&g, 0, (size_t)(along + GEMM_UNIT - 1) / GEMM_UNIT, 0);
    return;
  }
  pl_parallel_for(gemm_slice, &g, (size_t)(along + GEMM_UNIT - 1) / GEMM_UNIT,
                  1);
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

static void zero_rows(void *ctx, size_t begin, size_t end, int slot) {
  (void)slot;
  memset((float *)ctx + begin, 0, (end - begin) * sizeof(float));
}

void pl_model_zero_grad(pl_model *m) {
  pl_parallel_for(zero_rows, m->grads_memory, m->num_params, 1 << 16);
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
      {&a->datt, (size_t)PL_POOL_MAX * T * T},
      {&a->part, PL_POOL_MAX * (C > V ? C : V)},
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
/* exp over 4 lanes: GCC/Clang vector extensions (one SSE register on
 * plain x86-64, NEON on arm64). Cephes' expf: x = n ln2 + r,
 * |r| <= ln2/2, a degree-5 polynomial for e^r, 2^n put into the exponent
 * bits. Inputs are clamped to [-87, 88] (e^-87 ~ 1.6e-38 stands in for 0,
 * e^88 ~ 1.7e38 for overflow), within ~2 ulp of expf elsewhere. */

typedef float v4f __attribute__((vector_size(16)));
typedef int32_t v4i __attribute__((vector_size(16)));

static inline v4f v4_splat(float x) {
  return (v4f){x, x, x, x};
}
static inline v4f v4f_one(void) {
  return v4_splat(1.0f);
}
static inline v4f v4_load(const float *p) {
  v4f v;
  memcpy(&v, p, sizeof v);
  return v;
}
static inline void v4_store(float *p, v4f v) {
  memcpy(p, &v, sizeof v);
}
static inline float v4_sum(v4f v) {
  return (v[0] + v[2]) + (v[1] + v[3]);
}
static inline v4f v4_max(v4f a, v4f b) {
  v4i gt = a > b;
  return (v4f)(((v4i)a & gt) | ((v4i)b & ~gt));
}
static inline v4f v4_min(v4f a, v4f b) {
  return -v4_max(-a, -b);
}

static inline v4f vexp4(v4f x) {
  x = v4_min(v4_max(x, v4_splat(-87.0f)), v4_splat(88.0f));
  /* n = round(x log2 e): adding 1.5 * 2^23 rounds to an integer */
  v4f big = v4_splat(12582912.0f);
  v4f n = (x * v4_splat(1.44269504088896341f) + big) - big;
  v4f r = x - n * v4_splat(0.693359375f) - n * v4_splat(-2.12194440e-4f);
  v4f y = v4_splat(1.9875691500e-4f);
  y = y * r + v4_splat(1.3981999507e-3f);
  y = y * r + v4_splat(8.3334519073e-3f);
  y = y * r + v4_splat(4.1665795894e-2f);
  y = y * r + v4_splat(1.6666665459e-1f);
  y = y * r + v4_splat(5.0000001201e-1f);
  y = y * (r * r) + r + v4_splat(1.0f);
  v4i e = (__builtin_convertvector(n, v4i) + 127) << 23;
  return y * (v4f)e;
}

/* x[i] = exp(x[i] - shift) for i < n; returns their sum */
static float vexp_shift(float *x, int n, float shift) {
  v4f acc = v4_splat(0.0f), sh = v4_splat(shift);
  int i = 0;
  for (; i + 4 <= n; i += 4) {
    v4f e = vexp4(v4_load(x + i) - sh);
    v4_store(x + i, e);
    acc += e;
  }
  float sum = v4_sum(acc);
  if (i < n) {
    float tail[4] = {0};
    memcpy(tail, x + i, (n - i) * sizeof(float));
    v4f e = vexp4(v4_load(tail) - sh);
    for (int j = 0; j < n - i; j++) {
      x[i + j] = e[j];
      sum += e[j];
    }
  }
  return sum;
}

/* max of x[0..n), n >= 1 */
static float vmax(const float *x, int n) {
  float mx = x[0];
  int i = 0;
  if (n >= 4) {
    v4f m = v4_load(x);
    for (i = 4; i + 4 <= n; i += 4)
      m = v4_max(m, v4_load(x + i));
    for (int j = 0; j < 4; j++)
      mx = m[j] > mx ? m[j] : mx;
  }
  for (; i < n; i++)
    mx = x[i] > mx ? x[i] : mx;
  return mx;
}

/* ------------------------------------------------------------------------ */
/* layers. Each parallel one is a rows function over [begin, end) and a
 * wrapper handing slices of its rows to pl_parallel_for (policy.h). */

/* the arguments of every layer's rows function: a union of what they use */
typedef struct {
  float *out, *out2, *dw;
  const float *in, *in2, *w, *rstd, *cos_t, *sin_t;
  const int32_t *tokens;
  int B, T, C, NH, V;
  float dir;
  size_t dw_stride; /* per-slot partial dw: slot k at dw + k * dw_stride */
} layer_args;

/* out[bt,:] = wte[tokens[bt],:] */
static void embedding_forward(float *out /*(BT,C)*/, const int32_t *tokens,
                              const float *wte /*(V,C)*/, size_t BT, int C) {
  for (size_t bt = 0; bt < BT; bt++)
    memcpy(out + bt * C, wte + (size_t)tokens[bt] * C, C * sizeof(float));
}

/* Serial: rows of dwte repeat when tokens do. */
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
static void rmsnorm_forward_rows(void *ctx, size_t begin, size_t end,
                                 int slot) {
  const layer_args *g = ctx;
  int C = g->C;
  (void)slot;
  for (size_t n = begin; n < end; n++) {
    const float *x = g->in + n * C;
    float *o = g->out + n * C;
    float ss = 0.0f;
    for (int i = 0; i < C; i++)
      ss += x[i] * x[i];
    float r = 1.0f / sqrtf(ss / C + RMS_EPS);
    for (int i = 0; i < C; i++)
      o[i] = x[i] * r * g->w[i];
    g->out2[n] = r;
  }
}

static void rmsnorm_forward(float *out /*(N,C)*/, float *rstd /*(N)*/,
                            const float *inp /*(N,C)*/, const float *w /*(C)*/,
                            size_t N, int C) {
  layer_args g = {.out = out, .out2 = rstd, .in = inp, .w = w, .C = C};
  pl_parallel_for(rmsnorm_forward_rows, &g, N, 16);
}

/* With g = dout * w and r = rstd (dr/dx_i = -r^3 x_i / C):
 *   dx_i += r g_i - r^3 x_i (g . x) / C;   dw_i += dout_i x_i r.
 * dinp accumulates: it is the residual stream's gradient. Each slot sums
 * its rows' dw into its own zeroed partial; the wrapper adds them up. */
static void rmsnorm_backward_rows(void *ctx, size_t begin, size_t end,
                                  int slot) {
  const layer_args *g = ctx;
  int C = g->C;
  float *dw = g->dw + slot * g->dw_stride;
  memset(dw, 0, C * sizeof(float));
  for (size_t n = begin; n < end; n++) {
    const float *x = g->in + n * C, *d = g->in2 + n * C;
    float *dx = g->out + n * C;
    float r = g->rstd[n], gx = 0.0f;
    for (int i = 0; i < C; i++)
      gx += d[i] * g->w[i] * x[i];
    float k = r * r * r * gx / C;
    for (int i = 0; i < C; i++) {
      dx[i] += r * d[i] * g->w[i] - k * x[i];
      dw[i] += d[i] * x[i] * r;
    }
  }
}

/* part: (PL_POOL_MAX, C) scratch for the partial dw */
static void rmsnorm_backward(float *dinp /*(N,C)*/, float *dw /*(C)*/,
                             const float *dout /*(N,C)*/,
                             const float *inp /*(N,C)*/, const float *w,
                             const float *rstd /*(N)*/, float *part, size_t N,
                             int C) {
  layer_args g = {.out = dinp,
                  .dw = part,
                  .in = inp,
                  .in2 = dout,
                  .w = w,
                  .rstd = rstd,
                  .C = C,
                  .dw_stride = (size_t)C};
  int slots = pl_parallel_for(rmsnorm_backward_rows, &g, N, 16);
  for (int k = 0; k < slots; k++)
    for (int i = 0; i < C; i++)
      dw[i] += part[(size_t)k * C + i];
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
 * forward rotation, -1 its transpose (the backward of a rotation). Rows are
 * the (b,t) positions. */
static void rope_rows(void *ctx, size_t begin, size_t end, int slot) {
  const layer_args *g = ctx;
  int C = g->C, NH = g->NH, hs = C / NH, half = hs / 2;
  (void)slot;
  for (size_t bt = begin; bt < end; bt++) {
    int t = (int)(bt % g->T);
    float *row = g->out + bt * 3 * C;
    const float *ct = g->cos_t + (size_t)t * half,
                *st = g->sin_t + (size_t)t * half;
    for (int part = 0; part < 2; part++) /* q, then k */
      for (int h = 0; h < NH; h++) {
        float *x = row + part * C + h * hs;
        for (int i = 0; i < half; i++) {
          float c = ct[i], s = g->dir * st[i];
          float x0 = x[2 * i], x1 = x[2 * i + 1];
          x[2 * i] = x0 * c - x1 * s;
          x[2 * i + 1] = x0 * s + x1 * c;
        }
      }
  }
}

static void rope_apply(float *qkv /*(B,T,3C)*/, const float *cos_t,
                       const float *sin_t /*(max_seq,hs/2)*/, int B, int T,
                       int C, int NH, float dir) {
  layer_args g = {.out = qkv,
                  .cos_t = cos_t,
                  .sin_t = sin_t,
                  .T = T,
                  .C = C,
                  .NH = NH,
                  .dir = dir};
  pl_parallel_for(rope_rows, &g, (size_t)B * T, 16);
}

/* Attention works on blocks of ATT_BLOCK query rows: block [t0, t0+tb)
 * sees keys [0, t0+tb) only, so the GEMMs skip the blocks above the
 * diagonal (10 of 16 for T = 256) where P is 0. */
#define ATT_BLOCK 64

/* Runs fn over the (b,h) pairs, one slice of pairs per thread. */
static void attention_parallel(pl_par_fn fn, layer_args *g) {
  pl_parallel_for(fn, g, (size_t)g->B * g->NH, 1);
}

/* Causal attention per (b,h): S = Q K^T / sqrt(hs), P = softmax over t2 <= t
 * (zero above the diagonal), Y = P V. Q, K, V are column blocks of qkv,
 * read in place through the leading dimension 3C. Rows: (b,h) pairs. */
static void attention_forward_rows(void *ctx, size_t begin, size_t end,
                                   int slot) {
  const layer_args *g = ctx;
  int T = g->T, C = g->C, NH = g->NH, hs = C / NH, C3 = 3 * C;
  float scale = 1.0f / sqrtf((float)hs);
  (void)slot;
  for (size_t bh = begin; bh < end; bh++) {
    size_t b = bh / NH, h = bh % NH;
    const float *q = g->in + b * T * C3 + h * hs;
    const float *k = q + C, *v = q + 2 * C;
    float *p = g->out2 + bh * T * T;
    float *y = g->out + b * T * C + h * hs;
    for (int t0 = 0; t0 < T; t0 += ATT_BLOCK) {
      int tb = T - t0 < ATT_BLOCK ? T - t0 : ATT_BLOCK, nk = t0 + tb;
      float *pb = p + (size_t)t0 * T;
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, tb, nk, hs, scale,
                  q + (size_t)t0 * C3, C3, k, C3, 0.0f, pb, T);
      for (int t = t0; t < nk; t++) {
        float *row = p + (size_t)t * T;
        float mx = vmax(row, t + 1);
        float inv = 1.0f / vexp_shift(row, t + 1, mx);
        for (int t2 = 0; t2 <= t; t2++)
          row[t2] *= inv;
        memset(row + t + 1, 0, (T - t - 1) * sizeof(float));
      }
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, tb, hs, nk, 1.0f,
                  pb, T, v, C3, 0.0f, y + (size_t)t0 * C, C);
    }
  }
}

static void attention_forward(float *out /*(B,T,C)*/, float *att /*(B,NH,T,T)*/,
                              const float *qkv /*(B,T,3C)*/, int B, int T,
                              int C, int NH) {
  layer_args g = {
      .out = out, .out2 = att, .in = qkv, .B = B, .T = T, .C = C, .NH = NH};
  attention_parallel(attention_forward_rows, &g);
}

/* dP = dY V^T; dV = P^T dY; dS = P * (dP - rowsum(P * dP));
 * dQ = dS K / sqrt(hs); dK = dS^T Q / sqrt(hs). dqkv is overwritten. Per
 * query block: dP, dS and dQ over its keys; then per key block [s0, s0+sb):
 * dV and dK from the rows t >= s0 (P and dS are 0 above the diagonal). */
static void attention_backward_rows(void *ctx, size_t begin, size_t end,
                                    int slot) {
  const layer_args *g = ctx;
  int T = g->T, C = g->C, NH = g->NH, hs = C / NH, C3 = 3 * C;
  float scale = 1.0f / sqrtf((float)hs);
  float *dp = g->dw + slot * g->dw_stride; /* this thread's (T,T) */
  for (size_t bh = begin; bh < end; bh++) {
    size_t b = bh / NH, h = bh % NH;
    size_t off = b * T * C3 + h * hs;
    const float *q = g->in + off, *k = q + C, *v = q + 2 * C;
    float *dq = g->out + off, *dk = dq + C, *dv = dq + 2 * C;
    const float *p = g->w + bh * T * T;
    const float *dy = g->in2 + b * T * C + h * hs;
    for (int t0 = 0; t0 < T; t0 += ATT_BLOCK) {
      int tb = T - t0 < ATT_BLOCK ? T - t0 : ATT_BLOCK, nk = t0 + tb;
      float *db = dp + (size_t)t0 * T;
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, tb, nk, hs, 1.0f,
                  dy + (size_t)t0 * C, C, v, C3, 0.0f, db, T);
      for (int t = t0; t < nk; t++) {
        const float *pr = p + (size_t)t * T;
        float *dr = dp + (size_t)t * T, dot = 0.0f;
        for (int t2 = 0; t2 <= t; t2++)
          dot += pr[t2] * dr[t2];
        for (int t2 = 0; t2 <= t; t2++)
          dr[t2] = pr[t2] * (dr[t2] - dot);
        for (int t2 = t + 1; t2 < nk; t2++)
          dr[t2] = 0.0f;
      }
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, tb, hs, nk, scale,
                  db, T, k, C3, 0.0f, dq + (size_t)t0 * C3, C3);
    }
    for (int s0 = 0; s0 < T; s0 += ATT_BLOCK) {
      int sb = T - s0 < ATT_BLOCK ? T - s0 : ATT_BLOCK, rows = T - s0;
      size_t at = (size_t)s0 * T + s0;
      cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, sb, hs, rows, 1.0f,
                  p + at, T, dy + (size_t)s0 * C, C, 0.0f, dv + (size_t)s0 * C3,
                  C3);
      cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, sb, hs, rows, scale,
                  dp + at, T, q + (size_t)s0 * C3, C3, 0.0f,
                  dk + (size_t)s0 * C3, C3);
    }
  }
}

/* dp: (PL_POOL_MAX,T,T) scratch */
static void attention_backward(float *dqkv /*(B,T,3C)*/, float *dp,
                               const float *dout /*(B,T,C)*/,
                               const float *qkv /*(B,T,3C)*/,
                               const float *att /*(B,NH,T,T)*/, int B, int T,
                               int C, int NH) {
  layer_args g = {.out = dqkv,
                  .dw = dp,
                  .in = qkv,
                  .in2 = dout,
                  .w = att,
                  .B = B,
                  .T = T,
                  .C = C,
                  .NH = NH,
                  .dw_stride = (size_t)T * T};
  attention_parallel(attention_backward_rows, &g);
}

/* silu(g) u over 4 lanes */
static inline v4f swiglu4(v4f g, v4f u) {
  return g / (v4f_one() + vexp4(-g)) * u;
}

/* out = silu(gate) * up, gate = h13[n, 0:F], up = h13[n, F:2F] */
static void swiglu_forward_rows(void *ctx, size_t begin, size_t end, int slot) {
  const layer_args *a = ctx;
  int F = a->C;
  (void)slot;
  for (size_t n = begin; n < end; n++) {
    const float *g = a->in + n * 2 * F, *u = g + F;
    float *o = a->out + n * F;
    int i = 0;
    for (; i + 4 <= F; i += 4)
      v4_store(o + i, swiglu4(v4_load(g + i), v4_load(u + i)));
    if (i < F) { /* the tail through the same lanes */
      float gb[4] = {0}, ub[4] = {0}, ob[4];
      memcpy(gb, g + i, (F - i) * sizeof(float));
      memcpy(ub, u + i, (F - i) * sizeof(float));
      v4_store(ob, swiglu4(v4_load(gb), v4_load(ub)));
      memcpy(o + i, ob, (F - i) * sizeof(float));
    }
  }
}

static void swiglu_forward(float *out /*(N,F)*/, const float *h13 /*(N,2F)*/,
                           size_t N, int F) {
  layer_args g = {.out = out, .in = h13, .C = F};
  pl_parallel_for(swiglu_forward_rows, &g, N, 16);
}

/* silu'(g) = sig(g) (1 + g (1 - sig(g))): dg and du of 4 lanes */
static inline void swiglu_back4(v4f g, v4f u, v4f d, v4f *dg, v4f *du) {
  v4f one = v4f_one(), sig = one / (one + vexp4(-g));
  *du = d * g * sig;
  *dg = d * u * sig * (one + g * (one - sig));
}

/* dh13 is overwritten */
static void swiglu_backward_rows(void *ctx, size_t begin, size_t end,
                                 int slot) {
  const layer_args *a = ctx;
  int F = a->C;
  (void)slot;
  for (size_t n = begin; n < end; n++) {
    const float *g = a->in + n * 2 * F, *u = g + F, *d = a->in2 + n * F;
    float *dg = a->out + n * 2 * F, *du = dg + F;
    int i = 0;
    v4f vg, vu;
    for (; i + 4 <= F; i += 4) {
      swiglu_back4(v4_load(g + i), v4_load(u + i), v4_load(d + i), &vg, &vu);
      v4_store(dg + i, vg);
      v4_store(du + i, vu);
    }
    if (i < F) {
      float gb[4] = {0}, ub[4] = {0}, db[4] = {0}, dgb[4], dub[4];
      size_t w = (F - i) * sizeof(float);
      memcpy(gb, g + i, w);
      memcpy(ub, u + i, w);
      memcpy(db, d + i, w);
      swiglu_back4(v4_load(gb), v4_load(ub), v4_load(db), &vg, &vu);
      v4_store(dgb, vg);
      v4_store(dub, vu);
      memcpy(dg + i, dgb, w);
      memcpy(du + i, dub, w);
    }
  }
}

static void swiglu_backward(float *dh13 /*(N,2F)*/, const float *dout /*(N,F)*/,
                            const float *h13 /*(N,2F)*/, size_t N, int F) {
  layer_args g = {.out = dh13, .in = h13, .in2 = dout, .C = F};
  pl_parallel_for(swiglu_backward_rows, &g, N, 16);
}

/* out = a + b; rows are elements */
static void residual_rows(void *ctx, size_t begin, size_t end, int slot) {
  const layer_args *g = ctx;
  (void)slot;
  for (size_t i = begin; i < end; i++)
    g->out[i] = g->in[i] + g->in2[i];
}

static void residual_forward(float *out, const float *a, const float *b,
                             size_t n) {
  layer_args g = {.out = out, .in = a, .in2 = b};
  pl_parallel_for(residual_rows, &g, n, 4096);
}

/* lse[bt] = log sum exp(logits[bt,:]); losses[bt] = lse - logits[target]
 * (0 where target == -1). scratch (PL_POOL_MAX, V): each thread's exps. */
static void crossentropy_forward_rows(void *ctx, size_t begin, size_t end,
                                      int slot) {
  const layer_args *g = ctx;
  int V = g->V;
  float *e = g->dw + slot * g->dw_stride;
  for (size_t bt = begin; bt < end; bt++) {
    const float *z = g->in + bt * V;
    float mx = vmax(z, V);
    memcpy(e, z, V * sizeof(float));
    float lse = mx + logf(vexp_shift(e, V, mx));
    g->out2[bt] = lse;
    int32_t tg = g->tokens ? g->tokens[bt] : -1;
    g->out[bt] = tg >= 0 ? lse - z[tg] : 0.0f;
  }
}

/* Returns the sum of losses (in row order); *count the positions. */
static double crossentropy_forward(float *losses /*(BT)*/, float *lse /*(BT)*/,
                                   const float *logits /*(BT,V)*/,
                                   const int32_t *targets /*(BT) or NULL*/,
                                   float *scratch, size_t BT, int V,
                                   size_t *count) {
  layer_args g = {.out = losses,
                  .out2 = lse,
                  .in = logits,
                  .dw = scratch,
                  .tokens = targets,
                  .V = V,
                  .dw_stride = (size_t)V};
  pl_parallel_for(crossentropy_forward_rows, &g, BT, 16);
  double total = 0.0;
  *count = 0;
  for (size_t bt = 0; bt < BT; bt++)
    if (targets && targets[bt] >= 0) {
      total += losses[bt];
      (*count)++;
    }
  return total;
}

/* dlogits[bt,:] = (softmax(logits[bt,:]) - onehot(target)) * dloss[bt], and
 * 0 where target == -1. */
static void crossentropy_backward_rows(void *ctx, size_t begin, size_t end,
                                       int slot) {
  const layer_args *g = ctx;
  int V = g->V;
  (void)slot;
  for (size_t bt = begin; bt < end; bt++) {
    float *d = g->out + bt * V;
    float dl = g->in2[bt];
    int32_t tg = g->tokens[bt];
    if (tg < 0 || dl == 0.0f) {
      memset(d, 0, V * sizeof(float));
      continue;
    }
    memcpy(d, g->in + bt * V, V * sizeof(float));
    vexp_shift(d, V, g->rstd[bt]);
    for (int i = 0; i < V; i++)
      d[i] *= dl;
    d[tg] -= dl;
  }
}

static void crossentropy_softmax_backward(float *dlogits /*(BT,V)*/,
                                          const float *dloss /*(BT)*/,
                                          const float *logits /*(BT,V)*/,
                                          const float *lse /*(BT)*/,
                                          const int32_t *targets /*(BT)*/,
                                          size_t BT, int V) {
  layer_args g = {.out = dlogits,
                  .in = logits,
                  .in2 = dloss,
                  .rstd = lse,
                  .tokens = targets,
                  .V = V};
  pl_parallel_for(crossentropy_backward_rows, &g, BT, 16);
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
  double total = crossentropy_forward(a->losses, a->lse, a->logits, targets,
                                      a->part, BT, V, &count);
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
                   p->rms_final, a->lnf_rstd, a->part, BT, C);
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
    rmsnorm_backward(a->dres, d_rms_ffn, a->dln, res_att, rms_ffn, ln2_rstd,
                     a->part, BT, C);
    /* attention: dres is now d/d res_att */
    matmul_backward(a->datty, dwo, a->dres, atty, wo, BT, C, C);
    attention_backward(a->dqkv, a->datt, a->datty, qkv, att, B, T, C, NH);
    rope_apply(a->dqkv, m->rope_cos, m->rope_sin, B, T, C, NH, -1.0f);
    matmul_backward(a->dln, dwqkv, a->dqkv, ln1, wqkv, BT, C, 3 * C);
    rmsnorm_backward(a->dres, d_rms_att, a->dln, res_in, rms_att, ln1_rstd,
                     a->part, BT, C);
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
