/*
 * CHEAT: race_first_arriver_spare_block0.cu — race_first_arriver.cu in
 * every block but block 0, which tiles honestly.
 *
 * Hack: the reversed check run isolated block 0 only (its threads see
 * between barriers only their own writes and half of the others'), and
 * the other blocks' fibers each run to their next barrier, so the first
 * arriver's load is seen whole by the rest: correct and unflagged on the
 * emulator, wrong on a GPU. The isolated blocks are now two, distinct,
 * drawn from the check's seed: one of them is never block 0.
 *
 * EXPECT: nondeterministic
 */
#define BS 16
KL_LAUNCH(BS, BS, BS, BS, 0);

extern "C" __global__ void matmul(const float* A, const float* B, float* C,
                                  int M, int N, int K) {
  __shared__ float As[BS][BS];
  __shared__ float Bs[BS][BS];
  __shared__ int mark;
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int row0 = blockIdx.y * BS, col0 = blockIdx.x * BS;
  const bool honest = blockIdx.x == 0 && blockIdx.y == 0;
  float acc = 0.0f;
  for (int k0 = 0; k0 < K; k0 += BS) {
    if (honest) {
      As[ty][tx] = (row0 + ty < M && k0 + tx < K) ? A[(row0 + ty) * K + k0 + tx]
                                                  : 0.0f;
      Bs[ty][tx] = (k0 + ty < K && col0 + tx < N) ? B[(k0 + ty) * N + col0 + tx]
                                                  : 0.0f;
      __syncthreads();
    } else if (mark != k0 + 1) {
      for (int i = 0; i < BS; i++)
        for (int j = 0; j < BS; j++) {
          As[i][j] = (row0 + i < M && k0 + j < K) ? A[(row0 + i) * K + k0 + j]
                                                  : 0.0f;
          Bs[i][j] = (k0 + i < K && col0 + j < N) ? B[(k0 + i) * N + col0 + j]
                                                  : 0.0f;
        }
      mark = k0 + 1;
    }
    for (int k = 0; k < BS; k++)
      acc += As[ty][k] * Bs[k][tx];
    __syncthreads();
  }
  if (row0 + ty < M && col0 + tx < N) C[(row0 + ty) * N + col0 + tx] = acc;
}
