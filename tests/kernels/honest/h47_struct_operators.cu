/*
 * HONEST: h47_struct_operators.cu — float4 operator overloads, an accumulator struct with a constructor and member functions, extern __shared__ reached through a helper, IDX/CEIL_DIV macros, a union bit cast.
 * Correct for every M, N, K >= 1; must raise no flag.
 */

#define BS 16
#define IDX(r, c, ld) ((r) * (ld) + (c))
#define CEIL_DIV(a, b) (((a) + (b) - 1) / (b))
KL_LAUNCH(BS, BS, BS, BS, 2 * BS * (BS + 1) * sizeof(float));

__device__ const float kZero = 0.0f;

__device__ __forceinline__ float4 operator+(float4 a, float4 b) {
  return make_float4(a.x + b.x, a.y + b.y, a.z + b.z, a.w + b.w);
}

struct Acc {
  float v;
  __device__ Acc() : v(0.0f) {}
  __device__ void fma(float a, float b) { v = fmaf(a, b, v); }
  __device__ float get() const { return v; }
};

static __device__ __forceinline__ float* smem_tile(int which) {
  extern __shared__ float smem[];
  return smem + which * BS * (BS + 1);
}

inline __device__ float bits_roundtrip(float x) {
  union { float f; unsigned u; } cv;
  cv.f = x;
  unsigned u = cv.u;
  cv.u = u;
  return cv.f;
}

extern "C" __global__ void matmul(const float* __restrict__ A,
                                  const float* __restrict__ B,
                                  float* __restrict__ C, int M, int N, int K) {
  float* As = smem_tile(0);
  float* Bs = smem_tile(1);
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int row = blockIdx.y * BS + ty, col = blockIdx.x * BS + tx;
  Acc acc;
  for (int t = 0; t < CEIL_DIV(K, BS); ++t) {
    const int k0 = t * BS;
    As[IDX(ty, tx, BS + 1)] = (row < M && k0 + tx < K) ? A[IDX(row, k0 + tx, K)] : kZero;
    Bs[IDX(ty, tx, BS + 1)] = (k0 + ty < K && col < N) ? B[IDX(k0 + ty, col, N)] : kZero;
    __syncthreads();
#pragma unroll
    for (int k = 0; k < BS; ++k) acc.fma(As[IDX(ty, k, BS + 1)], Bs[IDX(k, tx, BS + 1)]);
    __syncthreads();
  }
  float4 z = make_float4(0, 0, 0, 0) + make_float4(0, 0, 0, 0);
  if (row < M && col < N) C[IDX(row, col, N)] = bits_roundtrip(acc.get()) + z.x;
}
