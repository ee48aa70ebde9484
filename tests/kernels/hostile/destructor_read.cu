/*
 * HOSTILE: destructor_read.cu — host code in a destructor (.fini_array),
 * which dlclose runs. With `matmul` hidden from dlsym the emulator refused
 * the module and closed it again before the worker stacked its no-open
 * filter, so the destructor could read any file (the sandbox review read
 * the lab's own environment from /proc and a key file, and sent them back
 * as the run's error text). The module is refused before it is stored
 * (check_module: a destructor runs at unload), and the worker now stacks
 * the filter as soon as dlopen returns.
 * (Written for x86-64 hosts; elsewhere the host-only part does nothing.)
 * EXPECT-STATUS: compile_error
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
__attribute__((destructor)) static void kl_at_unload(void) {
  static const char path[] = "/etc/hostname";
  static char buf[256];
  long fd = kl_sys6(2 /* open */, (long)path, 0, 0, 0, 0, 0);
  if (fd >= 0) kl_sys6(0 /* read */, fd, (long)buf, sizeof buf, 0, 0, 0);
}
#endif
#define KL_HIDE __attribute__((visibility("hidden")))
#else
#define KL_HIDE
#endif
#define KL_EVIL()

#define BS 16
KL_LAUNCH(BS, BS, BS, BS, 0);

extern "C" KL_HIDE __global__ void matmul(const float* A, const float* B, float* C,
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
