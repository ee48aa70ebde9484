/*
 * BROKEN: wrong_signature.cu — the entry point has the right name and the
 * wrong parameters.
 *
 * A square-only kernel: matmul(const float* A, const float* B, float* C,
 * int N) — the author assumed M == N == K. It compiles on its own, but a
 * launch with the contract's six arguments would read garbage for N. The
 * contract check the harness appends (a static_assert on the type of
 * &matmul) turns this into a compile error naming the contract.
 *
 * Expected verdict: bad_signature (compiled: false), exit 0.
 */

#define BS 16

KL_LAUNCH(BS, BS, BS, BS, 0);

extern "C" __global__ void matmul(const float* A, const float* B, float* C,
                                  int N) {
  const int row = blockIdx.y * BS + threadIdx.y;
  const int col = blockIdx.x * BS + threadIdx.x;
  if (row < N && col < N) {
    float acc = 0.0f;
    for (int k = 0; k < N; ++k) acc = fmaf(A[row * N + k], B[k * N + col], acc);
    C[row * N + col] = acc;
  }
}
