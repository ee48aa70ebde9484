/*
 * HOSTILE: write_file.cu — creates a file on the host.
 *
 * The host-only branch is invisible to NVRTC (__CUDACC_RTC__ is defined
 * there), so the kernel compiles for sm_90 as an honest one; on cpu-emu the
 * branch is native code. The sandbox's run-cpu-emu profile must stop it.
 * Nothing outside may be touched.
 * It makes its system calls itself (the x86-64 `syscall` instruction) and
 * imports nothing from libc: the emulator refuses a module that imports a
 * host function device code could not call, so raw system calls are what
 * an attacker is left with, and the seccomp filter must hold against them.
 * (Written for x86-64 hosts; elsewhere the host-only part does nothing.)
 * EXPECT-STATUS: killed:seccomp:openat | killed:seccomp:open
 */
#ifndef __CUDACC_RTC__
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
#define KL_EVIL()                                                              \
  kl_sys6(2 /* open */, (long)"/tmp/kernlab_hostile_write",                    \
          0101 /* O_WRONLY | O_CREAT */, 0644, 0, 0, 0)
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
