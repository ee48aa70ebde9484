/*
 * HOSTILE: write_file.cu — creates a file on the host.
 *
 * The host-only branch is invisible to NVRTC (__CUDACC_RTC__ is defined
 * there), so the kernel compiles for sm_90 as an honest one; on cpu-emu the
 * branch is native code. The sandbox's run-cpu-emu profile must stop it.
 * Nothing outside may be touched.
 * EXPECT-STATUS: killed:seccomp:openat | killed:seccomp:open
 */
#ifndef __CUDACC_RTC__
extern "C" int open(const char*, int, ...);
#define KL_EVIL() open("/tmp/kernlab_hostile_write", 0101, 0644)
#else
#define KL_EVIL()
#endif

#define BS 16
KL_LAUNCH(BS, BS, BS, BS, 0);

extern "C" __global__ void matmul(const float* A, const float* B, float* C,
                                  int M, int N, int K) {
  const int row = blockIdx.y * BS + threadIdx.y;
  const int col = blockIdx.x * BS + threadIdx.x;
  if (row == 0 && col == 0) KL_EVIL();
  if (row < M && col < N) {
    float acc = 0.0f;
    for (int k = 0; k < K; ++k) acc += A[row * K + k] * B[k * N + col];
    C[row * N + col] = acc;
  }
}
