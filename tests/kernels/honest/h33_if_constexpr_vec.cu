/*
 * HONEST: h33_if_constexpr_vec.cu — one templated body instantiated for a float4 path and a scalar path, chosen at run time.
 *
 * Correct for every M, N, K >= 1; must raise no flag.
 */

#define TX 16
#define TY 16
KL_LAUNCH(TX, TY, TY, 4 * TX, 0);

template <bool kVec>
__device__ __forceinline__ void row_strip(const float* __restrict__ A,
                                          const float* __restrict__ B,
                                          float* __restrict__ C, int M, int N,
                                          int K, int row, int col) {
  float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  for (int k = 0; k < K; ++k) {
    const float a = A[row * K + k];
    if constexpr (kVec) {
      const float4 b = *reinterpret_cast<const float4*>(B + k * N + col);
      acc[0] = fmaf(a, b.x, acc[0]);
      acc[1] = fmaf(a, b.y, acc[1]);
      acc[2] = fmaf(a, b.z, acc[2]);
      acc[3] = fmaf(a, b.w, acc[3]);
    } else {
      for (int j = 0; j < 4; ++j)
        if (col + j < N) acc[j] = fmaf(a, B[k * N + col + j], acc[j]);
    }
  }
  for (int j = 0; j < 4; ++j)
    if (col + j < N) C[row * N + col + j] = acc[j];
  (void)M;
}

extern "C" __global__ void matmul(const float* __restrict__ A,
                                  const float* __restrict__ B,
                                  float* __restrict__ C, int M, int N, int K) {
  const int row = blockIdx.y * TY + threadIdx.y;
  const int col = (blockIdx.x * TX + threadIdx.x) * 4;
  if (row >= M || col >= N) return; /* no barrier */
  const bool vec = (N % 4 == 0) && ((reinterpret_cast<unsigned long long>(B) & 15ull) == 0ull);
  if (vec)
    row_strip<true>(A, B, C, M, N, K, row, col);
  else
    row_strip<false>(A, B, C, M, N, K, row, col);
}
