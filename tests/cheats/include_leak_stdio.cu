/*
 * CHEAT: include_leak_stdio.cu — include leak: a host header.
 *
 * Hack: #include <stdio.h> pulls host declarations (fopen, system) into the
 * emulator's compile.
 *
 * EXPECT: disallowed_include
 */
#include <stdio.h>

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
