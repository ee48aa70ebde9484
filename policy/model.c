/*
 * policy/model.c — the policy's decoder-only transformer on the CPU, in
 * fp32: configuration, parameters, activations, initialisation, and the
 * forward and backward that string the layers of policy/layers.c together.
 * The readable reference that policy/cuda/ mirrors kernel by kernel, and
 * that tests/python/test_policy_torch.py holds against PyTorch.
 *
 * Layout (llm.c): parameters, gradients and activations are one allocation
 * each, with plain structs of pointers into them (pl_params, pl_acts in
 * policy.h). Parameter gradients accumulate (+=); activation gradients
 * overwrite, except the residual stream's. Each layer is a
 * pll_name_forward / pll_name_backward pair (policy/layers_internal.h).
 *
 * The linear layers' GEMMs go through pl_linear_gemm, which a hook can take
 * over (policy.h, policy/gemm_hook.c; the lab's --policy-matmul); without
 * one it is cblas_sgemm (pl_blas_gemm, split over the policy's pool).
 * Everything between them runs on the same cores through the policy's pool
 * (policy/parallel.c). It does not do: a KV cache (the sampler's business),
 * dropout, biases, mixed precision, or anything but temperature-1 logits.
 */
#include "policy/layers_internal.h"
#include "policy/policy.h"

#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
void pl_blas_gemm(int trans_a, int trans_b, int M, int N, int K, float alpha,
                  const float *A, int lda, const float *B, int ldb, float beta,
                  float *C, int ldc) {
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
    /* name what failed before pl_model_free clears it */
    int tables = m->params_memory && m->grads_memory;
    size_t n = m->num_params;
    pl_model_free(m);
    if (tables)
      snprintf(why, why_len,
               "model: out of memory for the RoPE tables (max_seq %d x %d "
               "floats, twice)",
               (int)cfg->max_seq, hs / 2);
    else
      snprintf(why, why_len,
               "model: out of memory for %zu parameters and their gradients",
               n);
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

double pl_model_acts_bytes(const pl_config *c, int B, int T) {
  /* every term is affine in B (the backward's per-thread scratch is not
   * per row): counted at B = 1 and 2, as doubles, since a batch a
   * campaign file can ask for overflows size_t */
  pl_acts a;
  double one = (double)point_acts(&a, NULL, c, 1, T);
  double two = (double)point_acts(&a, NULL, c, 2, T);
  return (one + (two - one) * (B - 1)) * sizeof(float);
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
  pll_embedding_forward(a->encoded, tokens, p->wte, BT, C);
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

    pll_rmsnorm_forward(ln1, ln1_rstd, res_in, rms_att, BT, C);
    pll_matmul_forward(qkv, ln1, wqkv, BT, C, 3 * C);
    pll_rope_apply(qkv, m->rope_cos, m->rope_sin, B, T, C, NH, 1.0f);
    pll_attention_forward(atty, att, qkv, B, T, C, NH);
    pll_matmul_forward(a->dln, atty, wo, BT, C, C); /* dln: scratch */
    pll_residual_forward(res_att, res_in, a->dln, BT * C);
    pll_rmsnorm_forward(ln2, ln2_rstd, res_att, rms_ffn, BT, C);
    pll_matmul_forward(h13, ln2, w13, BT, C, 2 * F);
    pll_swiglu_forward(hmul, h13, BT, F);
    pll_matmul_forward(a->dln, hmul, w2, BT, F, C);
    pll_residual_forward(res_ffn, res_att, a->dln, BT * C);
  }
  pll_rmsnorm_forward(a->lnf, a->lnf_rstd, a->res_ffn + (L - 1) * BT * C,
                      p->rms_final, BT, C);
  pll_matmul_forward(a->logits, a->lnf, p->wte, BT, C, V); /* tied head */
  size_t count;
  double total = pll_crossentropy_forward(a->losses, a->lse, a->logits, targets,
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

  pll_crossentropy_softmax_backward(a->dlogits, dloss, a->logits, a->lse,
                                    m->targets, BT, V);
  /* head: dlnf = dlogits · wte (into dln), dwte += dlogits^T · lnf */
  pll_matmul_backward(a->dln, g->wte, a->dlogits, a->lnf, p->wte, BT, C, V);
  memset(a->dres, 0, BT * C * sizeof(float));
  pll_rmsnorm_backward(a->dres, g->rms_final, a->dln,
                       a->res_ffn + (L - 1) * BT * C, p->rms_final, a->lnf_rstd,
                       a->part, BT, C);
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
    pll_matmul_backward(a->dhmul, dw2, a->dres, hmul, w2, BT, F, C);
    pll_swiglu_backward(a->dh13, a->dhmul, h13, BT, F);
    pll_matmul_backward(a->dln, dw13, a->dh13, ln2, w13, BT, C, 2 * F);
    pll_rmsnorm_backward(a->dres, d_rms_ffn, a->dln, res_att, rms_ffn, ln2_rstd,
                         a->part, BT, C);
    /* attention: dres is now d/d res_att */
    pll_matmul_backward(a->datty, dwo, a->dres, atty, wo, BT, C, C);
    pll_attention_backward(a->dqkv, a->datt, a->datty, qkv, att, B, T, C, NH);
    pll_rope_apply(a->dqkv, m->rope_cos, m->rope_sin, B, T, C, NH, -1.0f);
    pll_matmul_backward(a->dln, dwqkv, a->dqkv, ln1, wqkv, BT, C, 3 * C);
    pll_rmsnorm_backward(a->dres, d_rms_att, a->dln, res_in, rms_att, ln1_rstd,
                         a->part, BT, C);
  }
  pll_embedding_backward(g->wte, a->dres, m->tokens, BT, C);
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
