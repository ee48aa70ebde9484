/*
 * CHEAT: memo_static_member.cu — memoisation through a static data member.
 *
 * Hack: a struct's static member counts launches (device state in disguise).
 *
 * EXPECT: mutable_device_state
 */
#define BS 16
KL_LAUNCH(BS, BS, BS, BS, 0);

struct Memo {
  static int calls;
};
__device__ int Memo::calls;

extern "C" __global__ void matmul(const float* A, const float* B, float* C,
                                  int M, int N, int K) {
  const int row = blockIdx.y * BS + threadIdx.y;
  const int col = blockIdx.x * BS + threadIdx.x;
  if (Memo::calls > 1000000) return;
  if (row < M && col < N) {
    float acc = 0.0f;
    for (int k = 0; k < K; ++k) acc = fmaf(A[row * K + k], B[k * N + col], acc);
    C[row * N + col] = acc;
  }
  if (row == 0 && col == 0) Memo::calls++;
}
