/*
 * HONEST: h17_column_strip.cu — no shared memory: each thread walks 4 rows of one column, reusing each B value 4 times.
 *
 * Correct for every M, N, K >= 1; must raise no flag.
 */

#define TX 64
#define TM 4
KL_LAUNCH(TX, 1, TM, TX, 0);

extern "C" __global__ void matmul(const float* __restrict__ A,
                                  const float* __restrict__ B,
                                  float* __restrict__ C, int M, int N, int K) {
  const int col = blockIdx.x * TX + threadIdx.x;
  const int r0 = blockIdx.y * TM;
  if (col >= N) return; /* no barrier */
  float acc[TM] = {0.0f, 0.0f, 0.0f, 0.0f};
  for (int k = 0; k < K; ++k) {
    const float b = B[k * N + col];
#pragma unroll
    for (int i = 0; i < TM; ++i)
      if (r0 + i < M) acc[i] = fmaf(A[(r0 + i) * K + k], b, acc[i]);
  }
#pragma unroll
  for (int i = 0; i < TM; ++i)
    if (r0 + i < M) C[(r0 + i) * N + col] = acc[i];
}
