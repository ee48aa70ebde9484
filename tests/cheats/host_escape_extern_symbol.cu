/*
 * CHEAT: host_escape_extern_symbol.cu — reaches into the harness through an extern symbol.
 *
 * Hack: on cpu-emu the kernel is a shared object loaded into the run worker,
 * so an extern declaration resolves against the worker's own symbols (here
 * the float64 reference routine). Host-only code: flagged before it can
 * link.
 *
 * EXPECT: compile_pass_branch
 */
extern "C" void kl_reference(const float* A, const float* B, double* R,
                             double* S, int M, int N, int K);

#define BS 16
KL_LAUNCH(BS, BS, BS, BS, 0);

extern "C" __global__ void matmul(const float* A, const float* B, float* C,
                                  int M, int N, int K) {
  const int row = blockIdx.y * BS + threadIdx.y;
  const int col = blockIdx.x * BS + threadIdx.x;
  if (row < M && col < N) {
    float acc = 0.0f;
    for (int k = 0; k < K; ++k) acc = fmaf(A[row * K + k], B[k * N + col], acc);
    C[row * N + col] = acc;
  }
}
