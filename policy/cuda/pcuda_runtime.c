/*
 * policy/cuda/pcuda_runtime.c — the backend-neutral half of the policy's
 * CUDA runtime: the context with its sticky error, memory and launch
 * wrappers, and the GEMM entry point that picks cuBLAS or the tiled kernel,
 * or routes through a candidate's matmul when the lab installed one
 * (pcuda_set_matmul: packing, the candidate, then alpha and beta).
 * The backends themselves are pcuda_device.c (driver API) and emu.cpp (the
 * CPU emulator, test library only).
 */
#include "policy/cuda/pcuda_internal.h"

#include "kernels/kernels.h"

#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PCUDA_NAME(name) #name,
const char *const pcuda_kernel_names[PCUDA_NUM_KERNELS] = {
    PCUDA_KERNEL_LIST(PCUDA_NAME)};
#undef PCUDA_NAME

pcuda_ctx *pcuda_ctx_new(const pcuda_ops *ops, size_t chunk_min,
                         size_t redzone) {
  pcuda_ctx *ctx = calloc(1, sizeof *ctx);
  if (!ctx) return NULL;
  ctx->ops = ops;
  pcuda_arena_init(&ctx->arena, chunk_min, redzone);
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
  pcuda_free(ctx, ctx->mm_scratch);
  free(ctx->mm_seen);
  /* chunks go back through the backend, once its work is done */
  if (ctx->arena.n_chunks && ctx->ops->sync(ctx) != 0) ctx->failed = 1;
  pcuda_arena_release(ctx);
  if (ctx->ops && ctx->ops->close) ctx->ops->close(ctx);
  free(ctx);
}

const char *pcuda_describe(const pcuda_ctx *ctx) {
  return ctx->desc;
}

unsigned long pcuda_launches(const pcuda_ctx *ctx) {
  return ctx->launches;
}

int pcuda_status(pcuda_ctx *ctx, char *why, size_t whylen) {
  if (!ctx->failed && ctx->ops->sync(ctx) != 0) ctx->failed = 1;
  if (ctx->failed && why && whylen) snprintf(why, whylen, "%s", ctx->why);
  return ctx->failed ? PL_EENV : PL_OK;
}

int pcuda_mem_room(pcuda_ctx *ctx, double *bytes, char *why, size_t whylen) {
  size_t free_b = 0, total_b = 0;
  *bytes = 0;
  if (!ctx->failed && ctx->ops->mem_info(ctx, &free_b, &total_b) != 0)
    ctx->failed = 1;
  if (ctx->failed) return pcuda_status(ctx, why, whylen);
  const pcuda_mem_stats *st = &ctx->arena.stats;
  *bytes = (double)free_b + (double)(st->reserved - st->in_use);
  return PL_OK;
}

void *pcuda_alloc(pcuda_ctx *ctx, size_t bytes) {
  if (ctx->failed) return NULL;
  return pcuda_arena_alloc(ctx, bytes ? bytes : 1);
}

void pcuda_free(pcuda_ctx *ctx, void *dev) {
  if (dev) pcuda_arena_free(ctx, dev);
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
  ctx->launches++;
  return run_op(ctx,
                ctx->ops->launch(ctx, kernel, grid, block, dyn_smem, args));
}

/* A device allows 65535 blocks in y. */
#define MAX_GRID_Y 65535u

/* PL_OK when grid fits a device in y; else the failure "WHAT ROWS rows
 * needs N blocks in y, at most 65535" (what: the launch, as the message
 * starts) is recorded and returned. */
static int check_grid_y(pcuda_ctx *ctx, pcuda_dim grid, const char *what,
                        int rows) {
  if (grid.y <= MAX_GRID_Y) return PL_OK;
  return pcuda_fail(ctx, "%s %d rows needs %u blocks in y, at most %u", what,
                    rows, grid.y, MAX_GRID_Y);
}

/* The tiled GEMM kernels' grid is (ceil(N/16), ceil(M/16)), their block
 * (16, 16) (gemm_tiled.cuh). */
#define GEMM_TILE 16u

int pcuda_launch_gemm_tiled(pcuda_ctx *ctx, int kernel, const char *what, int M,
                            int N, void **args) {
  pcuda_dim grid = {pcuda_blocks((size_t)N, GEMM_TILE),
                    pcuda_blocks((size_t)M, GEMM_TILE), 1};
  if (check_grid_y(ctx, grid, what, M) != PL_OK) return PL_EENV;
  return pcuda_launch(ctx, kernel, grid, (pcuda_dim){GEMM_TILE, GEMM_TILE, 1},
                      0, args);
}

/* ---- a candidate's matmul (pcuda.h, pcuda_set_matmul) ---- */

void pcuda_set_matmul(pcuda_ctx *ctx, pcuda_matmul_fn fn, void *impl) {
  ctx->matmul = fn;
  ctx->matmul_impl = impl;
  ctx->mm_n_seen = 0;
  ctx->mm_checked = 0;
  ctx->mm_dropped = 0;
  ctx->mm_why[0] = 0;
  if (!fn) {
    pcuda_free(ctx, ctx->mm_scratch);
    ctx->mm_scratch = NULL;
    ctx->mm_scratch_cap = 0;
    free(ctx->mm_seen);
    ctx->mm_seen = NULL;
    ctx->mm_cap_seen = 0;
  }
}

int pcuda_matmul_dropped(pcuda_ctx *ctx, long long *checked, char *why,
                         size_t whylen) {
  if (checked) *checked = ctx->mm_checked;
  if (ctx->mm_dropped && why) snprintf(why, whylen, "%s", ctx->mm_why);
  return ctx->mm_dropped;
}

/* 1 when (M, N, K) is new to the installed matmul, and records it (when it
 * cannot, the shape is checked again next time). */
static int mm_first_time(pcuda_ctx *ctx, int M, int N, int K) {
  uint64_t key = (uint64_t)M | (uint64_t)N << 21 | (uint64_t)K << 42;
  for (size_t i = 0; i < ctx->mm_n_seen; i++)
    if (ctx->mm_seen[i] == key) return 0;
  if (ctx->mm_n_seen == ctx->mm_cap_seen) {
    size_t cap = ctx->mm_cap_seen ? 2 * ctx->mm_cap_seen : 64;
    uint64_t *p = realloc(ctx->mm_seen, cap * sizeof *p);
    if (!p) return 1;
    ctx->mm_seen = p;
    ctx->mm_cap_seen = cap;
  }
  ctx->mm_seen[ctx->mm_n_seen++] = key;
  return 1;
}

/* The candidate's product C (M,N) against the default path's D on the host
 * by kl_compare_fp32, with S the element bound |A|·|B| (pcuda_set_matmul's
 * rule); 0 when they agree, else -1 with ctx->mm_why set (and the
 * candidate dropped). */
static int mm_compare(pcuda_ctx *ctx, const float *C, const float *D,
                      const float *S, int M, int N, int K) {
  size_t n = (size_t)M * N;
  float *c = malloc(n * sizeof(float)), *d = malloc(n * sizeof(float));
  float *s = malloc(n * sizeof(float));
  int rc = 0;
  if (!c || !d || !s) {
    snprintf(ctx->mm_why, sizeof ctx->mm_why,
             "out of host memory to check it at %dx%dx%d", M, N, K);
    rc = -1;
  } else if (pcuda_download(ctx, c, C, n * sizeof(float)) != PL_OK ||
             pcuda_download(ctx, d, D, n * sizeof(float)) != PL_OK ||
             pcuda_download(ctx, s, S, n * sizeof(float)) != PL_OK) {
    rc = 0; /* the context's sticky error says what happened */
  } else {
    kl_fp32_agreement a;
    kl_compare_fp32(c, d, s, M, N, N, &a);
    if (!a.pass) {
      char say[512];
      kl_fp32_agreement_say(&a, c, d, N, say, sizeof say);
      snprintf(ctx->mm_why, sizeof ctx->mm_why,
               "disagrees with the default path at %dx%dx%d: %s", M, N, K, say);
      rc = -1;
    }
  }
  free(c);
  free(d);
  free(s);
  if (rc) ctx->mm_dropped = 1;
  return rc;
}

/* dst[i] = |src[i]| for n floats (pack.cu). */
static int abs_copy(pcuda_ctx *ctx, float *dst, const float *src, size_t n) {
  void *args[] = {&dst, &src, &n};
  return pcuda_launch(ctx, PCUDA_K_abs_kernel,
                      (pcuda_dim){pcuda_blocks(n, 256), 1, 1},
                      (pcuda_dim){256, 1, 1}, 0, args);
}

/* Regions of the scratch start 256 bytes apart at least, as cudaMalloc's
 * pointers do: a candidate may load float4s from its operands. */
static size_t round_floats(size_t n) {
  return (n + 63) / 64 * 64;
}

/* The 32x32 tiles of pack_matrix_kernel. */
#define PACK_TILE 32u

/* dst (rows, cols) contiguous = op(src) (pack.cu). */
static int pack(pcuda_ctx *ctx, float *dst, const float *src, int rows,
                int cols, int ld, int trans) {
  pcuda_dim grid = {pcuda_blocks((size_t)cols, PACK_TILE),
                    pcuda_blocks((size_t)rows, PACK_TILE), 1};
  if (check_grid_y(ctx, grid, "candidate matmul: packing", rows) != PL_OK)
    return PL_EENV;
  void *args[] = {&dst, &src, &rows, &cols, &ld, &trans};
  return pcuda_launch(ctx, PCUDA_K_pack_matrix_kernel, grid,
                      (pcuda_dim){PACK_TILE, 8, 1}, 0, args);
}

/* The harness hands a candidate cuMemAlloc's pointers (256-byte aligned),
 * so a correct candidate may load float4s after checking only its sizes.
 * The policy's activations sit at offsets of N floats inside one buffer
 * (an rstd of a ragged N rows shifts what follows by 4 bytes), so they are
 * copied into the aligned scratch, as a strided operand is: on a device a
 * misaligned vector load faults and takes the context with it. */
static int aligned(const float *p) {
  return (uintptr_t)p % 256 == 0;
}

/* pcuda_gemm through the candidate: pack what is not contiguous or not
 * aligned, run it, fold alpha and beta in unless the product can go
 * straight into c. */
static int gemm_default(pcuda_ctx *ctx, float *c, const float *a,
                        const float *b, int M, int N, int K, int lda, int ldb,
                        int ldc, int trans_a, int trans_b, float alpha,
                        float beta);

static int gemm_via_matmul(pcuda_ctx *ctx, float *c, const float *a,
                           const float *b, int M, int N, int K, int lda,
                           int ldb, int ldc, int trans_a, int trans_b,
                           float alpha, float beta) {
  int pack_a = trans_a || lda != K || !aligned(a);
  int pack_b = trans_b || ldb != N || !aligned(b);
  int direct = alpha == 1.0f && beta == 0.0f && ldc == N && aligned(c);
  int check = mm_first_time(ctx, M, N, K); /* pcuda_set_matmul says why */
  size_t na = pack_a ? round_floats((size_t)M * K) : 0;
  size_t nb = pack_b ? round_floats((size_t)K * N) : 0;
  /* a checked call also needs the default's product, |A|, |B| and the
   * bound |A|·|B| */
  size_t nd = check ? round_floats((size_t)M * N) : 0;
  size_t nbound =
      check ? nd + round_floats((size_t)M * K) + round_floats((size_t)K * N)
            : 0;
  size_t need = nd + nbound + na + nb + (direct ? 0 : (size_t)M * N);
  if (need > ctx->mm_scratch_cap) {
    pcuda_free(ctx, ctx->mm_scratch);
    ctx->mm_scratch_cap = 0;
    ctx->mm_scratch = pcuda_alloc(ctx, need * sizeof(float));
    if (!ctx->mm_scratch) return PL_EENV;
    ctx->mm_scratch_cap = need;
  }
  float *scratch = ctx->mm_scratch + nd + nbound; /* after the check's */
  const float *A = a, *B = b;
  float *C = c;
  if (pack_a) {
    pack(ctx, scratch, a, M, K, lda, trans_a);
    A = scratch;
  }
  if (pack_b) {
    pack(ctx, scratch + na, b, K, N, ldb, trans_b);
    B = scratch + na;
  }
  if (!direct) C = scratch + na + nb;
  if (ctx->failed) return PL_EENV;
  char why[200] = "";
  ctx->launches++;
  if (ctx->matmul(ctx->matmul_impl, A, B, C, M, N, K, why, sizeof why) != 0)
    return pcuda_fail(ctx, "candidate matmul at %dx%dx%d: %s", M, N, K, why);
  if (check) {
    ctx->mm_checked++;
    float *D = ctx->mm_scratch, *S = D + nd;
    float *absA = S + nd, *absB = absA + round_floats((size_t)M * K);
    gemm_default(ctx, D, A, B, M, N, K, K, N, N, 0, 0, 1.0f, 0.0f);
    abs_copy(ctx, absA, A, (size_t)M * K);
    abs_copy(ctx, absB, B, (size_t)K * N);
    gemm_default(ctx, S, absA, absB, M, N, K, K, N, N, 0, 0, 1.0f, 0.0f);
    if (ctx->failed) return PL_EENV;
    if (mm_compare(ctx, C, D, S, M, N, K) != 0) /* dropped: the default's */
      return gemm_default(ctx, c, a, b, M, N, K, lda, ldb, ldc, trans_a,
                          trans_b, alpha, beta);
    if (ctx->failed) return PL_EENV; /* a download failed: not compared */
  }
  if (direct) return PL_OK;
  void *args[] = {&c, &C, &M, &N, &ldc, &alpha, &beta};
  return pcuda_launch(ctx, PCUDA_K_scale_add_kernel,
                      (pcuda_dim){pcuda_blocks((size_t)M * N, 256), 1, 1},
                      (pcuda_dim){256, 1, 1}, 0, args);
}

int pcuda_linear_gemm(pcuda_ctx *ctx, int use_matmul, float *c, const float *a,
                      const float *b, int M, int N, int K, int lda, int ldb,
                      int ldc, int trans_a, int trans_b, float alpha,
                      float beta) {
  if (ctx->failed) return PL_EENV;
  if (M <= 0 || N <= 0 || K <= 0) return PL_OK;
  if (use_matmul && ctx->matmul && !ctx->mm_dropped)
    return gemm_via_matmul(ctx, c, a, b, M, N, K, lda, ldb, ldc, trans_a,
                           trans_b, alpha, beta);
  return gemm_default(ctx, c, a, b, M, N, K, lda, ldb, ldc, trans_a, trans_b,
                      alpha, beta);
}

int pcuda_gemm(pcuda_ctx *ctx, float *c, const float *a, const float *b, int M,
               int N, int K, int lda, int ldb, int ldc, int trans_a,
               int trans_b, float alpha, float beta) {
  return pcuda_linear_gemm(ctx, 1, c, a, b, M, N, K, lda, ldb, ldc, trans_a,
                           trans_b, alpha, beta);
}

/* cuBLAS when the backend has it, else the tiled kernel. */
static int gemm_default(pcuda_ctx *ctx, float *c, const float *a,
                        const float *b, int M, int N, int K, int lda, int ldb,
                        int ldc, int trans_a, int trans_b, float alpha,
                        float beta) {
  if (ctx->ops->gemm) {
    ctx->launches++;
    return run_op(ctx, ctx->ops->gemm(ctx, c, a, b, M, N, K, lda, ldb, ldc,
                                      trans_a, trans_b, alpha, beta));
  }
  void *args[] = {&c,   &a,   &b,       &M,       &N,     &K,   &lda,
                  &ldb, &ldc, &trans_a, &trans_b, &alpha, &beta};
  return pcuda_launch_gemm_tiled(ctx, PCUDA_K_gemm_tiled_kernel,
                                 "tiled GEMM: M =", M, N, args);
}
