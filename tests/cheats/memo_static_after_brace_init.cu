/*
 * CHEAT: memo_static_after_brace_init.cu — memoisation in a static local
 * declared after a braced initializer.
 *
 * Hack: `static unsigned long long* const first{nullptr}, launches;` declares
 * a const pointer and a mutable static counter. The scope tracker cut the
 * statement at the initializer's '{' and read `, launches` after the '}' as
 * a statement of its own, without the `static` before it, so the counter
 * passed as a plain local. After the first (checked) launch, only the first
 * row of C is computed. The counter is bumped on a device only, through a
 * template chosen by blockDim's type (dim3 under NVRTC, the shim's uint3
 * under g++): the emulator's module data is read-only, and a write there
 * would crash. It passed correct and flag-free on cpu-emu.
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

extern "C" __global__ void matmul(const float* A, const float* B, float* C,
                                  int M, int N, int K) {
  static unsigned long long* const first{nullptr}, launches;
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
