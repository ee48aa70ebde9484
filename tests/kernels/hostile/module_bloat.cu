/*
 * HOSTILE: module_bloat.cu — a few lines of inline assembly that make the
 * emulator's host build of the kernel 8 MiB (an honest one is about
 * 15 KB). Every module stays in the artifact cache, so each edit of such a
 * kernel stored another file of up to the compiler's size limit, 240 MiB in
 * the sandbox review. A module over 4 MiB is refused before it is stored.
 * EXPECT-STATUS: compile_error
 */
#ifndef __CUDA_ARCH__
__asm__(".section .rodata\n.globl kl_bloat\nkl_bloat:\n.fill 8388608, 1, 1\n"
        ".text\n");
#endif
#define KL_EVIL()

#define BS 16
KL_LAUNCH(BS, BS, BS, BS, 0);

extern "C" __global__ void matmul(const float* A, const float* B, float* C,
                                  int M, int N, int K) {
  const int row = blockIdx.y * BS + threadIdx.y;
  const int col = blockIdx.x * BS + threadIdx.x;
  if (row == 0 && col == 0) KL_EVIL();
  if (row < M && col < N) {
    float acc = 0.0f;
    for (int k = 0; k < K; ++k) acc += A[row * K + k] * B[k * N + col];
    C[row * N + col] = acc;
  }
}
