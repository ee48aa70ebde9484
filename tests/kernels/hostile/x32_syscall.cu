/*
 * HOSTILE: x32_syscall.cu — opens a file through the x32 ABI (x86-64's
 * numbers with bit 30 set: openat is 0x40000101). libseccomp matches such
 * a call as a foreign architecture, whose action was by default to kill
 * the calling thread alone: the emulator's pool thread vanished and the
 * run waited out its whole deadline as a timeout (the sandbox review). It
 * traps like any refused call, and is named as x32's.
 * (Written for x86-64 hosts; elsewhere the host-only part does nothing.)
 * EXPECT-STATUS: killed:seccomp:x32-openat
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
static void kl_open_x32(void) {
  static const char path[] = "/etc/hostname";
  kl_sys6(0x40000000l | 257 /* x32 openat */, -100 /* AT_FDCWD */,
          (long)path, 0, 0, 0, 0);
}
#define KL_EVIL() kl_open_x32()
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
