/*
 * HONEST: h44_config_guards_static_assert.cu — #ifndef/#define config guards with #error, a __host__ __device__ constexpr helper, static_assert, a fragment struct and a template helper in an anonymous namespace, #pragma unroll 8.
 * Correct for every M, N, K >= 1; must raise no flag.
 */

#ifndef TILE
#define TILE 32
#endif
#ifndef TM
#define TM 4
#endif
#if TILE % TM != 0
#error "TILE must be a multiple of TM"
#endif

__host__ __device__ constexpr int ceil_div(int a, int b) { return (a + b - 1) / b; }
static_assert(TILE % TM == 0, "TILE must be a multiple of TM");
static_assert(ceil_div(TILE, TM) == TILE / TM, "");

KL_LAUNCH(TILE, TILE / TM, TILE, TILE, 0);

namespace {
struct Frag {
  float v[TM];
};

template <int T, int R>
__device__ __forceinline__ void tile_mma(const float (&As)[T][T + 1],
                                         const float (&Bs)[T][T + 1], int ty,
                                         int tx, Frag& f) {
#pragma unroll 8
  for (int k = 0; k < T; ++k) {
    const float b = Bs[k][tx];
#pragma unroll
    for (int i = 0; i < R; ++i) f.v[i] = fmaf(As[ty * R + i][k], b, f.v[i]);
  }
}
}  // namespace

extern "C" __global__ void matmul(const float* __restrict__ A,
                                  const float* __restrict__ B,
                                  float* __restrict__ C, int M, int N, int K) {
  __shared__ float As[TILE][TILE + 1];
  __shared__ float Bs[TILE][TILE + 1];
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int r0 = blockIdx.y * TILE, c0 = blockIdx.x * TILE;
  Frag f = {};
  for (int k0 = 0; k0 < K; k0 += TILE) {
#pragma unroll
    for (int i = 0; i < TM; ++i) {
      const int r = ty * TM + i;
      As[r][tx] = (r0 + r < M && k0 + tx < K) ? A[(r0 + r) * K + k0 + tx] : 0.0f;
      Bs[r][tx] = (k0 + r < K && c0 + tx < N) ? B[(k0 + r) * N + c0 + tx] : 0.0f;
    }
    __syncthreads();
    tile_mma<TILE, TM>(As, Bs, ty, tx, f);
    __syncthreads();
  }
#pragma unroll
  for (int i = 0; i < TM; ++i) {
    const int r = r0 + ty * TM + i, c = c0 + tx;
    if (r < M && c < N) C[r * N + c] = f.v[i];
  }
}
