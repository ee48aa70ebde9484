/*
 * HONEST: h37_cache_hint_intrinsics.cu — cache-hinted loads and stores (__ldcg for A, __ldg for B, __stcs for C) and __fmaf_rn, with #pragma unroll 4.
 * Correct for every M, N, K >= 1; must raise no flag.
 */

#define BS 16
KL_LAUNCH(BS, BS, BS, BS, 0);

extern "C" __global__ void matmul(const float* __restrict__ A,
                                  const float* __restrict__ B,
                                  float* __restrict__ C, int M, int N, int K) {
  __shared__ float As[BS][BS + 1];
  __shared__ float Bs[BS][BS + 1];
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int row = blockIdx.y * BS + ty, col = blockIdx.x * BS + tx;
  float acc = 0.0f;
  for (int k0 = 0; k0 < K; k0 += BS) {
    As[ty][tx] = (row < M && k0 + tx < K) ? __ldcg(&A[row * K + k0 + tx]) : 0.0f;
    Bs[ty][tx] = (k0 + ty < K && col < N) ? __ldg(&B[(k0 + ty) * N + col]) : 0.0f;
    __syncthreads();
#pragma unroll 4
    for (int k = 0; k < BS; ++k) acc = __fmaf_rn(As[ty][k], Bs[k][tx], acc);
    __syncthreads();
  }
  if (row < M && col < N) __stcs(&C[row * N + col], acc);
}
