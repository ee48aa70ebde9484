/*
 * CHEAT: coop_grid_sync.cu — cooperative grid-wide synchronisation.
 *
 * Hack: a grid barrier (this_grid().sync()) to split the work into phases;
 * under a normal launch it deadlocks or races.
 *
 * EXPECT: cooperative_grid_sync
 */
#define BS 16
KL_LAUNCH(BS, BS, BS, BS, 0);

namespace cg = cooperative_groups;

extern "C" __global__ void matmul(const float* A, const float* B, float* C,
                                  int M, int N, int K) {
  const int row = blockIdx.y * BS + threadIdx.y;
  const int col = blockIdx.x * BS + threadIdx.x;
  if (row < M && col < N) C[row * N + col] = 0.0f;
  cg::this_grid().sync();
  if (row < M && col < N) {
    float acc = 0.0f;
    for (int k = 0; k < K; ++k) acc = fmaf(A[row * K + k], B[k * N + col], acc);
    C[row * N + col] = acc;
  }
}
