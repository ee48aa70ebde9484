/*
 * HONEST: h40_assert_builtins.cu — device assert, __builtin_expect, __builtin_assume_aligned, an enum tile size, a __host__ __device__ helper, mixed-sign min/max.
 * Correct for every M, N, K >= 1; must raise no flag.
 */

enum : int { BS = 16 };
using idx_t = int;
KL_LAUNCH(BS, BS, BS, BS, 0);

__host__ __device__ __forceinline__ idx_t cdiv(idx_t a, idx_t b) { return (a + b - 1) / b; }

extern "C" __global__ void matmul(const float* __restrict__ A,
                                  const float* __restrict__ B,
                                  float* __restrict__ C, int M, int N, int K) {
  assert(M > 0 && N > 0 && K > 0);
  __shared__ __align__(16) float As[BS][BS];
  __shared__ __align__(16) float Bs[BS][BS];
  const unsigned tx = threadIdx.x, ty = threadIdx.y;
  const int row = blockIdx.y * BS + ty, col = blockIdx.x * BS + tx;
  const float* __restrict__ Bp = static_cast<const float*>(__builtin_assume_aligned(B, 4));
  float acc = 0.0f;
  const int tiles = cdiv(K, BS);
  for (int t = 0; t < tiles; ++t) {
    const int k0 = t * BS;
    const int lim = min(K - k0, BS);
    As[ty][tx] = (__builtin_expect(row < M, 1) && tx < (unsigned)lim) ? A[row * K + k0 + tx] : 0.0f;
    Bs[ty][tx] = (ty < (unsigned)lim && col < N) ? Bp[(k0 + ty) * N + col] : 0.0f;
    __syncthreads();
    for (int k = 0; k < max(lim, 0); ++k) acc = fmaf(As[ty][k], Bs[k][tx], acc);
    __syncthreads();
  }
  if (row < M && col < N) C[row * N + col] = acc;
}
