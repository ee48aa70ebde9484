/*
 * HONEST: h30_fp64_accumulate.cu — accumulates in double, rounds once to float (higher precision is allowed).
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
    double acc = 0.0;
    for (int k = 0; k < K; ++k) acc += (double)A[row * K + k] * (double)B[k * N + col];
    C[row * N + col] = (float)acc;
  }
}
