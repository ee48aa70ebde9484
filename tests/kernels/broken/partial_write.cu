/*
 * BROKEN: partial_write.cu — only the first half of the rows of C is stored.
 *
 * A correct shared-memory tiled kernel whose final store guard reads
 * `row < M / 2` instead of `row < M` (a leftover from a "split M in two
 * launches" experiment). Rows M/2 .. M-1 of C are never written and keep the
 * harness's NaN poison; for M == 1 nothing at all is written.
 *
 * Expected verdict: compiles, runs, WRONG RESULT (NaN left in C) on every
 * shape, 1 x 1 x 1 included.
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
    As[ty][tx] = (row < M && k0 + tx < K) ? A[row * K + k0 + tx] : 0.0f;
    Bs[ty][tx] = (k0 + ty < K && col < N) ? B[(k0 + ty) * N + col] : 0.0f;
    __syncthreads();
#pragma unroll
    for (int k = 0; k < BS; ++k) acc = fmaf(As[ty][k], Bs[k][tx], acc);
    __syncthreads();
  }
  if (row < M / 2 && col < N) C[row * N + col] = acc;  /* BUG: row < M */
}
