/*
 * CHEAT: host_escape_cuda_arch.cu — a different kernel per compilation pass.
 *
 * Hack: #ifdef __CUDA_ARCH__ — the device pass gets one body, any other pass
 * (the CPU emulator, the host pass of nvcc) another: each backend is shown
 * the code that scores best on it.
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
  float acc = 0.0f;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  for (int k = 0; k < K; k += 2) acc = fmaf(A[row * K + k], B[k * N + col], acc);
#else
  for (int k = 0; k < K; ++k) acc = fmaf(A[row * K + k], B[k * N + col], acc);
#endif
  C[row * N + col] = acc;
}
