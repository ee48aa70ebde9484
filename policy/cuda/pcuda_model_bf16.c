/*
 * policy/cuda/pcuda_model_bf16.c — the bf16 path of the policy's CUDA
 * runtime: bf16 GEMM operands with fp32 master weights (pcuda.h's top
 * comment says what is in which precision). This file holds what the path
 * adds to the fp32 model: the bf16 copy of the weights and its refresh, the
 * scratch the operands are rounded into, the bf16 GEMM (cuBLAS's GemmEx or
 * the tiled kernel's bf16 variant, bf16.cu), and the bf16 twins of
 * pcuda_model.c's matmul_forward / matmul_backward, which that file's
 * linear layers call when dm->dtype is PCUDA_DTYPE_BF16.
 *
 * Why this subset of llm.c's scheme (llm.c keeps parameters, activations
 * and gradients all in bf16, with an optional fp32 master copy):
 *   - the GEMMs are where bf16 pays (tensor cores; on an H200 bf16 with
 *     fp32 accumulation is an order of magnitude above fp32 without TF32),
 *     and cuBLAS takes bf16 A and B with an fp32 C natively, so the GEMM
 *     outputs need no extra rounding;
 *   - every other kernel is the fp32 path's, unchanged: the fp32 path must
 *     stay exactly as it is, and one source per layer keeps the mirror of
 *     policy/model.c testable; norms, softmax, the loss and the residual
 *     stream are where bf16 hurts (llm.c too keeps the norms' statistics
 *     and the losses in fp32);
 *   - gradients stay fp32 and AdamW is the fp32 kernel on the fp32 master,
 *     so small updates accumulate (the point of master weights) and the
 *     optimizer is the one already held to policy/adamw.c.
 * The cost: activations are stored in fp32 plus a bf16 scratch for the
 * GEMM operands, so the path saves GEMM time, not memory. An activation is
 * rounded to bf16 again in the backward for its weight gradient rather
 * than kept from the forward: the same bits (rounding is deterministic),
 * one more cast kernel, no stored bf16 activations.
 */
#include "policy/cuda/pcuda_internal.h"

#include <stdio.h>
#include <string.h>

#define CAST_THREADS 256u

pcuda_bf16 pcuda_bf16_from_float(float f) {
  uint32_t x;
  memcpy(&x, &f, sizeof x);
  /* NaN: the canonical 0x7fff, as cvt.rn.bf16.f32 and cuda_bf16.hpp's
   * own host conversion give (the payload is not kept) */
  if ((x & 0x7fffffffu) > 0x7f800000u) return (pcuda_bf16)0x7fffu;
  x += 0x7fffu + ((x >> 16) & 1u); /* round to nearest, ties to even */
  return (pcuda_bf16)(x >> 16);
}

float pcuda_bf16_to_float(pcuda_bf16 b) {
  uint32_t x = (uint32_t)b << 16;
  float f;
  memcpy(&f, &x, sizeof f);
  return f;
}

const char *pcuda_dtype_name(int dtype) {
  return dtype == PCUDA_DTYPE_FP32   ? "fp32"
         : dtype == PCUDA_DTYPE_BF16 ? "bf16"
                                     : "?";
}

int pcuda_gemm_bf16(pcuda_ctx *ctx, float *c, const pcuda_bf16 *a,
                    const pcuda_bf16 *b, int M, int N, int K, int lda, int ldb,
                    int ldc, int trans_a, int trans_b, float alpha,
                    float beta) {
  if (ctx->failed) return PL_EENV;
  if (M <= 0 || N <= 0 || K <= 0) return PL_OK;
  if (ctx->gemm_bf16) {
    ctx->launches++;
    if (ctx->gemm_bf16(ctx, c, a, b, M, N, K, lda, ldb, ldc, trans_a, trans_b,
                       alpha, beta) != 0)
      ctx->failed = 1;
    return ctx->failed ? PL_EENV : PL_OK;
  }
  void *args[] = {&c,   &a,   &b,       &M,       &N,     &K,   &lda,
                  &ldb, &ldc, &trans_a, &trans_b, &alpha, &beta};
  return pcuda_launch_gemm_tiled(ctx, PCUDA_K_gemm_tiled_bf16_kernel,
                                 "tiled bf16 GEMM: M =", M, N, args);
}

void pcuda_cast_bf16(pcuda_ctx *ctx, pcuda_bf16 *out, const float *in,
                     size_t n) {
  void *args[] = {&out, &in, &n};
  pcuda_launch(ctx, PCUDA_K_cast_bf16_kernel,
               (pcuda_dim){pcuda_blocks(n, CAST_THREADS), 1, 1},
               (pcuda_dim){CAST_THREADS, 1, 1}, 0, args);
}

int pcuda_model_cast_params(pcuda_model *dm) {
  if (dm->dtype != PCUDA_DTYPE_BF16) return PL_OK;
  if (!dm->params_bf16)
    return pcuda_fail(dm->ctx, "bf16 model without its bf16 weights");
  pcuda_cast_bf16(dm->ctx, dm->params_bf16, dm->params_memory, dm->num_params);
  return dm->ctx->failed ? PL_EENV : PL_OK;
}

static size_t max2(size_t a, size_t b) {
  return a > b ? a : b;
}

/* The scratch of a (B,T) batch: first the operand that is an activation
 * (a GEMM's input: width C or F), then the one that is an activation
 * gradient (a GEMM's dout: width V, 3C, 2F or C). Returns the elements of
 * the first part through *inp_part, the total as the result. */
static size_t scratch_layout(const pl_config *c, int B, int T,
                             size_t *inp_part) {
  size_t BT = (size_t)B * T, C = c->d_model, F = c->d_ff, V = c->vocab;
  *inp_part = BT * max2(C, F);
  return *inp_part + BT * max2(max2(V, 3 * C), 2 * F);
}

size_t pcuda_bf16_scratch_elems(const pl_config *c, int B, int T) {
  size_t inp_part;
  return scratch_layout(c, B, T, &inp_part);
}

static int ensure_cap(pcuda_model *dm, size_t need) {
  if (need <= dm->bf16_scratch_cap) return PL_OK;
  pcuda_free(dm->ctx, dm->bf16_scratch);
  dm->bf16_scratch = pcuda_alloc(dm->ctx, need * sizeof(pcuda_bf16));
  dm->bf16_scratch_cap = dm->bf16_scratch ? need : 0;
  return dm->bf16_scratch ? PL_OK : PL_EENV;
}

int pcuda_bf16_ensure_scratch(pcuda_model *dm, int B, int T) {
  if (dm->dtype != PCUDA_DTYPE_BF16) return PL_OK;
  size_t inp_part;
  return ensure_cap(dm, scratch_layout(&dm->cfg, B, T, &inp_part));
}

int pcuda_bf16_ensure_scratch_rows(pcuda_model *dm, size_t rows) {
  if (dm->dtype != PCUDA_DTYPE_BF16) return PL_OK;
  return ensure_cap(dm, rows * max2(dm->cfg.d_model, dm->cfg.d_ff));
}

/* The bf16 copy of the fp32 weight w (a pointer into params_memory). */
static const pcuda_bf16 *bf16_weight(const pcuda_model *dm, const float *w) {
  return dm->params_bf16 + (w - dm->params_memory);
}

/* The two parts of the scratch for the current batch, after checking that
 * n_inp and n_dout elements fit in them. A forward alone (n_dout 0: the
 * cached forward of sampling, sized by pcuda_bf16_ensure_scratch_rows)
 * needs only the first part. 0, or -1 with the failure recorded (a
 * caller's bug: the forward sized the scratch for this batch). */
static int scratch_parts(pcuda_model *dm, size_t n_inp, size_t n_dout,
                         pcuda_bf16 **inp16, pcuda_bf16 **dout16) {
  size_t inp_part, need = scratch_layout(&dm->cfg, dm->B, dm->T, &inp_part);
  if (n_dout == 0) need = inp_part = n_inp;
  if (!dm->bf16_scratch || need > dm->bf16_scratch_cap || n_inp > inp_part ||
      n_dout > need - inp_part) {
    pcuda_fail(dm->ctx,
               "bf16 GEMM: operands of %zu + %zu elements do not fit the "
               "scratch (%zu + %zu)",
               n_inp, n_dout, inp_part, dm->bf16_scratch_cap - inp_part);
    return -1;
  }
  *inp16 = dm->bf16_scratch;
  *dout16 = dm->bf16_scratch + inp_part;
  return 0;
}

void pcuda_bf16_matmul_forward(pcuda_model *dm, float *out, const float *inp,
                               const float *w, int N, int IC, int OC) {
  pcuda_bf16 *inp16, *unused;
  size_t n_inp = (size_t)N * IC;
  if (scratch_parts(dm, n_inp, 0, &inp16, &unused)) return;
  pcuda_cast_bf16(dm->ctx, inp16, inp, n_inp);
  pcuda_gemm_bf16(dm->ctx, out, inp16, bf16_weight(dm, w), N, OC, IC, IC, IC,
                  OC, 0, 1, 1.0f, 0.0f);
}

void pcuda_bf16_matmul_backward(pcuda_model *dm, float *dinp, float *dw,
                                const float *dout, const float *inp,
                                const float *w, int N, int IC, int OC) {
  pcuda_bf16 *inp16, *dout16;
  size_t n_inp = (size_t)N * IC, n_dout = (size_t)N * OC;
  if (scratch_parts(dm, n_inp, n_dout, &inp16, &dout16)) return;
  pcuda_cast_bf16(dm->ctx, dout16, dout, n_dout);
  pcuda_cast_bf16(dm->ctx, inp16, inp, n_inp);
  /* dinp = dout · w (overwritten); dw += dout^T · inp (fp32 accumulation
   * into the fp32 gradient) */
  pcuda_gemm_bf16(dm->ctx, dinp, dout16, bf16_weight(dm, w), N, IC, OC, OC, IC,
                  IC, 0, 0, 1.0f, 0.0f);
  pcuda_gemm_bf16(dm->ctx, dw, dout16, inp16, OC, IC, N, OC, IC, IC, 1, 0, 1.0f,
                  1.0f);
}

int pcuda_model_init_dtype(pcuda_model *dm, pcuda_ctx *ctx, const pl_model *m,
                           int dtype, char *why, size_t whylen) {
  if (dtype != PCUDA_DTYPE_FP32 && dtype != PCUDA_DTYPE_BF16) {
    memset(dm, 0, sizeof *dm);
    snprintf(why, whylen,
             "model dtype %d: expected PCUDA_DTYPE_FP32 (%d) or "
             "PCUDA_DTYPE_BF16 (%d)",
             dtype, PCUDA_DTYPE_FP32, PCUDA_DTYPE_BF16);
    return PL_EINPUT;
  }
  int rc = pcuda_model_init(dm, ctx, m, why, whylen);
  if (rc != PL_OK || dtype == PCUDA_DTYPE_FP32) return rc;
  dm->dtype = PCUDA_DTYPE_BF16;
  dm->params_bf16 = pcuda_alloc(ctx, dm->num_params * sizeof(pcuda_bf16));
  pcuda_model_cast_params(dm);
  rc = pcuda_status(ctx, why, whylen);
  if (rc != PL_OK) pcuda_model_free(dm);
  return rc;
}

int pcuda_model_get_params_bf16(pcuda_model *dm, pcuda_bf16 *params) {
  if (dm->dtype != PCUDA_DTYPE_BF16 || !dm->params_bf16) {
    fprintf(stderr, "pcuda_model_get_params_bf16: an fp32 model has no bf16 "
                    "weights\n");
    return PL_EINPUT;
  }
  return pcuda_download(dm->ctx, params, dm->params_bf16,
                        dm->num_params * sizeof(pcuda_bf16));
}
