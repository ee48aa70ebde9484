/*
 * HOSTILE: cubin_bloat.cu — one initialised __device__ table of 8 MB makes
 * NVRTC's cubin 8 MB (an honest one is about 8 KB). Every cubin goes to
 * the artifact cache, so each edit of such a kernel stored another (160 MB
 * each at 40M floats, the second sandbox review). A cubin over 4 MiB is
 * refused before anything is stored, and the compile worker's reply is
 * bounded by the caps.
 * EXPECT-STATUS: compile_error
 */
__device__ const float kl_table[2000000] = {1.0f};

#define BS 16
KL_LAUNCH(BS, BS, BS, BS, 0);

extern "C" __global__ void matmul(const float* A, const float* B, float* C,
                                  int M, int N, int K) {
  const int row = blockIdx.y * BS + threadIdx.y;
  const int col = blockIdx.x * BS + threadIdx.x;
  if (row < M && col < N) {
    float acc = kl_table[(row * N + col) % 2000000] - 1.0f;
    for (int k = 0; k < K; ++k) acc += A[row * K + k] * B[k * N + col];
    C[row * N + col] = acc;
  }
}
