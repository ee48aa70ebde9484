/*
 * HOSTILE: scribble_outputs.cu — maps the run worker's outputs memfd
 * (descriptor 5) from inside the kernel and overwrites what the runner
 * stored there after earlier launches. A candidate can only spoil its own
 * outputs that way (they are checked as the supervisor copies them, and
 * the next candidate's live in another memfd): it is judged wrong. It
 * cannot keep scribbling after its launches either: no thread of its own
 * may start (see thread_spawn.cu).
 * EXPECT-STATUS: wrong
 */
#ifndef __CUDA_ARCH__
extern "C" void *mmap(void *, unsigned long, int, int, int, long);
static void kl_scribble(void) {
  float *p = (float *)mmap(0, 4096, 3 /* read, write */, 1 /* MAP_SHARED */,
                           5, 0);
  if (p == (float *)-1) return;
  for (int i = 0; i < 1024; i++) p[i] = 12345.0f;
}
#define KL_EVIL() kl_scribble()
#else
#define KL_EVIL()
#endif

#define BS 16
KL_LAUNCH(BS, BS, BS, BS, 0);

extern "C" __global__ void matmul(const float *A, const float *B, float *C,
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
