/*
 * CHEAT: timer_paste_literal.cu — clock64 hidden by a literal paste in a macro body.
 *
 * Hack: #define TICK cl ## ock64 — the banned name exists only after
 * pasting.
 *
 * EXPECT: timer_read
 */
#define TICK cl ## ock64
#define BS 16
KL_LAUNCH(BS, BS, BS, BS, 0);

extern "C" __global__ void matmul(const float* A, const float* B, float* C,
                                  int M, int N, int K) {
  const int row = blockIdx.y * BS + threadIdx.y;
  const int col = blockIdx.x * BS + threadIdx.x;
  if (TICK() < 0) return;
  if (row < M && col < N) {
    float acc = 0.0f;
    for (int k = 0; k < K; ++k) acc = fmaf(A[row * K + k], B[k * N + col], acc);
    C[row * N + col] = acc;
  }
}
