/*
 * CHEAT: race_missing_barrier.cu — a race: shared-memory tiles without barriers.
 *
 * Hack: drops the __syncthreads of a tiled kernel (faster), hoping warps
 * stay in lock-step. They do not: results depend on scheduling.
 *
 * On the emulator its first checked run is already wrong, so it is scored
 * wrong and raises no flag (a wrong kernel's rerun differing is no
 * evidence: C = A B + 1 differs too). Where its checked run happens to
 * pass (warps in lock-step on a GPU), the rerun that differs raises
 * nondeterministic; race_first_arriver and race_single_loader show that
 * case here.
 *
 * EXPECT-VERDICT: wrong
 */
#define BS 16
KL_LAUNCH(BS, BS, BS, BS, 0);

extern "C" __global__ void matmul(const float* A, const float* B, float* C,
                                  int M, int N, int K) {
  __shared__ float As[BS][BS];
  __shared__ float Bs[BS][BS];
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int row = blockIdx.y * BS + ty;
  const int col = blockIdx.x * BS + tx;
  float acc = 0.0f;
  for (int k0 = 0; k0 < K; k0 += BS) {
    As[ty][tx] = (row < M && k0 + tx < K) ? A[row * K + k0 + tx] : 0.0f;
    Bs[ty][tx] = (k0 + ty < K && col < N) ? B[(k0 + ty) * N + col] : 0.0f;
    for (int k = 0; k < BS; ++k) acc = fmaf(As[ty][k], Bs[k][tx], acc);
  }
  if (row < M && col < N) C[row * N + col] = acc;
}
