/*
 * BROKEN: bad_geometry_big.cu — a block of 64 x 32 = 2048 threads.
 *
 * The kernel body is a correct coalesced kernel that strides over its
 * 16 x 16 tile, but the geometry asks for block = (64, 32), twice the
 * 1024-thread hardware limit (cudaLaunchKernel would fail with "invalid
 * configuration argument").
 *
 * Expected verdict: compiles, REJECTED at geometry validation (never run).
 */

#define BS 16

KL_LAUNCH(64, 32, BS, BS, 0);

extern "C" __global__ void matmul(const float* __restrict__ A,
                                  const float* __restrict__ B,
                                  float* __restrict__ C, int M, int N, int K) {
  for (int ty = threadIdx.y; ty < BS; ty += blockDim.y)
    for (int tx = threadIdx.x; tx < BS; tx += blockDim.x) {
      const int row = blockIdx.y * BS + ty;
      const int col = blockIdx.x * BS + tx;
      if (row < M && col < N) {
        float acc = 0.0f;
        for (int k = 0; k < K; ++k) acc = fmaf(A[row * K + k], B[k * N + col], acc);
        C[row * N + col] = acc;
      }
    }
}
