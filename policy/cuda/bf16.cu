/*
 * policy/cuda/bf16.cu — the kernels of the bf16 path (pcuda.h, "bf16 with
 * fp32 master weights"): the cast that rounds an fp32 tensor to bf16 (the
 * weights' bf16 copy after each update, and every GEMM operand that is an
 * activation or an activation gradient), and the bf16 variant of the tiled
 * GEMM of matmul.cu, the fallback for cublasGemmEx (bf16 A and B, fp32 C,
 * fp32 compute) where cuBLAS is not there: always on the emulator.
 *
 * bf16 is __nv_bfloat16 on both compilers: cuda_bf16.h's under nvcc, the
 * emulator shim's (kernels/emu/cuda_shim.h: a struct holding the bits)
 * on the host compiler. Only the two conversions both provide are used:
 * __float2bfloat16_rn (round to nearest even, NaN stays NaN) and
 * __bfloat162float (exact).
 *
 * The GEMM keeps matmul.cu's contract and tiling (row-major; trans_a /
 * trans_b; C not read when beta == 0) and differs only in its loads: each
 * bf16 element is widened to fp32 as it enters the shared tile, and the
 * products and the sum are fp32, as on a tensor core with fp32
 * accumulation (a bf16 x bf16 product is exact in fp32). It is a copy of
 * gemm_tiled_kernel rather than a template of it, so that the fp32 kernel
 * stays byte for byte what the fp32 path was tested with.
 */
#include "policy/cuda/common.cuh"

#ifndef KL_EMU_CUDA_SHIM_H
#include <cuda_bf16.h>
#endif

#define PCUDA_GEMM_BF16_TILE 16

/* out[i] = bf16(in[i]) for i < n, round to nearest even. One thread per
 * element, 1-D grid. */
extern "C" __global__ void cast_bf16_kernel(__nv_bfloat16 *out /*(n)*/,
                                            const float *in /*(n)*/, size_t n) {
  size_t i = global_index();
  if (i < n) out[i] = __float2bfloat16_rn(in[i]);
}

/* Grid: (ceil(N/16), ceil(M/16)); block: (16, 16). matmul.cu's contract
 * with bf16 A and B and fp32 C:
 *   C[m,n] = alpha * sum_k A'(m,k) B'(k,n) + beta * C[m,n]  (fp32 sums) */
extern "C" __global__ void
gemm_tiled_bf16_kernel(float *c /*(M,N) ld ldc*/, const __nv_bfloat16 *a,
                       const __nv_bfloat16 *b, int M, int N, int K, int lda,
                       int ldb, int ldc, int trans_a, int trans_b, float alpha,
                       float beta) {
  __shared__ float a_tile16[PCUDA_GEMM_BF16_TILE][PCUDA_GEMM_BF16_TILE + 1];
  __shared__ float b_tile16[PCUDA_GEMM_BF16_TILE][PCUDA_GEMM_BF16_TILE + 1];
  int tx = threadIdx.x, ty = threadIdx.y;
  int row = blockIdx.y * PCUDA_GEMM_BF16_TILE + ty;
  int col = blockIdx.x * PCUDA_GEMM_BF16_TILE + tx;
  float acc = 0.0f;
  for (int k0 = 0; k0 < K; k0 += PCUDA_GEMM_BF16_TILE) {
    /* a_tile16[ty][tx] = A'(row, k0+tx); b_tile16[ty][tx] = B'(k0+ty, col),
     * widened to fp32 */
    int ka = k0 + tx, kb = k0 + ty;
    float av = 0.0f, bv = 0.0f;
    if (row < M && ka < K)
      av = __bfloat162float(trans_a ? a[(size_t)ka * lda + row]
                                    : a[(size_t)row * lda + ka]);
    if (kb < K && col < N)
      bv = __bfloat162float(trans_b ? b[(size_t)col * ldb + kb]
                                    : b[(size_t)kb * ldb + col]);
    a_tile16[ty][tx] = av;
    b_tile16[ty][tx] = bv;
    __syncthreads();
    for (int kk = 0; kk < PCUDA_GEMM_BF16_TILE; kk++)
      acc += a_tile16[ty][kk] * b_tile16[kk][tx];
    __syncthreads();
  }
  if (row < M && col < N) {
    float *out = c + (size_t)row * ldc + col;
    *out = beta == 0.0f ? alpha * acc : alpha * acc + beta * *out;
  }
}
