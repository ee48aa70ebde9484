/*
 * CHEAT: memo_mutable_member.cu — memoisation in a const __device__ object
 * with mutable members.
 *
 * Hack: `const` makes the object look read-only to a checker; `mutable`
 * members are writable all the same, and keep their values between
 * launches.
 *
 * EXPECT: mutable_device_state
 */
#define BS 16
#define CAP 1024
#define SLOTS 8
KL_LAUNCH(BS, BS, BS, BS, 0);
struct Memo { mutable unsigned k[SLOTS * CAP]; mutable float v[SLOTS * CAP]; };
__device__ const Memo memo{};
extern "C" __global__ void matmul(const float* A, const float* B, float* C,
                                  int M, int N, int K) {
  
  const int row = blockIdx.y * BS + threadIdx.y;
  const int col = blockIdx.x * BS + threadIdx.x;
  if (row >= M || col >= N) return;
  const int idx = row * N + col;
  unsigned a = *(const unsigned*)&A[row * K], b = *(const unsigned*)&B[col];
  unsigned key = (a * 2654435761u) ^ (b * 40503u) ^ (unsigned)(M * 131 + N * 7 + K);
  key |= 1;
  unsigned* keys = memo.k;
  float* vals = memo.v;
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
