/*
 * CHEAT: inline_asm_store.cu — inline PTX store.
 *
 * Hack: st.global in asm: a store the scanner cannot bounds-check (here to
 * C, but it could be anywhere).
 *
 * EXPECT: inline_asm
 */
#define BS 16
KL_LAUNCH(BS, BS, BS, BS, 0);

extern "C" __global__ void matmul(const float* A, const float* B, float* C,
                                  int M, int N, int K) {
  const int row = blockIdx.y * BS + threadIdx.y;
  const int col = blockIdx.x * BS + threadIdx.x;
  if (row < M && col < N) {
    float acc = 0.0f;
    for (int k = 0; k < K; ++k) acc = fmaf(A[row * K + k], B[k * N + col], acc);
    asm volatile("st.global.f32 [%0], %1;" :: "l"(C + row * N + col), "f"(acc));
  }
}
