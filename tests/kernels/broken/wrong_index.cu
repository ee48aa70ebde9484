/*
 * BROKEN: wrong_index.cu — A indexed as if it were column-major.
 *
 * A coalesced one-thread-per-element kernel that reads A[k * M + row]
 * instead of A[row * K + k], i.e. it treats A as a K x M row-major matrix
 * (A transposed). Every index stays inside the M * K buffer, so nothing
 * faults; it computes reshape(A)^T * B instead of A * B.
 *
 * Expected verdict: compiles, runs, WRONG RESULT on every shape except
 * degenerate ones where the two layouts coincide (M == 1 or K == 1, e.g.
 * 1 x 1 x 1); wrong on 127 x 129 x 65 and on square shapes like 64^3.
 */

#define BS 32

KL_LAUNCH(BS, BS, BS, BS, 0);

extern "C" __global__ void matmul(const float* __restrict__ A,
                                  const float* __restrict__ B,
                                  float* __restrict__ C, int M, int N, int K) {
  const int row = blockIdx.y * BS + threadIdx.y;
  const int col = blockIdx.x * BS + threadIdx.x;
  if (row < M && col < N) {
    float acc = 0.0f;
    for (int k = 0; k < K; ++k)
      acc = fmaf(A[k * M + row], B[k * N + col], acc);  /* BUG: A[row * K + k] */
    C[row * N + col] = acc;
  }
}
