/*
 * policy/cuda/kernel_list.h — every kernel of policy/cuda/kernels.cu, by
 * name, as an X-macro: the host side turns it into an enum of kernel ids
 * (pcuda_internal.h), the device backend into the names it looks up with
 * cuModuleGetFunction, and the emulator backend into a table of
 * trampolines (emu.cpp). Also the launch constants the host and a kernel
 * must agree on. Internal to policy/cuda/.
 */
#ifndef POLICY_CUDA_KERNEL_LIST_H
#define POLICY_CUDA_KERNEL_LIST_H

#define PCUDA_KERNEL_LIST(X)                                                   \
  X(embedding_forward_kernel)                                                  \
  X(embedding_backward_kernel)                                                 \
  X(rmsnorm_forward_kernel)                                                    \
  X(rmsnorm_backward_kernel)                                                   \
  X(rmsnorm_backward_dweight_kernel)                                           \
  X(rmsnorm_backward_dweight_sum_kernel)                                       \
  X(gemm_tiled_kernel)                                                         \
  X(pack_matrix_kernel)                                                        \
  X(scale_add_kernel)                                                          \
  X(abs_kernel)                                                                \
  X(rope_apply_kernel)                                                         \
  X(attention_forward_kernel)                                                  \
  X(attention_backward_dscore_kernel)                                          \
  X(attention_backward_dq_kernel)                                              \
  X(attention_backward_dkv_kernel)                                             \
  X(swiglu_forward_kernel)                                                     \
  X(swiglu_backward_kernel)                                                    \
  X(residual_forward_kernel)                                                   \
  X(crossentropy_forward_kernel)                                               \
  X(crossentropy_softmax_backward_kernel)                                      \
  X(global_norm_squared_kernel)                                                \
  X(global_norm_reduce_kernel)                                                 \
  X(adamw_kernel)                                                              \
  X(kv_cache_write_kernel)                                                     \
  X(kv_cache_copy_kernel)                                                      \
  X(attention_cached_kernel)                                                   \
  X(attention_combine_kernel)                                                  \
  X(sample_kernel)                                                             \
  X(cast_bf16_kernel)                                                          \
  X(gemm_tiled_bf16_kernel)

/* attention_cached_kernel (kvcache.cu): warps per block, and positions
 * per chunk, the scores a block holds in shared memory at a time */
#define PCUDA_ATT_WARPS 4
#define PCUDA_ATT_CHUNK 256

#define PCUDA_KERNEL_ENUM(name) PCUDA_K_##name,
enum pcuda_kernel_id { PCUDA_KERNEL_LIST(PCUDA_KERNEL_ENUM) PCUDA_NUM_KERNELS };
#undef PCUDA_KERNEL_ENUM

#endif
