/*
 * policy/cuda/matmul.cu — a plain tiled GEMM, the fallback behind
 * matmul_forward / matmul_backward (and the head) when cuBLAS is not there:
 * always on the emulator, on a device only when cuBLAS cannot be loaded or
 * is switched off (PCUDA_GEMM_TILED). On a device the normal path is
 * cublasSgemm (policy/cuda/pcuda_device.c). It is written for clarity, not
 * speed: 16x16 tiles of A and B in shared memory, one output per thread.
 *
 * Row-major, like the CPU code's cblas_sgemm(CblasRowMajor, ...):
 *   C[m,n] = alpha * sum_k A'(m,k) B'(k,n) + beta * C[m,n]
 *   A'(m,k) = trans_a ? A[k*lda + m] : A[m*lda + k]
 *   B'(k,n) = trans_b ? B[n*ldb + k] : B[k*ldb + n]
 * With beta == 0, C is not read (it may hold NaN), as in BLAS.
 */
#include "policy/cuda/common.cuh"

#define PCUDA_GEMM_TILE 16

/* Grid: (ceil(N/16), ceil(M/16)); block: (16, 16). */
extern "C" __global__ void
gemm_tiled_kernel(float *c /*(M,N) ld ldc*/, const float *a, const float *b,
                  int M, int N, int K, int lda, int ldb, int ldc, int trans_a,
                  int trans_b, float alpha, float beta) {
  __shared__ float a_tile[PCUDA_GEMM_TILE][PCUDA_GEMM_TILE + 1];
  __shared__ float b_tile[PCUDA_GEMM_TILE][PCUDA_GEMM_TILE + 1];
  int tx = threadIdx.x, ty = threadIdx.y;
  int row = blockIdx.y * PCUDA_GEMM_TILE + ty;
  int col = blockIdx.x * PCUDA_GEMM_TILE + tx;
  float acc = 0.0f;
  for (int k0 = 0; k0 < K; k0 += PCUDA_GEMM_TILE) {
    /* a_tile[ty][tx] = A'(row, k0+tx); b_tile[ty][tx] = B'(k0+ty, col) */
    int ka = k0 + tx, kb = k0 + ty;
    float av = 0.0f, bv = 0.0f;
    if (row < M && ka < K)
      av = trans_a ? a[(size_t)ka * lda + row] : a[(size_t)row * lda + ka];
    if (kb < K && col < N)
      bv = trans_b ? b[(size_t)col * ldb + kb] : b[(size_t)kb * ldb + col];
    a_tile[ty][tx] = av;
    b_tile[ty][tx] = bv;
    __syncthreads();
    for (int kk = 0; kk < PCUDA_GEMM_TILE; kk++)
      acc += a_tile[ty][kk] * b_tile[kk][tx];
    __syncthreads();
  }
  if (row < M && col < N) {
    float *out = c + (size_t)row * ldc + col;
    *out = beta == 0.0f ? alpha * acc : alpha * acc + beta * *out;
  }
}
