/*
 * 07_warptile.cu — warp tiling (block tile -> warp tile -> thread tile).
 *
 * What it adds over 06: an explicit middle level of the hierarchy. The block
 * tile (128 x 128) is split into 8 warp tiles of WM x WN = 64 x 32; each warp
 * walks its tile in WMITER x WNITER = 1 x 2 sub-tiles of 64 x 16, and within a
 * sub-tile each lane owns a TM x TN = 8 x 4 patch. A warp's 32 lanes thus read
 * a compact, contiguous slice of each shared tile (fewer bank conflicts,
 * better register reuse), and the schedule maps onto how the hardware really
 * issues work (per warp). K is walked in chunks of BK = 16, twice 06's, so
 * there are half as many barriers per FMA.
 *
 * Launch geometry: BM x BN = 128 x 128 per block, (128/64) * (128/32) = 8
 * warps = 256 threads as block = (256, 1); tile_rows = tile_cols = 128, grid =
 * (ceil(N/128), ceil(M/128)). Results per thread: WMITER*TM * WNITER*TN = 64.
 * The A tile (128 x 16, stored transposed as As[k][m]) and the B tile
 * (16 x 128) are 512 float4 each: two vector loads of each per thread.
 *
 * Ragged shapes and alignment: as in 06, float4 global accesses only when
 * K % 4 == 0 (A) / N % 4 == 0 (B, C) and the base pointer is 16-byte
 * aligned, otherwise guarded scalar loads; out-of-range elements load as 0,
 * stores are guarded, and every thread reaches every barrier.
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

static_assert(WMITER >= 1 && (WSUBM / TM) * (WSUBN / TN) == 32, "warp layout");
static_assert((BM * BK / 4) % NTHREADS == 0 && (BK * BN / 4) % NTHREADS == 0, "loads");

KL_LAUNCH(NTHREADS, 1, BM, BN, 0);

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
  __shared__ __align__(16) float As[BK][BM];  /* transposed: As[k][m] */
  __shared__ __align__(16) float Bs[BK][BN];

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

  float acc[WMITER * TM * WNITER * TN];
#pragma unroll
  for (int i = 0; i < WMITER * TM * WNITER * TN; ++i) acc[i] = 0.0f;
  float regM[WMITER * TM], regN[WNITER * TN];

  for (int k0 = 0; k0 < K; k0 += BK) {
#pragma unroll
    for (int off = 0; off < BM; off += aStride) {
      const float4 v = kl_load4(A, M, K, rowBase + aRow + off, k0 + aCol, vecA);
      As[aCol + 0][aRow + off] = v.x;
      As[aCol + 1][aRow + off] = v.y;
      As[aCol + 2][aRow + off] = v.z;
      As[aCol + 3][aRow + off] = v.w;
    }
#pragma unroll
    for (int off = 0; off < BK; off += bStride) {
      const float4 v = kl_load4(B, K, N, k0 + bRow + off, colBase + bCol, vecB);
      *reinterpret_cast<float4*>(&Bs[bRow + off][bCol]) = v;
    }
    __syncthreads();

#pragma unroll
    for (int k = 0; k < BK; ++k) {
#pragma unroll
      for (int wm = 0; wm < WMITER; ++wm)
#pragma unroll
        for (int i = 0; i < TM; i += 4) {
          const float4 a = *reinterpret_cast<const float4*>(
              &As[k][warpRow * WM + wm * WSUBM + tRow * TM + i]);
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
              &Bs[k][warpCol * WN + wn * WSUBN + tCol * TN + j]);
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
