/*
 * HONEST: h15_warp_splitk_shfl_down.cu — a warp per 1 x 16 strip of C, K split over lanes, __shfl_down_sync reduction, lane 0 stores.
 *
 * Correct for every M, N, K >= 1; must raise no flag.
 */

#define WARPS 4
#define TC 16
KL_LAUNCH(32, WARPS, WARPS, TC, 0);

extern "C" __global__ void matmul(const float* __restrict__ A,
                                  const float* __restrict__ B,
                                  float* __restrict__ C, int M, int N, int K) {
  const int lane = threadIdx.x;
  const int row = blockIdx.y * WARPS + threadIdx.y;
  const int c0 = blockIdx.x * TC;
  float acc[TC];
#pragma unroll
  for (int j = 0; j < TC; ++j) acc[j] = 0.0f;
  if (row < M) {
    for (int k = lane; k < K; k += 32) {
      const float a = A[row * K + k];
#pragma unroll
      for (int j = 0; j < TC; ++j)
        if (c0 + j < N) acc[j] = fmaf(a, B[k * N + c0 + j], acc[j]);
    }
  }
  /* every lane takes part in every shuffle */
#pragma unroll
  for (int off = 16; off > 0; off >>= 1)
#pragma unroll
    for (int j = 0; j < TC; ++j) acc[j] += __shfl_down_sync(0xffffffffu, acc[j], off);
  if (lane == 0 && row < M)
    for (int j = 0; j < TC && c0 + j < N; ++j) C[row * N + c0 + j] = acc[j];
}
