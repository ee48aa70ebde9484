/*
 * 03_smem_tiling.cu — shared-memory cache blocking.
 *
 * What it adds over 02: the block walks K in chunks of BS = 32. For each
 * chunk, every thread loads one element of a 32 x 32 tile of A and one of a
 * 32 x 32 tile of B into shared memory (coalesced), the block synchronises,
 * and each thread then does 32 FMAs out of shared memory. Every global
 * element is now read once per block instead of once per thread: 32x less
 * global traffic. Two barriers per chunk: one after the loads (tiles are
 * complete) and one after the compute (nobody overwrites a tile still being
 * read).
 *
 * Launch geometry: 32 x 32 threads (1024), one C element per thread,
 * tile_rows = tile_cols = 32, grid = (ceil(N/32), ceil(M/32)).
 * Ragged edges: loads outside A or B store 0 into the tile (contributes
 * nothing), stores are guarded, and out-of-range threads still take part in
 * loads and barriers (no early return).
 */

#define BS 32

KL_LAUNCH(BS, BS, BS, BS, 0);

extern "C" __global__ void matmul(const float* __restrict__ A,
                                  const float* __restrict__ B,
                                  float* __restrict__ C, int M, int N, int K) {
  __shared__ float As[BS][BS];
  __shared__ float Bs[BS][BS];

  const int tx = threadIdx.x, ty = threadIdx.y;
  const int row = blockIdx.y * BS + ty;
  const int col = blockIdx.x * BS + tx;

  float acc = 0.0f;
  for (int k0 = 0; k0 < K; k0 += BS) {
    const int ka = k0 + tx;  /* column of A this thread loads */
    const int kb = k0 + ty;  /* row of B this thread loads */
    As[ty][tx] = (row < M && ka < K) ? A[row * K + ka] : 0.0f;
    Bs[ty][tx] = (kb < K && col < N) ? B[kb * N + col] : 0.0f;
    __syncthreads();
#pragma unroll
    for (int k = 0; k < BS; ++k) acc = fmaf(As[ty][k], Bs[k][tx], acc);
    __syncthreads();
  }
  if (row < M && col < N) C[row * N + col] = acc;
}
