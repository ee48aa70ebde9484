/*
 * BROKEN: missing_barrier.cu — shared-memory tiling without __syncthreads.
 *
 * A 16 x 16 shared-memory tiled kernel that forgot its barriers: there is no
 * __syncthreads between loading a tile and reading it (a thread reads tile
 * elements that other threads have not written yet), and none between
 * reading a tile and overwriting it with the next K chunk (fast threads
 * clobber the tile while slow threads still compute on it). On a GPU the
 * 8 warps of a block drift apart; under any emulator that interleaves a
 * block's threads arbitrarily (or runs them one after another) almost every
 * output reads stale or foreign tile values.
 *
 * Expected verdict: compiles (ptxas reports 0 barriers), runs, WRONG RESULT
 * (a data race; not a fault, not a hang) on any shape with more than one
 * tile of work, e.g. 127 x 129 x 65 or 33 x 17 x 200. On 1 x 1 x 1 it can
 * come out right by luck (every other tile slot is a zero pad, and fresh
 * shared memory may already hold zeros), so do not test it there.
 */

#define BS 16

KL_LAUNCH(BS, BS, BS, BS, 0);

extern "C" __global__ void matmul(const float* __restrict__ A,
                                  const float* __restrict__ B,
                                  float* __restrict__ C, int M, int N, int K) {
  __shared__ float As[BS][BS];
  __shared__ float Bs[BS][BS];

  const int tx = threadIdx.x, ty = threadIdx.y;
  const int row = blockIdx.y * BS + ty;
  const int col = blockIdx.x * BS + tx;

  float acc = 0.0f;
  for (int k0 = 0; k0 < K; k0 += BS) {
    As[ty][tx] = (row < M && k0 + tx < K) ? A[row * K + k0 + tx] : 0.0f;
    Bs[ty][tx] = (k0 + ty < K && col < N) ? B[(k0 + ty) * N + col] : 0.0f;
    /* BUG: missing __syncthreads() here ... */
#pragma unroll
    for (int k = 0; k < BS; ++k) acc = fmaf(As[ty][k], Bs[k][tx], acc);
    /* BUG: ... and here, before the next chunk overwrites the tiles */
  }
  if (row < M && col < N) C[row * N + col] = acc;
}
