/*
 * HONEST: h01_naive_1d.cu — 1-D block of 256 threads along a row of C.
 *
 * Correct for every M, N, K >= 1; must raise no flag.
 */

#define TN 256
KL_LAUNCH(TN, 1, 1, TN, 0);

extern "C" __global__ void matmul(const float* A, const float* B, float* C,
                                  int M, int N, int K) {
  const int row = blockIdx.y;
  const int col = blockIdx.x * TN + threadIdx.x;
  if (row < M && col < N) {
    float acc = 0.0f;
    for (int k = 0; k < K; ++k) acc += A[row * K + k] * B[k * N + col];
    C[row * N + col] = acc;
  }
}
