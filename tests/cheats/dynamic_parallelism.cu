/*
 * CHEAT: dynamic_parallelism.cu — dynamic parallelism: a child launch.
 *
 * Hack: the timed kernel only launches a child grid (tail launch) that does
 * the work after the timer has stopped.
 *
 * EXPECT: graph_or_dynamic_parallelism
 */
#define BS 16
KL_LAUNCH(1, 1, 1 << 20, 1 << 20, 0);

__global__ void kl_child(const float* A, const float* B, float* C, int M, int N,
                         int K) {
  const int row = blockIdx.y * BS + threadIdx.y;
  const int col = blockIdx.x * BS + threadIdx.x;
  if (row < M && col < N) {
    float acc = 0.0f;
    for (int k = 0; k < K; ++k) acc = fmaf(A[row * K + k], B[k * N + col], acc);
    C[row * N + col] = acc;
  }
}

extern "C" __global__ void matmul(const float* A, const float* B, float* C,
                                  int M, int N, int K) {
  kl_child<<<dim3((N + BS - 1) / BS, (M + BS - 1) / BS), dim3(BS, BS)>>>(
      A, B, C, M, N, K);
}
