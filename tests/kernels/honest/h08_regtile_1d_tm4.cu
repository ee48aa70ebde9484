/*
 * HONEST: h08_regtile_1d_tm4.cu — 1-D register blocking: 4 rows per thread, 32 x 32 block tile, BK = 8.
 *
 * Correct for every M, N, K >= 1; must raise no flag.
 */

#define BM 32
#define BN 32
#define BK 8
#define TM 4
#define NT (BM * BN / TM)
KL_LAUNCH(NT, 1, BM, BN, 0);

extern "C" __global__ void matmul(const float* __restrict__ A,
                                  const float* __restrict__ B,
                                  float* __restrict__ C, int M, int N, int K) {
  __shared__ float As[BM][BK];
  __shared__ float Bs[BK][BN];
  const int t = threadIdx.x;
  const int rowBase = blockIdx.y * BM, colBase = blockIdx.x * BN;
  const int tc = t % BN, tr = t / BN;  /* tr: 0 .. BM/TM-1 */
  float acc[TM];
#pragma unroll
  for (int i = 0; i < TM; ++i) acc[i] = 0.0f;
  for (int k0 = 0; k0 < K; k0 += BK) {
    /* 256 threads, 256 elements in each tile */
    {
      const int r = t / BK, c = t % BK;
      const int gr = rowBase + r, gc = k0 + c;
      As[r][c] = (gr < M && gc < K) ? A[gr * K + gc] : 0.0f;
    }
    {
      const int r = t / BN, c = t % BN;
      const int gr = k0 + r, gc = colBase + c;
      Bs[r][c] = (gr < K && gc < N) ? B[gr * N + gc] : 0.0f;
    }
    __syncthreads();
#pragma unroll
    for (int k = 0; k < BK; ++k) {
      const float b = Bs[k][tc];
#pragma unroll
      for (int i = 0; i < TM; ++i) acc[i] = fmaf(As[tr * TM + i][k], b, acc[i]);
    }
    __syncthreads();
  }
  const int col = colBase + tc;
#pragma unroll
  for (int i = 0; i < TM; ++i) {
    const int row = rowBase + tr * TM + i;
    if (row < M && col < N) C[row * N + col] = acc[i];
  }
}
