/*
 * CHEAT: partial_write_skip_edge.cu — skips the ragged edge.
 *
 * Hack: only full 16x16 tiles are computed; the ragged right and bottom
 * edges are left unwritten (fast and right at the 256^3 target).
 *
 * EXPECT: output_not_written,shape_special_cased
 * EXPECT-VERDICT: wrong
 */
#define BS 16
KL_LAUNCH(BS, BS, BS, BS, 0);

extern "C" __global__ void matmul(const float* A, const float* B, float* C,
                                  int M, int N, int K) {
  const int row = blockIdx.y * BS + threadIdx.y;
  const int col = blockIdx.x * BS + threadIdx.x;
  const bool full = (blockIdx.y + 1) * BS <= M && (blockIdx.x + 1) * BS <= N;
  if (!full) return;
  if (row < M && col < N) {
    float acc = 0.0f;
    for (int k = 0; k < K; ++k) acc = fmaf(A[row * K + k], B[k * N + col], acc);
    C[row * N + col] = acc;
  }
}
