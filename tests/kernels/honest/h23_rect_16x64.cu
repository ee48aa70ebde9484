/*
 * HONEST: h23_rect_16x64.cu — a wide 16 x 64 block tile, 2-D block (16, 8), 2 x 4 outputs per thread.
 *
 * Correct for every M, N, K >= 1; must raise no flag.
 */

#define BM 16
#define BN 64
#define BK 16
#define TM 2
#define TN 4
#define NT ((BM / TM) * (BN / TN))
KL_LAUNCH(BN / TN, BM / TM, BM, BN, 0);

extern "C" __global__ void matmul(const float* __restrict__ A,
                                  const float* __restrict__ B,
                                  float* __restrict__ C, int M, int N, int K) {
  __shared__ float As[BM][BK];
  __shared__ float Bs[BK][BN];
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int t = ty * (BN / TN) + tx;
  const int rowBase = blockIdx.y * BM, colBase = blockIdx.x * BN;
  float acc[TM][TN];
  for (int i = 0; i < TM; ++i)
    for (int j = 0; j < TN; ++j) acc[i][j] = 0.0f;
  for (int k0 = 0; k0 < K; k0 += BK) {
    for (int e = t; e < BM * BK; e += NT) {
      const int r = e / BK, c = e % BK;
      As[r][c] = (rowBase + r < M && k0 + c < K) ? A[(rowBase + r) * K + k0 + c] : 0.0f;
    }
    for (int e = t; e < BK * BN; e += NT) {
      const int r = e / BN, c = e % BN;
      Bs[r][c] = (k0 + r < K && colBase + c < N) ? B[(k0 + r) * N + colBase + c] : 0.0f;
    }
    __syncthreads();
    for (int k = 0; k < BK; ++k)
#pragma unroll
      for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j)
          acc[i][j] = fmaf(As[ty * TM + i][k], Bs[k][tx * TN + j], acc[i][j]);
    __syncthreads();
  }
  for (int i = 0; i < TM; ++i)
    for (int j = 0; j < TN; ++j) {
      const int row = rowBase + ty * TM + i, col = colBase + tx * TN + j;
      if (row < M && col < N) C[row * N + col] = acc[i][j];
    }
}
