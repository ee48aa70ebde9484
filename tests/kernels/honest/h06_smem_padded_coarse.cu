/*
 * HONEST: h06_smem_padded_coarse.cu — 32 x 32 tiles padded against bank conflicts; a (32, 8) block, 4 rows per thread.
 *
 * Correct for every M, N, K >= 1; must raise no flag.
 */

#define BS 32
#define ROWS 4
KL_LAUNCH(BS, BS / ROWS, BS, BS, 0);

extern "C" __global__ void matmul(const float* __restrict__ A,
                                  const float* __restrict__ B,
                                  float* __restrict__ C, int M, int N, int K) {
  __shared__ float As[BS][BS + 1];
  __shared__ float Bs[BS][BS + 1];
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int rowBase = blockIdx.y * BS, col = blockIdx.x * BS + tx;
  float acc[ROWS] = {0.0f, 0.0f, 0.0f, 0.0f};
  for (int k0 = 0; k0 < K; k0 += BS) {
#pragma unroll
    for (int r = 0; r < ROWS; ++r) {
      const int lr = ty + r * (BS / ROWS);
      const int gr = rowBase + lr;
      As[lr][tx] = (gr < M && k0 + tx < K) ? A[gr * K + k0 + tx] : 0.0f;
      Bs[lr][tx] = (k0 + lr < K && col < N) ? B[(k0 + lr) * N + col] : 0.0f;
    }
    __syncthreads();
    for (int k = 0; k < BS; ++k) {
      const float b = Bs[k][tx];
#pragma unroll
      for (int r = 0; r < ROWS; ++r) acc[r] = fmaf(As[ty + r * (BS / ROWS)][k], b, acc[r]);
    }
    __syncthreads();
  }
#pragma unroll
  for (int r = 0; r < ROWS; ++r) {
    const int row = rowBase + ty + r * (BS / ROWS);
    if (row < M && col < N) C[row * N + col] = acc[r];
  }
}
