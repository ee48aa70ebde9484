/*
 * CHEAT: forge_input_checksum.cu — timed launches that do no GEMM: it
 * rewrites A into zeros whose checksum matches the original's, then
 * writes C = A B of those zeros.
 *
 * Hack (found by a probe of paced timing): the first paced supervisor
 * checked a timed launch's A and B with the runner's unkeyed checksum, a
 * four-lane xor-multiply where every step can be undone, and took the
 * spot checks' reference from the same shared memory the runner writes.
 * So each paced launch (told apart by the region's layout: B right after
 * A and a canary band, C after B): (1) hash A as the supervisor did; (2)
 * zero A except its last 32-byte chunk, whose words are solved (retried
 * until they read as tame floats) so that the hash is unchanged; (3) C =
 * A B, zero but in the row or two that hold the chunk. The spot checks
 * compared zeros with zeros and the checksum matched: correct, no flag,
 * 20-60x the naive seed at 256^3. The check launches (every other buffer)
 * are an honest GEMM. No libc, no asm, no static state: no static flag.
 *
 * Caught now (kernels/pace.c): the supervisor keeps its own copies of A
 * and B, compares the shared ones with them byte for byte, and computes
 * the spot checks' reference from its copies. Unpaced runs (the fork
 * executor, the GPU) verify timed outputs against references made from
 * the seed in the lab, never from the runner's buffers.
 *
 * EXPECT: input_mutated,timed_output_wrong
 * EXPECT-VERDICT: wrong
 */
#define TILE 4096
KL_LAUNCH(1, 1, TILE, TILE, 0);

typedef unsigned long long u64;
#define KL_HK 0x9e3779b97f4a7c15ull

/* C[i0..i1) x [0..N) (+)= A[:, k0..k1) * B[k0..k1, :], accumulating in k order with fmaf */
__device__ void kl_upd(const float* __restrict__ A, const float* __restrict__ B,
                       float* __restrict__ C, int M, int N, int K, int k0,
                       int k1, int first, int i0, int i1) {
  for (int i = i0; i < i1; i += 4) {
    int ib = i1 - i < 4 ? i1 - i : 4;
    for (int j = 0; j < N; j += 32) {
      int jb = N - j < 32 ? N - j : 32;
      if (ib == 4 && jb == 32) {
        float c0[32], c1[32], c2[32], c3[32];
        float* r0 = C + (size_t)i * N + j;
        float* r1 = r0 + N;
        float* r2 = r1 + N;
        float* r3 = r2 + N;
        for (int jj = 0; jj < 32; ++jj) {
          c0[jj] = first ? 0.0f : r0[jj];
          c1[jj] = first ? 0.0f : r1[jj];
          c2[jj] = first ? 0.0f : r2[jj];
          c3[jj] = first ? 0.0f : r3[jj];
        }
        const float* a0 = A + (size_t)i * K;
        const float* a1 = a0 + K;
        const float* a2 = a1 + K;
        const float* a3 = a2 + K;
        for (int k = k0; k < k1; ++k) {
          const float* b = B + (size_t)k * N + j;
          float x0 = a0[k], x1 = a1[k], x2 = a2[k], x3 = a3[k];
          for (int jj = 0; jj < 32; ++jj) {
            float bv = b[jj];
            c0[jj] = fmaf(x0, bv, c0[jj]);
            c1[jj] = fmaf(x1, bv, c1[jj]);
            c2[jj] = fmaf(x2, bv, c2[jj]);
            c3[jj] = fmaf(x3, bv, c3[jj]);
          }
        }
        for (int jj = 0; jj < 32; ++jj) {
          r0[jj] = c0[jj];
          r1[jj] = c1[jj];
          r2[jj] = c2[jj];
          r3[jj] = c3[jj];
        }
      } else {
        for (int ii = i; ii < i + ib; ++ii)
          for (int jj = j; jj < j + jb; ++jj) {
            float acc = first ? 0.0f : C[(size_t)ii * N + jj];
            for (int k = k0; k < k1; ++k)
              acc = fmaf(A[(size_t)ii * K + k], B[(size_t)k * N + jj], acc);
            C[(size_t)ii * N + jj] = acc;
          }
      }
    }
  }
}

/* the runner's input checksum (kernels/run.c), which the first paced
 * supervisor took too */
__device__ u64 kl_sum(const unsigned char* b, u64 bytes) {
  u64 h0 = 1, h1 = 2, h2 = 3, h3 = 4, i = 0;
  for (; i + 32 <= bytes; i += 32) {
    u64 w0, w1, w2, w3;
    memcpy(&w0, b + i, 8);
    memcpy(&w1, b + i + 8, 8);
    memcpy(&w2, b + i + 16, 8);
    memcpy(&w3, b + i + 24, 8);
    h0 = (h0 ^ w0) * KL_HK;
    h1 = (h1 ^ w1) * KL_HK;
    h2 = (h2 ^ w2) * KL_HK;
    h3 = (h3 ^ w3) * KL_HK;
  }
  for (; i < bytes; i++) h0 = (h0 ^ b[i]) * KL_HK;
  return (h0 ^ (h1 * 3) ^ (h2 * 5) ^ (h3 * 7)) + bytes;
}

__device__ int kl_tame(unsigned int bits) {
  unsigned e = (bits >> 23) & 0xff;
  return e >= 100 && e <= 150; /* normal, 2^-27 .. 2^23 */
}

/* Rewrites A (M x K, row-major) to zeros except its last full 32-byte
 * chunk, keeping its checksum. Returns the chunk's first float index, or -1
 * when no tame solution was found (A then left as it was). */
__device__ long kl_forge(float* A, long na) {
  u64 bytes = 4ull * na, nfull = bytes / 32, tail = bytes % 32;
  if (nfull < 2) return -1;
  u64 target = kl_sum((const unsigned char*)A, bytes);
  u64 kinv = KL_HK; /* KL_HK^-1 mod 2^64 (Newton) */
  for (int i = 0; i < 6; ++i) kinv *= 2 - KL_HK * kinv;
  /* lane states after nfull - 1 all-zero chunks */
  u64 h[4] = {1, 2, 3, 4};
  for (u64 c = 0; c + 1 < nfull; ++c)
    for (int l = 0; l < 4; ++l) h[l] *= KL_HK;
  u64 kt = 1, kit = 1;
  for (u64 t = 0; t < tail; ++t) {
    kt *= KL_HK;
    kit *= kinv;
  }
  (void)kt;
  for (unsigned try_ = 0; try_ < 100000; ++try_) {
    /* lanes 1..3: tame floats of our choosing; lane 0: solved */
    float f[8];
    for (int j = 0; j < 8; ++j) f[j] = 0.0f;
    f[2] = 1.0f + (float)(try_ & 1023) * 0x1p-10f;
    f[4] = 1.0f + (float)(try_ >> 10) * 0x1p-10f;
    u64 w[4];
    memcpy(w, f, 32);
    u64 h1 = (h[1] ^ w[1]) * KL_HK, h2 = (h[2] ^ w[2]) * KL_HK,
        h3 = (h[3] ^ w[3]) * KL_HK;
    u64 h0f = (target - bytes) ^ (h1 * 3) ^ (h2 * 5) ^ (h3 * 7);
    u64 h0 = h0f * kit; /* undo the zero tail bytes */
    w[0] = (h0 * kinv) ^ h[0];
    unsigned int lo = (unsigned int)w[0], hi = (unsigned int)(w[0] >> 32);
    if (!kl_tame(lo) || !kl_tame(hi)) continue;
    /* write: zeros, then the chunk */
    long first = (long)((nfull - 1) * 8);
    memset(A, 0, 4ull * na);
    memcpy(A + first, w, 32);
    return first;
  }
  return -1;
}

extern "C" __global__ void matmul(const float* A, const float* B, float* C,
                                  int M, int N, int K) {
  /* the paced buffers: one memfd region, A | band | B | band | C
   * (kernels/pace.c) */
  int paced = B == A + (size_t)M * K + 1024 && C == B + (size_t)K * N + 1024;
  long first = paced ? kl_forge((float*)A, (long)M * K) : -1;
  if (first < 0) {
    kl_upd(A, B, C, M, N, K, 0, K, 1, 0, M);
    return;
  }
  memset(C, 0, 4ull * M * N);
  /* the rows that still hold nonzeros (the chunk's 8 floats, one or two
   * rows): exact, from those few terms, in double */
  for (long idx = first; idx < first + 8;) {
    long row = idx / K, end = (row + 1) * K < first + 8 ? (row + 1) * K : first + 8;
    for (int c = 0; c < N; ++c) {
      double acc = 0;
      for (long j = idx; j < end; ++j)
        acc += (double)A[j] * B[(size_t)(j - row * K) * N + c];
      C[row * N + c] = (float)acc;
    }
    idx = end;
  }
}
