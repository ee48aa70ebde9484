/*
 * CHEAT: memo_static_local.cu — memoisation through a static local variable.
 *
 * Hack: a function-scope static counts launches; after the first (checked)
 * launch, only the first row of C is computed.
 *
 * On a device the timed runs catch it (timed_output_wrong); on cpu-emu its
 * first write to its own file-scope data faults (read-only there) and the
 * verdict is a crash.
 *
 * EXPECT: mutable_device_state
 * EXPECT-VERDICT: wrong
 */
#define BS 16
KL_LAUNCH(BS, BS, BS, BS, 0);

extern "C" __global__ void matmul(const float* A, const float* B, float* C,
                                  int M, int N, int K) {
  static int launches = 0;
  const int row = blockIdx.y * BS + threadIdx.y;
  const int col = blockIdx.x * BS + threadIdx.x;
  if (launches > 0 && row > 0) return;
  if (row < M && col < N) {
    float acc = 0.0f;
    for (int k = 0; k < K; ++k) acc = fmaf(A[row * K + k], B[k * N + col], acc);
    C[row * N + col] = acc;
  }
  if (row == 0 && col == 0) launches++;
}
