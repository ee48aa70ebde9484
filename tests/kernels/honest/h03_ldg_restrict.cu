/*
 * HONEST: h03_ldg_restrict.cu — __ldg read-only loads through __restrict__ pointers.
 *
 * Correct for every M, N, K >= 1; must raise no flag.
 */

#define BS 16
KL_LAUNCH(BS, BS, BS, BS, 0);

extern "C" __global__ void matmul(const float* __restrict__ A,
                                  const float* __restrict__ B,
                                  float* __restrict__ C, int M, int N, int K) {
  const int row = blockIdx.y * BS + threadIdx.y;
  const int col = blockIdx.x * BS + threadIdx.x;
  if (row < M && col < N) {
    const float* a = A + row * K;
    const float* b = B + col;
    float acc = 0.0f;
    for (int k = 0; k < K; ++k) acc = fmaf(__ldg(a + k), __ldg(b + k * N), acc);
    C[row * N + col] = acc;
  }
}
