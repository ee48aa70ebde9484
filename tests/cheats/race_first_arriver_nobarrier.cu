/*
 * CHEAT: race_first_arriver_nobarrier.cu — race_first_arriver.cu without
 * any barrier, so the emulator runs each thread as a plain call, start to
 * end: the first thread of a block stages a whole row strip of A and
 * column strip of B and marks them with the block's number, and every
 * later thread finds the mark and reads them (4 times faster than honest
 * shared-memory tiling on the emulator, scored correct and unflagged; the
 * second sandbox review). On a GPU the other threads read the strips
 * before they are written. Caught as race_first_arriver.cu is.
 *
 * EXPECT: nondeterministic
 */
#define BS 16
#define KMAX 256
KL_LAUNCH(BS, BS, BS, BS, 0);

extern "C" __global__ void matmul(const float* A, const float* B, float* C,
                                  int M, int N, int K) {
  __shared__ float As[BS][KMAX];
  __shared__ float Bs[KMAX][BS];
  __shared__ int mark;
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int row0 = blockIdx.y * BS, col0 = blockIdx.x * BS;
  const int blk = blockIdx.y * gridDim.x + blockIdx.x + 1;
  if (K > KMAX) { /* the strips do not fit: the plain product */
    if (row0 + ty < M && col0 + tx < N) {
      float acc = 0.0f;
      for (int k = 0; k < K; k++)
        acc += A[(row0 + ty) * K + k] * B[k * N + col0 + tx];
      C[(row0 + ty) * N + col0 + tx] = acc;
    }
    return;
  }
  if (mark != blk) {
    for (int i = 0; i < BS; i++)
      for (int k = 0; k < K; k++) {
        As[i][k] = row0 + i < M ? A[(row0 + i) * K + k] : 0.0f;
        Bs[k][i] = col0 + i < N ? B[k * N + col0 + i] : 0.0f;
      }
    mark = blk;
  }
  if (row0 + ty < M && col0 + tx < N) {
    float acc = 0.0f;
    for (int k = 0; k < K; k++)
      acc += As[ty][k] * Bs[k][tx];
    C[(row0 + ty) * N + col0 + tx] = acc;
  }
}
