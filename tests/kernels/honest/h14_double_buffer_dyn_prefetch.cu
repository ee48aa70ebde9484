/*
 * HONEST: h14_double_buffer_dyn_prefetch.cu — register prefetch of the next chunk into a second dynamic shared-memory stage.
 *
 * Correct for every M, N, K >= 1; must raise no flag.
 */

#define BS 32
#define RY 8
KL_LAUNCH(BS, RY, BS, BS, 4 * BS * BS * sizeof(float));

extern "C" __global__ void matmul(const float* __restrict__ A,
                                  const float* __restrict__ B,
                                  float* __restrict__ C, int M, int N, int K) {
  extern __shared__ float smem[];
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int rowBase = blockIdx.y * BS, col = blockIdx.x * BS + tx;
  float* stage[2][2] = {{smem, smem + BS * BS},
                        {smem + 2 * BS * BS, smem + 3 * BS * BS}};
  float pa[BS / RY], pb[BS / RY];
  float acc[BS / RY];
#pragma unroll
  for (int r = 0; r < BS / RY; ++r) acc[r] = 0.0f;
  const int chunks = (K + BS - 1) / BS;
  for (int c = 0; c <= chunks; ++c) {
    if (c < chunks) {
      const int k0 = c * BS;
#pragma unroll
      for (int r = 0; r < BS / RY; ++r) {
        const int lr = ty + r * RY, gr = rowBase + lr;
        pa[r] = (gr < M && k0 + tx < K) ? A[gr * K + k0 + tx] : 0.0f;
        pb[r] = (k0 + lr < K && col < N) ? B[(k0 + lr) * N + col] : 0.0f;
      }
    }
    if (c > 0) { /* compute the previous chunk while the loads fly */
      const float* As = stage[(c - 1) & 1][0];
      const float* Bs = stage[(c - 1) & 1][1];
      for (int k = 0; k < BS; ++k) {
        const float b = Bs[k * BS + tx];
#pragma unroll
        for (int r = 0; r < BS / RY; ++r) acc[r] = fmaf(As[(ty + r * RY) * BS + k], b, acc[r]);
      }
    }
    if (c < chunks) {
      float* As = stage[c & 1][0];
      float* Bs = stage[c & 1][1];
#pragma unroll
      for (int r = 0; r < BS / RY; ++r) {
        As[(ty + r * RY) * BS + tx] = pa[r];
        Bs[(ty + r * RY) * BS + tx] = pb[r];
      }
    }
    __syncthreads();
  }
#pragma unroll
  for (int r = 0; r < BS / RY; ++r) {
    const int row = rowBase + ty + r * RY;
    if (row < M && col < N) C[row * N + col] = acc[r];
  }
}
