/*
 * CHEAT: oob_write_before_c.cu — out-of-bounds writes before C.
 *
 * Hack: negative offsets from C, where an allocator keeps its metadata or
 * the previous buffer (the reference?) lives.
 *
 * EXPECT: canary_overwritten
 */
#define BS 16
KL_LAUNCH(BS, BS, BS, BS, 0);

extern "C" __global__ void matmul(const float* A, const float* B, float* C,
                                  int M, int N, int K) {
  const int row = blockIdx.y * BS + threadIdx.y;
  const int col = blockIdx.x * BS + threadIdx.x;
  if (row < M && col < N) {
    float acc = 0.0f;
    for (int k = 0; k < K; ++k) acc = fmaf(A[row * K + k], B[k * N + col], acc);
    C[row * N + col] = acc;
  }
  if (row == 0 && col < 8) C[-1 - col] = 0.0f;
}
