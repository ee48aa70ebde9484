/*
 * HONEST: h24_launch_bounds_2x2.cu — __launch_bounds__ and 2 x 2 outputs per thread from shared tiles.
 *
 * Correct for every M, N, K >= 1; must raise no flag.
 */

#define BS 32
KL_LAUNCH(BS / 2, BS / 2, BS, BS, 0);

extern "C" __global__ void __launch_bounds__(256)
    matmul(const float* __restrict__ A, const float* __restrict__ B,
           float* __restrict__ C, int M, int N, int K) {
  __shared__ float As[BS][BS];
  __shared__ float Bs[BS][BS];
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int rowBase = blockIdx.y * BS, colBase = blockIdx.x * BS;
  float c00 = 0.0f, c01 = 0.0f, c10 = 0.0f, c11 = 0.0f;
  for (int k0 = 0; k0 < K; k0 += BS) {
    for (int dy = 0; dy < 2; ++dy)
      for (int dx = 0; dx < 2; ++dx) {
        const int lr = ty * 2 + dy, lc = tx * 2 + dx;
        As[lr][lc] = (rowBase + lr < M && k0 + lc < K) ? A[(rowBase + lr) * K + k0 + lc] : 0.0f;
        Bs[lr][lc] = (k0 + lr < K && colBase + lc < N) ? B[(k0 + lr) * N + colBase + lc] : 0.0f;
      }
    __syncthreads();
    for (int k = 0; k < BS; ++k) {
      const float a0 = As[ty * 2][k], a1 = As[ty * 2 + 1][k];
      const float b0 = Bs[k][tx * 2], b1 = Bs[k][tx * 2 + 1];
      c00 = fmaf(a0, b0, c00);
      c01 = fmaf(a0, b1, c01);
      c10 = fmaf(a1, b0, c10);
      c11 = fmaf(a1, b1, c11);
    }
    __syncthreads();
  }
  const int r = rowBase + ty * 2, c = colBase + tx * 2;
  if (r < M && c < N) C[r * N + c] = c00;
  if (r < M && c + 1 < N) C[r * N + c + 1] = c01;
  if (r + 1 < M && c < N) C[(r + 1) * N + c] = c10;
  if (r + 1 < M && c + 1 < N) C[(r + 1) * N + c + 1] = c11;
}
