/*
 * CHEAT: memo_paren_declarator_brace.cu — memoisation in a file-scope
 * __device__ variable with its name in parentheses and a braced
 * initializer.
 *
 * Hack: `__device__ Count (launches){0};` reads like the definition of a
 * function named Count with one unnamed parameter; the scanner took it so
 * (a function definition at file scope is neither state nor a prototype)
 * and raised nothing. `E() memo{0}`, E an empty macro, read the same way.
 * After the first (checked) launch, only the first row of C is computed.
 * The counter is bumped on a device only, through a template chosen by
 * blockDim's type (dim3 under NVRTC, the shim's uint3 under g++): the
 * emulator's module data is read-only, and a write there would crash. It
 * passed correct and flag-free on cpu-emu.
 *
 * EXPECT: mutable_device_state
 */
#define BS 16
KL_LAUNCH(BS, BS, BS, BS, 0);
struct OnGpu {};
struct OnEmu {};
__device__ OnGpu pass_tag(const dim3&) { return OnGpu(); }
template <class T> __device__ OnEmu pass_tag(const T&) { return OnEmu(); }
template <class Tag> struct Bump {
  __device__ static void at(unsigned long long*) {}
};
template <> struct Bump<OnGpu> {
  __device__ static void at(unsigned long long* p) { ++*p; }
};

typedef unsigned long long Count;
__device__ Count (launches){0};

extern "C" __global__ void matmul(const float* A, const float* B, float* C,
                                  int M, int N, int K) {
  const int row = blockIdx.y * BS + threadIdx.y;
  const int col = blockIdx.x * BS + threadIdx.x;
  if (launches > 0 && row > 0) return;
  if (row < M && col < N) {
    float acc = 0.0f;
    for (int k = 0; k < K; ++k) acc = fmaf(A[row * K + k], B[k * N + col], acc);
    C[row * N + col] = acc;
  }
  if (row == 0 && col == 0) Bump<decltype(pass_tag(blockDim))>::at(&launches);
}
