/*
 * HONEST: h43_persistent_supertile.cu — persistent-style: a block owns a 128 x 128 super-tile and loops over its 16 x 16 sub-tiles; __launch_bounds__(256, 2); size_t indexing.
 * Correct for every M, N, K >= 1; must raise no flag.
 */

#define SUPER 128
#define BS 16
KL_LAUNCH(BS, BS, SUPER, SUPER, 0);

extern "C" __global__ void __launch_bounds__(256, 2)
matmul(const float* __restrict__ A, const float* __restrict__ B,
       float* __restrict__ C, int M, int N, int K) {
  __shared__ float As[BS][BS];
  __shared__ float Bs[BS][BS];
  const int tx = threadIdx.x, ty = threadIdx.y;
  constexpr int SUB = (SUPER / BS) * (SUPER / BS);
  for (int s = 0; s < SUB; ++s) {
    const int sr = blockIdx.y * SUPER + (s / (SUPER / BS)) * BS;
    const int sc = blockIdx.x * SUPER + (s % (SUPER / BS)) * BS;
    if (sr >= M || sc >= N) continue; /* uniform over the block */
    const size_t row = (size_t)(sr + ty), col = (size_t)(sc + tx);
    float acc = 0.0f;
    for (int k0 = 0; k0 < K; k0 += BS) {
      As[ty][tx] = (row < (size_t)M && k0 + tx < K) ? A[row * K + k0 + tx] : 0.0f;
      Bs[ty][tx] = (k0 + ty < K && col < (size_t)N) ? B[(size_t)(k0 + ty) * N + col] : 0.0f;
      __syncthreads();
#pragma unroll
      for (int k = 0; k < BS; ++k) acc += As[ty][k] * Bs[k][tx];
      __syncthreads();
    }
    if (row < (size_t)M && col < (size_t)N) C[row * N + col] = acc;
  }
}
