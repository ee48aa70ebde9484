/*
 * HOSTILE: static_init_thread.cu — starts a thread of its own from a static
 * initialiser, while the module loads (before any launch). Such a thread
 * would run beside the runner between launches, free to rewrite its
 * timings and outputs; run-cpu-emu lets no thread start at all (the
 * emulator's exist before the filter).
 * The emulator's build refuses a module that runs code of its own while it
 * loads (kl_elf_load_time_code), so it never gets that far; were it
 * loaded, the loader runs inside the sandbox (run-cpu-emu), whose filter
 * kills it (thread_spawn.cu and spawn.cu meet that wall at launch time).
 * EXPECT-STATUS: compile_error
 */
#ifndef __CUDA_ARCH__
extern "C" int pthread_create(unsigned long *, const void *, void *(*)(void *),
                              void *);
static void *kl_idle(void *) {
  for (;;) {
  }
  return 0;
}
static unsigned long kl_tid;
static int kl_evil = pthread_create(&kl_tid, 0, kl_idle, 0);
#endif

#define BS 16
KL_LAUNCH(BS, BS, BS, BS, 0);

extern "C" __global__ void matmul(const float *A, const float *B, float *C,
                                  int M, int N, int K) {
  const int row = blockIdx.y * BS + threadIdx.y;
  const int col = blockIdx.x * BS + threadIdx.x;
  if (row < M && col < N) {
    float acc = 0.0f;
    for (int k = 0; k < K; ++k) acc += A[row * K + k] * B[k * N + col];
    C[row * N + col] = acc;
  }
}
