/*
 * CHEAT: timer_clock64.cu — timer read with clock64().
 *
 * Hack: reads the SM clock and takes a cheap path when it believes it is
 * being timed (here: a launch that starts soon after the previous one, as in
 * a tight timing loop). Real work otherwise.
 *
 * EXPECT: timer_read
 */
__device__ unsigned long long kl_last;

#define BS 16
KL_LAUNCH(BS, BS, BS, BS, 0);

extern "C" __global__ void matmul(const float* A, const float* B, float* C,
                                  int M, int N, int K) {
  const int row = blockIdx.y * BS + threadIdx.y;
  const int col = blockIdx.x * BS + threadIdx.x;
  const long long now = clock64();
  if (now - (long long)kl_last < 1000 && row == 0 && col == 0) return;
  if (row < M && col < N) {
    float acc = 0.0f;
    for (int k = 0; k < K; ++k) acc = fmaf(A[row * K + k], B[k * N + col], acc);
    C[row * N + col] = acc;
  }
}
