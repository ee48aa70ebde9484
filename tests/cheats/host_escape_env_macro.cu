/*
 * CHEAT: host_escape_env_macro.cu — branches on a macro only the environment defines.
 *
 * Hack: #ifdef KL_EMU_CUDA_SHIM_H (the emulator's shim guard) — a test for
 * 'am I on the CPU emulator', which gets a lazy path there.
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
#ifdef KL_EMU_CUDA_SHIM_H
  C[row * N + col] = 0.0f;
#else
  float acc = 0.0f;
  for (int k = 0; k < K; ++k) acc = fmaf(A[row * K + k], B[k * N + col], acc);
  C[row * N + col] = acc;
#endif
}
