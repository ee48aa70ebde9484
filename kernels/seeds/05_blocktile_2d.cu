/*
 * 05_blocktile_2d.cu — 2D register blocking (an outer product per thread).
 *
 * What it adds over 04: each thread computes a TM x TN = 8 x 8 sub-tile of C.
 * For every k of the chunk it loads 8 values of the A tile and 8 values of
 * the B tile into registers and does 64 FMAs (an outer product), so shared
 * memory loads per FMA drop to 0.25 and arithmetic intensity per thread is
 * 4x that of 04.
 *
 * Launch geometry: the block owns a BM x BN = 128 x 128 tile of C, walks K in
 * chunks of BK = 8, and has 128 * 128 / (8 * 8) = 256 threads, laid out 1D as
 * block = (256, 1); tile_rows = tile_cols = 128, grid = (ceil(N/128),
 * ceil(M/128)). Thread t owns rows (t / 16) * 8 .. + 7 and columns
 * (t % 16) * 8 .. + 7 of the block tile. Each chunk's A tile (128 x 8) and
 * B tile (8 x 128) hold 1024 elements each: 4 strided loads per thread, each
 * pass coalesced along the fast dimension. Out-of-range loads write 0,
 * stores are guarded, every thread reaches every barrier. Results: 64
 * registers per thread.
 */

#define BM 128
#define BN 128
#define BK 8
#define TM 8
#define TN 8
#define NTHREADS ((BM / TM) * (BN / TN))

KL_LAUNCH(NTHREADS, 1, BM, BN, 0);

extern "C" __global__ void matmul(const float* __restrict__ A,
                                  const float* __restrict__ B,
                                  float* __restrict__ C, int M, int N, int K) {
  __shared__ float As[BM][BK];
  __shared__ float Bs[BK][BN];

  const int t = threadIdx.x;
  const int rowBase = blockIdx.y * BM;
  const int colBase = blockIdx.x * BN;
  const int threadRow = t / (BN / TN);
  const int threadCol = t % (BN / TN);

  /* loading: a pass of 256 threads covers 32 rows of A-tile / 2 rows of B-tile */
  const int aRow = t / BK, aCol = t % BK;
  const int aStride = NTHREADS / BK;  /* 32 */
  const int bRow = t / BN, bCol = t % BN;
  const int bStride = NTHREADS / BN;  /* 2 */

  float acc[TM * TN];
#pragma unroll
  for (int i = 0; i < TM * TN; ++i) acc[i] = 0.0f;
  float regM[TM], regN[TN];

  for (int k0 = 0; k0 < K; k0 += BK) {
#pragma unroll
    for (int off = 0; off < BM; off += aStride) {
      const int r = rowBase + aRow + off, c = k0 + aCol;
      As[aRow + off][aCol] = (r < M && c < K) ? A[r * K + c] : 0.0f;
    }
#pragma unroll
    for (int off = 0; off < BK; off += bStride) {
      const int r = k0 + bRow + off, c = colBase + bCol;
      Bs[bRow + off][bCol] = (r < K && c < N) ? B[r * N + c] : 0.0f;
    }
    __syncthreads();
#pragma unroll
    for (int k = 0; k < BK; ++k) {
#pragma unroll
      for (int i = 0; i < TM; ++i) regM[i] = As[threadRow * TM + i][k];
#pragma unroll
      for (int j = 0; j < TN; ++j) regN[j] = Bs[k][threadCol * TN + j];
#pragma unroll
      for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j)
          acc[i * TN + j] = fmaf(regM[i], regN[j], acc[i * TN + j]);
    }
    __syncthreads();
  }

#pragma unroll
  for (int i = 0; i < TM; ++i) {
    const int row = rowBase + threadRow * TM + i;
#pragma unroll
    for (int j = 0; j < TN; ++j) {
      const int col = colBase + threadCol * TN + j;
      if (row < M && col < N) C[row * N + col] = acc[i * TN + j];
    }
  }
}
