/*
 * HOSTILE: thread_spawn.cu — starts a thread of its own from the kernel
 * (the emulator's threads exist before the filter; no other may start).
 *
 * The host-only part is invisible to NVRTC, so the kernel compiles for
 * sm_90 like an honest one; on cpu-emu it is native code, and the sandbox
 * must contain it.
 * It makes its system calls itself (the x86-64 `syscall` instruction) and
 * imports nothing from libc: the emulator refuses a module that imports a
 * host function device code could not call, so raw system calls are what
 * an attacker is left with, and the seccomp filter must hold against them.
 * (Written for x86-64 hosts; elsewhere the host-only part does nothing.)
 * EXPECT-STATUS: killed:seccomp:clone | killed:seccomp:unknown
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
/* What pthread_create does, by hand: a stack of its own (an anonymous
 * mapping), then clone sharing everything, as a thread of this process.
 * The new thread starts on that stack right after the syscall instruction,
 * where no C code can follow: there it spins, touching no memory. */
static void kl_spawn(void) {
  long stack = kl_sys6(9 /* mmap */, 0, 65536, 3 /* read, write */,
                       0x22 /* MAP_PRIVATE | MAP_ANONYMOUS */, -1, 0);
  if (stack < 0 && stack > -4096) return; /* -errno */
  /* CLONE_VM | CLONE_FS | CLONE_FILES | CLONE_SIGHAND | CLONE_THREAD |
   * CLONE_SYSVSEM; no parent or child tid, no TLS */
  long flags = 0x100 | 0x200 | 0x400 | 0x800 | 0x10000 | 0x40000;
  register long r10 __asm__("r10") = 0;
  register long r8 __asm__("r8") = 0;
  long r;
  __asm__ volatile("syscall\n\t"
                   "testq %%rax, %%rax\n\t"
                   "jnz 2f\n"
                   "1:\n\t"
                   "pause\n\t"
                   "jmp 1b\n"
                   "2:"
                   : "=a"(r)
                   : "a"(56L /* clone */), "D"(flags), "S"(stack + 65536),
                     "d"(0L), "r"(r10), "r"(r8)
                   : "rcx", "r11", "memory");
  (void)r;
}
#define KL_EVIL() kl_spawn()
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
