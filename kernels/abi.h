/*
 * kernlab candidate contract (fp32 matmul task)
 *
 * Write ONE CUDA C++ translation unit that computes C = A * B for row-major
 * float matrices: A is M x K, B is K x N, C is M x N.
 *
 *   extern "C" __global__ void matmul(const float* A, const float* B, float* C,
 *                                     int M, int N, int K);
 *
 * Declare the launch geometry once, at file scope:
 *
 *   KL_LAUNCH(block_x, block_y, tile_rows, tile_cols, dyn_smem_bytes);
 *
 * The harness launches grid = (ceil(N / tile_cols), ceil(M / tile_rows)) and
 * block = (block_x, block_y), with dyn_smem_bytes of dynamic shared memory
 * (for `extern __shared__` arrays). Each argument may be any integer constant
 * expression, e.g. 2 * 32 * 33 * sizeof(float). 1 <= block_x * block_y <= 1024.
 *
 * Rules:
 *  - The kernel must be correct for every M, N, K >= 1, ragged sizes included
 *    (127 x 129 x 65 is checked), not only for the target shape.
 *  - Every element of C must be written; C starts as NaN.
 *  - C must be the same bits on every run of the same inputs: reduce in a
 *    fixed order (shuffles, shared memory), not with float atomicAdd whose
 *    order varies (flagged nondeterministic).
 *  - #include is limited to: cuda_fp16.h, cuda_bf16.h, cuda_pipeline.h
 *    (cp.async: __pipeline_memcpy_async, _commit, _wait_prior), mma.h,
 *    cooperative_groups.h and cooperative_groups/reduce.h (block and
 *    tile level: this_thread_block, tiled_partition<1..32>, sync, shfl*,
 *    any/all/ballot, cg::reduce; grid, cluster and coalesced groups,
 *    memcpy_async and cuda:: are refused).
 *  - Inputs are fresh random values for every check; the result is compared
 *    with a float64 reference at fp32 tolerance.
 *
 * This header is pre-included by the harness (NVRTC --pre-include, and the
 * same for the CPU emulator); do not include it yourself.
 */
#ifndef KL_ABI_H
#define KL_ABI_H

struct kl_launch_geometry {
  int block_x, block_y, tile_rows, tile_cols, dyn_smem_bytes;
};

/* Expands to an extern "C" device constant named kl_launch that the harness
 * reads after compiling: from the cubin's symbol table, with
 * cuModuleGetGlobal on a device, or with dlsym in the CPU emulator. */
#define KL_LAUNCH(block_x, block_y, tile_rows, tile_cols, dyn_smem_bytes)      \
  extern "C" __device__ const kl_launch_geometry kl_launch = {                 \
      (int)(block_x), (int)(block_y), (int)(tile_rows), (int)(tile_cols),      \
      (int)(dyn_smem_bytes)}

#endif
