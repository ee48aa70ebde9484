/*
 * HONEST: h51_cg_subwarp_tiles.cu — tiles of 8 threads (tiled_partition<8>),
 * one per element of C: K split over the tile's lanes, a butterfly of
 * tile.shfl_xor, then the sum broadcast with tile.shfl. On a ragged edge
 * whole tiles skip their element while the other tiles of the same warp
 * compute, as a device allows (a tile's collectives wait for its own
 * lanes only).
 *
 * Correct for every M, N, K >= 1; must raise no flag.
 */
#include <cooperative_groups.h>

namespace cg = cooperative_groups;

#define TILE 8
#define COLS 16 /* tiles per block row */
#define ROWS 2
KL_LAUNCH(TILE * COLS, ROWS, ROWS, COLS, 0);

extern "C" __global__ void matmul(const float* __restrict__ A,
                                  const float* __restrict__ B,
                                  float* __restrict__ C, int M, int N, int K) {
  cg::thread_block block = cg::this_thread_block();
  cg::thread_block_tile<TILE> tile = cg::tiled_partition<TILE>(block);
  const int t = tile.meta_group_rank(); /* 0 .. COLS * ROWS - 1 */
  const int row = blockIdx.y * ROWS + t / COLS;
  const int col = blockIdx.x * COLS + t % COLS;
  if (row >= M || col >= N) return; /* the whole tile leaves */
  float acc = 0.0f;
  for (int k = tile.thread_rank(); k < K; k += TILE)
    acc = fmaf(A[row * K + k], B[k * N + col], acc);
  for (int mask = TILE / 2; mask > 0; mask >>= 1)
    acc += tile.shfl_xor(acc, mask);
  acc = tile.shfl(acc, 0); /* every lane holds the same sum already */
  if (tile.thread_rank() == 0) C[row * N + col] = acc;
}
