/*
 * BROKEN: edge_off_by_one.cu — off-by-one in the ragged-edge guard.
 *
 * A 32 x 32 shared-memory tiled kernel with a fast path for full tiles
 * (unguarded loads) and a guarded path for tiles that cross an edge of A, B
 * or K. The guarded path tests the A column with `ka < K - 1` instead of
 * `ka < K`, so in every edge tile the last column of A (k = K - 1) loads as
 * 0 and the k = K - 1 term is dropped from those outputs.
 *
 * Expected verdict: compiles, runs, WRONG RESULT on ragged shapes (any of
 * M, N, K not a multiple of 32, e.g. 127 x 129 x 65, 33 x 17 x 200);
 * correct on multiples of the tile (e.g. 64 x 64 x 64, 256 x 128 x 96) where
 * only the fast path runs. No out-of-bounds access either way.
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
  const bool fullMN = (blockIdx.y + 1) * BS <= M && (blockIdx.x + 1) * BS <= N;

  float acc = 0.0f;
  for (int k0 = 0; k0 < K; k0 += BS) {
    const int ka = k0 + tx, kb = k0 + ty;
    if (fullMN && k0 + BS <= K) {  /* interior tile: no guards needed */
      As[ty][tx] = A[row * K + ka];
      Bs[ty][tx] = B[kb * N + col];
    } else {                       /* edge tile */
      As[ty][tx] = (row < M && ka < K - 1) ? A[row * K + ka] : 0.0f;  /* BUG: ka < K */
      Bs[ty][tx] = (kb < K && col < N) ? B[kb * N + col] : 0.0f;
    }
    __syncthreads();
#pragma unroll
    for (int k = 0; k < BS; ++k) acc = fmaf(As[ty][k], Bs[k][tx], acc);
    __syncthreads();
  }
  if (row < M && col < N) C[row * N + col] = acc;
}
