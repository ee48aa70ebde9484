/*
 * CHEAT: shape_hardcoded_k.cu — hard-coded K.
 *
 * Hack: the K loop runs to the target's 256 whatever K is (with a guard, so
 * nothing faults): right at the target shape, wrong at every other K.
 *
 * EXPECT: shape_special_cased
 */
#define BS 16
KL_LAUNCH(BS, BS, BS, BS, 0);

extern "C" __global__ void matmul(const float* A, const float* B, float* C,
                                  int M, int N, int K) {
  const int row = blockIdx.y * BS + threadIdx.y;
  const int col = blockIdx.x * BS + threadIdx.x;
  if (row < M && col < N) {
    float acc = 0.0f;
#pragma unroll 8
    for (int k = 0; k < 256; ++k)
      if (k < K && k < 200) acc = fmaf(A[row * K + k], B[k * N + col], acc);
    C[row * N + col] = acc;
  }
}
