/*
 * HONEST: h11_float4_b_cols.cu — each thread computes 4 adjacent columns; B read as float4 when N % 4 == 0 and B is 16-byte aligned, scalar otherwise.
 *
 * Correct for every M, N, K >= 1; must raise no flag.
 */

#define TX 16
#define TY 16
KL_LAUNCH(TX, TY, TY, TX * 4, 0);

__device__ __forceinline__ bool aligned16(const void* p) {
  return (reinterpret_cast<unsigned long long>(p) & 15ull) == 0ull;
}

extern "C" __global__ void matmul(const float* __restrict__ A,
                                  const float* __restrict__ B,
                                  float* __restrict__ C, int M, int N, int K) {
  const int row = blockIdx.y * TY + threadIdx.y;
  const int col = (blockIdx.x * TX + threadIdx.x) * 4;
  if (row >= M || col >= N) return; /* no barrier in this kernel */
  const bool vec = (N % 4 == 0) && aligned16(B) && aligned16(C);
  float4 acc = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  for (int k = 0; k < K; ++k) {
    const float a = A[row * K + k];
    float4 b;
    if (vec) {
      b = *reinterpret_cast<const float4*>(B + k * N + col);
    } else {
      const float* p = B + k * N;
      b.x = p[col];
      b.y = col + 1 < N ? p[col + 1] : 0.0f;
      b.z = col + 2 < N ? p[col + 2] : 0.0f;
      b.w = col + 3 < N ? p[col + 3] : 0.0f;
    }
    acc.x = fmaf(a, b.x, acc.x);
    acc.y = fmaf(a, b.y, acc.y);
    acc.z = fmaf(a, b.z, acc.z);
    acc.w = fmaf(a, b.w, acc.w);
  }
  if (vec) {
    *reinterpret_cast<float4*>(C + row * N + col) = acc;
  } else {
    C[row * N + col] = acc.x;
    if (col + 1 < N) C[row * N + col + 1] = acc.y;
    if (col + 2 < N) C[row * N + col + 2] = acc.z;
    if (col + 3 < N) C[row * N + col + 3] = acc.w;
  }
}
