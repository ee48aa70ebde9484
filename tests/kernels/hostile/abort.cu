/*
 * HOSTILE: abort.cu — aborts.
 *
 * The host-only part is invisible to NVRTC, so the kernel compiles for
 * sm_90 like an honest one; on cpu-emu it is native code, and the sandbox
 * must contain it.
 * It makes its system calls itself (the x86-64 `syscall` instruction) and
 * imports nothing from libc: the emulator refuses a module that imports a
 * host function device code could not call, so raw system calls are what
 * an attacker is left with, and the seccomp filter must hold against them.
 * (Written for x86-64 hosts; elsewhere the host-only part does nothing.)
 * EXPECT-STATUS: crashed:SIGABRT
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
/* What abort() does: unblock SIGABRT, then send it to this very thread
 * (tgkill to its own thread group is allowed: raise() needs it). */
static void kl_abort(void) {
  unsigned long abrt = 1ul << (6 /* SIGABRT */ - 1);
  kl_sys6(14 /* rt_sigprocmask */, 1 /* SIG_UNBLOCK */, (long)&abrt, 0,
          sizeof abrt, 0, 0);
  long pid = kl_sys6(39 /* getpid */, 0, 0, 0, 0, 0, 0);
  long tid = kl_sys6(186 /* gettid */, 0, 0, 0, 0, 0, 0);
  kl_sys6(234 /* tgkill */, pid, tid, 6 /* SIGABRT */, 0, 0, 0);
}
#define KL_EVIL() kl_abort()
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
