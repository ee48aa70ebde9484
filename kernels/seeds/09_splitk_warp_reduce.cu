/*
 * 09_splitk_warp_reduce.cu — split-K inside a warp, reduced with shuffles.
 *
 * What it adds over 08: a different axis of parallelism for skinny shapes
 * (small M or N, long K), where 128 x 128 block tiles leave most of the GPU
 * idle. Here a warp computes a 1 x TC strip of C (one row, TC = 8 columns)
 * and splits K across its 32 lanes: lane l handles k = l, l + 32, l + 64,
 * ..., so the warp's reads of the A row are perfectly coalesced. Each lane
 * ends with TC partial sums; a butterfly of __shfl_xor_sync (5 steps, full
 * mask, all 32 lanes) leaves the complete sums in every lane, and lane j
 * (j < TC) writes column j, a coalesced store. No shared memory, no atomics,
 * deterministic (the reduction order is fixed).
 *
 * Launch geometry: block = (32, 8): threadIdx.x is the lane, threadIdx.y the
 * warp (blockDim.x == 32, so each y-row of the block is exactly one warp).
 * The block owns 8 rows x TC = 8 columns of C: tile_rows = 8, tile_cols = 8,
 * grid = (ceil(N/8), ceil(M/8)). Lanes of a warp whose row is past M, or
 * whose k is past K, contribute zeros but still execute every shuffle (no
 * early return), and columns past N are skipped in loads and stores.
 */

#define WARPS 8
#define TC 8

KL_LAUNCH(32, WARPS, WARPS, TC, 0);

extern "C" __global__ void matmul(const float* __restrict__ A,
                                  const float* __restrict__ B,
                                  float* __restrict__ C, int M, int N, int K) {
  const int lane = threadIdx.x;
  const int row = blockIdx.y * WARPS + threadIdx.y;
  const int c0 = blockIdx.x * TC;
  const bool rowOk = row < M;

  float acc[TC];
#pragma unroll
  for (int j = 0; j < TC; ++j) acc[j] = 0.0f;

  if (rowOk) {
    const float* a = A + row * K;
    if (c0 + TC <= N) {
      for (int k = lane; k < K; k += 32) {
        const float av = __ldg(a + k);
        const float* b = B + k * N + c0;
#pragma unroll
        for (int j = 0; j < TC; ++j) acc[j] = fmaf(av, __ldg(b + j), acc[j]);
      }
    } else { /* ragged right edge of C */
      for (int k = lane; k < K; k += 32) {
        const float av = __ldg(a + k);
        const float* b = B + k * N + c0;
#pragma unroll
        for (int j = 0; j < TC; ++j)
          if (c0 + j < N) acc[j] = fmaf(av, __ldg(b + j), acc[j]);
      }
    }
  }

  /* butterfly reduction across the 32 lanes: every lane gets every sum */
#pragma unroll
  for (int off = 16; off > 0; off >>= 1)
#pragma unroll
    for (int j = 0; j < TC; ++j) acc[j] += __shfl_xor_sync(0xffffffffu, acc[j], off);

  float out = 0.0f;
#pragma unroll
  for (int j = 0; j < TC; ++j)
    if (lane == j) out = acc[j];
  if (rowOk && lane < TC && c0 + lane < N) C[row * N + c0 + lane] = out;
}
