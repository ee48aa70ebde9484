/*
 * HONEST: h13_double_buffer_static.cu — two static shared-memory stages, one barrier per K chunk.
 *
 * Correct for every M, N, K >= 1; must raise no flag.
 */

#define BS 16
KL_LAUNCH(BS, BS, BS, BS, 0);

extern "C" __global__ void matmul(const float* __restrict__ A,
                                  const float* __restrict__ B,
                                  float* __restrict__ C, int M, int N, int K) {
  __shared__ float As[2][BS][BS];
  __shared__ float Bs[2][BS][BS];
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int row = blockIdx.y * BS + ty, col = blockIdx.x * BS + tx;
  const int chunks = (K + BS - 1) / BS;
  As[0][ty][tx] = (row < M && tx < K) ? A[row * K + tx] : 0.0f;
  Bs[0][ty][tx] = (ty < K && col < N) ? B[ty * N + col] : 0.0f;
  __syncthreads();
  float acc = 0.0f;
  for (int c = 0; c < chunks; ++c) {
    const int cur = c & 1, nxt = cur ^ 1;
    if (c + 1 < chunks) { /* uniform: every thread takes the same branch */
      const int k0 = (c + 1) * BS;
      As[nxt][ty][tx] = (row < M && k0 + tx < K) ? A[row * K + k0 + tx] : 0.0f;
      Bs[nxt][ty][tx] = (k0 + ty < K && col < N) ? B[(k0 + ty) * N + col] : 0.0f;
    }
    for (int k = 0; k < BS; ++k) acc = fmaf(As[cur][ty][k], Bs[cur][k][tx], acc);
    __syncthreads();
  }
  if (row < M && col < N) C[row * N + col] = acc;
}
