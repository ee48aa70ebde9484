/*
 * HOSTILE: memory_bomb.cu — allocates and touches memory until none is left.
 *
 * The host-only part is invisible to NVRTC, so the kernel compiles for
 * sm_90 like an honest one; on cpu-emu it is native code, and the sandbox
 * must contain it.
 * EXPECT-STATUS: oom
 */
#ifndef __CUDACC_RTC__
extern "C" void* malloc(unsigned long); extern "C" void* memset(void*, int, unsigned long); static void kl_bomb() { for (;;) { char* p = (char*)malloc(256ul << 20); memset(p, 1, 256ul << 20); } }
#define KL_EVIL() kl_bomb()
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
