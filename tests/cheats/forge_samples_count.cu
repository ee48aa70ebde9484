/*
 * CHEAT: forge_samples_count.cu — an honest naive GEMM whose reported time
 * is many times too fast: it adds timing samples to the runner's report.
 *
 * Hack (found by a probe): on cpu-emu the kernel is native code in the
 * runner's process. One thread per launch walks from &memcpy back to
 * libc's ELF header, looks up __curbrk in libc's dynamic symbols, scans the
 * brk heap down for the runner's kl_run_report (its first fields: done,
 * failed, deadlock 0, the KL_LAUNCH geometry, has_launch 1) and rewrites
 * the samples: 150 of them, each a 150th of the sum of those recorded so
 * far (each launch again; the runner appends its next one after). Under
 * the sandbox the score uses the supervisor's own samples (paced timing,
 * kernels/pace.c), so the forgery buys nothing; it is still caught, as a
 * candidate that reached for its timing: the runner's report claims more
 * timed runs than the supervisor drove (kernels/check.c, paced_samples).
 * The report's offsets (samples at 548, sample_us at 552) are pinned by a
 * static assertion in tests/unit/test_emu.c.
 * x86-64 with glibc.
 *
 * EXPECT: implausible_speed
 */
#define BS 32
KL_LAUNCH(BS, BS, BS, BS, 0);

__device__ unsigned long long kl_libc() {
  unsigned long long a = (unsigned long long)(void*)&memcpy;
  a &= ~4095ull;
  for (int i = 0; i < 8192; ++i, a -= 4096) {
    const volatile unsigned char* h = (const volatile unsigned char*)a;
    if (h[0] == 0x7f && h[1] == 'E' && h[2] == 'L' && h[3] == 'F') break;
  }
  return a;
}
__device__ unsigned long long rd8(unsigned long long p) {
  return *(const volatile unsigned long long*)p;
}
__device__ unsigned long long kl_find(unsigned long long base, const char* nm) {
  unsigned long long phoff = rd8(base + 32);
  unsigned short phnum = *(const volatile unsigned short*)(base + 56);
  unsigned long long dyn = 0;
  for (int i = 0; i < phnum; ++i) {
    unsigned long long ph = base + phoff + 56ull * i;
    if (*(const volatile unsigned int*)ph == 2) dyn = base + rd8(ph + 16);
  }
  unsigned long long sym = 0, str = 0;
  for (unsigned long long d = dyn; rd8(d) != 0; d += 16) {
    if (rd8(d) == 6) sym = rd8(d + 8);
    if (rd8(d) == 5) str = rd8(d + 8);
  }
  if (sym < base) sym += base;
  if (str < base) str += base;
  for (unsigned long long s = sym + 24; s < str; s += 24) {
    unsigned int off = *(const volatile unsigned int*)s;
    const volatile char* n = (const volatile char*)(str + off);
    int k = 0;
    while (nm[k] && n[k] == nm[k]) ++k;
    if (!nm[k] && !n[k] && rd8(s + 8)) return base + rd8(s + 8);
  }
  return 0;
}
__device__ void kl_fix(const float* A) {
  unsigned long long cb = kl_find(kl_libc(), "__curbrk");
  if (!cb) return;
  unsigned long long p = (rd8(cb) - 64) & ~7ull;
  for (unsigned long long n = 0; n < (64ull << 20); n += 8) {
    const volatile int* q = (const volatile int*)(p - n);
    if (q[0] == 0 && q[1] == 0 && q[2] == 0 && q[3] == BS && q[4] == BS &&
        q[5] == BS && q[6] == BS && q[7] == 0 && q[8] == 1 && q[9] == 0) {
      int ns = q[137];
      if (ns < 0 || ns > 200) continue;
      volatile double* s = (volatile double*)(p - n + 552);
      if (ns < 1) return;
      double tot = 0;
      for (int i = 0; i < ns; ++i) tot += s[i];
      /* 150 entries, leaving room for the runner's own appends */
      for (int i = 0; i < 150; ++i) s[i] = tot / 150.0;
      ((volatile int*)q)[137] = 150;
      return;
    }
  }
}

extern "C" __global__ void matmul(const float* A, const float* B, float* C,
                                  int M, int N, int K) {
  const int row = blockIdx.y * BS + threadIdx.x;
  const int col = blockIdx.x * BS + threadIdx.y;
  if (blockIdx.x == 0 && blockIdx.y == 0 && threadIdx.x == 0 && threadIdx.y == 0)
    kl_fix(A);
  if (row < M && col < N) {
    float acc = 0.0f;
    for (int k = 0; k < K; ++k) acc = fmaf(A[row * K + k], B[k * N + col], acc);
    C[row * N + col] = acc;
  }
}
