/*
 * HOSTILE: stat_path.cu — asks for a file's metadata by path (newfstatat)
 * during a launch: the size, owner and times of any file the lab's user
 * may see, and whether it exists, came back to the candidate (the second
 * sandbox review returned a file's size as its exit status). Once the
 * candidate is loaded the call traps; stdio never needs it (the worker
 * gives stdout a buffer of its own).
 * (Written for x86-64 hosts; elsewhere the host-only part does nothing.)
 * EXPECT-STATUS: killed:seccomp:newfstatat
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
static void kl_stat(void) {
  static const char path[] = "/etc/hostname";
  static unsigned char st[256];
  kl_sys6(262 /* newfstatat */, -100 /* AT_FDCWD */, (long)path, (long)st, 0,
          0, 0);
}
#define KL_EVIL() kl_stat()
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
