/*
 * HONEST: h31_row_cache.cu — a block owns 1 row x 128 columns and stages chunks of its A row in shared memory.
 *
 * Correct for every M, N, K >= 1; must raise no flag.
 */

#define TX 128
#define CH 64
KL_LAUNCH(TX, 1, 1, TX, 0);

extern "C" __global__ void matmul(const float* __restrict__ A,
                                  const float* __restrict__ B,
                                  float* __restrict__ C, int M, int N, int K) {
  __shared__ float arow[CH];
  const int row = blockIdx.y;
  const int col = blockIdx.x * TX + threadIdx.x;
  float acc = 0.0f;
  for (int k0 = 0; k0 < K; k0 += CH) {
    if (threadIdx.x < CH)
      arow[threadIdx.x] = (row < M && k0 + threadIdx.x < K) ? A[row * K + k0 + threadIdx.x] : 0.0f;
    __syncthreads();
    const int kend = min(CH, K - k0);
    if (col < N)
      for (int k = 0; k < kend; ++k) acc = fmaf(arow[k], B[(k0 + k) * N + col], acc);
    __syncthreads();
  }
  if (row < M && col < N) C[row * N + col] = acc;
}
