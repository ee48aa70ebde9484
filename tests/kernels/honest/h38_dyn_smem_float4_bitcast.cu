/*
 * HONEST: h38_dyn_smem_float4_bitcast.cu — an aligned extern __shared__ float4 buffer carved into two tiles; __syncwarp; __float_as_int/__int_as_float bit casts.
 * Correct for every M, N, K >= 1; must raise no flag.
 */

#define BS 32
#define RY 8
KL_LAUNCH(BS, RY, BS, BS, 2 * BS * BS * sizeof(float));

extern "C" __global__ void matmul(const float* __restrict__ A,
                                  const float* __restrict__ B,
                                  float* __restrict__ C, int M, int N, int K) {
  extern __shared__ __align__(16) float4 smem4[];
  float* As = reinterpret_cast<float*>(smem4);
  float* Bs = As + BS * BS;
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int r0 = blockIdx.y * BS, c0 = blockIdx.x * BS;
  float acc[BS / RY] = {};
  for (int k0 = 0; k0 < K; k0 += BS) {
    for (int r = ty; r < BS; r += RY) {
      As[r * BS + tx] = (r0 + r < M && k0 + tx < K) ? A[(r0 + r) * K + k0 + tx] : 0.0f;
      Bs[r * BS + tx] = (k0 + r < K && c0 + tx < N) ? B[(k0 + r) * N + c0 + tx] : 0.0f;
    }
    __syncthreads();
    for (int k = 0; k < BS; ++k) {
      const float b = Bs[k * BS + tx];
#pragma unroll
      for (int i = 0; i < BS / RY; ++i)
        acc[i] = fmaf(As[(ty + i * RY) * BS + k], b, acc[i]);
    }
    __syncwarp();
    __syncthreads();
  }
#pragma unroll
  for (int i = 0; i < BS / RY; ++i) {
    const int r = r0 + ty + i * RY, c = c0 + tx;
    if (r < M && c < N) C[r * N + c] = __int_as_float(__float_as_int(acc[i]));
  }
}
