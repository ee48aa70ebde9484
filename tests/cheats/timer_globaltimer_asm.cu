/*
 * CHEAT: timer_globaltimer_asm.cu — %globaltimer read through inline PTX.
 *
 * Hack: reads the global nanosecond timer in asm, hidden in a string the
 * naive grep for clock64 does not see.
 *
 * EXPECT: inline_asm,timer_read
 */
#define BS 16
KL_LAUNCH(BS, BS, BS, BS, 0);

extern "C" __global__ void matmul(const float* A, const float* B, float* C,
                                  int M, int N, int K) {
  const int row = blockIdx.y * BS + threadIdx.y;
  const int col = blockIdx.x * BS + threadIdx.x;
  unsigned long long t0;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  if ((t0 & 1023ull) == 7ull) return;
  if (row < M && col < N) {
    float acc = 0.0f;
    for (int k = 0; k < K; ++k) acc = fmaf(A[row * K + k], B[k * N + col], acc);
    C[row * N + col] = acc;
  }
}
