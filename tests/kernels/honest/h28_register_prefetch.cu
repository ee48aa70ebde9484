/*
 * HONEST: h28_register_prefetch.cu — single-stage tiles with the next chunk prefetched into registers before the compute.
 *
 * Correct for every M, N, K >= 1; must raise no flag.
 */

#define BS 16
KL_LAUNCH(BS, BS, BS, BS, 0);

extern "C" __global__ void matmul(const float* __restrict__ A,
                                  const float* __restrict__ B,
                                  float* __restrict__ C, int M, int N, int K) {
  __shared__ float As[BS][BS];
  __shared__ float Bs[BS][BS];
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int row = blockIdx.y * BS + ty, col = blockIdx.x * BS + tx;
  float na = (row < M && tx < K) ? A[row * K + tx] : 0.0f;
  float nb = (ty < K && col < N) ? B[ty * N + col] : 0.0f;
  float acc = 0.0f;
  for (int k0 = 0; k0 < K; k0 += BS) {
    As[ty][tx] = na;
    Bs[ty][tx] = nb;
    __syncthreads();
    const int k1 = k0 + BS;
    na = (row < M && k1 + tx < K) ? A[row * K + k1 + tx] : 0.0f;
    nb = (k1 + ty < K && col < N) ? B[(k1 + ty) * N + col] : 0.0f;
    for (int k = 0; k < BS; ++k) acc = fmaf(As[ty][k], Bs[k][tx], acc);
    __syncthreads();
  }
  if (row < M && col < N) C[row * N + col] = acc;
}
