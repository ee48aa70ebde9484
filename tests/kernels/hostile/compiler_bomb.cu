/*
 * HOSTILE: compiler_bomb.cu — exponential template instantiation: 2^28
 * distinct X<n, L<...>> types. NVRTC works on it until it runs out of time
 * or memory; the compile worker's deadline and RLIMIT_AS end it.
 * EXPECT-STATUS: compile_timeout | oom
 */
template <class... T> struct L {};
template <int N, class T> struct X {
  static const int v = X<N - 1, L<T, int> >::v + X<N - 1, L<T, char> >::v;
};
template <class T> struct X<0, T> {
  static const int v = 1;
};

KL_LAUNCH(1, 1, 1, 1, 0);

extern "C" __global__ void matmul(const float* A, const float* B, float* C,
                                  int M, int N, int K) {
  C[0] = (float)X<28, int>::v;
}
