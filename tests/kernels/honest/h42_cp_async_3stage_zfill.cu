/*
 * HONEST: h42_cp_async_3stage_zfill.cu — a 3-stage cp.async pipeline in dynamic shared memory: 16-byte copies when rows are aligned, 4-byte otherwise, ragged chunks zero-filled by the copy (zfill).
 * Correct for every M, N, K >= 1; must raise no flag.
 */

#include <cuda_pipeline.h>

#define BM 64
#define BN 64
#define BK 16
#define TM 4
#define TN 4
#define STAGES 3
#define NT ((BM / TM) * (BN / TN))
KL_LAUNCH(NT, 1, BM, BN, STAGES * (BM * BK + BK * BN) * sizeof(float));

extern "C" __global__ void __launch_bounds__(NT)
matmul(const float* __restrict__ A, const float* __restrict__ B,
       float* __restrict__ C, int M, int N, int K) {
  extern __shared__ __align__(16) float smem[];
  float* As = smem;                       /* [STAGES][BM][BK] */
  float* Bs = smem + STAGES * BM * BK;    /* [STAGES][BK][BN] */
  const int t = threadIdx.x;
  const int r0 = blockIdx.y * BM, c0 = blockIdx.x * BN;
  const bool vecA = (K % 4 == 0) && ((reinterpret_cast<size_t>(A) & 15) == 0);
  const bool vecB = (N % 4 == 0) && ((reinterpret_cast<size_t>(B) & 15) == 0);
  const int am = t / (BK / 4), ak = (t % (BK / 4)) * 4;   /* 64 x 4 float4 */
  const int bk = t / (BN / 4), bn = (t % (BN / 4)) * 4;   /* 16 x 16 float4 */
  const int nk = (K + BK - 1) / BK;

  auto load = [&](int stage, int k0) {
    float* as = As + stage * BM * BK + am * BK + ak;
    float* bs = Bs + stage * BK * BN + bk * BN + bn;
    const int ar = r0 + am, ac = k0 + ak;
    const int br = k0 + bk, bc = c0 + bn;
    if (vecA) {
      const bool in = ar < M && ac < K;
      __pipeline_memcpy_async(as, in ? A + (size_t)ar * K + ac : A, 16, in ? 0 : 16);
    } else {
      for (int q = 0; q < 4; ++q) {
        const bool in = ar < M && ac + q < K;
        __pipeline_memcpy_async(as + q, in ? A + (size_t)ar * K + ac + q : A, 4, in ? 0 : 4);
      }
    }
    if (vecB) {
      const bool in = br < K && bc < N;
      __pipeline_memcpy_async(bs, in ? B + (size_t)br * N + bc : B, 16, in ? 0 : 16);
    } else {
      for (int q = 0; q < 4; ++q) {
        const bool in = br < K && bc + q < N;
        __pipeline_memcpy_async(bs + q, in ? B + (size_t)br * N + bc + q : B, 4, in ? 0 : 4);
      }
    }
  };

  const int tr = t / (BN / TN), tc = t % (BN / TN);
  float acc[TM][TN] = {};
#pragma unroll
  for (int s = 0; s < STAGES - 1; ++s) {
    if (s < nk) load(s, s * BK);
    __pipeline_commit();
  }
  for (int kt = 0; kt < nk; ++kt) {
    const int pre = kt + STAGES - 1;
    if (pre < nk) load(pre % STAGES, pre * BK);
    __pipeline_commit();
    __pipeline_wait_prior(STAGES - 1);
    __syncthreads();
    const float* as = As + (kt % STAGES) * BM * BK;
    const float* bs = Bs + (kt % STAGES) * BK * BN;
#pragma unroll
    for (int k = 0; k < BK; ++k) {
      float a[TM], b[TN];
#pragma unroll
      for (int i = 0; i < TM; ++i) a[i] = as[(tr * TM + i) * BK + k];
#pragma unroll
      for (int j = 0; j < TN; ++j) b[j] = bs[k * BN + tc * TN + j];
#pragma unroll
      for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
    }
    __syncthreads();
  }
#pragma unroll
  for (int i = 0; i < TM; ++i) {
    const int r = r0 + tr * TM + i;
    if (r >= M) continue;
#pragma unroll
    for (int j = 0; j < TN; ++j) {
      const int c = c0 + tc * TN + j;
      if (c < N) C[(size_t)r * N + c] = acc[i][j];
    }
  }
}
