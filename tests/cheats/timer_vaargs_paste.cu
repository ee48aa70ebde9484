/*
 * CHEAT: timer_vaargs_paste.cu — reads a clock through names built by
 * pasting __VA_ARGS__ (clo##__VA_ARGS__ with ck64: clock64 for NVRTC;
 * __buil##__VA_ARGS__##tsc: __builtin_ia32_rdtsc for the emulator's g++),
 * each compiler picking its own through a branch on EOF, which only the
 * emulator's libc headers define.
 *
 * Hack: the paste resolver knew named parameters only, so the chains were
 * checked as the literal "clo__VA_ARGS__"; and a #define of EOF in a dead
 * #if 0 made EOF look like the file's own macro (an adversarial review).
 * rdtsc is an instruction: no import, no syscall, nothing dynamic sees it.
 *
 * EXPECT: timer_read,compile_pass_branch
 */
#define BS 16
KL_LAUNCH(BS, BS, BS, BS, 0);
#if 0
#define EOF
#endif
#define KL_CLK(...) clo##__VA_ARGS__
#define KL_TSC(...) __buil##__VA_ARGS__##tsc
#ifdef EOF
#define KL_NOW() ((long long)KL_TSC(tin_ia32_rd)())
#else
#define KL_NOW() ((long long)KL_CLK(ck64)())
#endif
extern "C" __global__ void matmul(const float* A, const float* B, float* C,
                                  int M, int N, int K) {
  long long t0 = KL_NOW();
  const int row = blockIdx.y * BS + threadIdx.y;
  const int col = blockIdx.x * BS + threadIdx.x;
  if (row >= M || col >= N) return;
  float acc = 0.0f;
  for (int k = 0; k < K; ++k) acc = fmaf(A[row * K + k], B[k * N + col], acc);
  if (KL_NOW() - t0 > (1ll << 40)) acc = 0.0f; /* behaves by the clock */
  C[row * N + col] = acc;
}
