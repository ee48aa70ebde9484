/*
 * BROKEN: missing_barrier_cg.cu — missing_barrier.cu with cooperative
 * groups: the tile is loaded, block.sync() is called after the compute
 * but not between the loads and the reads.
 *
 * A thread reads tile elements other threads have not written yet. A
 * thread_block's sync is __syncthreads, and the emulator treats the two
 * alike: the race shows as it does in the __syncthreads twin.
 *
 * Expected verdict: compiles, runs, WRONG RESULT.
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
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int row = blockIdx.y * BS + ty;
  const int col = blockIdx.x * BS + tx;
  float acc = 0.0f;
  for (int k0 = 0; k0 < K; k0 += BS) {
    As[ty][tx] = (row < M && k0 + tx < K) ? A[row * K + k0 + tx] : 0.0f;
    Bs[ty][tx] = (k0 + ty < K && col < N) ? B[(k0 + ty) * N + col] : 0.0f;
    /* BUG: missing block.sync() here */
#pragma unroll
    for (int k = 0; k < BS; ++k) acc = fmaf(As[ty][k], Bs[k][tx], acc);
    block.sync();
  }
  if (row < M && col < N) C[row * N + col] = acc;
}
