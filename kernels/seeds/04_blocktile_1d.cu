/*
 * 04_blocktile_1d.cu — 1D register blocking (several results per thread).
 *
 * What it adds over 03: each thread computes TM = 8 vertically adjacent
 * elements of C instead of one. In the inner loop a thread loads one value of
 * the B tile into a register and reuses it for 8 FMAs against 8 values of the
 * A tile, so shared-memory loads per FMA drop from 2 to about 1.1 and the
 * kernel stops being shared-memory-bandwidth bound.
 *
 * Launch geometry: the block owns a BM x BN = 64 x 64 tile of C and walks K
 * in chunks of BK = 8. 64 * 64 / TM = 512 threads, laid out 1D as
 * block = (512, 1); tile_rows = tile_cols = 64, grid = (ceil(N/64),
 * ceil(M/64)). Thread t computes column t % 64, rows (t / 64) * 8 .. + 7.
 * Loads: the A tile (64 x 8) and the B tile (8 x 64) hold 512 elements
 * each, so every thread loads exactly one of each per chunk (coalesced along
 * the fast dimension). Out-of-range loads write 0, stores are guarded, and
 * every thread reaches every barrier.
 */

#define BM 64
#define BN 64
#define BK 8
#define TM 8
#define NTHREADS (BM * BN / TM)

KL_LAUNCH(NTHREADS, 1, BM, BN, 0);

extern "C" __global__ void matmul(const float* __restrict__ A,
                                  const float* __restrict__ B,
                                  float* __restrict__ C, int M, int N, int K) {
  __shared__ float As[BM][BK];
  __shared__ float Bs[BK][BN];

  const int t = threadIdx.x;
  const int rowBase = blockIdx.y * BM;
  const int colBase = blockIdx.x * BN;

  /* which element of each tile this thread loads */
  const int aRow = t / BK, aCol = t % BK;  /* 64 x 8 */
  const int bRow = t / BN, bCol = t % BN;  /* 8 x 64 */

  /* which outputs this thread computes */
  const int threadCol = t % BN;
  const int threadRow = t / BN;  /* 0 .. BM/TM - 1 */

  float acc[TM];
#pragma unroll
  for (int i = 0; i < TM; ++i) acc[i] = 0.0f;

  for (int k0 = 0; k0 < K; k0 += BK) {
    const int ar = rowBase + aRow, ac = k0 + aCol;
    As[aRow][aCol] = (ar < M && ac < K) ? A[ar * K + ac] : 0.0f;
    const int br = k0 + bRow, bc = colBase + bCol;
    Bs[bRow][bCol] = (br < K && bc < N) ? B[br * N + bc] : 0.0f;
    __syncthreads();
#pragma unroll
    for (int k = 0; k < BK; ++k) {
      const float b = Bs[k][threadCol];
#pragma unroll
      for (int i = 0; i < TM; ++i)
        acc[i] = fmaf(As[threadRow * TM + i][k], b, acc[i]);
    }
    __syncthreads();
  }

  const int col = colBase + threadCol;
#pragma unroll
  for (int i = 0; i < TM; ++i) {
    const int row = rowBase + threadRow * TM + i;
    if (row < M && col < N) C[row * N + col] = acc[i];
  }
}
