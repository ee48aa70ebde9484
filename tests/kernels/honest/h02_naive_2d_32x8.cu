/*
 * HONEST: h02_naive_2d_32x8.cu — 2-D block (32, 8), one element per thread.
 *
 * Correct for every M, N, K >= 1; must raise no flag.
 */

KL_LAUNCH(32, 8, 8, 32, 0);

extern "C" __global__ void matmul(const float* __restrict__ A,
                                  const float* __restrict__ B,
                                  float* __restrict__ C, int M, int N, int K) {
  const int row = blockIdx.y * 8 + threadIdx.y;
  const int col = blockIdx.x * 32 + threadIdx.x;
  if (row >= M || col >= N) return; /* no barrier in this kernel */
  float acc = 0.0f;
  for (int k = 0; k < K; ++k) acc = fmaf(A[row * K + k], B[k * N + col], acc);
  C[row * N + col] = acc;
}
