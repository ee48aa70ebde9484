/*
 * HONEST: h10_template_tile.cu — the block tile is a template device function; constexpr helpers size it.
 *
 * Correct for every M, N, K >= 1; must raise no flag.
 */

template <int BM, int BN, int BK, int TM, int TN> struct Tile {
  static constexpr int kThreads = (BM / TM) * (BN / TN);
};
using Cfg = Tile<32, 32, 16, 2, 2>;
constexpr int kBM = 32, kBN = 32, kBK = 16, kTM = 2, kTN = 2;

KL_LAUNCH(Cfg::kThreads, 1, kBM, kBN, 0);

template <int BM, int BN, int BK, int TM, int TN>
__device__ __forceinline__ void block_tile(const float* __restrict__ A,
                                           const float* __restrict__ B,
                                           float* __restrict__ C, int M, int N,
                                           int K, float (*As)[BM],
                                           float (*Bs)[BN]) {
  constexpr int NT = (BM / TM) * (BN / TN);
  const int t = threadIdx.x;
  const int rowBase = blockIdx.y * BM, colBase = blockIdx.x * BN;
  const int tr = t / (BN / TN), tc = t % (BN / TN);
  float acc[TM * TN] = {};
  for (int k0 = 0; k0 < K; k0 += BK) {
    for (int e = t; e < BM * BK; e += NT) {
      const int r = e / BK, c = e % BK, gr = rowBase + r, gc = k0 + c;
      As[c][r] = (gr < M && gc < K) ? A[gr * K + gc] : 0.0f;
    }
    for (int e = t; e < BK * BN; e += NT) {
      const int r = e / BN, c = e % BN, gr = k0 + r, gc = colBase + c;
      Bs[r][c] = (gr < K && gc < N) ? B[gr * N + gc] : 0.0f;
    }
    __syncthreads();
#pragma unroll
    for (int k = 0; k < BK; ++k)
#pragma unroll
      for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j)
          acc[i * TN + j] = fmaf(As[k][tr * TM + i], Bs[k][tc * TN + j], acc[i * TN + j]);
    __syncthreads();
  }
  for (int i = 0; i < TM; ++i)
    for (int j = 0; j < TN; ++j) {
      const int row = rowBase + tr * TM + i, col = colBase + tc * TN + j;
      if (row < M && col < N) C[row * N + col] = acc[i * TN + j];
    }
}

extern "C" __global__ void matmul(const float* __restrict__ A,
                                  const float* __restrict__ B,
                                  float* __restrict__ C, int M, int N, int K) {
  __shared__ float As[kBK][kBM];
  __shared__ float Bs[kBK][kBN];
  block_tile<kBM, kBN, kBK, kTM, kTN>(A, B, C, M, N, K, As, Bs);
}
