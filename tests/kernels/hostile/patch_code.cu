/*
 * HOSTILE: patch_code.cu — makes a page of its own code writable and
 * executable again, the first step of patching the runner (its clock, the
 * vDSO's clock_gettime) to forge its timings. Once the candidate is loaded
 * no page may become executable (run-cpu-emu-loaded: W^X).
 * EXPECT-STATUS: killed:seccomp:mprotect
 */
#ifndef __CUDA_ARCH__
extern "C" int mprotect(void*, unsigned long, int);
static void kl_patch(void) {
  unsigned long page = (unsigned long)&kl_patch & ~4095ul;
  mprotect((void*)page, 4096, 7 /* read, write, exec */);
}
#define KL_EVIL() kl_patch()
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
