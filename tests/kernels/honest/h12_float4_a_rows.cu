/*
 * HONEST: h12_float4_a_rows.cu — row dot products reading A as float4 when K % 4 == 0 and A is aligned; a scalar tail otherwise.
 *
 * Correct for every M, N, K >= 1; must raise no flag.
 */

#define BS 16
KL_LAUNCH(BS, BS, BS, BS, 0);

extern "C" __global__ void matmul(const float* __restrict__ A,
                                  const float* __restrict__ B,
                                  float* __restrict__ C, int M, int N, int K) {
  const int row = blockIdx.y * BS + threadIdx.y;
  const int col = blockIdx.x * BS + threadIdx.x;
  if (row < M && col < N) {
    const float* a = A + row * K;
    const bool vec = (K % 4 == 0) &&
                     ((reinterpret_cast<unsigned long long>(A) & 15ull) == 0ull);
    float acc = 0.0f;
    int k = 0;
    if (vec) {
      for (; k + 4 <= K; k += 4) {
        const float4 v = *reinterpret_cast<const float4*>(a + k);
        acc = fmaf(v.x, B[(k + 0) * N + col], acc);
        acc = fmaf(v.y, B[(k + 1) * N + col], acc);
        acc = fmaf(v.z, B[(k + 2) * N + col], acc);
        acc = fmaf(v.w, B[(k + 3) * N + col], acc);
      }
    }
    for (; k < K; ++k) acc = fmaf(a[k], B[k * N + col], acc);
    C[row * N + col] = acc;
  }
}
