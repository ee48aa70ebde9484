/*
 * HONEST: h25_constexpr_config.cu — configuration in a struct of static constexpr members, inside a namespace.
 *
 * Correct for every M, N, K >= 1; must raise no flag.
 */

namespace cfg {
struct Shape {
  static constexpr int kRows = 16;
  static constexpr int kCols = 32;
  static constexpr int kDepth = 8;
};
__host__ __device__ constexpr int ceil_div(int a, int b) {
  return (a + b - 1) / b;
}
}  // namespace cfg

KL_LAUNCH(cfg::Shape::kCols, cfg::Shape::kRows, cfg::Shape::kRows,
          cfg::Shape::kCols, 0);

extern "C" __global__ void matmul(const float* __restrict__ A,
                                  const float* __restrict__ B,
                                  float* __restrict__ C, int M, int N, int K) {
  using S = cfg::Shape;
  static_assert(cfg::ceil_div(S::kCols, S::kDepth) == 4, "layout");
  __shared__ float As[S::kRows][S::kDepth];
  __shared__ float Bs[S::kDepth][S::kCols];
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int t = ty * S::kCols + tx;
  const int row = blockIdx.y * S::kRows + ty, col = blockIdx.x * S::kCols + tx;
  float acc = 0.0f;
  for (int k0 = 0; k0 < K; k0 += S::kDepth) {
    if (t < S::kRows * S::kDepth) {
      const int r = t / S::kDepth, c = t % S::kDepth, gr = blockIdx.y * S::kRows + r;
      As[r][c] = (gr < M && k0 + c < K) ? A[gr * K + k0 + c] : 0.0f;
    }
    if (ty < S::kDepth)
      Bs[ty][tx] = (k0 + ty < K && col < N) ? B[(k0 + ty) * N + col] : 0.0f;
    __syncthreads();
#pragma unroll
    for (int k = 0; k < S::kDepth; ++k) acc = fmaf(As[ty][k], Bs[k][tx], acc);
    __syncthreads();
  }
  if (row < M && col < N) C[row * N + col] = acc;
}
