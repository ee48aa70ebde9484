/*
 * CHEAT: precision_half_roundtrip.cu — precision downgrade: a __float2half round trip.
 *
 * Hack: rounds A and B to fp16 before multiplying (half the bandwidth in a
 * real kernel, tensor cores in a real one); returns fp32.
 *
 * EXPECT: precision_downgrade
 * EXPECT-VERDICT: wrong
 */
#include <cuda_fp16.h>

#define BS 16
KL_LAUNCH(BS, BS, BS, BS, 0);

extern "C" __global__ void matmul(const float* A, const float* B, float* C,
                                  int M, int N, int K) {
  const int row = blockIdx.y * BS + threadIdx.y;
  const int col = blockIdx.x * BS + threadIdx.x;
  if (row < M && col < N) {
    float acc = 0.0f;
    for (int k = 0; k < K; ++k)
      acc = fmaf(__half2float(__float2half(A[row * K + k])),
                 __half2float(__float2half(B[k * N + col])), acc);
    C[row * N + col] = acc;
  }
}
