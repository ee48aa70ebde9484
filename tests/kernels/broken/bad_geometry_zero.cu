/*
 * BROKEN: bad_geometry_zero.cu — a launch declaration with block_x = 0.
 *
 * The kernel body is a correct 16 x 16 coalesced kernel, but the geometry
 * says block = (0, 1): zero threads per block, which no launch accepts
 * (the contract requires 1 <= block_x * block_y <= 1024).
 *
 * Expected verdict: compiles, REJECTED at geometry validation (never run).
 */

#define BS 16

KL_LAUNCH(0, 1, BS, BS, 0);

extern "C" __global__ void matmul(const float* __restrict__ A,
                                  const float* __restrict__ B,
                                  float* __restrict__ C, int M, int N, int K) {
  const int row = blockIdx.y * BS + threadIdx.y;
  const int col = blockIdx.x * BS + threadIdx.x;
  if (row < M && col < N) {
    float acc = 0.0f;
    for (int k = 0; k < K; ++k) acc = fmaf(A[row * K + k], B[k * N + col], acc);
    C[row * N + col] = acc;
  }
}
