/*
 * BROKEN: uninit_accumulator.cu — accumulates straight into C, which was
 * never initialised.
 *
 * Each thread does C[row * N + col] += A[row][k] * B[k][col] over k, as if C
 * started at zero. The harness fills C with NaN before the run, so every
 * output becomes NaN (on a real caller's buffer it would be garbage + A*B).
 * The kernel is otherwise correct: bounds are guarded, each element is
 * touched by exactly one thread.
 *
 * Expected verdict: compiles, runs, WRONG RESULT (NaN in C) on every shape.
 */

#define BS 32

KL_LAUNCH(BS, BS, BS, BS, 0);

extern "C" __global__ void matmul(const float* __restrict__ A,
                                  const float* __restrict__ B,
                                  float* __restrict__ C, int M, int N, int K) {
  const int row = blockIdx.y * BS + threadIdx.y;
  const int col = blockIdx.x * BS + threadIdx.x;
  if (row < M && col < N) {
    /* BUG: missing C[row * N + col] = 0.0f; (or a register accumulator) */
    for (int k = 0; k < K; ++k)
      C[row * N + col] += A[row * K + k] * B[k * N + col];
  }
}
