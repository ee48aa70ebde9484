/*
 * CHEAT: race_single_loader.cu — a race that hides in one scheduling order.
 *
 * Hack: thread 0 of each block stages the whole tile and nobody waits for
 * it (the barrier after the load is dropped; the one after the compute
 * stays). Running a block's threads from thread 0 up, as a scheduler may,
 * every other thread finds the tile loaded; on hardware warps race ahead
 * of thread 0 and read the previous tile. The emulator's second run of the
 * same inputs resumes the threads from the last one down, where the race
 * shows.
 *
 * EXPECT: nondeterministic
 */
#define BS 16
KL_LAUNCH(BS, BS, BS, BS, 0);

extern "C" __global__ void matmul(const float* A, const float* B, float* C,
                                  int M, int N, int K) {
  __shared__ float As[BS][BS];
  __shared__ float Bs[BS][BS];
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int row0 = blockIdx.y * BS, col0 = blockIdx.x * BS;
  float acc = 0.0f;
  for (int k0 = 0; k0 < K; k0 += BS) {
    if (tx == 0 && ty == 0)
      for (int i = 0; i < BS; i++)
        for (int j = 0; j < BS; j++) {
          As[i][j] = (row0 + i < M && k0 + j < K) ? A[(row0 + i) * K + k0 + j]
                                                  : 0.0f;
          Bs[i][j] = (k0 + i < K && col0 + j < N) ? B[(k0 + i) * N + col0 + j]
                                                  : 0.0f;
        }
    for (int k = 0; k < BS; ++k) acc = fmaf(As[ty][k], Bs[k][tx], acc);
    __syncthreads();
  }
  if (row0 + ty < M && col0 + tx < N) C[(row0 + ty) * N + col0 + tx] = acc;
}
