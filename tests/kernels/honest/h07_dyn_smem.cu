/*
 * HONEST: h07_dyn_smem.cu — tiles in dynamic shared memory (extern __shared__), sized by KL_LAUNCH.
 *
 * Correct for every M, N, K >= 1; must raise no flag.
 */

#define BS 16
KL_LAUNCH(BS, BS, BS, BS, 2 * BS * BS * sizeof(float));

extern "C" __global__ void matmul(const float* __restrict__ A,
                                  const float* __restrict__ B,
                                  float* __restrict__ C, int M, int N, int K) {
  extern __shared__ float smem[];
  float* As = smem;            /* BS x BS */
  float* Bs = smem + BS * BS;  /* BS x BS */
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int row = blockIdx.y * BS + ty, col = blockIdx.x * BS + tx;
  float acc = 0.0f;
  for (int k0 = 0; k0 < K; k0 += BS) {
    As[ty * BS + tx] = (row < M && k0 + tx < K) ? A[row * K + k0 + tx] : 0.0f;
    Bs[ty * BS + tx] = (k0 + ty < K && col < N) ? B[(k0 + ty) * N + col] : 0.0f;
    __syncthreads();
    for (int k = 0; k < BS; ++k) acc = fmaf(As[ty * BS + k], Bs[k * BS + tx], acc);
    __syncthreads();
  }
  if (row < M && col < N) C[row * N + col] = acc;
}
