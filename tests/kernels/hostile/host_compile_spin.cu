/*
 * HOSTILE: host_compile_spin.cu — compile-time work that only the host
 * compiler sees.
 *
 * NVRTC compiles a trivial kernel (__CUDACC_RTC__ hides the constexpr loop
 * from it); the emulator's host compiler evaluates 400 x 4M iterations. The
 * eval's --compile-timeout must hold for the host compile as for NVRTC.
 * EXPECT-STATUS: compile_timeout
 */
#ifndef __CUDACC_RTC__
constexpr long kl_spin(long seed) {
  long s = seed;
  for (long i = 0; i < 4000000; ++i) s += i ^ seed;
  return s;
}
template <int N> struct S { static constexpr long v = kl_spin(N) + S<N - 1>::v; };
template <> struct S<0> { static constexpr long v = 0; };
#define KL_WORK S<400>::v
#else
#define KL_WORK 1
#endif

#define BS 16
KL_LAUNCH(BS, BS, BS, BS, 0);

extern "C" __global__ void matmul(const float* A, const float* B, float* C,
                                  int M, int N, int K) {
  const int row = blockIdx.y * BS + threadIdx.y;
  const int col = blockIdx.x * BS + threadIdx.x;
  if (row < M && col < N) {
    float acc = 0.0f;
    for (int k = 0; k < K; ++k) acc = fmaf(A[row * K + k], B[k * N + col], acc);
    C[row * N + col] = acc * (KL_WORK > 0);
  }
}
