/*
 * policy/cuda/pack.cu — the glue around a candidate's matmul (the lab's
 * --policy-matmul; pcuda.h, pcuda_set_matmul). A candidate of the contract
 * (kernels/abi.h) computes only C = A·B with contiguous row-major operands;
 * the model's GEMMs need op(A) = A^T or a leading dimension wider than the
 * row, and C = alpha·product + beta·C. pcuda_gemm packs an operand that is
 * not already contiguous with pack_matrix_kernel, runs the candidate into a
 * scratch, and folds the product into C with scale_add_kernel.
 *
 * Plain and coalesced enough: the transpose goes through a 32x32 tile in
 * shared memory (padded against bank conflicts), so both the read and the
 * write run along rows. Never on the default path: without a candidate
 * pcuda_gemm calls cuBLAS or the tiled kernel directly.
 */
#include "policy/cuda/common.cuh"

#define PCUDA_PACK_TILE 32
#define PCUDA_PACK_ROWS 8 /* block (32, 8): each thread moves 4 elements */

/* dst (rows, cols), contiguous, = op(src):
 *   trans 0: dst[r][c] = src[r*ld + c]   (src is (rows, >= cols))
 *   trans 1: dst[r][c] = src[c*ld + r]   (src is (cols, >= rows))
 * Grid: (ceil(cols/32), ceil(rows/32)); block: (32, 8). */
extern "C" __global__ void pack_matrix_kernel(float *dst /*(rows,cols)*/,
                                              const float *src, int rows,
                                              int cols, int ld, int trans) {
  __shared__ float tile[PCUDA_PACK_TILE][PCUDA_PACK_TILE + 1];
  int r0 = blockIdx.y * PCUDA_PACK_TILE, c0 = blockIdx.x * PCUDA_PACK_TILE;
  int tx = threadIdx.x, ty = threadIdx.y;
  if (!trans) {
    for (int i = ty; i < PCUDA_PACK_TILE; i += PCUDA_PACK_ROWS) {
      int r = r0 + i, c = c0 + tx;
      if (r < rows && c < cols)
        dst[(size_t)r * cols + c] = src[(size_t)r * ld + c];
    }
    return;
  }
  /* tile[j][i] = src row c0+j (a column of dst), element r0+i: the read
   * runs along src's rows, the write along dst's */
  for (int j = ty; j < PCUDA_PACK_TILE; j += PCUDA_PACK_ROWS) {
    int c = c0 + j, r = r0 + tx;
    if (c < cols && r < rows) tile[j][tx] = src[(size_t)c * ld + r];
  }
  __syncthreads();
  for (int i = ty; i < PCUDA_PACK_TILE; i += PCUDA_PACK_ROWS) {
    int r = r0 + i, c = c0 + tx;
    if (r < rows && c < cols) dst[(size_t)r * cols + c] = tile[tx][i];
  }
}

/* c[m*ldc + n] = alpha * t[m*N + n] + beta * c[m*ldc + n] for the M x N
 * product t; c is not read when beta == 0 (BLAS's rule: it may hold NaN).
 * One thread per element of t. */
extern "C" __global__ void scale_add_kernel(float *c /*(M,N) ld ldc*/,
                                            const float *t /*(M,N)*/, int M,
                                            int N, int ldc, float alpha,
                                            float beta) {
  size_t idx = global_index();
  if (idx >= (size_t)M * N) return;
  size_t m = idx / N, n = idx % N;
  float *out = c + m * ldc + n;
  *out = beta == 0.0f ? alpha * t[idx] : alpha * t[idx] + beta * *out;
}

/* dst[i] = |src[i]| for n elements: the operands of the GEMM whose product
 * bounds a candidate's rounding error when its first call of a shape is
 * checked (pcuda_runtime.c, mm_compare). One thread per element. */
extern "C" __global__ void abs_kernel(float *dst, const float *src, size_t n) {
  size_t idx = global_index();
  if (idx < n) dst[idx] = fabsf(src[idx]);
}
