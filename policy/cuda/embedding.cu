/*
 * policy/cuda/embedding.cu — the token embedding, mirroring
 * embedding_forward / embedding_backward of policy/model.c.
 *
 * The backward is a block per run of equal tokens: the host sorts the
 * batch's positions by token (pcuda_model.c, token_runs; the tokens are on
 * the host anyway), and each block adds its token's positions to that one
 * row of dwte, columns across its threads, positions in order. No two
 * blocks touch the same row, so there are no atomics, and every element is
 * summed in the CPU's order (its loop over bt), bit for bit. (The earlier
 * kernel gave each of C threads a column and walked all BT tokens: one
 * block's worth of parallelism.)
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

/* dwte[v,:] += dout[bt,:] for each position bt of token v, in order.
 * Grid: n_runs blocks, block r for the run of token run_token[r], whose
 * positions are pos[start[r] .. start[r+1]) (ascending); threads stride
 * over the C columns. */
extern "C" __global__ void embedding_backward_kernel(
    float *dwte /*(V,C)*/, const float *dout /*(BT,C)*/,
    const int32_t *pos /*(BT)*/, const int32_t *start /*(n_runs+1)*/,
    const int32_t *run_token /*(n_runs)*/, int n_runs, int C) {
  int r = blockIdx.x;
  if (r >= n_runs) return;
  float *row = dwte + (size_t)run_token[r] * C;
  int k0 = start[r], k1 = start[r + 1];
  for (int i = threadIdx.x; i < C; i += blockDim.x) {
    float acc = row[i];
    for (int k = k0; k < k1; k++)
      acc += dout[(size_t)pos[k] * C + i];
    row[i] = acc;
  }
}
