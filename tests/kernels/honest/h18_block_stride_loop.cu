/*
 * HONEST: h18_block_stride_loop.cu — a 1-D block of 128 threads loops over its 32 x 32 tile with a block-stride loop.
 *
 * Correct for every M, N, K >= 1; must raise no flag.
 */

#define TILE 32
#define NT 128
KL_LAUNCH(NT, 1, TILE, TILE, 0);

extern "C" __global__ void matmul(const float* __restrict__ A,
                                  const float* __restrict__ B,
                                  float* __restrict__ C, int M, int N, int K) {
  const int rowBase = blockIdx.y * TILE, colBase = blockIdx.x * TILE;
  for (int e = threadIdx.x; e < TILE * TILE; e += NT) {
    const int row = rowBase + e / TILE, col = colBase + e % TILE;
    if (row < M && col < N) {
      float acc = 0.0f;
      for (int k = 0; k < K; ++k) acc = fmaf(A[row * K + k], B[k * N + col], acc);
      C[row * N + col] = acc;
    }
  }
}
