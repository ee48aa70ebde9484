/*
 * policy/cuda/embedding.cu — the token embedding, mirroring
 * embedding_forward / embedding_backward of policy/model.c.
 *
 * The backward gives each thread one column of wte and walks the tokens in
 * order: tokens repeat, so a thread per token would race on the same row,
 * and atomics would make the sum's order (and its rounding) depend on
 * scheduling. This way the sum is the CPU's, in the CPU's order, at the
 * price of only C-wide parallelism (fine at the policy's sizes).
 */
#include "policy/cuda/common.cuh"

/* out[bt,:] = wte[tokens[bt],:]; one thread per element of out. */
extern "C" __global__ void
embedding_forward_kernel(float *out /*(BT,C)*/, const int32_t *tokens /*(BT)*/,
                         const float *wte /*(V,C)*/, int BT, int C) {
  size_t idx = global_index();
  if (idx >= (size_t)BT * C) return;
  size_t bt = idx / C, i = idx % C;
  out[idx] = wte[(size_t)tokens[bt] * C + i];
}

/* dwte[tokens[bt],:] += dout[bt,:]; one thread per column i. */
extern "C" __global__ void
embedding_backward_kernel(float *dwte /*(V,C)*/, const float *dout /*(BT,C)*/,
                          const int32_t *tokens /*(BT)*/, int BT, int C) {
  size_t i = global_index();
  if (i >= (size_t)C) return;
  for (int bt = 0; bt < BT; bt++)
    dwte[(size_t)tokens[bt] * C + i] += dout[(size_t)bt * C + i];
}
