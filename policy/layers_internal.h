/*
 * policy/layers_internal.h — the layers of the policy's transformer
 * (policy/layers.c), which policy/model.c strings together into the forward
 * and backward. Not part of the module's API (that is policy/policy.h);
 * prefix pll_.
 *
 * The conventions of llm.c: outputs first, sizes last, shapes in the
 * comments (row-major); parameter gradients accumulate (+=), activation
 * gradients overwrite. The parallel layers split their rows over the
 * policy's pool (policy/parallel.c); scratch arguments give each slot of
 * the pool its own part.
 */
#ifndef POLICY_LAYERS_INTERNAL_H
#define POLICY_LAYERS_INTERNAL_H

#include "policy/policy.h"

#include <stddef.h>
#include <stdint.h>

#define PLL_RMS_EPS 1e-5f

/* out[bt,:] = wte[tokens[bt],:] */
void pll_embedding_forward(float *out /*(BT,C)*/, const int32_t *tokens,
                           const float *wte /*(V,C)*/, size_t BT, int C);
/* dwte[tokens[bt],:] += dout[bt,:]; serial (rows repeat when tokens do) */
void pll_embedding_backward(float *dwte /*(V,C)*/, const float *dout /*(BT,C)*/,
                            const int32_t *tokens, size_t BT, int C);

/* out = inp / rms(inp) * w per row; rstd keeps 1 / rms for the backward */
void pll_rmsnorm_forward(float *out /*(N,C)*/, float *rstd /*(N)*/,
                         const float *inp /*(N,C)*/, const float *w /*(C)*/,
                         size_t N, int C);
/* part: (PL_POOL_MAX, C) scratch for the partial dw */
void pll_rmsnorm_backward(float *dinp /*(N,C)*/, float *dw /*(C)*/,
                          const float *dout /*(N,C)*/,
                          const float *inp /*(N,C)*/, const float *w,
                          const float *rstd /*(N)*/, float *part, size_t N,
                          int C);

/* out = inp · w^T (w stored (OC,IC), PyTorch's Linear without bias),
 * through pl_linear_gemm (so a --policy-matmul hook sees it) */
void pll_matmul_forward(float *out /*(N,OC)*/, const float *inp /*(N,IC)*/,
                        const float *w /*(OC,IC)*/, size_t N, int IC, int OC);
/* dinp = dout · w (overwritten); dw += dout^T · inp */
void pll_matmul_backward(float *dinp /*(N,IC)*/, float *dw /*(OC,IC)*/,
                         const float *dout /*(N,OC)*/,
                         const float *inp /*(N,IC)*/,
                         const float *w /*(OC,IC)*/, size_t N, int IC, int OC);

/* rotates q and k of every token by its position; dir -1 undoes it (the
 * backward of a rotation is the inverse rotation) */
void pll_rope_apply(float *qkv /*(B,T,3C)*/, const float *cos_t,
                    const float *sin_t /*(max_seq,hs/2)*/, int B, int T, int C,
                    int NH, float dir);

/* causal softmax attention per (batch, head); att keeps the probabilities */
void pll_attention_forward(float *out /*(B,T,C)*/, float *att /*(B,NH,T,T)*/,
                           const float *qkv /*(B,T,3C)*/, int B, int T, int C,
                           int NH);
/* dp: (PL_POOL_MAX,T,T) scratch */
void pll_attention_backward(float *dqkv /*(B,T,3C)*/, float *dp,
                            const float *dout /*(B,T,C)*/,
                            const float *qkv /*(B,T,3C)*/,
                            const float *att /*(B,NH,T,T)*/, int B, int T,
                            int C, int NH);

/* out = silu(gate) * up, h13 = [gate | up] per row */
void pll_swiglu_forward(float *out /*(N,F)*/, const float *h13 /*(N,2F)*/,
                        size_t N, int F);
void pll_swiglu_backward(float *dh13 /*(N,2F)*/, const float *dout /*(N,F)*/,
                         const float *h13 /*(N,2F)*/, size_t N, int F);

/* out = a + b */
void pll_residual_forward(float *out, const float *a, const float *b, size_t n);

/* losses[bt] = -log softmax(logits[bt])[targets[bt]] (0 where the target
 * is -1), lse the log-sum-exp per row. Returns the sum of losses (in row
 * order); *count the positions with a target. */
double pll_crossentropy_forward(float *losses /*(BT)*/, float *lse /*(BT)*/,
                                const float *logits /*(BT,V)*/,
                                const int32_t *targets /*(BT) or NULL*/,
                                float *scratch, size_t BT, int V,
                                size_t *count);
/* dlogits = dloss[bt] * (softmax(logits[bt]) - onehot(targets[bt])) */
void pll_crossentropy_softmax_backward(float *dlogits /*(BT,V)*/,
                                       const float *dloss /*(BT)*/,
                                       const float *logits /*(BT,V)*/,
                                       const float *lse /*(BT)*/,
                                       const int32_t *targets /*(BT)*/,
                                       size_t BT, int V);

#endif
