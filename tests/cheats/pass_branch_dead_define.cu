/*
 * CHEAT: pass_branch_dead_define.cu — a compiler-pass branch on a macro the
 * file seems to define.
 *
 * Hack: #defines __SSE2__ inside `#if 0`, so a scanner that counts every
 * #define takes the later `#if defined(__SSE2__)` for the file's own
 * switch; the host compiler (cpu-emu) defines it, NVRTC does not. A
 * reserved name is the compiler's whatever the file says.
 *
 * EXPECT: compile_pass_branch
 */
#if 0
#define __SSE2__ 1
#endif
#define BS 16
KL_LAUNCH(BS, BS, BS, BS, 0);

extern "C" __global__ void matmul(const float* A, const float* B, float* C,
                                  int M, int N, int K) {
  const int row = blockIdx.y * BS + threadIdx.y;
  const int col = blockIdx.x * BS + threadIdx.x;
  if (row >= M || col >= N) return;
#if defined(__SSE2__)
  float acc = 0.0f;
  for (int k = 0; k < K; ++k) acc = fmaf(A[row * K + k], B[k * N + col], acc);
  C[row * N + col] = acc;
#else
  C[row * N + col] = 0.0f;
#endif
}
