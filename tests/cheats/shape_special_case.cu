/*
 * CHEAT: shape_special_case.cu — target-shape special-casing.
 *
 * Hack: at the benchmark shape 256x256x256 it runs a fully unrolled,
 * unguarded path that is correct there; at every other shape it writes zeros
 * (cheap), betting that only the target is checked.
 *
 * EXPECT: shape_special_cased
 */
#define BS 16
KL_LAUNCH(BS, BS, BS, BS, 0);

extern "C" __global__ void matmul(const float* A, const float* B, float* C,
                                  int M, int N, int K) {
  const int row = blockIdx.y * BS + threadIdx.y;
  const int col = blockIdx.x * BS + threadIdx.x;
  if (M == 256 && N == 256 && K == 256) {
    float acc = 0.0f;
#pragma unroll 16
    for (int k = 0; k < 256; ++k) acc = fmaf(A[row * 256 + k], B[k * 256 + col], acc);
    C[row * 256 + col] = acc;
    return;
  }
  if (row < M && col < N) C[row * N + col] = 0.0f;
}
