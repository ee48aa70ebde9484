/*
 * CHEAT: device_new.cu — operator new in device code.
 *
 * Hack: a private heap buffer (new float[...]) that outlives the launch.
 *
 * EXPECT: device_malloc
 */
#define BS 16
KL_LAUNCH(BS, BS, BS, BS, 0);

extern "C" __global__ void matmul(const float* A, const float* B, float* C,
                                  int M, int N, int K) {
  const int row = blockIdx.y * BS + threadIdx.y;
  const int col = blockIdx.x * BS + threadIdx.x;
  float* scratch = nullptr;
  if (row == 0 && col == 0) scratch = new float[16];
  (void)scratch;
  if (row < M && col < N) {
    float acc = 0.0f;
    for (int k = 0; k < K; ++k) acc = fmaf(A[row * K + k], B[k * N + col], acc);
    C[row * N + col] = acc;
  }
}
