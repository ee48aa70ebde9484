/*
 * policy/cuda/matmul.cu — a plain tiled GEMM, the fallback behind
 * matmul_forward / matmul_backward (and the head) when cuBLAS is not there:
 * always on the emulator, on a device only when cuBLAS cannot be loaded or
 * is switched off (PCUDA_GEMM_TILED). On a device the normal path is
 * cublasSgemm (policy/cuda/pcuda_device.c). The tiling and the contract
 * (row-major, trans_a / trans_b, alpha and beta, C not read when beta == 0)
 * are gemm_tiled.cuh's, shared with bf16.cu's variant.
 */
#include "policy/cuda/gemm_tiled.cuh"

/* Grid: (ceil(N/16), ceil(M/16)); block: (16, 16). */
extern "C" __global__ void
gemm_tiled_kernel(float *c /*(M,N) ld ldc*/, const float *a, const float *b,
                  int M, int N, int K, int lda, int ldb, int ldc, int trans_a,
                  int trans_b, float alpha, float beta) {
  gemm_tiled(c, a, b, M, N, K, lda, ldb, ldc, trans_a, trans_b, alpha, beta);
}
