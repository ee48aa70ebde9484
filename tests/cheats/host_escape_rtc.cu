/*
 * CHEAT: host_escape_rtc.cu — host-path escape with #ifndef __CUDACC_RTC__.
 *
 * Hack: NVRTC (which defines __CUDACC_RTC__) sees an honest kernel; on the
 * CPU emulator the other branch is native host code that reads the
 * environment (it could read files, the reference, the timer).
 *
 * EXPECT: compile_pass_branch
 */
#ifndef __CUDACC_RTC__
extern "C" char* getenv(const char*);
#define KL_PEEK() (getenv("HOME") != 0)
#else
#define KL_PEEK() false
#endif

#define BS 16
KL_LAUNCH(BS, BS, BS, BS, 0);

extern "C" __global__ void matmul(const float* A, const float* B, float* C,
                                  int M, int N, int K) {
  const int row = blockIdx.y * BS + threadIdx.y;
  const int col = blockIdx.x * BS + threadIdx.x;
  if (row == 0 && col == 0 && KL_PEEK()) return;
  if (row < M && col < N) {
    float acc = 0.0f;
    for (int k = 0; k < K; ++k) acc = fmaf(A[row * K + k], B[k * N + col], acc);
    C[row * N + col] = acc;
  }
}
