/*
 * HONEST: h52_cg_tile_ballot_broadcast.cu — a warp tile per row strip of
 * 32 columns: each lane owns a column, A's row is loaded 32 values at a
 * time, one per lane, and read back by every lane through warp.shfl (even
 * k) or a per-warp shared-memory stage ordered by cg::sync(warp) (odd k);
 * warp.any skips a strip wholly past M or N, and warp.ballot counts the
 * lanes with a column in range.
 *
 * Correct for every M, N, K >= 1; must raise no flag.
 */
#include <cooperative_groups.h>

namespace cg = cooperative_groups;

#define WARPS 4
KL_LAUNCH(32, WARPS, WARPS, 32, 0);

extern "C" __global__ void matmul(const float* __restrict__ A,
                                  const float* __restrict__ B,
                                  float* __restrict__ C, int M, int N, int K) {
  __shared__ float stage[WARPS][32];
  auto block = cg::this_thread_block();
  auto warp = cg::tiled_partition<32>(block);
  const int w = warp.meta_group_rank(), lane = warp.thread_rank();
  const int row = blockIdx.y * WARPS + w;
  const int col = blockIdx.x * 32 + lane;
  if (!warp.any(row < M && col < N)) return;
  const int live = __popc(warp.ballot(col < N)); /* columns in range */
  float acc = 0.0f;
  for (int k0 = 0; k0 < K; k0 += 32) {
    const float a = (row < M && k0 + lane < K) ? A[row * K + k0 + lane] : 0.0f;
    stage[w][lane] = a;
    cg::sync(warp);
    const int kn = K - k0 < 32 ? K - k0 : 32;
    for (int k = 0; k < kn; ++k) {
      const float ak = (k % 2) ? stage[w][k] : warp.shfl(a, k);
      if (lane < live) acc = fmaf(ak, B[(k0 + k) * N + col], acc);
    }
    warp.sync(); /* every lane has read the stage before it is rewritten */
  }
  if (row < M && col < N) C[row * N + col] = acc;
}
