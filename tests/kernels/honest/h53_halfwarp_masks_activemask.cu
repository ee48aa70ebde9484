/*
 * HONEST: h53_halfwarp_masks_activemask.cu — two C elements per warp, one per half-warp: each half sums a K slice per lane and reduces with its own mask (0x0000ffff inside `if (lane < 16)`, 0xffff0000 in the else, width 16), and inside the in-range branch __ballot_sync(__activemask(), ...) picks the lanes that store.
 * Correct for every M, N, K >= 1; must raise no flag.
 */

#define WARPS 4
KL_LAUNCH(32, WARPS, WARPS, 2, 0);

extern "C" __global__ void matmul(const float* __restrict__ A,
                                  const float* __restrict__ B,
                                  float* __restrict__ C, int M, int N, int K) {
  const int lane = threadIdx.x, hl = lane & 15;
  const int row = blockIdx.y * WARPS + threadIdx.y;
  const int col = blockIdx.x * 2 + (lane >> 4);
  float acc = 0.0f;
  if (row < M && col < N)
    for (int k = hl; k < K; k += 16) acc = fmaf(A[row * K + k], B[k * N + col], acc);
  /* each half-warp reduces among its own lanes, reading only lanes of its
   * mask (width 16 keeps every source inside the half) */
  if (lane < 16) {
#pragma unroll
    for (int off = 8; off > 0; off >>= 1) acc += __shfl_down_sync(0x0000ffffu, acc, off, 16);
  } else {
#pragma unroll
    for (int off = 8; off > 0; off >>= 1) acc += __shfl_down_sync(0xffff0000u, acc, off, 16);
  }
  /* on the last block column of an odd N only the lower half is here: the
   * vote is among the lanes that are, and each lane's own bit is its own
   * predicate whichever lanes those are */
  if (col < N) {
    const unsigned storers = __ballot_sync(__activemask(), hl == 0 && row < M);
    if ((storers >> lane) & 1u) C[row * N + col] = acc;
  }
}
