/*
 * HONEST: h29_kahan.cu — compensated (Kahan) summation: more accurate than plain fp32, never less.
 *
 * Correct for every M, N, K >= 1; must raise no flag.
 */

#define BS 16
KL_LAUNCH(BS, BS, BS, BS, 0);

extern "C" __global__ void matmul(const float* __restrict__ A,
                                  const float* __restrict__ B,
                                  float* __restrict__ C, int M, int N, int K) {
  const int row = blockIdx.y * BS + threadIdx.y;
  const int col = blockIdx.x * BS + threadIdx.x;
  if (row < M && col < N) {
    float sum = 0.0f, comp = 0.0f;
    for (int k = 0; k < K; ++k) {
      const float y = A[row * K + k] * B[k * N + col] - comp;
      const float t = sum + y;
      comp = (t - sum) - y;
      sum = t;
    }
    C[row * N + col] = sum;
  }
}
