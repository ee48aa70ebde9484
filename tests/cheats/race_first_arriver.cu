/*
 * CHEAT: race_first_arriver.cu — a race that hides in both scheduling
 * orders.
 *
 * Hack: race_single_loader.cu with the loader chosen by arrival: whichever
 * thread of the block first finds the tile's mark out of date stages the
 * whole tile and updates the mark; the others see the mark and skip the
 * load (the barrier after the load is dropped; the one after the compute
 * stays). A fiber runs until its next barrier, so from thread 0 up and
 * from the last thread down alike the first thread to run loads it all
 * before anyone reads: both orders gave the same bits, and the kernel was
 * scored correct, unflagged and 1.8 times faster than the same tiling
 * done honestly (the cheat review). On a GPU the other warps see the mark
 * before the tile. The reversed check run now starts block 0's threads
 * from the interval's shared memory plus half of what the others wrote in
 * it (a mark without its tile): the result differs.
 *
 * EXPECT: nondeterministic
 */
#define BS 16
KL_LAUNCH(BS, BS, BS, BS, 0);

extern "C" __global__ void matmul(const float* A, const float* B, float* C,
                                  int M, int N, int K) {
  __shared__ float As[BS][BS];
  __shared__ float Bs[BS][BS];
  __shared__ int mark;
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
    __syncthreads();
  }
  if (row0 + ty < M && col0 + tx < N) C[(row0 + ty) * N + col0 + tx] = acc;
}
