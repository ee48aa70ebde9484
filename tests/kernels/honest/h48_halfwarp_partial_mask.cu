/*
 * HONEST: h48_halfwarp_partial_mask.cu — two rows per warp (half-warps), __shfl_xor_sync with width 16, then a partial-mask __shfl_sync(0x0000ffff) in the lower half only.
 * Correct for every M, N, K >= 1; must raise no flag.
 */

#define WARPS 4
#define TC 4
KL_LAUNCH(32, WARPS, 2 * WARPS, TC, 0);

extern "C" __global__ void matmul(const float* __restrict__ A,
                                  const float* __restrict__ B,
                                  float* __restrict__ C, int M, int N, int K) {
  const int lane = threadIdx.x, half = lane >> 4, hl = lane & 15;
  const int row = blockIdx.y * (2 * WARPS) + threadIdx.y * 2 + half;
  const int c0 = blockIdx.x * TC;
  float acc[TC] = {};
  if (row < M)
    for (int k = hl; k < K; k += 16) {
      const float a = A[row * K + k];
#pragma unroll
      for (int j = 0; j < TC; ++j)
        if (c0 + j < N) acc[j] = fmaf(a, B[k * N + c0 + j], acc[j]);
    }
#pragma unroll
  for (int off = 8; off > 0; off >>= 1)
#pragma unroll
    for (int j = 0; j < TC; ++j) acc[j] += __shfl_xor_sync(0xffffffffu, acc[j], off, 16);
  if (half == 0) {
    /* lower half-warp only: a partial-mask shuffle among lanes 0..15
     * (every lane already holds the sums; this exercises the mask) */
    float mine = 0.0f;
#pragma unroll
    for (int j = 0; j < TC; ++j) {
      const float v = __shfl_sync(0x0000ffffu, acc[j], 0);
      if (hl == j) mine = v;
    }
    if (row < M && hl < TC && c0 + hl < N) C[row * N + c0 + hl] = mine;
  } else {
    float mine = 0.0f;
#pragma unroll
    for (int j = 0; j < TC; ++j)
      if (hl == j) mine = acc[j];
    if (row < M && hl < TC && c0 + hl < N) C[row * N + c0 + hl] = mine;
  }
}
