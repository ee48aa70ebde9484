/*
 * policy/cuda/pcuda_runtime.c — the backend-neutral half of the policy's
 * CUDA runtime: the context with its sticky error, memory and launch
 * wrappers, and the GEMM entry point that picks cuBLAS or the tiled kernel.
 * The backends themselves are pcuda_device.c (driver API) and emu.cpp (the
 * CPU emulator, test library only).
 */
#include "policy/cuda/pcuda_internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PCUDA_NAME(name) #name,
const char *const pcuda_kernel_names[PCUDA_NUM_KERNELS] = {
    PCUDA_KERNEL_LIST(PCUDA_NAME)};
#undef PCUDA_NAME

pcuda_ctx *pcuda_ctx_new(const pcuda_ops *ops) {
  pcuda_ctx *ctx = calloc(1, sizeof *ctx);
  if (ctx) ctx->ops = ops;
  return ctx;
}

int pcuda_fail(pcuda_ctx *ctx, const char *fmt, ...) {
  if (!ctx->failed) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(ctx->why, sizeof ctx->why, fmt, ap);
    va_end(ap);
    ctx->failed = 1;
  }
  return PL_EENV;
}

void pcuda_close(pcuda_ctx *ctx) {
  if (!ctx) return;
  if (ctx->ops && ctx->ops->close) ctx->ops->close(ctx);
  free(ctx);
}

const char *pcuda_describe(const pcuda_ctx *ctx) {
  return ctx->desc;
}

int pcuda_status(pcuda_ctx *ctx, char *why, size_t whylen) {
  if (!ctx->failed && ctx->ops->sync(ctx) != 0) ctx->failed = 1;
  if (ctx->failed && why && whylen) snprintf(why, whylen, "%s", ctx->why);
  return ctx->failed ? PL_EENV : PL_OK;
}

void *pcuda_alloc(pcuda_ctx *ctx, size_t bytes) {
  void *dev = NULL;
  if (ctx->failed) return NULL;
  if (ctx->ops->alloc(ctx, &dev, bytes ? bytes : 1) != 0) {
    ctx->failed = 1;
    return NULL;
  }
  return dev;
}

void pcuda_free(pcuda_ctx *ctx, void *dev) {
  if (dev) ctx->ops->free(ctx, dev);
}

/* Runs one backend operation unless a failure came before; makes its
 * failure sticky. */
static int run_op(pcuda_ctx *ctx, int rc) {
  if (rc != 0) ctx->failed = 1;
  return ctx->failed ? PL_EENV : PL_OK;
}

int pcuda_upload(pcuda_ctx *ctx, void *dev, const void *host, size_t bytes) {
  if (ctx->failed) return PL_EENV;
  if (!bytes) return PL_OK;
  return run_op(ctx, ctx->ops->upload(ctx, dev, host, bytes));
}

int pcuda_download(pcuda_ctx *ctx, void *host, const void *dev, size_t bytes) {
  if (ctx->failed) return PL_EENV;
  if (!bytes) return PL_OK;
  return run_op(ctx, ctx->ops->download(ctx, host, dev, bytes));
}

int pcuda_zero(pcuda_ctx *ctx, void *dev, size_t bytes) {
  if (ctx->failed) return PL_EENV;
  if (!bytes) return PL_OK;
  return run_op(ctx, ctx->ops->zero(ctx, dev, bytes));
}

unsigned pcuda_blocks(size_t count, unsigned n) {
  return (unsigned)((count + n - 1) / n);
}

int pcuda_launch(pcuda_ctx *ctx, int kernel, pcuda_dim grid, pcuda_dim block,
                 size_t dyn_smem, void **args) {
  if (ctx->failed) return PL_EENV;
  if (!grid.x || !grid.y || !grid.z) return PL_OK; /* nothing to do */
  return run_op(ctx,
                ctx->ops->launch(ctx, kernel, grid, block, dyn_smem, args));
}

/* The tiled kernel's grid is (ceil(N/16), ceil(M/16)); a device allows
 * 65535 blocks in y. */
#define GEMM_TILE 16u
#define GEMM_MAX_GRID_Y 65535u

int pcuda_gemm(pcuda_ctx *ctx, float *c, const float *a, const float *b, int M,
               int N, int K, int lda, int ldb, int ldc, int trans_a,
               int trans_b, float alpha, float beta) {
  if (ctx->failed) return PL_EENV;
  if (M <= 0 || N <= 0 || K <= 0) return PL_OK;
  if (ctx->ops->gemm)
    return run_op(ctx, ctx->ops->gemm(ctx, c, a, b, M, N, K, lda, ldb, ldc,
                                      trans_a, trans_b, alpha, beta));
  pcuda_dim grid = {pcuda_blocks((size_t)N, GEMM_TILE),
                    pcuda_blocks((size_t)M, GEMM_TILE), 1};
  if (grid.y > GEMM_MAX_GRID_Y)
    return pcuda_fail(ctx,
                      "tiled GEMM: M = %d rows needs %u blocks in y, at most "
                      "%u",
                      M, grid.y, GEMM_MAX_GRID_Y);
  void *args[] = {&c,   &a,   &b,       &M,       &N,     &K,   &lda,
                  &ldb, &ldc, &trans_a, &trans_b, &alpha, &beta};
  return pcuda_launch(ctx, PCUDA_K_gemm_tiled_kernel, grid,
                      (pcuda_dim){GEMM_TILE, GEMM_TILE, 1}, 0, args);
}
