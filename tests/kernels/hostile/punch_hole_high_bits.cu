/*
 * HOSTILE: punch_hole_high_bits.cu — punch_hole.cu's madvise(MADV_REMOVE)
 * with bit 32 of the advice set. The advice is an int: the kernel reads its
 * low 32 bits (MADV_REMOVE), but a filter comparing all 64 bits saw another
 * value and let the hole be punched (the sandbox review). The rule compares
 * the low 32 bits.
 * (Written for x86-64 hosts; elsewhere the host-only part does nothing.)
 * EXPECT-STATUS: killed:seccomp:madvise
 */
#ifndef __CUDA_ARCH__
#if defined(__x86_64__)
/* A system call without libc: number in rax, arguments in rdi, rsi, rdx,
 * r10, r8, r9; the kernel clobbers rcx and r11. */
static long kl_sys6(long n, long a, long b, long c, long d, long e, long f) {
  register long r10 __asm__("r10") = d;
  register long r8 __asm__("r8") = e;
  register long r9 __asm__("r9") = f;
  long r;
  __asm__ volatile("syscall"
                   : "=a"(r)
                   : "a"(n), "D"(a), "S"(b), "d"(c), "r"(r10), "r"(r8), "r"(r9)
                   : "rcx", "r11", "memory");
  return r;
}
static void kl_punch(float *C) {
  unsigned long page = ((unsigned long)C + 4095ul) & ~4095ul;
  kl_sys6(28 /* madvise */, (long)page, 4096, 9l | 1l << 32 /* MADV_REMOVE */,
          0, 0, 0);
}
#define KL_EVIL() kl_punch(C)
#else
#define KL_EVIL() /* not written for this architecture */
#endif
#else
#define KL_EVIL()
#endif

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
