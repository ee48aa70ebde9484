/*
 * BROKEN: mask_read_outside.cu — each half-warp reduces with its own
 * mask, and the lower half's first step reads the upper half's lanes.
 *
 * A warp computes one element of C, K split over its 32 lanes. The two
 * halves then reduce apart, each with its own mask (0x0000ffff inside
 * `if (lane < 16)`, 0xffff0000 in the else), through one helper that
 * starts at offset 16: for the lower half that step was meant to fold in
 * the upper half's partial sums, but those lanes are outside its mask. A
 * shuffle that reads a lane outside its mask gets an undefined value
 * (CUDA C++ Programming Guide, warp shuffle functions); on a device the
 * inactive lanes' registers may still hold the right sums, so the bug
 * can hide there. When every warp operation met the whole warp, the
 * emulator paired the two halves' first shuffles and passed it.
 *
 * Expected verdict: compiles, runs, WRONG RESULT (the emulator reads a
 * lane outside the mask as poison: NaN in C) on every shape.
 */

#define WARPS 4
KL_LAUNCH(32, WARPS, WARPS, 1, 0);

__device__ __forceinline__ float half_reduce(float v, unsigned mask) {
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) v += __shfl_down_sync(mask, v, off);
  return v;
}

extern "C" __global__ void matmul(const float* __restrict__ A,
                                  const float* __restrict__ B,
                                  float* __restrict__ C, int M, int N, int K) {
  const int lane = threadIdx.x;
  const int row = blockIdx.y * WARPS + threadIdx.y, col = blockIdx.x;
  float acc = 0.0f;
  if (row < M && col < N)
    for (int k = lane; k < K; k += 32) acc = fmaf(A[row * K + k], B[k * N + col], acc);
  if (lane < 16)
    acc = half_reduce(acc, 0x0000ffffu); /* the bug: offset 16 leaves the mask */
  else
    acc = half_reduce(acc, 0xffff0000u);
  if (lane == 0 && row < M && col < N) C[row * N + col] = acc;
}
