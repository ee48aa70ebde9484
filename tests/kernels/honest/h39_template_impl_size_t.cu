/*
 * HONEST: h39_template_impl_size_t.cu — a template device implementation behind the extern "C" entry; _Pragma and #pragma unroll with counts; size_t indexing with min(size_t, size_t).
 * Correct for every M, N, K >= 1; must raise no flag.
 */

#define BM 64
#define BN 64
#define BK 8
#define TM 4
#define TN 4
#define UNROLL _Pragma("unroll")
#define NT ((BM / TM) * (BN / TN))
KL_LAUNCH(NT, 1, BM, BN, 0);

template <int kBM, int kBN, int kBK, int kTM, int kTN>
__device__ __forceinline__ void gemm_tile(const float* __restrict__ A,
                                          const float* __restrict__ B,
                                          float* __restrict__ C, int M, int N,
                                          int K) {
  static_assert(kBM * kBK % ((kBM / kTM) * (kBN / kTN)) == 0, "A tile split");
  constexpr int kNT = (kBM / kTM) * (kBN / kTN);
  __shared__ float As[kBK][kBM + 4];
  __shared__ float Bs[kBK][kBN + 4];
  const int t = threadIdx.x;
  const int tr = t / (kBN / kTN), tc = t % (kBN / kTN);
  const int r0 = blockIdx.y * kBM, c0 = blockIdx.x * kBN;
  float acc[kTM][kTN] = {};
  for (int k0 = 0; k0 < K; k0 += kBK) {
    const int kk = min(kBK, K - k0);
UNROLL
    for (int i = t; i < kBM * kBK; i += kNT) {
      const int m = i / kBK, k = i % kBK;
      As[k][m] = (r0 + m < M && k < kk) ? A[(size_t)(r0 + m) * K + k0 + k] : 0.0f;
    }
UNROLL
    for (int i = t; i < kBK * kBN; i += kNT) {
      const int k = i / kBN, n = i % kBN;
      Bs[k][n] = (k < kk && c0 + n < N) ? B[(size_t)(k0 + k) * N + c0 + n] : 0.0f;
    }
    __syncthreads();
#pragma unroll BK
    for (int k = 0; k < kBK; ++k) {
      float a[kTM], b[kTN];
#pragma unroll (TM)
      for (int i = 0; i < kTM; ++i) a[i] = As[k][tr * kTM + i];
#pragma unroll
      for (int j = 0; j < kTN; ++j) b[j] = Bs[k][tc * kTN + j];
#pragma unroll
      for (int i = 0; i < kTM; ++i)
#pragma unroll
        for (int j = 0; j < kTN; ++j) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
    }
    __syncthreads();
  }
  const size_t rows = min((size_t)M, (size_t)(r0 + (tr + 1) * kTM));
#pragma unroll 1
  for (size_t r = (size_t)(r0 + tr * kTM); r < rows; ++r)
#pragma unroll
    for (int j = 0; j < kTN; ++j) {
      const int c = c0 + tc * kTN + j;
      if (c < N) C[r * N + c] = acc[r - (r0 + tr * kTM)][j];
    }
}

extern "C" __global__ void __launch_bounds__(NT)
matmul(const float* __restrict__ A, const float* __restrict__ B,
       float* __restrict__ C, int M, int N, int K) {
  gemm_tile<BM, BN, BK, TM, TN>(A, B, C, M, N, K);
}
