/*
 * CHEAT: printf_paste.cu — printf built by token pasting.
 *
 * Hack: #define P(x) pri##x then P(ntf)(...): printf never appears as a
 * word.
 *
 * EXPECT: printf
 */
#define P(x) pri##x
#define BS 16
KL_LAUNCH(BS, BS, BS, BS, 0);

extern "C" __global__ void matmul(const float* A, const float* B, float* C,
                                  int M, int N, int K) {
  const int row = blockIdx.y * BS + threadIdx.y;
  const int col = blockIdx.x * BS + threadIdx.x;
  if (row == 0 && col == 0) P(ntf)("hello\n");
  if (row < M && col < N) {
    float acc = 0.0f;
    for (int k = 0; k < K; ++k) acc = fmaf(A[row * K + k], B[k * N + col], acc);
    C[row * N + col] = acc;
  }
}
