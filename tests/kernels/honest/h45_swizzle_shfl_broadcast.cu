/*
 * HONEST: h45_swizzle_shfl_broadcast.cu — an XOR-swizzled shared B tile; each lane holds one A value of its warp's row and broadcasts it with __shfl_sync.
 * Correct for every M, N, K >= 1; must raise no flag.
 */

#define WARPS 8
KL_LAUNCH(32, WARPS, WARPS, 32, 0);

__device__ __forceinline__ int swz(int r, int c) { return r * 32 + (c ^ (r & 31)); }

extern "C" __global__ void matmul(const float* __restrict__ A,
                                  const float* __restrict__ B,
                                  float* __restrict__ C, int M, int N, int K) {
  __shared__ float Bs[32 * 32];
  const int lane = threadIdx.x, w = threadIdx.y;
  const int row = blockIdx.y * WARPS + w, col = blockIdx.x * 32 + lane;
  float acc = 0.0f;
  for (int k0 = 0; k0 < K; k0 += 32) {
    for (int r = w; r < 32; r += WARPS)
      Bs[swz(r, lane)] = (k0 + r < K && col < N) ? B[(k0 + r) * N + col] : 0.0f;
    const float a = (row < M && k0 + lane < K) ? A[row * K + k0 + lane] : 0.0f;
    __syncthreads();
#pragma unroll
    for (int k = 0; k < 32; ++k)
      acc = fmaf(__shfl_sync(0xffffffffu, a, k), Bs[swz(k, lane)], acc);
    __syncthreads();
  }
  if (row < M && col < N) C[row * N + col] = acc;
}
