/*
 * BROKEN: cg_grid_sync.cu — a grid-wide barrier from cooperative groups.
 *
 * Zeroes C, waits at this_grid().sync() for every block to have done so,
 * then accumulates. grid.sync() is only defined under a cooperative launch
 * (cudaLaunchCooperativeKernel), which the harness never makes: the block
 * and tile level of cooperative_groups.h is supported, the grid level is
 * refused before compiling, with a message that says why.
 *
 * Expected verdict: invalid_input (exit 2), naming this_grid and the
 * cooperative launch.
 */
#include <cooperative_groups.h>

namespace cg = cooperative_groups;

#define BS 16
KL_LAUNCH(BS, BS, BS, BS, 0);

extern "C" __global__ void matmul(const float* A, const float* B, float* C,
                                  int M, int N, int K) {
  cg::grid_group grid = cg::this_grid();
  const int row = blockIdx.y * BS + threadIdx.y;
  const int col = blockIdx.x * BS + threadIdx.x;
  if (row < M && col < N) C[row * N + col] = 0.0f;
  grid.sync();
  if (row < M && col < N)
    for (int k = 0; k < K; ++k)
      C[row * N + col] = fmaf(A[row * K + k], B[k * N + col], C[row * N + col]);
}
