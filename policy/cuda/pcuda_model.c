/*
 * policy/cuda/pcuda_model.c — the policy's decoder-only transformer on a
 * CUDA backend: policy/model.c, function by function. Each static layer
 * function below has the name of its CPU twin and launches the kernel(s)
 * of the same name + _kernel (policy/cuda/<layer>.cu); pcuda_model_forward
 * and model_backward walk the layers in the CPU's order, with the same
 * slices of the same stacked tensors (pl_params, and pcuda_acts whose
 * fields are pl_acts's).
 *
 * What differs from the CPU, and why:
 *   - the losses are summed on the host after a download (the forward
 *     returns the mean, like the CPU's, so it waits for the kernels);
 *   - the per-token loss gradient (dloss) is computed on the host exactly as
 *     the CPU does and uploaded;
 *   - attention's backward keeps dS of every head at once (acts.datt is
 *     (B,NH,T,T)), since the heads run in parallel;
 *   - GEMMs go through pcuda_gemm: cuBLAS on a device, the tiled kernel on
 *     the emulator (or when cuBLAS is missing).
 *   - a bf16 model (pcuda_model_init_dtype) runs its linear layers through
 *     their bf16 twins (pcuda_linear_forward / linear_backward below pick;
 *     pcuda_model_bf16.c); everything else is the same code for both.
 * Parameter gradients accumulate (+=), activation gradients overwrite,
 * except the residual stream's, as on the CPU.
 */
#include "policy/cuda/pcuda_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* threads per block: element-wise kernels, row kernels */
#define ELEM_THREADS 256u
#define ROW_THREADS 128u
/* rows per block of rmsnorm_backward_dweight_kernel's partial sums */
#define DW_ROWS 128u
/* int32 slots of embedding_backward's token runs for BT tokens: the
 * positions (BT), the runs' starts (at most BT + 1), their tokens (BT) */
#define TOKEN_RUNS_INTS(BT) (3 * (size_t)(BT) + 1)

static pcuda_dim dim1(unsigned x) {
  return (pcuda_dim){x, 1, 1};
}

/* Points the eight tensors of p into memory, in pl_params order (as
 * model.c's point_params). */
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

int pcuda_model_init(pcuda_model *dm, pcuda_ctx *ctx, const pl_model *m,
                     char *why, size_t whylen) {
  memset(dm, 0, sizeof *dm);
  dm->ctx = ctx;
  dm->cfg = m->cfg;
  memcpy(dm->param_sizes, m->param_sizes, sizeof dm->param_sizes);
  dm->num_params = m->num_params;
  int hs = m->cfg.d_model / m->cfg.n_heads;
  size_t rope_n = (size_t)m->cfg.max_seq * (hs / 2);
  size_t bytes = dm->num_params * sizeof(float);
  dm->params_memory = pcuda_alloc(ctx, bytes);
  dm->grads_memory = pcuda_alloc(ctx, bytes);
  dm->rope_cos = pcuda_alloc(ctx, rope_n * sizeof(float));
  dm->rope_sin = pcuda_alloc(ctx, rope_n * sizeof(float));
  pcuda_upload(ctx, dm->params_memory, m->params_memory, bytes);
  pcuda_zero(ctx, dm->grads_memory, bytes);
  pcuda_upload(ctx, dm->rope_cos, m->rope_cos, rope_n * sizeof(float));
  pcuda_upload(ctx, dm->rope_sin, m->rope_sin, rope_n * sizeof(float));
  int rc = pcuda_status(ctx, why, whylen);
  if (rc != PL_OK) {
    pcuda_model_free(dm);
    return rc;
  }
  point_params(&dm->params, dm->params_memory, dm->param_sizes);
  point_params(&dm->grads, dm->grads_memory, dm->param_sizes);
  dm->mean_loss = -1.0f;
  return PL_OK;
}

void pcuda_model_free(pcuda_model *dm) {
  pcuda_ctx *ctx = dm->ctx;
  if (ctx) {
    pcuda_free(ctx, dm->params_memory);
    pcuda_free(ctx, dm->grads_memory);
    pcuda_free(ctx, dm->rope_cos);
    pcuda_free(ctx, dm->rope_sin);
    pcuda_free(ctx, dm->acts_memory);
    pcuda_free(ctx, dm->params_bf16);
    pcuda_free(ctx, dm->bf16_scratch);
  }
  free(dm->tokens);
  free(dm->targets);
  free(dm->host_scratch);
  free(dm->host_runs);
  memset(dm, 0, sizeof *dm);
}

int pcuda_model_set_params(pcuda_model *dm, const float *params) {
  int rc = pcuda_upload(dm->ctx, dm->params_memory, params,
                        dm->num_params * sizeof(float));
  /* a bf16 model's GEMMs read the bf16 copy: refresh it */
  return rc == PL_OK ? pcuda_model_cast_params(dm) : rc;
}

int pcuda_model_get_params(pcuda_model *dm, float *params) {
  return pcuda_download(dm->ctx, params, dm->params_memory,
                        dm->num_params * sizeof(float));
}

int pcuda_model_get_grads(pcuda_model *dm, float *grads) {
  return pcuda_download(dm->ctx, grads, dm->grads_memory,
                        dm->num_params * sizeof(float));
}

void pcuda_model_zero_grad(pcuda_model *dm) {
  pcuda_zero(dm->ctx, dm->grads_memory, dm->num_params * sizeof(float));
}

/* ------------------------------------------------------------------------ */
/* activations */

/* Points the activation tensors into memory (NULL: just count) for (B,T);
 * returns the number of floats they need. model.c's point_acts, plus dloss
 * and the token and target ids (int32, one float slot each). */
static size_t point_acts(pcuda_acts *a, float *memory, const pl_config *c,
                         int B, int T) {
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
      {&a->datt, (size_t)B * NH * T * T},
      {&a->dloss, BT},
      {&a->dw_partial, pcuda_blocks(BT, DW_ROWS) * C},
  };
  size_t total = 0;
  for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
    if (memory) *t[i].ptr = memory + total;
    total += t[i].n;
  }
  if (memory) {
    a->tokens = (int32_t *)(memory + total);
    a->targets = a->tokens + BT;
    a->token_runs = a->targets + BT;
  }
  return total + 2 * BT + TOKEN_RUNS_INTS(BT);
}

static double batch_bytes_at(const pl_config *c, int dtype, int B, int T) {
  pcuda_acts a;
  double bytes = (double)point_acts(&a, NULL, c, B, T) * sizeof(float);
  if (dtype == PCUDA_DTYPE_BF16)
    bytes += (double)pcuda_bf16_scratch_elems(c, B, T) * sizeof(pcuda_bf16);
  return bytes;
}

double pcuda_model_batch_bytes(const pl_config *c, int dtype, int B, int T) {
  /* Affine in B but for the rounding of the partial sums' blocks, so
   * counted at B = 1 and 2 in doubles first; where that is well inside
   * size_t, the count at B itself is exact. */
  double one = batch_bytes_at(c, dtype, 1, T);
  double est = one + (batch_bytes_at(c, dtype, 2, T) - one) * (B - 1);
  if (B <= 2 || est > 0x1p60) return est;
  return batch_bytes_at(c, dtype, B, T);
}

/* Makes room for a (B,T) batch: the activations grow, never shrink. The
 * host side keeps the tokens, targets, per-token losses and the token runs
 * of embedding_backward (token_runs below, with its V+1 counters). */
static int ensure_acts(pcuda_model *dm, int B, int T) {
  if (dm->acts_memory && dm->B == B && dm->T == T) return PL_OK;
  size_t need = point_acts(&dm->acts, NULL, &dm->cfg, B, T);
  if (need > dm->acts_capacity) {
    pcuda_free(dm->ctx, dm->acts_memory);
    dm->acts_memory = pcuda_alloc(dm->ctx, need * sizeof(float));
    dm->acts_capacity = dm->acts_memory ? need : 0;
  }
  size_t BT = (size_t)B * T;
  if (dm->host_capacity < BT) {
    free(dm->tokens);
    free(dm->targets);
    free(dm->host_scratch);
    free(dm->host_runs);
    dm->tokens = malloc(BT * sizeof(int32_t));
    dm->targets = malloc(BT * sizeof(int32_t));
    dm->host_scratch = malloc(BT * sizeof(float));
    dm->host_runs = malloc((TOKEN_RUNS_INTS(BT) + (size_t)dm->cfg.vocab + 1) *
                           sizeof(int32_t));
    dm->host_capacity =
        dm->tokens && dm->targets && dm->host_scratch && dm->host_runs ? BT : 0;
  }
  if (!dm->acts_memory || !dm->host_capacity) {
    dm->B = dm->T = 0;
    return PL_EENV;
  }
  point_acts(&dm->acts, dm->acts_memory, &dm->cfg, B, T);
  dm->B = B;
  dm->T = T;
  return PL_OK;
}

/* ------------------------------------------------------------------------ */
/* layers: each launches the kernels of policy/cuda/<layer>.cu (the
 * pcuda_ ones are the cached forward's too, pcuda_internal.h) */

void pcuda_embedding_forward(pcuda_ctx *ctx, float *out /*(BT,C)*/,
                             const int32_t *tokens, const float *wte /*(V,C)*/,
                             int BT, int C) {
  void *args[] = {&out, &tokens, &wte, &BT, &C};
  pcuda_launch(ctx, PCUDA_K_embedding_forward_kernel,
               dim1(pcuda_blocks((size_t)BT * C, ELEM_THREADS)),
               dim1(ELEM_THREADS), 0, args);
}

/* The runs of equal tokens in tokens (BT, host), for embedding_backward:
 * into runs (TOKEN_RUNS_INTS(BT) slots, the device layout) the positions
 * ordered by token and, within a token, by position (a counting sort,
 * stable), at runs[BT..] the start of each token's run in them (n_runs + 1
 * entries), at runs[2BT+1..] each run's token; counts (V+1) is scratch.
 * Returns n_runs. */
static int token_runs(int32_t *runs, int32_t *counts, const int32_t *tokens,
                      int BT, int V) {
  int32_t *pos = runs, *start = runs + BT, *run_token = runs + 2 * BT + 1;
  memset(counts, 0, ((size_t)V + 1) * sizeof *counts);
  for (int i = 0; i < BT; i++)
    counts[tokens[i] + 1]++;
  int n_runs = 0;
  for (int v = 0; v < V; v++) {
    if (counts[v + 1]) {
      start[n_runs] = counts[v];
      run_token[n_runs++] = v;
    }
    counts[v + 1] += counts[v]; /* counts[v]: where token v's run starts */
  }
  start[n_runs] = BT;
  for (int i = 0; i < BT; i++)
    pos[counts[tokens[i]]++] = i;
  return n_runs;
}

/* dwte[v,:] += dout[bt,:] for every bt with tokens[bt] == v: the token runs
 * (host tokens -> token_runs, uploaded to dm->acts.token_runs), then a
 * block per run. */
static void embedding_backward(pcuda_model *dm, float *dwte /*(V,C)*/,
                               const float *dout /*(BT,C)*/, int BT, int C) {
  pcuda_ctx *ctx = dm->ctx;
  int32_t *runs = dm->host_runs, *counts = runs + TOKEN_RUNS_INTS(BT);
  int n_runs = token_runs(runs, counts, dm->tokens, BT, dm->cfg.vocab);
  int32_t *d_runs = dm->acts.token_runs;
  pcuda_upload(ctx, d_runs, runs, TOKEN_RUNS_INTS(BT) * sizeof(int32_t));
  const int32_t *pos = d_runs, *start = d_runs + BT,
                *run_token = d_runs + 2 * BT + 1;
  void *args[] = {&dwte, &dout, &pos, &start, &run_token, &n_runs, &C};
  pcuda_launch(ctx, PCUDA_K_embedding_backward_kernel, dim1((unsigned)n_runs),
               dim1(ROW_THREADS), 0, args);
}

void pcuda_rmsnorm_forward(pcuda_ctx *ctx, float *out /*(N,C)*/,
                           float *rstd /*(N)*/, const float *inp /*(N,C)*/,
                           const float *w /*(C)*/, int N, int C) {
  void *args[] = {&out, &rstd, &inp, &w, &N, &C};
  pcuda_launch(ctx, PCUDA_K_rmsnorm_forward_kernel, dim1((unsigned)N),
               dim1(ROW_THREADS), 0, args);
}

/* dinp accumulates (the residual stream's gradient); dw += as well, in two
 * steps: partial sums of DW_ROWS rows each into partial ((ceil(N/DW_ROWS),
 * C), scratch), then their sum in order. */
static void rmsnorm_backward(pcuda_ctx *ctx, float *dinp /*(N,C)*/,
                             float *dw /*(C)*/, float *partial,
                             const float *dout /*(N,C)*/,
                             const float *inp /*(N,C)*/, const float *w,
                             const float *rstd /*(N)*/, int N, int C) {
  void *args[] = {&dinp, &dout, &inp, &w, &rstd, &N, &C};
  pcuda_launch(ctx, PCUDA_K_rmsnorm_backward_kernel, dim1((unsigned)N),
               dim1(ROW_THREADS), 0, args);
  unsigned chunks = pcuda_blocks((size_t)N, DW_ROWS);
  unsigned col_tiles = pcuda_blocks((size_t)C, 32);
  int rows = (int)DW_ROWS;
  void *pargs[] = {&partial, &dout, &inp, &rstd, &N, &C, &rows};
  pcuda_launch(ctx, PCUDA_K_rmsnorm_backward_dweight_kernel,
               dim1(chunks * col_tiles), (pcuda_dim){32, 8, 1}, 0, pargs);
  int n_chunks = (int)chunks;
  void *sargs[] = {&dw, &partial, &n_chunks, &C};
  pcuda_launch(ctx, PCUDA_K_rmsnorm_backward_dweight_sum_kernel,
               dim1(pcuda_blocks((size_t)C, ELEM_THREADS)), dim1(ELEM_THREADS),
               0, sargs);
}

/* out = inp · w^T (w stored (OC,IC)) */
static void matmul_forward(pcuda_ctx *ctx, float *out /*(N,OC)*/,
                           const float *inp /*(N,IC)*/,
                           const float *w /*(OC,IC)*/, int N, int IC, int OC) {
  pcuda_gemm(ctx, out, inp, w, N, OC, IC, IC, IC, OC, 0, 1, 1.0f, 0.0f);
}

/* dinp = dout · w (overwritten); dw += dout^T · inp */
static void matmul_backward(pcuda_ctx *ctx, float *dinp /*(N,IC)*/,
                            float *dw /*(OC,IC)*/, const float *dout /*(N,OC)*/,
                            const float *inp /*(N,IC)*/,
                            const float *w /*(OC,IC)*/, int N, int IC, int OC) {
  pcuda_gemm(ctx, dinp, dout, w, N, IC, OC, OC, IC, IC, 0, 0, 1.0f, 0.0f);
  pcuda_gemm(ctx, dw, dout, inp, OC, IC, N, OC, IC, IC, 1, 0, 1.0f, 1.0f);
}

/* The model's linear layers in its dtype: matmul_forward / matmul_backward
 * above for fp32, their bf16 twins (pcuda_model_bf16.c: bf16 operands,
 * fp32 sums and outputs) for PCUDA_DTYPE_BF16. w points into
 * dm->params_memory. */
void pcuda_linear_forward(pcuda_model *dm, float *out /*(N,OC)*/,
                          const float *inp /*(N,IC)*/,
                          const float *w /*(OC,IC)*/, int N, int IC, int OC) {
  if (dm->dtype == PCUDA_DTYPE_BF16)
    pcuda_bf16_matmul_forward(dm, out, inp, w, N, IC, OC);
  else
    matmul_forward(dm->ctx, out, inp, w, N, IC, OC);
}

static void linear_backward(pcuda_model *dm, float *dinp /*(N,IC)*/,
                            float *dw /*(OC,IC)*/, const float *dout /*(N,OC)*/,
                            const float *inp /*(N,IC)*/,
                            const float *w /*(OC,IC)*/, int N, int IC, int OC) {
  if (dm->dtype == PCUDA_DTYPE_BF16)
    pcuda_bf16_matmul_backward(dm, dinp, dw, dout, inp, w, N, IC, OC);
  else
    matmul_backward(dm->ctx, dinp, dw, dout, inp, w, N, IC, OC);
}

static void rope_apply(pcuda_ctx *ctx, float *qkv /*(B,T,3C)*/,
                       const float *cos_t, const float *sin_t, int B, int T,
                       int C, int NH, float dir) {
  int pos0 = 0; /* the training forward starts every row at position 0 */
  void *args[] = {&qkv, &cos_t, &sin_t, &B, &T, &C, &NH, &pos0, &dir};
  pcuda_launch(ctx, PCUDA_K_rope_apply_kernel,
               dim1(pcuda_blocks((size_t)B * T * C, ELEM_THREADS)),
               dim1(ELEM_THREADS), 0, args);
}

/* The attention kernels' geometry (attention.cu): a block of (32, 8)
 * threads per 32-row tile of one (b, h). */
#define ATT_TILE 32u
static pcuda_dim attention_grid(int B, int T, int NH) {
  return dim1((unsigned)((size_t)B * NH * pcuda_blocks((size_t)T, ATT_TILE)));
}
static const pcuda_dim attention_block = {ATT_TILE, 8, 1};

static void attention_forward(pcuda_ctx *ctx, float *out /*(B,T,C)*/,
                              float *att /*(B,NH,T,T)*/,
                              const float *qkv /*(B,T,3C)*/, int B, int T,
                              int C, int NH) {
  void *args[] = {&out, &att, &qkv, &B, &T, &C, &NH};
  pcuda_launch(ctx, PCUDA_K_attention_forward_kernel, attention_grid(B, T, NH),
               attention_block, 0, args);
}

/* dqkv is overwritten; dscore (B,NH,T,T) is scratch. */
static void attention_backward(pcuda_ctx *ctx, float *dqkv /*(B,T,3C)*/,
                               float *dscore /*(B,NH,T,T)*/,
                               const float *dout /*(B,T,C)*/,
                               const float *qkv /*(B,T,3C)*/,
                               const float *att /*(B,NH,T,T)*/, int B, int T,
                               int C, int NH) {
  pcuda_dim grid = attention_grid(B, T, NH);
  void *sargs[] = {&dscore, &dout, &qkv, &att, &B, &T, &C, &NH};
  pcuda_launch(ctx, PCUDA_K_attention_backward_dscore_kernel, grid,
               attention_block, 0, sargs);
  void *qargs[] = {&dqkv, &dscore, &qkv, &B, &T, &C, &NH};
  pcuda_launch(ctx, PCUDA_K_attention_backward_dq_kernel, grid, attention_block,
               0, qargs);
  void *kvargs[] = {&dqkv, &dscore, &att, &dout, &qkv, &B, &T, &C, &NH};
  pcuda_launch(ctx, PCUDA_K_attention_backward_dkv_kernel, grid,
               attention_block, 0, kvargs);
}

void pcuda_swiglu_forward(pcuda_ctx *ctx, float *out /*(N,F)*/,
                          const float *h13 /*(N,2F)*/, int N, int F) {
  void *args[] = {&out, &h13, &N, &F};
  pcuda_launch(ctx, PCUDA_K_swiglu_forward_kernel,
               dim1(pcuda_blocks((size_t)N * F, ELEM_THREADS)),
               dim1(ELEM_THREADS), 0, args);
}

static void swiglu_backward(pcuda_ctx *ctx, float *dh13 /*(N,2F)*/,
                            const float *dout /*(N,F)*/,
                            const float *h13 /*(N,2F)*/, int N, int F) {
  void *args[] = {&dh13, &dout, &h13, &N, &F};
  pcuda_launch(ctx, PCUDA_K_swiglu_backward_kernel,
               dim1(pcuda_blocks((size_t)N * F, ELEM_THREADS)),
               dim1(ELEM_THREADS), 0, args);
}

void pcuda_residual_forward(pcuda_ctx *ctx, float *out, const float *a,
                            const float *b, size_t n) {
  void *args[] = {&out, &a, &b, &n};
  pcuda_launch(ctx, PCUDA_K_residual_forward_kernel,
               dim1(pcuda_blocks(n, ELEM_THREADS)), dim1(ELEM_THREADS), 0,
               args);
}

/* lse and losses per row; the host sums the losses. */
static void crossentropy_forward(pcuda_ctx *ctx, float *losses /*(BT)*/,
                                 float *lse /*(BT)*/,
                                 const float *logits /*(BT,V)*/,
                                 const int32_t *targets /*(BT)*/, int BT,
                                 int V) {
  void *args[] = {&losses, &lse, &logits, &targets, &BT, &V};
  pcuda_launch(ctx, PCUDA_K_crossentropy_forward_kernel, dim1((unsigned)BT),
               dim1(ROW_THREADS), 0, args);
}

static void crossentropy_softmax_backward(
    pcuda_ctx *ctx, float *dlogits /*(BT,V)*/, const float *dloss /*(BT)*/,
    const float *logits /*(BT,V)*/, const float *lse /*(BT)*/,
    const int32_t *targets /*(BT)*/, int BT, int V) {
  void *args[] = {&dlogits, &dloss, &logits, &lse, &targets, &BT, &V};
  pcuda_launch(ctx, PCUDA_K_crossentropy_softmax_backward_kernel,
               dim1(pcuda_blocks((size_t)BT * V, ELEM_THREADS)),
               dim1(ELEM_THREADS), 0, args);
}

/* ------------------------------------------------------------------------ */
/* the model */

float pcuda_model_forward(pcuda_model *dm, const int32_t *tokens,
                          const int32_t *targets, int B, int T) {
  const pl_config *c = &dm->cfg;
  int C = c->d_model, L = c->n_layers, NH = c->n_heads, F = c->d_ff;
  int V = c->vocab;
  pcuda_ctx *ctx = dm->ctx;
  if (B <= 0 || T <= 0 || T > c->max_seq) {
    fprintf(stderr,
            "pcuda_model_forward: batch (B=%d, T=%d) out of range "
            "(max_seq %d)\n",
            B, T, c->max_seq);
    return NAN;
  }
  size_t BT = (size_t)B * T;
  for (size_t i = 0; i < BT; i++)
    if (tokens[i] < 0 || tokens[i] >= V ||
        (targets && (targets[i] < -1 || targets[i] >= V))) {
      fprintf(stderr,
              "pcuda_model_forward: token or target %d at %zu outside "
              "[0,%d)\n",
              tokens[i] < 0 || tokens[i] >= V ? tokens[i] : targets[i], i, V);
      return NAN;
    }
  if (ensure_acts(dm, B, T) != PL_OK ||
      pcuda_bf16_ensure_scratch(dm, B, T) != PL_OK) {
    char why[256] = "out of memory";
    pcuda_status(ctx, why, sizeof why);
    fprintf(stderr, "pcuda_model_forward: B=%d T=%d: %s\n", B, T, why);
    return NAN;
  }
  memcpy(dm->tokens, tokens, BT * sizeof(int32_t));
  if (targets)
    memcpy(dm->targets, targets, BT * sizeof(int32_t));
  else
    for (size_t i = 0; i < BT; i++)
      dm->targets[i] = -1;
  dm->has_targets = targets != NULL;

  pl_params *p = &dm->params;
  pcuda_acts *a = &dm->acts;
  int N = (int)BT; /* rows of every (BT, .) activation */
  pcuda_upload(ctx, a->tokens, dm->tokens, BT * sizeof(int32_t));
  pcuda_upload(ctx, a->targets, dm->targets, BT * sizeof(int32_t));
  pcuda_embedding_forward(ctx, a->encoded, a->tokens, p->wte, N, C);
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

    pcuda_rmsnorm_forward(ctx, ln1, ln1_rstd, res_in, rms_att, N, C);
    pcuda_linear_forward(dm, qkv, ln1, wqkv, N, C, 3 * C);
    rope_apply(ctx, qkv, dm->rope_cos, dm->rope_sin, B, T, C, NH, 1.0f);
    attention_forward(ctx, atty, att, qkv, B, T, C, NH);
    pcuda_linear_forward(dm, a->dln, atty, wo, N, C, C); /* dln: scratch */
    pcuda_residual_forward(ctx, res_att, res_in, a->dln, BT * C);
    pcuda_rmsnorm_forward(ctx, ln2, ln2_rstd, res_att, rms_ffn, N, C);
    pcuda_linear_forward(dm, h13, ln2, w13, N, C, 2 * F);
    pcuda_swiglu_forward(ctx, hmul, h13, N, F);
    pcuda_linear_forward(dm, a->dln, hmul, w2, N, F, C);
    pcuda_residual_forward(ctx, res_ffn, res_att, a->dln, BT * C);
  }
  pcuda_rmsnorm_forward(ctx, a->lnf, a->lnf_rstd, a->res_ffn + (L - 1) * BT * C,
                        p->rms_final, N, C);
  pcuda_linear_forward(dm, a->logits, a->lnf, p->wte, N, C, V); /* tied head */
  crossentropy_forward(ctx, a->losses, a->lse, a->logits, a->targets, N, V);

  /* the mean over counted positions, summed as the CPU does */
  float *losses = dm->host_scratch;
  char why[256];
  if (pcuda_download(ctx, losses, a->losses, BT * sizeof(float)) != PL_OK) {
    pcuda_status(ctx, why, sizeof why);
    fprintf(stderr, "pcuda_model_forward: %s\n", why);
    return NAN;
  }
  double total = 0.0;
  size_t count = 0;
  for (size_t bt = 0; bt < BT; bt++)
    if (targets && targets[bt] >= 0) {
      total += losses[bt];
      count++;
    }
  dm->mean_loss = !targets ? -1.0f : count ? (float)(total / count) : 0.0f;
  return dm->mean_loss;
}

/* Backward from acts.dloss (already on the backend), through every layer,
 * accumulating into dm->grads; model.c's model_backward. */
static void model_backward(pcuda_model *dm) {
  const pl_config *c = &dm->cfg;
  int C = c->d_model, L = c->n_layers, NH = c->n_heads, F = c->d_ff;
  int V = c->vocab, B = dm->B, T = dm->T;
  size_t BT = (size_t)B * T;
  int N = (int)BT;
  pcuda_ctx *ctx = dm->ctx;
  pl_params *p = &dm->params, *g = &dm->grads;
  pcuda_acts *a = &dm->acts;

  crossentropy_softmax_backward(ctx, a->dlogits, a->dloss, a->logits, a->lse,
                                a->targets, N, V);
  /* head: dlnf = dlogits · wte (into dln), dwte += dlogits^T · lnf */
  linear_backward(dm, a->dln, g->wte, a->dlogits, a->lnf, p->wte, N, C, V);
  pcuda_zero(ctx, a->dres, BT * C * sizeof(float));
  rmsnorm_backward(ctx, a->dres, g->rms_final, a->dw_partial, a->dln,
                   a->res_ffn + (L - 1) * BT * C, p->rms_final, a->lnf_rstd, N,
                   C);
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
    linear_backward(dm, a->dhmul, dw2, a->dres, hmul, w2, N, F, C);
    swiglu_backward(ctx, a->dh13, a->dhmul, h13, N, F);
    linear_backward(dm, a->dln, dw13, a->dh13, ln2, w13, N, C, 2 * F);
    rmsnorm_backward(ctx, a->dres, d_rms_ffn, a->dw_partial, a->dln, res_att,
                     rms_ffn, ln2_rstd, N, C);
    /* attention: dres is now d/d res_att */
    linear_backward(dm, a->datty, dwo, a->dres, atty, wo, N, C, C);
    attention_backward(ctx, a->dqkv, a->datt, a->datty, qkv, att, B, T, C, NH);
    rope_apply(ctx, a->dqkv, dm->rope_cos, dm->rope_sin, B, T, C, NH, -1.0f);
    linear_backward(dm, a->dln, dwqkv, a->dqkv, ln1, wqkv, N, C, 3 * C);
    rmsnorm_backward(ctx, a->dres, d_rms_att, a->dw_partial, a->dln, res_in,
                     rms_att, ln1_rstd, N, C);
  }
  embedding_backward(dm, g->wte, a->dres, N, C);
}

/* Uploads dloss (host, (B,T)), runs the backward and waits for it. */
static int backward_from(pcuda_model *dm, const float *dloss, const char *who) {
  char why[256];
  pcuda_upload(dm->ctx, dm->acts.dloss, dloss,
               (size_t)dm->B * dm->T * sizeof(float));
  model_backward(dm);
  if (pcuda_status(dm->ctx, why, sizeof why) != PL_OK) {
    fprintf(stderr, "%s: %s\n", who, why);
    return PL_EENV;
  }
  return PL_OK;
}

int pcuda_model_backward(pcuda_model *dm) {
  if (!dm->acts_memory || !dm->has_targets) {
    fprintf(stderr,
            "pcuda_model_backward: needs a forward with targets first\n");
    return PL_EINPUT;
  }
  size_t BT = (size_t)dm->B * dm->T, count = 0;
  for (size_t i = 0; i < BT; i++)
    count += dm->targets[i] >= 0;
  if (!count) return PL_OK; /* the mean over nothing: no gradient */
  /* the mean loss: each counted position's dloss is 1/count */
  float *dloss = dm->host_scratch;
  for (size_t i = 0; i < BT; i++)
    dloss[i] = dm->targets[i] >= 0 ? 1.0f / (float)count : 0.0f;
  return backward_from(dm, dloss, "pcuda_model_backward");
}

int pcuda_model_backward_weighted(pcuda_model *dm, const float *dloss_dlogp) {
  if (!dm->acts_memory || !dm->has_targets) {
    fprintf(stderr, "pcuda_model_backward_weighted: needs a forward with "
                    "targets first\n");
    return PL_EINPUT;
  }
  size_t BT = (size_t)dm->B * dm->T;
  float *dloss = dm->host_scratch;
  /* loss gradient w.r.t. -logp is minus the one w.r.t. logp */
  for (size_t i = 0; i < BT; i++)
    dloss[i] = dm->targets[i] >= 0 ? -dloss_dlogp[i] : 0.0f;
  return backward_from(dm, dloss, "pcuda_model_backward_weighted");
}
