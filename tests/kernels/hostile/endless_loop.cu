/*
 * HOSTILE: endless_loop.cu — never finishes (a plain device-code loop, so
 * it is the same on a GPU).
 * EXPECT-STATUS: timeout
 */
KL_LAUNCH(16, 16, 16, 16, 0);

extern "C" __global__ void matmul(const float* A, const float* B, float* C,
                                  int M, int N, int K) {
  volatile int spin = 1;
  while (spin) {
  }
  C[0] = A[0] * B[0];
}
