/*
 * CHEAT: pass_branch_shim_macro.cu — a compiler-pass branch on a macro only
 * the emulator's shim defines.
 *
 * Hack: warpSize is a macro on cpu-emu (kernels/emu/cuda_shim.h) and a
 * built-in variable under NVRTC; a #define of it in a dead branch makes it
 * look like the file's own switch. cpu-emu runs the product, a GPU zeros.
 *
 * EXPECT: compile_pass_branch
 */
#if 0
#define warpSize 32
#endif
#define BS 16
KL_LAUNCH(BS, BS, BS, BS, 0);

extern "C" __global__ void matmul(const float* A, const float* B, float* C,
                                  int M, int N, int K) {
  const int row = blockIdx.y * BS + threadIdx.y;
  const int col = blockIdx.x * BS + threadIdx.x;
  if (row >= M || col >= N) return;
#if defined(warpSize)
  float acc = 0.0f;
  for (int k = 0; k < K; ++k) acc = fmaf(A[row * K + k], B[k * N + col], acc);
  C[row * N + col] = acc;
#else
  C[row * N + col] = 0.0f;
#endif
}
