/*
 * 02_coalesced.cu — global memory coalescing.
 *
 * What it adds over 01: the thread -> element mapping is swapped so that
 * threadIdx.x walks the COLUMNS of C. The 32 lanes of a warp now share one
 * row of A (a broadcast) and read 32 consecutive floats of a row of B, and
 * write 32 consecutive floats of C: every warp access is one or two 128-byte
 * transactions instead of 32.
 *
 * Launch geometry: unchanged, a 32 x 32 block (1024 threads) per 32 x 32
 * tile of C, grid = (ceil(N/32), ceil(M/32)). Out-of-range threads skip the
 * work (no barriers in this kernel).
 */

#define BS 32

KL_LAUNCH(BS, BS, BS, BS, 0);

extern "C" __global__ void matmul(const float* __restrict__ A,
                                  const float* __restrict__ B,
                                  float* __restrict__ C, int M, int N, int K) {
  const int row = blockIdx.y * BS + threadIdx.y;
  const int col = blockIdx.x * BS + threadIdx.x;  /* lanes along a row of C */
  if (row < M && col < N) {
    float acc = 0.0f;
    for (int k = 0; k < K; ++k) acc = fmaf(A[row * K + k], B[k * N + col], acc);
    C[row * N + col] = acc;
  }
}
