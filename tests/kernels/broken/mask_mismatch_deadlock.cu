/*
 * BROKEN: mask_mismatch_deadlock.cu — lanes of one warp meet at
 * __syncwarp with different masks.
 *
 * A warp computes a few elements of C one after another, K split over
 * its 32 lanes. Each lane stages its partial sum in shared memory; lane
 * 0 waits with __syncwarp(0xffffffff) for the others' writes, then adds
 * the 32 sums and stores. The other lanes, which read nothing, call
 * __syncwarp(0xfffffffe) ("among themselves"): a mask other than lane
 * 0's, so lane 0's barrier names lanes that never execute it with its
 * mask (each lane a mask names must execute __syncwarp with the same
 * mask, CUDA C++ Programming Guide). They go on to the block's
 * __syncthreads, lane 0 waits for them: a deadlock. When every warp
 * barrier met the whole warp, the emulator paired the two calls and
 * passed it.
 *
 * Expected verdict: compiles, runs, DEADLOCK, reported with the mask
 * lane 0 waits with (0xffffffff) and the lanes it waits for.
 */

#define WARPS 4
#define COLS 4
KL_LAUNCH(32, WARPS, WARPS, COLS, 0);

extern "C" __global__ void matmul(const float* __restrict__ A,
                                  const float* __restrict__ B,
                                  float* __restrict__ C, int M, int N, int K) {
  __shared__ float part[WARPS][32];
  const int lane = threadIdx.x, w = threadIdx.y;
  const int row = blockIdx.y * WARPS + w;
  for (int c = 0; c < COLS; ++c) {
    const int col = blockIdx.x * COLS + c;
    float acc = 0.0f;
    if (row < M && col < N)
      for (int k = lane; k < K; k += 32) acc = fmaf(A[row * K + k], B[k * N + col], acc);
    part[w][lane] = acc;
    if (lane == 0) {
      __syncwarp(0xffffffffu);
      float sum = 0.0f;
      for (int i = 0; i < 32; ++i) sum += part[w][i];
      if (row < M && col < N) C[row * N + col] = sum;
    } else {
      __syncwarp(0xfffffffeu); /* the bug: not lane 0's mask */
    }
    __syncthreads(); /* part is written again for the next column */
  }
}
