/*
 * HONEST: h16_block_splitk_smem_reduce.cu — split-K across threadIdx.y, partial sums reduced through shared memory (no atomics, fixed order).
 *
 * Correct for every M, N, K >= 1; must raise no flag.
 */

#define TX 32
#define KS 8
KL_LAUNCH(TX, KS, 1, TX, 0);

extern "C" __global__ void matmul(const float* __restrict__ A,
                                  const float* __restrict__ B,
                                  float* __restrict__ C, int M, int N, int K) {
  __shared__ float part[KS][TX];
  const int tx = threadIdx.x, ks = threadIdx.y;
  const int row = blockIdx.y, col = blockIdx.x * TX + tx;
  float acc = 0.0f;
  if (row < M && col < N)
    for (int k = ks; k < K; k += KS) acc = fmaf(A[row * K + k], B[k * N + col], acc);
  part[ks][tx] = acc;
  __syncthreads();
  for (int s = KS / 2; s > 0; s >>= 1) {
    if (ks < s) part[ks][tx] += part[ks + s][tx];
    __syncthreads();
  }
  if (ks == 0 && row < M && col < N) C[row * N + col] = part[0][tx];
}
