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
 * The GEMM is matmul.cu's (gemm_tiled.cuh: the same contract and tiling)
 * instantiated for bf16 operands: each element is widened to fp32 as it
 * enters the shared tile, and the products and the sum are fp32.
 */
#include "policy/cuda/gemm_tiled.cuh"

#ifndef KL_EMU_CUDA_SHIM_H
#include <cuda_bf16.h>
#endif

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
  gemm_tiled(c, a, b, M, N, K, lda, ldb, ldc, trans_a, trans_b, alpha, beta);
}
