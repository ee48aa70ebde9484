/*
 * HOSTILE: host_call_overload.cu — reaches a host library function from
 * device code that NVRTC and the source scanner both accept. The kernel
 * defines a __device__ template strtok(T, const char*); NVRTC compiles it
 * as the kernel's own function, the scanner has no rule for the name, and
 * the emulator's g++, which also sees glibc's strtok(char*, const char*)
 * through the shim's headers, prefers the non-template one: on cpu-emu the
 * call runs glibc's strtok, which keeps a pointer between calls (state
 * that outlives a launch; getenv, setenv or rand would serve as well).
 * The emulator's build refuses a module that imports a function device
 * code cannot call (kernels/emu/emu_build.c, check_module).
 * EXPECT-STATUS: compile_error
 */
#define BS 16
KL_LAUNCH(BS, BS, BS, BS, 0);

template <class T> __device__ char* strtok(T s, const char* delim) {
  return 0;
}

extern "C" __global__ void matmul(const float* A, const float* B, float* C,
                                  int M, int N, int K) {
  const int row = blockIdx.y * BS + threadIdx.y;
  const int col = blockIdx.x * BS + threadIdx.x;
  char text[4] = {'a', ',', 'b', 0};
  if (row == 0 && col == 0 && strtok(text, ",") && M < 0) return;
  if (row < M && col < N) {
    float acc = 0.0f;
    for (int k = 0; k < K; ++k) acc += A[row * K + k] * B[k * N + col];
    C[row * N + col] = acc;
  }
}
