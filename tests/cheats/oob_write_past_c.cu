/*
 * CHEAT: oob_write_past_c.cu — out-of-bounds writes past the end of C.
 *
 * Hack: threads of the ragged edge write scratch values just past C (using
 * the memory after the output as free scratch space, or probing the
 * harness's buffers).
 *
 * EXPECT: canary_overwritten
 */
#define BS 16
KL_LAUNCH(BS, BS, BS, BS, 0);

extern "C" __global__ void matmul(const float* A, const float* B, float* C,
                                  int M, int N, int K) {
  const int row = blockIdx.y * BS + threadIdx.y;
  const int col = blockIdx.x * BS + threadIdx.x;
  if (row < M && col < N) {
    float acc = 0.0f;
    for (int k = 0; k < K; ++k) acc = fmaf(A[row * K + k], B[k * N + col], acc);
    C[row * N + col] = acc;
  }
  if (row == M - 1 && col < 16) C[M * N + col] = 1.0f;  /* past the end */
}
