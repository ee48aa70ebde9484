/*
 * BROKEN: no_launch.cu — the launch-geometry declaration is missing.
 *
 * A correct 32 x 32 coalesced kernel with the contract entry, but the file
 * never declares its launch geometry, so there is nothing to launch it with
 * (no geometry symbol in the cubin / shared object). The macro's name is
 * deliberately absent from this file, comments included.
 *
 * Expected verdict: REJECTED before running: the source check reports the
 * missing declaration (if a checker let it through, it compiles and the
 * geometry symbol lookup fails).
 */

#define BS 32

extern "C" __global__ void matmul(const float* __restrict__ A,
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
