/*
 * HOSTILE: scribble_outputs.cu — a thread started from a static initialiser
 * (threads may still start while the module loads) maps the run worker's
 * outputs memfd (descriptor 5) and keeps rewriting it, during the runs and
 * after the reply: the outputs the supervisor copies then differ from what
 * the worker checksummed, or are wrong. Either way not `ok`, and the next
 * candidate's outputs live in another memfd.
 * EXPECT-STATUS: run_error | wrong
 */
#ifndef __CUDA_ARCH__
extern "C" int pthread_create(unsigned long *, const void *, void *(*)(void *),
                              void *);
extern "C" void *mmap(void *, unsigned long, int, int, int, long);
static void *kl_scribble(void *) {
  volatile float *p = (volatile float *)mmap(0, 4096, 3 /* read, write */,
                                             1 /* MAP_SHARED */, 5, 0);
  if (p == (volatile float *)-1) return 0;
  for (unsigned i = 0;; i++)
    p[i % 1024] = (float)i;
  return 0;
}
static unsigned long kl_tid;
static int kl_evil = pthread_create(&kl_tid, 0, kl_scribble, 0);
#endif

#define BS 16
KL_LAUNCH(BS, BS, BS, BS, 0);

extern "C" __global__ void matmul(const float *A, const float *B, float *C,
                                  int M, int N, int K) {
  const int row = blockIdx.y * BS + threadIdx.y;
  const int col = blockIdx.x * BS + threadIdx.x;
  if (row < M && col < N) {
    float acc = 0.0f;
    for (int k = 0; k < K; ++k)
      acc += A[row * K + k] * B[k * N + col];
    C[row * N + col] = acc;
  }
}
