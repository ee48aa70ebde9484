/*
 * 01_naive.cu — the baseline of the SGEMM ladder.
 *
 * What it adds: nothing; one thread computes one element of C with a plain
 * dot product over K, reading A and B straight from global memory.
 *
 * Launch geometry: a 32 x 32 block (1024 threads) owns a 32 x 32 tile of C,
 * so tile_rows = tile_cols = 32 and the harness launches
 * grid = (ceil(N/32), ceil(M/32)). Deliberately (as in the classic worklog)
 * threadIdx.x walks the ROWS of C: consecutive lanes of a warp read A rows
 * that are K floats apart and write C elements N floats apart, so nothing is
 * coalesced. Step 02 fixes exactly that. Threads outside M x N do nothing;
 * there is no barrier, so they may simply skip the work.
 */

#define BS 32

KL_LAUNCH(BS, BS, BS, BS, 0);

extern "C" __global__ void matmul(const float* A, const float* B, float* C,
                                  int M, int N, int K) {
  const int row = blockIdx.y * BS + threadIdx.x;  /* uncoalesced on purpose */
  const int col = blockIdx.x * BS + threadIdx.y;
  if (row < M && col < N) {
    float acc = 0.0f;
    for (int k = 0; k < K; ++k) acc = fmaf(A[row * K + k], B[k * N + col], acc);
    C[row * N + col] = acc;
  }
}
