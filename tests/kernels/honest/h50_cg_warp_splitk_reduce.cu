/*
 * HONEST: h50_cg_warp_splitk_reduce.cu — h15 written with cooperative
 * groups: a warp tile (tiled_partition<32>) per 1 x 8 strip of C, K split
 * over its lanes, reduced by warp.shfl_down for half the strip and by
 * cg::reduce(warp, v, cg::plus<float>()) for the other half; rank 0 of
 * the tile stores.
 *
 * Correct for every M, N, K >= 1; must raise no flag.
 */
#include <cooperative_groups.h>
#include <cooperative_groups/reduce.h>

namespace cg = cooperative_groups;

#define WARPS 4
#define TC 8
KL_LAUNCH(32, WARPS, WARPS, TC, 0);

extern "C" __global__ void matmul(const float* __restrict__ A,
                                  const float* __restrict__ B,
                                  float* __restrict__ C, int M, int N, int K) {
  cg::thread_block block = cg::this_thread_block();
  cg::thread_block_tile<32> warp = cg::tiled_partition<32>(block);
  const int lane = warp.thread_rank();
  const int row = blockIdx.y * WARPS + warp.meta_group_rank();
  const int c0 = blockIdx.x * TC;
  float acc[TC];
#pragma unroll
  for (int j = 0; j < TC; ++j) acc[j] = 0.0f;
  if (row < M) {
    for (int k = lane; k < K; k += warp.size()) {
      const float a = A[row * K + k];
#pragma unroll
      for (int j = 0; j < TC; ++j)
        if (c0 + j < N) acc[j] = fmaf(a, B[k * N + c0 + j], acc[j]);
    }
  }
  /* every lane of the tile takes part in every collective */
#pragma unroll
  for (int j = 0; j < TC / 2; ++j)
    for (int off = warp.size() / 2; off > 0; off >>= 1)
      acc[j] += warp.shfl_down(acc[j], off);
#pragma unroll
  for (int j = TC / 2; j < TC; ++j)
    acc[j] = cg::reduce(warp, acc[j], cg::plus<float>());
  if (lane == 0 && row < M)
    for (int j = 0; j < TC && c0 + j < N; ++j) C[row * N + c0 + j] = acc[j];
}
