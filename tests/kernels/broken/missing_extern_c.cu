/*
 * BROKEN: missing_extern_c.cu — the entry is named matmul but is not
 * extern "C".
 *
 * A correct coalesced kernel whose definition lacks `extern "C"`, so the
 * compiler mangles its name (_Z6matmulPKfS0_Pfiii); the word `matmul` and a
 * KL_LAUNCH are present, so a purely textual check passes, and the file
 * compiles, but the module / shared object has no symbol named `matmul`.
 *
 * Expected verdict: compiles, REJECTED when the entry `matmul` is looked up
 * (never run).
 */

#define BS 32

KL_LAUNCH(BS, BS, BS, BS, 0);

__global__ void matmul(const float* __restrict__ A, const float* __restrict__ B,
                       float* __restrict__ C, int M, int N, int K) {
  const int row = blockIdx.y * BS + threadIdx.y;
  const int col = blockIdx.x * BS + threadIdx.x;
  if (row < M && col < N) {
    float acc = 0.0f;
    for (int k = 0; k < K; ++k) acc = fmaf(A[row * K + k], B[k * N + col], acc);
    C[row * N + col] = acc;
  }
}
