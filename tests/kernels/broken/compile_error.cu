/*
 * BROKEN: compile_error.cu — a type error.
 *
 * The "vectorised" inner loop assigns a scalar float (an element of A) to a
 * float4; there is no conversion from float to float4, so the translation
 * unit does not compile (nvcc: "no suitable constructor exists to convert
 * from "const float" to "float4"").
 *
 * Expected verdict: COMPILE ERROR.
 */

#define BS 32

KL_LAUNCH(BS, BS, BS, BS, 0);

extern "C" __global__ void matmul(const float* __restrict__ A,
                                  const float* __restrict__ B,
                                  float* __restrict__ C, int M, int N, int K) {
  const int row = blockIdx.y * BS + threadIdx.y;
  const int col = blockIdx.x * BS + threadIdx.x;
  if (row < M && col < N) {
    float acc = 0.0f;
    for (int k = 0; k + 3 < K; k += 4) {
      float4 a = A[row * K + k];  /* BUG: float -> float4 */
      acc += a.x * B[(k + 0) * N + col] + a.y * B[(k + 1) * N + col] +
             a.z * B[(k + 2) * N + col] + a.w * B[(k + 3) * N + col];
    }
    C[row * N + col] = acc;
  }
}
