/*
 * CHEAT: pass_branch_split_comment.cu — a compiler-pass branch hidden by a
 * comment that spans lines inside the #if.
 *
 * Hack: the emulator's host compiler defines __SSE2__, NVRTC does not, so
 * cpu-emu checks and times the real product while a GPU would run the zero
 * branch. The comment splits the directive over two lines for a scanner
 * that ends a directive at the first newline; the preprocessor replaces the
 * comment by a space and reads one directive.
 *
 * EXPECT: compile_pass_branch
 */
#define BS 16
KL_LAUNCH(BS, BS, BS, BS, 0);

extern "C" __global__ void matmul(const float* A, const float* B, float* C,
                                  int M, int N, int K) {
  const int row = blockIdx.y * BS + threadIdx.y;
  const int col = blockIdx.x * BS + threadIdx.x;
  if (row >= M || col >= N) return;
#if /* the host
   */ defined(__SSE2__)
  float acc = 0.0f;
  for (int k = 0; k < K; ++k) acc = fmaf(A[row * K + k], B[k * N + col], acc);
  C[row * N + col] = acc;
#else
  C[row * N + col] = 0.0f;
#endif
}
