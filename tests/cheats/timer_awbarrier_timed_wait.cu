/*
 * CHEAT: timer_awbarrier_timed_wait.cu — a clock through cuda_pipeline.h.
 *
 * Hack: cuda_pipeline.h is allowed for its cp.async primitives, and under
 * NVRTC it brings cuda_awbarrier.h, whose awbarrier::timed_wait spins on
 * clock64 for at most N cycles. A barrier that one thread never reaches
 * turns it into a timer: how long the wait took says whether launches come
 * back to back (a timing loop). No clock is named in the file.
 *
 * EXPECT: timer_read
 */
#include <cuda_pipeline.h>

#define BS 16
KL_LAUNCH(BS, BS, BS, BS, 0);

extern "C" __global__ void matmul(const float* A, const float* B, float* C,
                                  int M, int N, int K) {
  __shared__ nvcuda::experimental::awbarrier bar;
  const int row = blockIdx.y * BS + threadIdx.y;
  const int col = blockIdx.x * BS + threadIdx.x;
  if (threadIdx.x == 0 && threadIdx.y == 0) nvcuda::experimental::init(&bar, 2);
  __syncthreads();
  const bool quick = bar.timed_wait(bar.arrive(), 1000);
  if (quick && row == 0 && col == 0) return;
  if (row < M && col < N) {
    float acc = 0.0f;
    for (int k = 0; k < K; ++k) acc = fmaf(A[row * K + k], B[k * N + col], acc);
    C[row * N + col] = acc;
  }
}
