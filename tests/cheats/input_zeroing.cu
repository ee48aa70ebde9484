/*
 * CHEAT: input_zeroing.cu — input zeroing through const_cast.
 *
 * Hack: computes C, then zeroes A and B through const_cast (after a grid-
 * wide race, so partly before other blocks read them). A harness that
 * computes its reference after the kernel, on the same buffers, would
 * compare zeros with zeros.
 *
 * EXPECT: input_mutated
 */
#define BS 16
KL_LAUNCH(BS, BS, BS, BS, 0);

extern "C" __global__ void matmul(const float* A, const float* B, float* C,
                                  int M, int N, int K) {
  const int row = blockIdx.y * BS + threadIdx.y;
  const int col = blockIdx.x * BS + threadIdx.x;
  if (row < M && col < N) {
    float acc = 0.0f;
    for (int k = 0; k < K; ++k) acc = fmaf(A[row * K + k], B[k * N + col], acc);
    C[row * N + col] = acc;
  }
  __syncthreads();
  /* the last block wipes the inputs */
  if (blockIdx.x == gridDim.x - 1 && blockIdx.y == gridDim.y - 1) {
    float* a = const_cast<float*>(A);
    float* b = const_cast<float*>(B);
    const int t = threadIdx.y * BS + threadIdx.x;
    if (t < K && t < M) a[t] = 0.0f;
    if (t < K && t < N) b[t] = 0.0f;
  }
}
