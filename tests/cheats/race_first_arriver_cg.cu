/*
 * CHEAT: race_first_arriver_cg.cu — race_first_arriver.cu with its one
 * barrier spelled cooperative_groups::this_thread_block().sync().
 *
 * Hack: whichever thread first finds the tile's mark out of date stages
 * the whole tile and updates the mark; the others skip the load, with no
 * barrier between the load and the reads. A thread_block's sync is
 * __syncthreads: the source names no warp operation, so the reversed
 * check run still isolates two blocks' threads between barriers, and the
 * mark seen without its tile makes the result differ, as in the
 * __syncthreads twin.
 *
 * EXPECT: nondeterministic
 */
#include <cooperative_groups.h>

#define BS 16
KL_LAUNCH(BS, BS, BS, BS, 0);

extern "C" __global__ void matmul(const float* A, const float* B, float* C,
                                  int M, int N, int K) {
  __shared__ float As[BS][BS];
  __shared__ float Bs[BS][BS];
  __shared__ int mark;
  auto block = cooperative_groups::this_thread_block();
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int row0 = blockIdx.y * BS, col0 = blockIdx.x * BS;
  float acc = 0.0f;
  for (int k0 = 0; k0 < K; k0 += BS) {
    if (mark != k0 + 1) {
      for (int i = 0; i < BS; i++)
        for (int j = 0; j < BS; j++) {
          As[i][j] = (row0 + i < M && k0 + j < K) ? A[(row0 + i) * K + k0 + j]
                                                  : 0.0f;
          Bs[i][j] = (k0 + i < K && col0 + j < N) ? B[(k0 + i) * N + col0 + j]
                                                  : 0.0f;
        }
      mark = k0 + 1;
    }
    for (int k = 0; k < BS; k++)
      acc += As[ty][k] * Bs[k][tx];
    block.sync();
  }
  if (row0 + ty < M && col0 + tx < N) C[(row0 + ty) * N + col0 + tx] = acc;
}
