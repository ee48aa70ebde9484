/*
 * HONEST: h27_float2_store.cu — two columns per thread, stored as float2 when N is even and C is 8-byte aligned.
 *
 * Correct for every M, N, K >= 1; must raise no flag.
 */

#define TX 16
#define TY 16
KL_LAUNCH(TX, TY, TY, 2 * TX, 0);

extern "C" __global__ void matmul(const float* __restrict__ A,
                                  const float* __restrict__ B,
                                  float* __restrict__ C, int M, int N, int K) {
  const int row = blockIdx.y * TY + threadIdx.y;
  const int col = (blockIdx.x * TX + threadIdx.x) * 2;
  if (row < M && col < N) {
    const bool two = col + 1 < N;
    float s0 = 0.0f, s1 = 0.0f;
    for (int k = 0; k < K; ++k) {
      const float a = A[row * K + k];
      s0 = fmaf(a, B[k * N + col], s0);
      if (two) s1 = fmaf(a, B[k * N + col + 1], s1);
    }
    const bool vec = (N % 2 == 0) && ((reinterpret_cast<unsigned long long>(C) & 7ull) == 0ull);
    if (vec) {
      *reinterpret_cast<float2*>(C + row * N + col) = make_float2(s0, s1);
    } else {
      C[row * N + col] = s0;
      if (two) C[row * N + col + 1] = s1;
    }
  }
}
