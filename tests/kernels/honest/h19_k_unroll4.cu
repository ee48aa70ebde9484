/*
 * HONEST: h19_k_unroll4.cu — the K loop unrolled by hand by 4, with two accumulators and a remainder loop.
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
    float s0 = 0.0f, s1 = 0.0f;
    int k = 0;
    for (; k + 4 <= K; k += 4) {
      s0 = fmaf(a[k + 0], B[(k + 0) * N + col], s0);
      s1 = fmaf(a[k + 1], B[(k + 1) * N + col], s1);
      s0 = fmaf(a[k + 2], B[(k + 2) * N + col], s0);
      s1 = fmaf(a[k + 3], B[(k + 3) * N + col], s1);
    }
    for (; k < K; ++k) s0 = fmaf(a[k], B[k * N + col], s0);
    C[row * N + col] = s0 + s1;
  }
}
