/*
 * HONEST: h34_warp_tile_ballot_free.cu — warp-level tiling without shuffles: each warp owns an 8 x 32 patch, lanes own columns.
 *
 * Correct for every M, N, K >= 1; must raise no flag.
 */

#define WARPS 4
#define WR 8
KL_LAUNCH(32, WARPS, WARPS * WR, 32, 0);

extern "C" __global__ void matmul(const float* __restrict__ A,
                                  const float* __restrict__ B,
                                  float* __restrict__ C, int M, int N, int K) {
  __shared__ float Bs[16][32];
  const int lane = threadIdx.x, w = threadIdx.y;
  const int col = blockIdx.x * 32 + lane;
  const int r0 = blockIdx.y * (WARPS * WR) + w * WR;
  float acc[WR];
#pragma unroll
  for (int i = 0; i < WR; ++i) acc[i] = 0.0f;
  for (int k0 = 0; k0 < K; k0 += 16) {
    for (int r = w; r < 16; r += WARPS)
      Bs[r][lane] = (k0 + r < K && col < N) ? B[(k0 + r) * N + col] : 0.0f;
    __syncthreads();
    const int kend = min(16, K - k0);
    for (int k = 0; k < kend; ++k) {
      const float b = Bs[k][lane];
#pragma unroll
      for (int i = 0; i < WR; ++i)
        if (r0 + i < M) acc[i] = fmaf(A[(r0 + i) * K + k0 + k], b, acc[i]);
    }
    __syncthreads();
  }
#pragma unroll
  for (int i = 0; i < WR; ++i)
    if (r0 + i < M && col < N) C[(r0 + i) * N + col] = acc[i];
}
