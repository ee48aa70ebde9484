/*
 * policy/cuda/common.cuh — what every kernel of the policy's CUDA runtime
 * shares: the model's constants, block-wide reductions, dynamic shared
 * memory spelled so that both compilers accept it.
 *
 * Every kernel file is compiled twice (policy/cuda/pcuda.h says why): by
 * nvcc for sm_90 into the embedded fatbin, and by the host C++ compiler
 * against kernels/emu/cuda_shim.h into the emulator's test library. So the
 * kernels use only what the shim emulates (barriers, shuffles, plain C
 * math) and no `extern __shared__` arrays directly (the shim cannot express
 * them; PCUDA_DYN_SMEM can).
 *
 * Reductions are trees of warp shuffles in a fixed order: the result does
 * not depend on scheduling, so a run is deterministic (but sums in another
 * order than the CPU's loops: the tests' tolerances allow for that).
 */
#ifndef POLICY_CUDA_COMMON_CUH
#define POLICY_CUDA_COMMON_CUH

#include <stddef.h>
#include <stdint.h>

/* policy/model.c's RMS_EPS: the same float. */
#define PCUDA_RMS_EPS 1e-5f

#ifdef KL_EMU_CUDA_SHIM_H
#define PCUDA_DYN_SMEM(T, name) T *name = (T *)kl_emu_dyn_smem()
#else
#define PCUDA_DYN_SMEM(T, name)                                                \
  extern __shared__ __align__(16) unsigned char pcuda_dyn_smem[];              \
  T *name = (T *)pcuda_dyn_smem
#endif

/* Sum and max over the 32 lanes of a warp; every lane gets the result. */
__device__ inline float warp_sum(float v) {
  for (int off = 16; off > 0; off >>= 1)
    v += __shfl_xor_sync(0xffffffffu, v, off);
  return v;
}
__device__ inline double warp_sum_double(double v) {
  for (int off = 16; off > 0; off >>= 1)
    v += __shfl_xor_sync(0xffffffffu, v, off);
  return v;
}
__device__ inline float warp_max(float v) {
  for (int off = 16; off > 0; off >>= 1)
    v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, off));
  return v;
}

/* Block-wide reduction over a 1-D block whose size is a multiple of 32 (at
 * most 1024): warp_op (one of the warp reductions above) within each warp,
 * then over the warps' results (identity stands in for the slots of warps
 * the block does not have). Every thread of the block must call it, and
 * every thread gets the result. The first barrier keeps a previous call's
 * readers from seeing this call's partials. */
template <typename T, T (*warp_op)(T)>
__device__ inline T block_reduce(T v, T identity) {
  __shared__ T partial[32];
  int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  int nwarps = blockDim.x / 32;
  v = warp_op(v);
  __syncthreads();
  if (lane == 0) partial[warp] = v;
  __syncthreads();
  return warp_op(lane < nwarps ? partial[lane] : identity);
}
__device__ inline float block_sum(float v) {
  return block_reduce<float, warp_sum>(v, 0.0f);
}
__device__ inline double block_sum_double(double v) {
  return block_reduce<double, warp_sum_double>(v, 0.0);
}
__device__ inline float block_max(float v) {
  return block_reduce<float, warp_max>(v, -INFINITY);
}

/* The global index of this thread in a 1-D grid, in 64 bits. */
__device__ inline size_t global_index(void) {
  return (size_t)blockIdx.x * blockDim.x + threadIdx.x;
}

#endif
