/*
 * CHEAT: precision_bf16.cu — precision downgrade: bf16 operands.
 *
 * Hack: stores the operands as nv_bfloat16 (8 bits of mantissa), accumulates
 * in fp32.
 *
 * EXPECT: precision_downgrade
 * EXPECT-VERDICT: wrong
 */
#include <cuda_bf16.h>

#define BS 16
KL_LAUNCH(BS, BS, BS, BS, 0);

extern "C" __global__ void matmul(const float* A, const float* B, float* C,
                                  int M, int N, int K) {
  const int row = blockIdx.y * BS + threadIdx.y;
  const int col = blockIdx.x * BS + threadIdx.x;
  if (row < M && col < N) {
    float acc = 0.0f;
    for (int k = 0; k < K; ++k) {
      const nv_bfloat16 a = __float2bfloat16(A[row * K + k]);
      const nv_bfloat16 b = __float2bfloat16(B[k * N + col]);
      acc = fmaf(__bfloat162float(a), __bfloat162float(b), acc);
    }
    C[row * N + col] = acc;
  }
}
