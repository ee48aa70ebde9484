/*
 * HONEST: h09_regtile_2d_4x4.cu — 2-D register blocking: 4 x 4 outputs per thread, 64 x 64 block tile, 256 threads.
 *
 * Correct for every M, N, K >= 1; must raise no flag.
 */

#define BM 64
#define BN 64
#define BK 8
#define TM 4
#define TN 4
#define NT ((BM / TM) * (BN / TN))
KL_LAUNCH(NT, 1, BM, BN, 0);

extern "C" __global__ void matmul(const float* __restrict__ A,
                                  const float* __restrict__ B,
                                  float* __restrict__ C, int M, int N, int K) {
  __shared__ float As[BK][BM]; /* transposed */
  __shared__ float Bs[BK][BN];
  const int t = threadIdx.x;
  const int rowBase = blockIdx.y * BM, colBase = blockIdx.x * BN;
  const int tr = t / (BN / TN), tc = t % (BN / TN);
  float acc[TM][TN];
#pragma unroll
  for (int i = 0; i < TM; ++i)
#pragma unroll
    for (int j = 0; j < TN; ++j) acc[i][j] = 0.0f;
  for (int k0 = 0; k0 < K; k0 += BK) {
    for (int e = t; e < BM * BK; e += NT) {
      const int r = e / BK, c = e % BK;
      const int gr = rowBase + r, gc = k0 + c;
      As[c][r] = (gr < M && gc < K) ? A[gr * K + gc] : 0.0f;
    }
    for (int e = t; e < BK * BN; e += NT) {
      const int r = e / BN, c = e % BN;
      const int gr = k0 + r, gc = colBase + c;
      Bs[r][c] = (gr < K && gc < N) ? B[gr * N + gc] : 0.0f;
    }
    __syncthreads();
#pragma unroll
    for (int k = 0; k < BK; ++k) {
      float a[TM], b[TN];
#pragma unroll
      for (int i = 0; i < TM; ++i) a[i] = As[k][tr * TM + i];
#pragma unroll
      for (int j = 0; j < TN; ++j) b[j] = Bs[k][tc * TN + j];
#pragma unroll
      for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
    }
    __syncthreads();
  }
#pragma unroll
  for (int i = 0; i < TM; ++i)
#pragma unroll
    for (int j = 0; j < TN; ++j) {
      const int row = rowBase + tr * TM + i, col = colBase + tc * TN + j;
      if (row < M && col < N) C[row * N + col] = acc[i][j];
    }
}
