/*
 * CHEAT: memo_device_pointer.cu — memoisation through file-scope __device__ state.
 *
 * Hack: remembers the C pointer and shape of the previous launch; when they
 * match, returns at once, hoping the buffer still holds the answer (timed
 * runs then cost nothing). Defeated by fresh buffers per sample and by
 * verifying timed outputs.
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

__device__ const float* kl_last_C;
__device__ int kl_last_MNK[3];

extern "C" __global__ void matmul(const float* A, const float* B, float* C,
                                  int M, int N, int K) {
  const int row = blockIdx.y * BS + threadIdx.y;
  const int col = blockIdx.x * BS + threadIdx.x;
  if (kl_last_C == C && kl_last_MNK[0] == M && kl_last_MNK[1] == N &&
      kl_last_MNK[2] == K)
    return;  /* "already computed" */
  if (row < M && col < N) {
    float acc = 0.0f;
    for (int k = 0; k < K; ++k) acc = fmaf(A[row * K + k], B[k * N + col], acc);
    C[row * N + col] = acc;
  }
  if (row == 0 && col == 0) {
    kl_last_C = C;
    kl_last_MNK[0] = M, kl_last_MNK[1] = N, kl_last_MNK[2] = K;
  }
}
