/*
 * HONEST: h20_device_helpers.cu — small __device__ helpers: a guarded load and a tile dot product.
 *
 * Correct for every M, N, K >= 1; must raise no flag.
 */

#define BS 16
KL_LAUNCH(BS, BS, BS, BS, 0);

__device__ __forceinline__ float load_or_zero(const float* P, int rows, int cols,
                                              int r, int c) {
  return (r < rows && c < cols) ? P[r * cols + c] : 0.0f;
}

__device__ __forceinline__ float tile_dot(const float (*As)[BS],
                                          const float (*Bs)[BS], int ty, int tx,
                                          float acc) {
#pragma unroll
  for (int k = 0; k < BS; ++k) acc = fmaf(As[ty][k], Bs[k][tx], acc);
  return acc;
}

__device__ __noinline__ void store_guarded(float* C, int M, int N, int r, int c,
                                           float v) {
  if (r < M && c < N) C[r * N + c] = v;
}

extern "C" __global__ void matmul(const float* __restrict__ A,
                                  const float* __restrict__ B,
                                  float* __restrict__ C, int M, int N, int K) {
  __shared__ float As[BS][BS];
  __shared__ float Bs[BS][BS];
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int row = blockIdx.y * BS + ty, col = blockIdx.x * BS + tx;
  float acc = 0.0f;
  for (int k0 = 0; k0 < K; k0 += BS) {
    As[ty][tx] = load_or_zero(A, M, K, row, k0 + tx);
    Bs[ty][tx] = load_or_zero(B, K, N, k0 + ty, col);
    __syncthreads();
    acc = tile_dot(As, Bs, ty, tx, acc);
    __syncthreads();
  }
  store_guarded(C, M, N, row, col, acc);
}
