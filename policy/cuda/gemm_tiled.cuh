/*
 * policy/cuda/gemm_tiled.cuh — the tiled GEMM that matmul.cu (fp32
 * operands) and bf16.cu (bf16 operands) both instantiate: one source for
 * the tiling, the bounds and alpha/beta, so that the bf16 fallback differs
 * from the fp32 one only where it must, in the loads.
 *
 * Written for clarity, not speed: 16x16 tiles of A and B in shared memory,
 * one output per thread. Row-major, like the CPU code's
 * cblas_sgemm(CblasRowMajor, ...):
 *   C[m,n] = alpha * sum_k A'(m,k) B'(k,n) + beta * C[m,n]
 *   A'(m,k) = trans_a ? A[k*lda + m] : A[m*lda + k]
 *   B'(k,n) = trans_b ? B[n*ldb + k] : B[k*ldb + n]
 * With beta == 0, C is not read (it may hold NaN), as in BLAS. Each operand
 * element is widened to fp32 as it enters the shared tile (nothing to do
 * for fp32; exact for bf16), and the products and the sum are fp32, as on
 * a tensor core with fp32 accumulation (a bf16 x bf16 product is exact in
 * fp32).
 *
 * bf16 is __nv_bfloat16 on both compilers: cuda_bf16.h's under nvcc, the
 * emulator shim's (kernels/emu/cuda_shim.h: a struct holding the bits) on
 * the host compiler; only its conversion __bfloat162float is used here.
 */
#ifndef POLICY_CUDA_GEMM_TILED_CUH
#define POLICY_CUDA_GEMM_TILED_CUH

#include "policy/cuda/common.cuh"

#ifndef KL_EMU_CUDA_SHIM_H
#include <cuda_bf16.h>
#endif

#define PCUDA_GEMM_TILE 16

/* An operand element as the shared tile holds it. */
__device__ inline float gemm_operand(float v) {
  return v;
}
__device__ inline float gemm_operand(__nv_bfloat16 v) {
  return __bfloat162float(v);
}

/* The body of the tiled GEMM kernels, operands of type T (float or
 * __nv_bfloat16), C fp32. Grid: (ceil(N/16), ceil(M/16)); block: (16, 16).
 * Every thread of the block must call it (barriers). */
template <typename T>
__device__ inline void gemm_tiled(float *c /*(M,N) ld ldc*/, const T *a,
                                  const T *b, int M, int N, int K, int lda,
                                  int ldb, int ldc, int trans_a, int trans_b,
                                  float alpha, float beta) {
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
      av = trans_a ? gemm_operand(a[(size_t)ka * lda + row])
                   : gemm_operand(a[(size_t)row * lda + ka]);
    if (kb < K && col < N)
      bv = trans_b ? gemm_operand(b[(size_t)col * ldb + kb])
                   : gemm_operand(b[(size_t)kb * ldb + col]);
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

#endif
