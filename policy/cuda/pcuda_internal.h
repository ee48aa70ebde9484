/*
 * policy/cuda/pcuda_internal.h — what the files of policy/cuda/ share and
 * nobody else sees: the backend context (a table of operations filled by
 * the device backend, pcuda_device.c, or the emulator's, emu.cpp), the
 * sticky error, and the launch and GEMM entry points the model code calls.
 */
#ifndef POLICY_CUDA_PCUDA_INTERNAL_H
#define POLICY_CUDA_PCUDA_INTERNAL_H

#include "policy/cuda/kernel_list.h"
#include "policy/cuda/pcuda.h"

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct pcuda_dim {
  unsigned x, y, z;
} pcuda_dim;

/* One backend. Every operation returns 0 or -1 with ctx->why filled (the
 * wrappers in pcuda_runtime.c make the error sticky). */
typedef struct pcuda_ops {
  int (*alloc)(pcuda_ctx *ctx, void **dev, size_t bytes);
  void (*free)(pcuda_ctx *ctx, void *dev);
  int (*upload)(pcuda_ctx *ctx, void *dev, const void *host, size_t bytes);
  int (*download)(pcuda_ctx *ctx, void *host, const void *dev, size_t bytes);
  int (*zero)(pcuda_ctx *ctx, void *dev, size_t bytes);
  /* args: the kernel's arguments, each pointed to, as cuLaunchKernel's
   * kernelParams */
  int (*launch)(pcuda_ctx *ctx, int kernel, pcuda_dim grid, pcuda_dim block,
                size_t dyn_smem, void **args);
  /* cuBLAS, row-major as pcuda_gemm; NULL: the tiled kernel */
  int (*gemm)(pcuda_ctx *ctx, float *c, const float *a, const float *b, int M,
              int N, int K, int lda, int ldb, int ldc, int trans_a, int trans_b,
              float alpha, float beta);
  int (*sync)(pcuda_ctx *ctx);
  void (*close)(pcuda_ctx *ctx);
} pcuda_ops;

struct pcuda_ctx {
  const pcuda_ops *ops;
  void *impl;     /* the backend's own state */
  int failed;     /* sticky: the first failure stops everything after it */
  char why[256];  /* its reason */
  char desc[256]; /* pcuda_describe */
};

/* Allocates a context for ops (impl NULL). NULL when out of memory. */
pcuda_ctx *pcuda_ctx_new(const pcuda_ops *ops);

/* Records a failure (the first one wins) and returns PL_EENV. */
int pcuda_fail(pcuda_ctx *ctx, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Launches kernel on grid x block with args (see pcuda_ops.launch); does
 * nothing after a failure. Returns PL_OK or the sticky error. */
int pcuda_launch(pcuda_ctx *ctx, int kernel, pcuda_dim grid, pcuda_dim block,
                 size_t dyn_smem, void **args);

/* Row-major GEMM, the contract of gemm_tiled_kernel (matmul.cu):
 *   C[m,n] = alpha * sum_k A'(m,k) B'(k,n) + beta * C[m,n],
 *   A'(m,k) = trans_a ? A[k*lda+m] : A[m*lda+k],
 *   B'(k,n) = trans_b ? B[n*ldb+k] : B[k*ldb+n]; C not read when beta == 0.
 * Through the backend's gemm (cuBLAS) when it has one, else the tiled
 * kernel. */
int pcuda_gemm(pcuda_ctx *ctx, float *c, const float *a, const float *b, int M,
               int N, int K, int lda, int ldb, int ldc, int trans_a,
               int trans_b, float alpha, float beta);

/* Blocks of n threads covering `count` elements: ceil(count / n). */
unsigned pcuda_blocks(size_t count, unsigned n);

/* The kernel names of kernel_list.h, by id. */
extern const char *const pcuda_kernel_names[PCUDA_NUM_KERNELS];

#ifdef __cplusplus
}
#endif
#endif
