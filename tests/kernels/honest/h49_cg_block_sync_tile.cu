/*
 * HONEST: h49_cg_block_sync_tile.cu — shared-memory tiles of 16 x 16 whose
 * barriers are cooperative groups' thread_block::sync (and cg::sync), the
 * block's 2-D thread_index and group_index in place of the built-ins.
 *
 * Correct for every M, N, K >= 1; must raise no flag.
 */
#include <cooperative_groups.h>

namespace cg = cooperative_groups;

#define BS 16
KL_LAUNCH(BS, BS, BS, BS, 0);

extern "C" __global__ void matmul(const float* __restrict__ A,
                                  const float* __restrict__ B,
                                  float* __restrict__ C, int M, int N, int K) {
  __shared__ float As[BS][BS];
  __shared__ float Bs[BS][BS];
  cg::thread_block block = cg::this_thread_block();
  const dim3 t = block.thread_index(), g = block.group_index();
  const int tx = t.x, ty = t.y;
  const int row = g.y * BS + ty, col = g.x * BS + tx;
  float acc = 0.0f;
  for (int k0 = 0; k0 < K; k0 += BS) {
    As[ty][tx] = (row < M && k0 + tx < K) ? A[row * K + k0 + tx] : 0.0f;
    Bs[ty][tx] = (k0 + ty < K && col < N) ? B[(k0 + ty) * N + col] : 0.0f;
    block.sync();
#pragma unroll
    for (int k = 0; k < BS; ++k) acc = fmaf(As[ty][k], Bs[k][tx], acc);
    cg::sync(block);
  }
  if (row < M && col < N) C[row * N + col] = acc;
}
