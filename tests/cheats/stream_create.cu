/*
 * CHEAT: stream_create.cu — streams from device code.
 *
 * Hack: creates a non-blocking stream and launches the real work there, so
 * the events on the timed stream see almost nothing.
 *
 * EXPECT: stream_or_event,graph_or_dynamic_parallelism
 */
#define BS 16
KL_LAUNCH(BS, BS, BS, BS, 0);

__global__ void kl_work(const float* A, const float* B, float* C, int M, int N,
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
  if (blockIdx.x != 0 || blockIdx.y != 0 || threadIdx.x != 0 || threadIdx.y != 0)
    return;
  cudaStream_t s;
  cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
  kl_work<<<dim3((N + BS - 1) / BS, (M + BS - 1) / BS), dim3(BS, BS), 0, s>>>(
      A, B, C, M, N, K);
}
