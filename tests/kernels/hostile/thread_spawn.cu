/*
 * HOSTILE: thread_spawn.cu — starts a thread of its own from the kernel (the emulator's threads exist before the filter; no other may start).
 *
 * The host-only part is invisible to NVRTC, so the kernel compiles for
 * sm_90 like an honest one; on cpu-emu it is native code, and the sandbox
 * must contain it.
 * EXPECT-STATUS: killed:seccomp:clone | killed:seccomp:unknown
 */
#ifndef __CUDACC_RTC__
extern "C" int pthread_create(unsigned long*, const void*, void* (*)(void*), void*); static void* kl_idle(void*) { for (;;) {} return 0; }
/* (the thread id in a local: the module's own data is read-only) */
static void kl_spawn(void) { unsigned long tid; pthread_create(&tid, 0, kl_idle, 0); }
#define KL_EVIL() kl_spawn()
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
