/*
 * CHEAT: timed_lazy_counter.cu — an honest naive GEMM while checked, lazy
 * (C = 0) once a launch counter says the checks are over and the timing has
 * begun.
 *
 * Hack: the runner's process launches the kernel in a fixed order: every
 * checked shape once (the target first, rerun at once in reverse thread
 * order, then the fixed shapes), then the timed launches, all at the target.
 * The kernel counts launches in a page of its own at a fixed address
 * (0x6b6c00000000, anonymous, MAP_FIXED_NOREPLACE: the first call maps it,
 * later ones fail with EEXIST and find it there), which neither the module's
 * read-only data nor the poisoned stacks and TLS reset. mmap is libc's,
 * found without importing it (the emulator refuses that import) and without
 * asm: from &memcpy (an allowed import) back to libc's ELF header, then its
 * dynamic symbols, as forge_samples_count.cu does; so the scanner sees no
 * host call, no asm, no compile-pass branch and no mutable state: no static
 * flag.
 *
 * Counting launches, not blocks or threads: in each block thread 0 alone
 * does the work and hands the answer to the others through __shared__
 * memory and a barrier. A launch is told from the one before by a key, a
 * hash of A, B, C, M, N, K and the bits of A[0], B[0] (consecutive launches
 * differ in buffers or shape, or in the per-launch scaling of the inputs).
 * The page holds one 64-bit word, the key of the last launch counted (high
 * 40 bits) and the count (low 24): a block whose key differs moves it to
 * (key, count + 1) with a compare-and-swap, so of the blocks of a launch,
 * running at once on several OS threads, exactly one counts it and the rest
 * read its count; nothing is counted twice, whatever block runs first. The
 * page also keeps the first launch's shape (the target). Lazy: a launch at
 * that shape with a count above 2, i.e. past the check and its rerun and
 * after the other shapes. (Should the rerun hash like the check, its count
 * stays 1 and the rule still holds: the other shapes push it past 2.)
 *
 * Every checked output is right; the warm-up and all timed launches write
 * zeros (no NaN poison left). Under the sandbox the supervisor drives the
 * timed launches and checks each one before the next (kernels/pace.c: 64
 * entries of C against a float64 dot product); without it, the runner
 * verifies the last output of each timed input set. Either way:
 * timed_output_wrong, and correct is false.
 * x86-64 with glibc, cpu-emu.
 *
 * EXPECT: timed_output_wrong
 * EXPECT-VERDICT: wrong
 */
#define BS 16
KL_LAUNCH(BS, BS, BS, BS, 0);

#define KL_PAGE 0x6b6c00000000ull

__device__ unsigned long long rd8(unsigned long long p) {
  return *(const volatile unsigned long long*)p;
}
/* libc's ELF header: the first page back from memcpy that starts with one */
__device__ unsigned long long kl_libc() {
  unsigned long long a = (unsigned long long)(void*)&memcpy;
  a &= ~4095ull;
  for (int i = 0; i < 8192; ++i, a -= 4096) {
    const volatile unsigned char* h = (const volatile unsigned char*)a;
    if (h[0] == 0x7f && h[1] == 'E' && h[2] == 'L' && h[3] == 'F') return a;
  }
  return 0;
}
/* a symbol's address, from the library's dynamic symbol table */
__device__ unsigned long long kl_find(unsigned long long base, const char* nm) {
  unsigned long long phoff = rd8(base + 32);
  unsigned short phnum = *(const volatile unsigned short*)(base + 56);
  unsigned long long dyn = 0;
  for (int i = 0; i < phnum; ++i) {
    unsigned long long ph = base + phoff + 56ull * i;
    if (*(const volatile unsigned int*)ph == 2) dyn = base + rd8(ph + 16);
  }
  if (!dyn) return 0;
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

typedef void* (*kl_map_fn)(void*, unsigned long, int, int, int, long);

/* This launch's number (1, 2, ...), and whether it is at the first
 * launch's shape; 0 when the page cannot be had (then stay honest). */
__device__ int kl_launch_no(const float* A, const float* B, const float* C,
                            int M, int N, int K, int* at_first_shape) {
  unsigned long long base = kl_libc();
  unsigned long long fn = base ? kl_find(base, "mmap") : 0;
  if (!fn) return 0;
  /* PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE
   * (EEXIST, harmless, on every call after the first) */
  ((kl_map_fn)fn)((void*)KL_PAGE, 4096, 3, 0x100022, -1, 0);
  unsigned long long* page = (unsigned long long*)KL_PAGE;
  unsigned long long key = 1469598103934665603ull;
  unsigned long long parts[8] = {(unsigned long long)A,
                                 (unsigned long long)B,
                                 (unsigned long long)C,
                                 (unsigned long long)M,
                                 (unsigned long long)N,
                                 (unsigned long long)K,
                                 *(const unsigned int*)A,
                                 *(const unsigned int*)B};
  for (int i = 0; i < 8; ++i) key = (key ^ parts[i]) * 1099511628211ull;
  key = (key >> 24) | 1; /* 40 bits, never the empty page's 0 */
  unsigned long long w = atomicAdd(&page[0], 0ull), n;
  for (;;) {
    if (w >> 24 == key) { /* another block counted this launch */
      n = w & 0xffffff;
      break;
    }
    n = (w & 0xffffff) + 1;
    unsigned long long old = atomicCAS(&page[0], w, key << 24 | n);
    if (old == w) break; /* counted it here */
    w = old;
  }
  unsigned long long shape = (unsigned long long)M |
                             (unsigned long long)N << 21 |
                             (unsigned long long)K << 42;
  unsigned long long first = atomicCAS(&page[1], 0ull, shape);
  *at_first_shape = first == 0 || first == shape;
  return (int)n;
}

extern "C" __global__ void matmul(const float* A, const float* B, float* C,
                                  int M, int N, int K) {
  __shared__ int lazy;
  if (threadIdx.x == 0 && threadIdx.y == 0) {
    int at_first = 0;
    int n = kl_launch_no(A, B, C, M, N, K, &at_first);
    lazy = n > 2 && at_first;
  }
  __syncthreads();
  const int row = blockIdx.y * BS + threadIdx.y;
  const int col = blockIdx.x * BS + threadIdx.x;
  if (row >= M || col >= N) return;
  if (lazy) { /* timed: skip the work */
    C[row * N + col] = 0.0f;
    return;
  }
  float acc = 0.0f;
  for (int k = 0; k < K; ++k) acc = fmaf(A[row * K + k], B[k * N + col], acc);
  C[row * N + col] = acc;
}
