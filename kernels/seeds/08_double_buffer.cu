/*
 * 08_double_buffer.cu — double-buffered shared memory, register prefetch,
 * dynamic shared memory.
 *
 * What it adds over 07: two copies of each shared tile. While the warps
 * compute on buffer `cur`, every thread has already issued the global loads
 * of the NEXT K chunk into registers (their latency hides behind the FMAs),
 * and after the compute it writes them into buffer `cur ^ 1`. The buffer
 * being written was last read in the previous iteration, which ended with a
 * barrier, and the one being read is not written this iteration, so ONE
 * __syncthreads per K chunk suffices (07 needs two). The tiles live in
 * dynamic shared memory (`extern __shared__`), sized by KL_LAUNCH.
 *
 * Launch geometry: same warp tiling as 07: BM x BN = 128 x 128 per block,
 * BK = 16, 8 warps of 64 x 32, lanes with 8 x 4 patches (two 64 x 16
 * sub-tiles per warp), 256 threads as block = (256, 1); tile_rows =
 * tile_cols = 128, grid = (ceil(N/128), ceil(M/128)). Dynamic shared memory:
 * 2 buffers x (BK*BM + BK*BN) floats = 32 KiB (under the 48 KiB default, no
 * opt-in needed).
 *
 * Ragged shapes and alignment: float4 global accesses only when K % 4 == 0
 * (A) / N % 4 == 0 (B, C) and the base pointer is 16-byte aligned, otherwise
 * guarded scalar loads; out-of-range elements load as 0, stores are guarded.
 * The "is there a next chunk" test is uniform across the block, so every
 * thread reaches every barrier.
 */

#define BM 128
#define BN 128
#define BK 16
#define WM 64
#define WN 32
#define WNITER 2
#define TM 8
#define TN 4
#define NWARPS ((BM / WM) * (BN / WN))
#define NTHREADS (NWARPS * 32)
#define WMITER ((WM * WN) / (32 * TM * TN * WNITER))
#define WSUBM (WM / WMITER)
#define WSUBN (WN / WNITER)
#define A_LOADS ((BM * BK / 4) / NTHREADS) /* float4 per thread per chunk */
#define B_LOADS ((BK * BN / 4) / NTHREADS)
#define A_TILE (BK * BM)
#define B_TILE (BK * BN)

static_assert(WMITER >= 1 && (WSUBM / TM) * (WSUBN / TN) == 32, "warp layout");
static_assert(A_LOADS >= 1 && B_LOADS >= 1, "loads");

KL_LAUNCH(NTHREADS, 1, BM, BN, 2 * (A_TILE + B_TILE) * sizeof(float));

__device__ __forceinline__ bool kl_aligned16(const void* p) {
  return (reinterpret_cast<unsigned long long>(p) & 15ull) == 0ull;
}

/* Four consecutive floats P[r][c..c+3] of a rows x cols row-major matrix,
 * zeros outside. vec: cols % 4 == 0 and P 16-byte aligned, c % 4 == 0. */
__device__ __forceinline__ float4 kl_load4(const float* __restrict__ P, int rows,
                                           int cols, int r, int c, bool vec) {
  float4 v = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  if (r < rows) {
    const float* p = P + r * cols;
    if (vec) {
      if (c < cols) v = *reinterpret_cast<const float4*>(p + c);
    } else {
      v.x = (c + 0 < cols) ? p[c + 0] : 0.0f;
      v.y = (c + 1 < cols) ? p[c + 1] : 0.0f;
      v.z = (c + 2 < cols) ? p[c + 2] : 0.0f;
      v.w = (c + 3 < cols) ? p[c + 3] : 0.0f;
    }
  }
  return v;
}

extern "C" __global__ void matmul(const float* __restrict__ A,
                                  const float* __restrict__ B,
                                  float* __restrict__ C, int M, int N, int K) {
  extern __shared__ __align__(16) float smem[];
  /* As[buf][k][m] (transposed) then Bs[buf][k][n] */
  float* const AsBase = smem;
  float* const BsBase = smem + 2 * A_TILE;

  const int t = threadIdx.x;
  const int rowBase = blockIdx.y * BM;
  const int colBase = blockIdx.x * BN;

  const int warpIdx = t / 32, lane = t % 32;
  const int warpRow = warpIdx / (BN / WN), warpCol = warpIdx % (BN / WN);
  const int tRow = lane / (WSUBN / TN), tCol = lane % (WSUBN / TN);

  const bool vecA = (K % 4 == 0) && kl_aligned16(A);
  const bool vecB = (N % 4 == 0) && kl_aligned16(B);
  const bool vecC = (N % 4 == 0) && kl_aligned16(C);

  const int aRow = t / (BK / 4), aCol = (t % (BK / 4)) * 4;
  const int aStride = NTHREADS / (BK / 4);
  const int bRow = t / (BN / 4), bCol = (t % (BN / 4)) * 4;
  const int bStride = NTHREADS / (BN / 4);

  float4 pa[A_LOADS], pb[B_LOADS];  /* prefetch registers */

  float acc[WMITER * TM * WNITER * TN];
#pragma unroll
  for (int i = 0; i < WMITER * TM * WNITER * TN; ++i) acc[i] = 0.0f;
  float regM[WMITER * TM], regN[WNITER * TN];

  const int nChunks = (K + BK - 1) / BK;  /* >= 1 since K >= 1 */

  /* prologue: chunk 0 -> registers -> buffer 0 */
#pragma unroll
  for (int l = 0; l < A_LOADS; ++l)
    pa[l] = kl_load4(A, M, K, rowBase + aRow + l * aStride, aCol, vecA);
#pragma unroll
  for (int l = 0; l < B_LOADS; ++l)
    pb[l] = kl_load4(B, K, N, bRow + l * bStride, colBase + bCol, vecB);
#pragma unroll
  for (int l = 0; l < A_LOADS; ++l) {
    float* as = AsBase + aRow + l * aStride;
    as[(aCol + 0) * BM] = pa[l].x;
    as[(aCol + 1) * BM] = pa[l].y;
    as[(aCol + 2) * BM] = pa[l].z;
    as[(aCol + 3) * BM] = pa[l].w;
  }
#pragma unroll
  for (int l = 0; l < B_LOADS; ++l)
    *reinterpret_cast<float4*>(BsBase + (bRow + l * bStride) * BN + bCol) = pb[l];
  __syncthreads();

  for (int c = 0; c < nChunks; ++c) {
    const int cur = c & 1;
    const bool hasNext = (c + 1 < nChunks);  /* uniform across the block */
    if (hasNext) {
      const int k0 = (c + 1) * BK;
#pragma unroll
      for (int l = 0; l < A_LOADS; ++l)
        pa[l] = kl_load4(A, M, K, rowBase + aRow + l * aStride, k0 + aCol, vecA);
#pragma unroll
      for (int l = 0; l < B_LOADS; ++l)
        pb[l] = kl_load4(B, K, N, k0 + bRow + l * bStride, colBase + bCol, vecB);
    }

    const float* As = AsBase + cur * A_TILE;
    const float* Bs = BsBase + cur * B_TILE;
#pragma unroll
    for (int k = 0; k < BK; ++k) {
#pragma unroll
      for (int wm = 0; wm < WMITER; ++wm)
#pragma unroll
        for (int i = 0; i < TM; i += 4) {
          const float4 a = *reinterpret_cast<const float4*>(
              As + k * BM + warpRow * WM + wm * WSUBM + tRow * TM + i);
          regM[wm * TM + i + 0] = a.x;
          regM[wm * TM + i + 1] = a.y;
          regM[wm * TM + i + 2] = a.z;
          regM[wm * TM + i + 3] = a.w;
        }
#pragma unroll
      for (int wn = 0; wn < WNITER; ++wn)
#pragma unroll
        for (int j = 0; j < TN; j += 4) {
          const float4 b = *reinterpret_cast<const float4*>(
              Bs + k * BN + warpCol * WN + wn * WSUBN + tCol * TN + j);
          regN[wn * TN + j + 0] = b.x;
          regN[wn * TN + j + 1] = b.y;
          regN[wn * TN + j + 2] = b.z;
          regN[wn * TN + j + 3] = b.w;
        }
#pragma unroll
      for (int i = 0; i < WMITER * TM; ++i)
#pragma unroll
        for (int j = 0; j < WNITER * TN; ++j)
          acc[i * (WNITER * TN) + j] = fmaf(regM[i], regN[j], acc[i * (WNITER * TN) + j]);
    }

    if (hasNext) {
      float* AsN = AsBase + (cur ^ 1) * A_TILE;
      float* BsN = BsBase + (cur ^ 1) * B_TILE;
#pragma unroll
      for (int l = 0; l < A_LOADS; ++l) {
        float* as = AsN + aRow + l * aStride;
        as[(aCol + 0) * BM] = pa[l].x;
        as[(aCol + 1) * BM] = pa[l].y;
        as[(aCol + 2) * BM] = pa[l].z;
        as[(aCol + 3) * BM] = pa[l].w;
      }
#pragma unroll
      for (int l = 0; l < B_LOADS; ++l)
        *reinterpret_cast<float4*>(BsN + (bRow + l * bStride) * BN + bCol) = pb[l];
    }
    __syncthreads();
  }

#pragma unroll
  for (int wm = 0; wm < WMITER; ++wm)
#pragma unroll
    for (int i = 0; i < TM; ++i) {
      const int row = rowBase + warpRow * WM + wm * WSUBM + tRow * TM + i;
      if (row >= M) continue;  /* no barrier below */
#pragma unroll
      for (int wn = 0; wn < WNITER; ++wn)
#pragma unroll
        for (int j = 0; j < TN; j += 4) {
          const int col = colBase + warpCol * WN + wn * WSUBN + tCol * TN + j;
          const float* a = &acc[(wm * TM + i) * (WNITER * TN) + wn * TN + j];
          if (vecC) {
            if (col < N)
              *reinterpret_cast<float4*>(&C[row * N + col]) =
                  make_float4(a[0], a[1], a[2], a[3]);
          } else {
#pragma unroll
            for (int q = 0; q < 4; ++q)
              if (col + q < N) C[row * N + col + q] = a[q];
          }
        }
    }
}
