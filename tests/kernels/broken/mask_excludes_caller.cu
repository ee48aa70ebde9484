/*
 * BROKEN: mask_excludes_caller.cu — a warp split-K whose shuffles name
 * only the lanes whose sums are stored.
 *
 * A warp computes a 1 x 16 strip of C, K split over its 32 lanes, and
 * reduces with __shfl_down_sync. Only lane 0 stores, so the author gave
 * the shuffles the mask 0x0000ffff ("the lanes that matter"), but every
 * lane of the warp executes them. On a device each lane must name itself
 * in the mask (CUDA C++ Programming Guide, warp shuffle functions): the
 * result is undefined, though converged hardware often hands out the
 * right values, so the bug hides there. When every warp operation met
 * the whole warp, the emulator passed it too.
 *
 * Expected verdict: compiles, runs, RUN ERROR: the launch fails saying
 * that lane 16 called a warp operation with mask 0x0000ffff, which leaves
 * out its own lane.
 */

#define WARPS 4
#define TC 16
KL_LAUNCH(32, WARPS, WARPS, TC, 0);

extern "C" __global__ void matmul(const float* __restrict__ A,
                                  const float* __restrict__ B,
                                  float* __restrict__ C, int M, int N, int K) {
  const int lane = threadIdx.x;
  const int row = blockIdx.y * WARPS + threadIdx.y;
  const int c0 = blockIdx.x * TC;
  float acc[TC];
#pragma unroll
  for (int j = 0; j < TC; ++j) acc[j] = 0.0f;
  if (row < M)
    for (int k = lane; k < K; k += 32) {
      const float a = A[row * K + k];
#pragma unroll
      for (int j = 0; j < TC; ++j)
        if (c0 + j < N) acc[j] = fmaf(a, B[k * N + c0 + j], acc[j]);
    }
  /* the bug: every lane runs these, the mask names lanes 0..15 only */
#pragma unroll
  for (int off = 16; off > 0; off >>= 1)
#pragma unroll
    for (int j = 0; j < TC; ++j) acc[j] += __shfl_down_sync(0x0000ffffu, acc[j], off);
  if (lane == 0 && row < M)
    for (int j = 0; j < TC && c0 + j < N; ++j) C[row * N + c0 + j] = acc[j];
}
