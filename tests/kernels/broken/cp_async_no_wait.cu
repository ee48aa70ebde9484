/*
 * BROKEN: cp_async_no_wait.cu — cp.async double buffering without
 * __pipeline_wait_prior.
 *
 * The copies of a stage are committed but never waited for: the barrier
 * after them does not make asynchronous copies visible, so the tile is read
 * before it lands (on a device: whatever the stage held before). The CPU
 * emulator completes a copy only at the wait that covers it, so every
 * product reads the stage's previous bytes and the kernel is wrong there
 * too.
 */
#include <cuda_pipeline.h>

#define BS 16
KL_LAUNCH(BS, BS, BS, BS, 0);

extern "C" __global__ void matmul(const float* __restrict__ A,
                                  const float* __restrict__ B,
                                  float* __restrict__ C, int M, int N, int K) {
  __shared__ float As[2][BS][BS];
  __shared__ float Bs[2][BS][BS];
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int row = blockIdx.y * BS + ty, col = blockIdx.x * BS + tx;
  const int nk = (K + BS - 1) / BS;
  auto load = [&](int stage, int k0) {
    const int ak = k0 + tx, bk = k0 + ty;
    if (row < M && ak < K)
      __pipeline_memcpy_async(&As[stage][ty][tx], &A[row * K + ak], sizeof(float));
    else
      As[stage][ty][tx] = 0.0f;
    if (bk < K && col < N)
      __pipeline_memcpy_async(&Bs[stage][ty][tx], &B[bk * N + col], sizeof(float));
    else
      Bs[stage][ty][tx] = 0.0f;
    __pipeline_commit();
  };
  float acc = 0.0f;
  load(0, 0);
  for (int t = 0; t < nk; ++t) {
    const int cur = t & 1;
    if (t + 1 < nk) {
      load(cur ^ 1, (t + 1) * BS);
    }
    __syncthreads();
#pragma unroll
    for (int k = 0; k < BS; ++k) acc = fmaf(As[cur][ty][k], Bs[cur][k][tx], acc);
    __syncthreads();
  }
  if (row < M && col < N) C[row * N + col] = acc;
}
