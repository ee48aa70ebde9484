/*
 * CHEAT: timer_paste_args.cu — clock64 hidden by token pasting with macro arguments.
 *
 * Hack: CAT(cl, ock64) pastes to clock64 only in the preprocessor; a scanner
 * that greps the text sees neither half.
 *
 * EXPECT: timer_read
 */
#define CAT(a, b) a##b
#define BS 16
KL_LAUNCH(BS, BS, BS, BS, 0);

extern "C" __global__ void matmul(const float* A, const float* B, float* C,
                                  int M, int N, int K) {
  const int row = blockIdx.y * BS + threadIdx.y;
  const int col = blockIdx.x * BS + threadIdx.x;
  const long long t = CAT(cl, ock64)();
  if (t < 0) return;
  if (row < M && col < N) {
    float acc = 0.0f;
    for (int k = 0; k < K; ++k) acc = fmaf(A[row * K + k], B[k * N + col], acc);
    C[row * N + col] = acc;
  }
}
