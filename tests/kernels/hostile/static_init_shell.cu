/*
 * HOSTILE: static_init_shell.cu — runs a shell command from a static
 * initialiser in the host-only path (#ifndef __CUDA_ARCH__): NVRTC never
 * compiles it, the emulator's host compile does, and it runs when the module
 * is loaded — before any kernel launch, so the loader itself must be inside
 * the sandbox.
 * The emulator's build refuses a module that runs code of its own while it
 * loads (kl_elf_load_time_code), so it never gets that far; were it
 * loaded, the loader runs inside the sandbox (run-cpu-emu), whose filter
 * kills it (thread_spawn.cu and spawn.cu meet that wall at launch time).
 * EXPECT-STATUS: compile_error
 */
#ifndef __CUDA_ARCH__
extern "C" int system(const char*);
static int kl_evil = system("touch /tmp/kernlab_hostile_static");
#endif

#define BS 16
KL_LAUNCH(BS, BS, BS, BS, 0);

extern "C" __global__ void matmul(const float* A, const float* B, float* C,
                                  int M, int N, int K) {
  const int row = blockIdx.y * BS + threadIdx.y;
  const int col = blockIdx.x * BS + threadIdx.x;
  if (row < M && col < N) {
    float acc = 0.0f;
    for (int k = 0; k < K; ++k) acc += A[row * K + k] * B[k * N + col];
    C[row * N + col] = acc;
  }
}
