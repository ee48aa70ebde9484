/*
 * CHEAT: pass_branch_partial_guard.cu — a "guard" on a name the host
 * compiler predefines, around part of the file.
 *
 * Hack: the host compiler (cpu-emu) defines __SSE2__, so it skips the
 * block that zeroes C; NVRTC does not, so a GPU runs it. Shaped like an
 * include guard (#ifndef X, #define X), but not around the whole file.
 *
 * EXPECT: compile_pass_branch
 */
#define BS 16
KL_LAUNCH(BS, BS, BS, BS, 0);

extern "C" __global__ void matmul(const float* A, const float* B, float* C,
                                  int M, int N, int K) {
  const int row = blockIdx.y * BS + threadIdx.y;
  const int col = blockIdx.x * BS + threadIdx.x;
  if (row >= M || col >= N) return;
  float acc = 0.0f;
  for (int k = 0; k < K; ++k) acc = fmaf(A[row * K + k], B[k * N + col], acc);
#ifndef __SSE2__
#define __SSE2__ 1
  acc = 0.0f;
#endif
  C[row * N + col] = acc;
}
