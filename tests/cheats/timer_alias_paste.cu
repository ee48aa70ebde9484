/*
 * CHEAT: timer_alias_paste.cu — clock64 built by a pasting macro called
 * through an alias (#define KL_J KL_CAT, then KL_J(clo, ck64)) and through
 * a wrapper whose arguments are its own parameters.
 *
 * Hack: the paste resolver looked for calls under the pasting macro's own
 * name, with the arguments written there: through another macro it built
 * "ab" from the wrapper's parameters, or nothing at all.
 *
 * EXPECT: compile_pass_branch
 */
#define BS 16
KL_LAUNCH(BS, BS, BS, BS, 0);
#define KL_CAT(a, b) a##b
#define KL_J KL_CAT
#define KL_W(a, b) KL_CAT(a, b)
extern "C" __global__ void matmul(const float* A, const float* B, float* C,
                                  int M, int N, int K) {
  long long t0 = KL_J(clo, ck64)() + KL_W(clo, ck64)();
  const int row = blockIdx.y * BS + threadIdx.y;
  const int col = blockIdx.x * BS + threadIdx.x;
  if (row >= M || col >= N) return;
  float acc = 0.0f;
  for (int k = 0; k < K; ++k) acc = fmaf(A[row * K + k], B[k * N + col], acc);
  if (t0 == 0) acc = 0.0f;
  C[row * N + col] = acc;
}
