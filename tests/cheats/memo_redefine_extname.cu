/*
 * CHEAT: memo_redefine_extname.cu — reaches the host's malloc under another
 * name: `#pragma redefine_extname kl_grab malloc` and a __device__
 * prototype of kl_grab, never defined. On the emulator the linker binds it
 * to glibc's malloc, an allowed import: a heap block kept across launches,
 * with no name the table knows.
 *
 * Hack: the scanner skipped #pragma text, and returned before its extern
 * check for anything that looked like a function.
 *
 * EXPECT: compile_pass_branch
 */
#define BS 16
KL_LAUNCH(BS, BS, BS, BS, 0);
#pragma redefine_extname kl_grab malloc
extern "C" __device__ void* kl_grab(unsigned long);
_Pragma("GCC poison clock64")
extern "C" __global__ void matmul(const float* A, const float* B, float* C,
                                  int M, int N, int K) {
  const int row = blockIdx.y * BS + threadIdx.y;
  const int col = blockIdx.x * BS + threadIdx.x;
  if (row >= M || col >= N) return;
  float acc = 0.0f;
  for (int k = 0; k < K; ++k) acc = fmaf(A[row * K + k], B[k * N + col], acc);
  float* p = (float*)kl_grab(64);
  if (!p) acc = 0.0f;
  C[row * N + col] = acc;
}
