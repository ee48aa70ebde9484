/*
 * HOSTILE: forge_pace_answer.cu — writes a well-formed PACED frame ("the
 * launch ran") into the run worker's reply pipe (descriptor 4) at each
 * launch, hoping the supervisor stops its clock before the work is done
 * (paced timing, kernels/pace.c). The first forged answer comes during the
 * checks, before the warm-up even started: the supervisor finds C still
 * poisoned and stops pacing, and the frames that follow (the runner's own
 * answers and more forged ones) are not the RAN it then waits for: a
 * malformed reply. A frame of another protocol version is refused as
 * malformed too. Either way a run_error, never a timing.
 * It makes its system calls itself (the x86-64 `syscall` instruction) and
 * imports nothing from libc: the emulator refuses a module that imports a
 * host function device code could not call, so raw system calls are what
 * an attacker is left with, and the seccomp filter must hold against them.
 * (Written for x86-64 hosts; elsewhere the host-only part does nothing.)
 * EXPECT-STATUS: run_error
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
static unsigned kl_crc32c(const unsigned char *p, int n) {
  unsigned c = ~0u;
  for (int i = 0; i < n; i++) {
    c ^= p[i];
    for (int k = 0; k < 8; k++) c = (c >> 1) ^ (0x82f63b78u & -(c & 1u));
  }
  return ~c;
}
static void kl_forge(void) {
  int phase = 1; /* ran */
  struct {
    unsigned magic;
    unsigned short version, type;
    unsigned long long len;
    unsigned crc, reserved;
  } h = {0x31464c4bu, 6, 11, sizeof phase, 0, 0};
  h.crc = kl_crc32c((const unsigned char *)&phase, sizeof phase);
  kl_sys6(1 /* write */, 4, (long)&h, sizeof h, 0, 0, 0);
  kl_sys6(1 /* write */, 4, (long)&phase, sizeof phase, 0, 0, 0);
}
#define KL_EVIL() kl_forge()
#else
#define KL_EVIL() /* not written for this architecture */
#endif
#else
#define KL_EVIL()
#endif

#define BS 16
KL_LAUNCH(BS, BS, BS, BS, 0);

extern "C" __global__ void matmul(const float *A, const float *B, float *C,
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
