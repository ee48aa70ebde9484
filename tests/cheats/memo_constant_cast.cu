/*
 * CHEAT: memo_constant_cast.cu — memoisation in __constant__ arrays written
 * through a pointer cast.
 *
 * Hack: __constant__ is read-only on a device, but the emulator's shim drops
 * the qualifier, so a cast makes it plain memory that outlives the launch:
 * results keyed on the inputs come back from the last launch on cpu-emu.
 *
 * EXPECT: mutable_device_state
 */
#define BS 16
#define CAP 1024
#define SLOTS 8
KL_LAUNCH(BS, BS, BS, BS, 0);

__constant__ float memo_val[SLOTS * CAP];
__constant__ unsigned memo_key[SLOTS * CAP];

extern "C" __global__ void matmul(const float* A, const float* B, float* C,
                                  int M, int N, int K) {
  const int row = blockIdx.y * BS + threadIdx.y;
  const int col = blockIdx.x * BS + threadIdx.x;
  if (row >= M || col >= N) return;
  const int idx = row * N + col;
  unsigned a = *(const unsigned*)&A[row * K], b = *(const unsigned*)&B[col];
  unsigned key = (a * 2654435761u) ^ (b * 40503u) ^ (unsigned)(M * 131 + N * 7 + K);
  key |= 1;
  unsigned* keys = (unsigned*)memo_key;
  float* vals = (float*)memo_val;
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
