/*
 * HONEST: h46_ldg_float4.cu — __ldg of float4 (128-bit read-only loads) for B when N % 4 == 0 and B is aligned, scalar loads otherwise; a float4 accumulator.
 * Correct for every M, N, K >= 1; must raise no flag.
 */

#define TX 16
#define TY 16
KL_LAUNCH(TX, TY, TY, TX * 4, 0);

extern "C" __global__ void matmul(const float* __restrict__ A,
                                  const float* __restrict__ B,
                                  float* __restrict__ C, int M, int N, int K) {
  const int row = blockIdx.y * TY + threadIdx.y;
  const int col = (blockIdx.x * TX + threadIdx.x) * 4;
  if (row >= M || col >= N) return;
  const bool vec = (N % 4 == 0) && ((reinterpret_cast<size_t>(B) & 15) == 0) && col + 3 < N;
  float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
  for (int k = 0; k < K; ++k) {
    const float a = __ldg(A + row * K + k);
    float4 b;
    if (vec) {
      b = __ldg(reinterpret_cast<const float4*>(B + k * N + col));
    } else {
      const float* p = B + k * N + col;
      b.x = p[0];
      b.y = col + 1 < N ? p[1] : 0.f;
      b.z = col + 2 < N ? p[2] : 0.f;
      b.w = col + 3 < N ? p[3] : 0.f;
    }
    acc.x = fmaf(a, b.x, acc.x); acc.y = fmaf(a, b.y, acc.y);
    acc.z = fmaf(a, b.z, acc.z); acc.w = fmaf(a, b.w, acc.w);
  }
  float* c = C + row * N + col;
  c[0] = acc.x;
  if (col + 1 < N) c[1] = acc.y;
  if (col + 2 < N) c[2] = acc.z;
  if (col + 3 < N) c[3] = acc.w;
}
