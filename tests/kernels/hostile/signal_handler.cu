/*
 * HOSTILE: signal_handler.cu — installs a handler for SIGUSR1, the first
 * step of running its own code outside any launch: signalled (tgkill is
 * allowed within the process) to an idle pool thread, or to the runner's
 * while it waits for the supervisor, the handler would run with no launch
 * going, e.g. to change the shared inputs after the supervisor's checks
 * (a probe of paced timing did so, racing the supervisor). Once the
 * candidate is loaded no handler may be installed (run-cpu-emu-loaded:
 * rt_sigaction with a new action traps).
 * It makes its system calls itself (the x86-64 `syscall` instruction) and
 * imports nothing from libc: the emulator refuses a module that imports a
 * host function device code could not call, so raw system calls are what
 * an attacker is left with, and the seccomp filter must hold against them.
 * (Written for x86-64 hosts; elsewhere the host-only part does nothing.)
 * EXPECT-STATUS: killed:seccomp:rt_sigaction
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
static void kl_on_signal(int sig) { (void)sig; }
static void kl_install(void) {
  /* the kernel's struct sigaction: handler, flags, restorer, mask */
  struct {
    void (*handler)(int);
    unsigned long flags, restorer, mask;
  } act = {kl_on_signal, 0, 0, 0};
  kl_sys6(13 /* rt_sigaction */, 10 /* SIGUSR1 */, (long)&act, 0, 8, 0, 0);
}
#define KL_EVIL() kl_install()
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
