/*
 * CHEAT: memo_managed.cu — memoisation through __managed__ memory.
 *
 * Hack: a __managed__ array holds the last result; a later launch with the
 * same first input value copies it. Fresh inputs for every timed set
 * defeat the replay (A[0] never repeats), so there is no stale timed output
 * to catch; inside one launch the other threads replay before the result
 * exists, which makes the output wrong.
 *
 * EXPECT: mutable_device_state
 * EXPECT-VERDICT: wrong
 */
#define BS 16
KL_LAUNCH(BS, BS, BS, BS, 0);

__managed__ float kl_seen_a00;
__managed__ float kl_result[64 * 64];

extern "C" __global__ void matmul(const float* A, const float* B, float* C,
                                  int M, int N, int K) {
  const int row = blockIdx.y * BS + threadIdx.y;
  const int col = blockIdx.x * BS + threadIdx.x;
  if (row >= M || col >= N) return;
  const bool small = M * N <= 64 * 64;
  if (small && kl_seen_a00 == A[0]) {
    C[row * N + col] = kl_result[row * N + col];
    return;
  }
  float acc = 0.0f;
  for (int k = 0; k < K; ++k) acc = fmaf(A[row * K + k], B[k * N + col], acc);
  C[row * N + col] = acc;
  if (small) kl_result[row * N + col] = acc;
  if (row == 0 && col == 0) kl_seen_a00 = A[0];
}
