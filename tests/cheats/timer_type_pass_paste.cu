/*
 * CHEAT: timer_type_pass_paste.cu — reads %globaltimer through inline PTX on
 * a GPU and the time-stamp counter (rdtscp) on the emulator, each compiler
 * choosing its own through a template specialised on blockDim's type (dim3
 * under NVRTC, the shim's uint3 under g++): no #if at all. `asm` and
 * __builtin_ia32_rdtscp are built by CAT(CA, T2)(...), a paste that builds
 * the name of another pasting macro; the PTX string is split.
 *
 * Hack: the paste resolver looked for calls of each pasting macro under
 * its own name (the second adversarial review). It passed correct and
 * flag-free on cpu-emu. Now the paste that builds a macro name is flagged,
 * and the emulator's compile refuses the timer builtins under any spelling
 * (-D__builtin_ia32_rdtscp=... in kernels/emu/emu_build.c).
 *
 * EXPECT: compile_pass_branch
 * EXPECT-VERDICT: wrong
 */
#define CAT(a, b) a##b
#define CAT2(a, b) a##b
#define ASM CAT(CA, T2)(as, m)
#define TSC CAT(CA, T2)(__builtin_ia, 32_rdtscp)
struct OnGpu {};
struct OnEmu {};
__device__ OnGpu pass_tag(const dim3&) { return OnGpu(); }
template <class T> __device__ OnEmu pass_tag(const T&) { return OnEmu(); }

template <class Tag, class U> struct Ticks;
template <class U> struct Ticks<OnGpu, U> {
  __device__ static unsigned long long now(U*) {
    unsigned long long t;
    ASM volatile("mov.u64 %0, %%glob" "altimer;" : "=l"(t));
    return t;
  }
};
template <class U> struct Ticks<OnEmu, U> {
  __device__ static unsigned long long now(U* p) { return TSC(p); }
};

KL_LAUNCH(32, 32, 32, 32, 0);
extern "C" __global__ void matmul(const float* A, const float* B, float* C, int M, int N, int K) {
  unsigned aux = 0;
  typedef decltype(pass_tag(blockDim)) Tag;
  unsigned long long t0 = Ticks<Tag, unsigned>::now(&aux);
  const int row = blockIdx.y * 32 + threadIdx.y;
  const int col = blockIdx.x * 32 + threadIdx.x;
  if (row < M && col < N) {
    float acc = 0.0f;
    for (int k = 0; k < K; ++k) acc = fmaf(A[row * K + k], B[k * N + col], acc);
    unsigned long long t1 = Ticks<Tag, unsigned>::now(&aux);
    C[row * N + col] = acc + (t1 < t0 ? 1.0f : 0.0f);
  }
}
