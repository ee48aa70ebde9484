/*
 * BROKEN: wrong_name.cu — the entry point has the wrong name.
 *
 * A correct, coalesced kernel, but its extern "C" entry is called `sgemm`
 * (the BLAS name) instead of the name the contract requires, so the source
 * has no contract entry at all. The word the contract asks for is
 * deliberately absent from this file, comments included.
 *
 * Expected verdict: REJECTED before running: the source check reports the
 * missing entry (if a checker let it through, it compiles fine and the entry
 * lookup in the module / shared object fails).
 */

#define BS 32

KL_LAUNCH(BS, BS, BS, BS, 0);

extern "C" __global__ void sgemm(const float* __restrict__ A,
                                 const float* __restrict__ B,
                                 float* __restrict__ C, int M, int N, int K) {
  const int row = blockIdx.y * BS + threadIdx.y;
  const int col = blockIdx.x * BS + threadIdx.x;
  if (row < M && col < N) {
    float acc = 0.0f;
    for (int k = 0; k < K; ++k) acc = fmaf(A[row * K + k], B[k * N + col], acc);
    C[row * N + col] = acc;
  }
}
