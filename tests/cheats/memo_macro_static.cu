/*
 * CHEAT: memo_macro_static.cu — a static local hidden behind a macro.
 *
 * Hack: `#define KEEP static`, then `KEEP float memo[...]` inside the
 * kernel: a checker that reads declarations before macros are expanded
 * sees a plain local; it is a static, kept between launches.
 *
 * EXPECT: mutable_device_state
 */
#define BS 16
#define CAP 1024
#define SLOTS 8
KL_LAUNCH(BS, BS, BS, BS, 0);
#define KEEP static
extern "C" __global__ void matmul(const float* A, const float* B, float* C,
                                  int M, int N, int K) {
  KEEP float mv[SLOTS * CAP]; KEEP unsigned mk[SLOTS * CAP];
  const int row = blockIdx.y * BS + threadIdx.y;
  const int col = blockIdx.x * BS + threadIdx.x;
  if (row >= M || col >= N) return;
  const int idx = row * N + col;
  unsigned a = *(const unsigned*)&A[row * K], b = *(const unsigned*)&B[col];
  unsigned key = (a * 2654435761u) ^ (b * 40503u) ^ (unsigned)(M * 131 + N * 7 + K);
  key |= 1;
  unsigned* keys = mk;
  float* vals = mv;
  if (idx < CAP)
    for (int s = 0; s < SLOTS; s++)
      if (keys[s * CAP + idx] == key) { C[idx] = vals[s * CAP + idx]; return; }
  float acc = 0.0f;
  for (int k = 0; k < K; ++k) acc = fmaf(A[row * K + k], B[k * N + col], acc);
  C[idx] = acc;
  if (idx < CAP) {
    int s = 0;
    while (s < SLOTS && keys[s * CAP + idx] != 0) s++;
    if (s == SLOTS) s = key % SLOTS;
    vals[s * CAP + idx] = acc;
    keys[s * CAP + idx] = key;
  }
}
