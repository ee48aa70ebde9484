/*
 * HONEST: h35_include_guard.cu — a naive kernel inside an include guard
 * whose name is reserved (__X): a guard around the whole file is the
 * file's own macro, not a compiler-pass branch.
 *
 * Correct for every M, N, K >= 1; must raise no flag.
 */
#ifndef __H35_INCLUDE_GUARD_CU__
#define __H35_INCLUDE_GUARD_CU__

#define BS 16
KL_LAUNCH(BS, BS, BS, BS, 0);

extern "C" __global__ void matmul(const float* A, const float* B, float* C,
                                  int M, int N, int K) {
  const int row = blockIdx.y * BS + threadIdx.y;
  const int col = blockIdx.x * BS + threadIdx.x;
  if (row < M && col < N) {
    float acc = 0.0f;
    for (int k = 0; k < K; ++k) acc = fmaf(A[row * K + k], B[k * N + col], acc);
    C[row * N + col] = acc;
  }
}

#endif
