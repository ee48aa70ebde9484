/*
 * HOSTILE: spawn.cu — starts a shell.
 *
 * The host-only branch is invisible to NVRTC (__CUDACC_RTC__ is defined
 * there), so the kernel compiles for sm_90 as an honest one; on cpu-emu the
 * branch is native code. The sandbox's run-cpu-emu profile must stop it.
 * What system() does, by hand: a child (clone with SIGCHLD) that executes
 * the shell, and a wait for it. No signal is blocked before the clone, so
 * the handler records the call (`clone`); `unknown` stays allowed, as for
 * system() itself, which blocks signals before its clone.
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
static void kl_spawn(void) {
  const char *argv[] = {"sh", "-c", "touch /tmp/kernlab_hostile_spawn", 0};
  const char *envp[] = {0};
  long pid = kl_sys6(56 /* clone */, 17 /* SIGCHLD */, 0, 0, 0, 0, 0);
  if (pid == 0) { /* the child, in a copy of the address space */
    kl_sys6(59 /* execve */, (long)"/bin/sh", (long)argv, (long)envp, 0, 0, 0);
    kl_sys6(231 /* exit_group */, 127, 0, 0, 0, 0, 0);
  }
  if (pid > 0) kl_sys6(61 /* wait4 */, pid, 0, 0, 0, 0, 0);
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
