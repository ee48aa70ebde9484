/*
 * HONEST: h36_macros_pragmas.cu — what the scanner's stricter macro rules
 * must still let through: a pasting macro called with literal arguments
 * (tile_ ## 16), a variadic macro that pastes nothing, #pragma unroll and
 * _Pragma("unroll 4"), an #ifndef default on a name of the file's own, and
 * a __device__ helper declared before its definition.
 *
 * Correct for every M, N, K >= 1; must raise no flag.
 */
#ifndef TILE
#define TILE 16
#endif
#define KL_CAT(a, b) a##b
#define KL_FIRST(x, ...) (x)
#define KL_UNROLL4 _Pragma("unroll 4")
KL_LAUNCH(TILE, TILE, TILE, TILE, 0);

__device__ float dot_row(const float* a, const float* B, int N, int K,
                        int col);

extern "C" __global__ void matmul(const float* A, const float* B, float* C,
                                  int M, int N, int K) {
  const int row = blockIdx.y * TILE + threadIdx.y;
  const int col = blockIdx.x * TILE + threadIdx.x;
  if (row < M && col < N)
    C[row * N + col] = KL_FIRST(KL_CAT(dot_, row)(A + row * K, B, N, K, col), 0);
}

__device__ float dot_row(const float* a, const float* B, int N, int K,
                         int col) {
  float acc = 0.0f;
  int k = 0;
  KL_UNROLL4
  for (; k + 4 <= K; k += 4) {
#pragma unroll
    for (int u = 0; u < 4; ++u) acc = fmaf(a[k + u], B[(k + u) * N + col], acc);
  }
  for (; k < K; ++k) acc = fmaf(a[k], B[k * N + col], acc);
  return acc;
}
