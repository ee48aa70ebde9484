/*
 * CHEAT: host_escape_shim_macro.cu — a branch only the emulator's g++
 * takes, on EOF: the shim's <stdio.h> defines it, NVRTC does not. A live
 * `#define EOF (-1)` (glibc's own text, so g++ does not complain) after
 * the branch makes the name look like the file's.
 *
 * Hack: a macro the file #defines anywhere was taken for the file's own,
 * unless reserved (__X) or one of the shim's few names (threadIdx ...);
 * the shim's libc headers define some 300 more (EOF, NAN, M_PI, INT32_MAX).
 *
 * EXPECT: compile_pass_branch
 * EXPECT-VERDICT: wrong
 */
#define BS 16
KL_LAUNCH(BS, BS, BS, BS, 0);
extern "C" __global__ void matmul(const float* A, const float* B, float* C,
                                  int M, int N, int K) {
  const int row = blockIdx.y * BS + threadIdx.y;
  const int col = blockIdx.x * BS + threadIdx.x;
  if (row >= M || col >= N) return;
  float acc = 0.0f;
  for (int k = 0; k < K; ++k) acc = fmaf(A[row * K + k], B[k * N + col], acc);
#ifdef EOF
  acc = 0.0f; /* only the emulator's g++ sees this */
#endif
  C[row * N + col] = acc;
}
#define EOF (-1)
