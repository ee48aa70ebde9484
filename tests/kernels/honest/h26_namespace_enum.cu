/*
 * HONEST: h26_namespace_enum.cu — helpers in a namespace, tile sizes as enumerators.
 *
 * Correct for every M, N, K >= 1; must raise no flag.
 */

namespace kl {
enum { kTile = 16, kThreads = kTile * kTile };

__device__ __forceinline__ int cdiv(int a, int b) { return (a + b - 1) / b; }

__device__ float dot_column(const float* __restrict__ a,
                            const float* __restrict__ B, int N, int K, int col) {
  float acc = 0.0f;
  for (int k = 0; k < K; ++k) acc = fmaf(a[k], B[k * N + col], acc);
  return acc;
}
}  // namespace kl

KL_LAUNCH(kl::kThreads, 1, kl::kTile, kl::kTile, 0);

extern "C" __global__ void matmul(const float* __restrict__ A,
                                  const float* __restrict__ B,
                                  float* __restrict__ C, int M, int N, int K) {
  const int r = threadIdx.x / kl::kTile, c = threadIdx.x % kl::kTile;
  const int row = blockIdx.y * kl::kTile + r, col = blockIdx.x * kl::kTile + c;
  if (blockIdx.x >= (unsigned)kl::cdiv(N, kl::kTile)) return;
  if (row < M && col < N) C[row * N + col] = kl::dot_column(A + row * K, B, N, K, col);
}
