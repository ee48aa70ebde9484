/*
 * CHEAT: host_escape_unknown_macro.cu — branches on a compiler macro no list names.
 *
 * Hack: #if defined(__SSE2__) is true on the emulator's x86 host compiler
 * and false under NVRTC, so the emulator runs a lazy path. No list of
 * compiler macros is complete: the scanner counts any macro the file does
 * not #define itself as the environment's.
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
#if defined(__SSE2__) || defined(__AVX__)
  C[row * N + col] = 0.0f;
#else
  float acc = 0.0f;
  for (int k = 0; k < K; ++k) acc = fmaf(A[row * K + k], B[k * N + col], acc);
  C[row * N + col] = acc;
#endif
}
