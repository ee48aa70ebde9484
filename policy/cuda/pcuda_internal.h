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
#include <stdint.h>

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
  /* AddressSanitizer (un)poisoning of backend memory the host can see:
   * the emulator's; NULL on a device (pcuda_arena.c) */
  void (*poison)(void *p, size_t bytes, int on);
  /* the backend's free and total memory in bytes (cuMemGetInfo; the host's
   * available and physical memory on the emulator, whose buffers are
   * malloc'd) */
  int (*mem_info)(pcuda_ctx *ctx, size_t *free_bytes, size_t *total_bytes);
} pcuda_ops;

/* ---- the memory arena (pcuda_arena.c) ---- */

typedef struct pcuda_block pcuda_block; /* host-side, one per buffer */

/* A region taken from the backend in one allocation, its blocks in
 * address order. */
typedef struct pcuda_chunk {
  void *base;
  size_t size;
  pcuda_block *blocks;
} pcuda_chunk;

typedef struct pcuda_arena {
  pcuda_chunk *chunks;
  int n_chunks, cap_chunks;
  size_t chunk_min; /* bytes: the smallest chunk taken from the backend */
  size_t redzone;   /* bytes after each block (poisoned on the emulator) */
  int passthrough;  /* PCUDA_ARENA=off: a chunk per buffer, freed with it */
  pcuda_mem_stats stats;
} pcuda_arena;

/* Sets the arena up empty (reads PCUDA_ARENA). */
void pcuda_arena_init(pcuda_arena *a, size_t chunk_min, size_t redzone);
/* A 256-byte aligned block of bytes from ctx's arena, taking a chunk from
 * the backend when none fits; NULL with the failure recorded. */
void *pcuda_arena_alloc(pcuda_ctx *ctx, size_t bytes);
/* Returns a block to the arena (the backend keeps the chunk). A pointer
 * that is no live block is recorded as a failure. */
void pcuda_arena_free(pcuda_ctx *ctx, void *dev);
/* Returns every chunk to the backend, live blocks or not (pcuda_close). */
void pcuda_arena_release(pcuda_ctx *ctx);

struct pcuda_ctx {
  const pcuda_ops *ops;
  void *impl;        /* the backend's own state */
  pcuda_arena arena; /* what pcuda_alloc hands out */
  /* a candidate's matmul that pcuda_gemm routes through (pcuda_set_matmul;
   * NULL: cuBLAS or the tiled kernel), and its scratch: packed operands
   * and the product, on the backend */
  pcuda_matmul_fn matmul;
  void *matmul_impl;
  float *mm_scratch;
  size_t mm_scratch_cap; /* floats */
  /* its check on the first call of each shape (pcuda_runtime.c): the
   * shapes seen, how many were checked, and whether it was dropped */
  uint64_t *mm_seen;
  size_t mm_n_seen, mm_cap_seen;
  long long mm_checked;
  int mm_dropped;
  char mm_why[640];
  unsigned long launches; /* kernel launches and GEMM calls (pcuda_launches) */
  int failed;     /* sticky: the first failure stops everything after it */
  char why[256];  /* its reason */
  char desc[256]; /* pcuda_describe */
  /* cuBLAS's bf16 GEMM (cublasGemmEx), row-major as pcuda_gemm_bf16; set
   * by the device backend when cuBLAS loaded, NULL: the tiled kernel's bf16
   * variant. Kept out of pcuda_ops so that the backends' tables stay as
   * the fp32 path has them. */
  int (*gemm_bf16)(pcuda_ctx *ctx, float *c, const pcuda_bf16 *a,
                   const pcuda_bf16 *b, int M, int N, int K, int lda, int ldb,
                   int ldc, int trans_a, int trans_b, float alpha, float beta);
};

/* Allocates a context for ops (impl NULL) whose arena takes chunks of at
 * least chunk_min bytes with redzone bytes after each block. NULL when out
 * of memory. */
pcuda_ctx *pcuda_ctx_new(const pcuda_ops *ops, size_t chunk_min,
                         size_t redzone);

/* Records a failure (the first one wins) and returns PL_EENV. */
int pcuda_fail(pcuda_ctx *ctx, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Launches kernel on grid x block with args (see pcuda_ops.launch); does
 * nothing after a failure. Returns PL_OK or the sticky error. */
int pcuda_launch(pcuda_ctx *ctx, int kernel, pcuda_dim grid, pcuda_dim block,
                 size_t dyn_smem, void **args);

/* Launches one of the tiled GEMM kernels (gemm_tiled_kernel,
 * gemm_tiled_bf16_kernel: grid (ceil(N/16), ceil(M/16)), block (16, 16))
 * with args, the kernel's 13 arguments. When M needs more blocks in y than
 * a device allows, records the failure "WHAT M rows needs ..." instead
 * (what: "tiled GEMM: M ="). PL_OK or the sticky error. */
int pcuda_launch_gemm_tiled(pcuda_ctx *ctx, int kernel, const char *what, int M,
                            int N, void **args);

/* Row-major GEMM, the contract of gemm_tiled_kernel (matmul.cu,
 * gemm_tiled.cuh):
 *   C[m,n] = alpha * sum_k A'(m,k) B'(k,n) + beta * C[m,n],
 *   A'(m,k) = trans_a ? A[k*lda+m] : A[m*lda+k],
 *   B'(k,n) = trans_b ? B[n*ldb+k] : B[k*ldb+n]; C not read when beta == 0.
 * Through the installed candidate matmul when there is one (pcuda.h,
 * pcuda_set_matmul), else the backend's gemm (cuBLAS) when it has one, else
 * the tiled kernel. */
int pcuda_gemm(pcuda_ctx *ctx, float *c, const float *a, const float *b, int M,
               int N, int K, int lda, int ldb, int ldc, int trans_a,
               int trans_b, float alpha, float beta);

/* ---- the bf16 path (pcuda_model_bf16.c) ---- */

/* pcuda_gemm with bf16 A and B and fp32 C (fp32 products and sums):
 * cuBLAS's GemmEx when the backend has it (ctx->gemm_bf16), else
 * gemm_tiled_bf16_kernel (bf16.cu). */
int pcuda_gemm_bf16(pcuda_ctx *ctx, float *c, const pcuda_bf16 *a,
                    const pcuda_bf16 *b, int M, int N, int K, int lda, int ldb,
                    int ldc, int trans_a, int trans_b, float alpha, float beta);

/* out (n) = in (n) rounded to bf16 (cast_bf16_kernel). */
void pcuda_cast_bf16(pcuda_ctx *ctx, pcuda_bf16 *out, const float *in,
                     size_t n);

/* Refreshes dm->params_bf16 from the fp32 master (nothing for an fp32
 * model). PL_OK or the sticky error. */
int pcuda_model_cast_params(pcuda_model *dm);

/* Makes room in dm->bf16_scratch for the GEMM operands of a (B,T) batch
 * (nothing for an fp32 model). Called at the start of a forward, when no
 * kernel is in flight. PL_OK or PL_EENV. */
int pcuda_bf16_ensure_scratch(pcuda_model *dm, int B, int T);
/* The same for a forward alone over rows token rows (the cached forward of
 * sampling: its GEMM inputs only). */
int pcuda_bf16_ensure_scratch_rows(pcuda_model *dm, size_t rows);

/* matmul_forward / matmul_backward of pcuda_model.c in bf16: the same
 * arguments and results (out = inp · w^T; dinp = dout · w, dw += dout^T ·
 * inp), with inp and dout rounded to bf16 into the scratch and w read from
 * the bf16 copy of the weights (w must point into dm->params_memory). */
void pcuda_bf16_matmul_forward(pcuda_model *dm, float *out /*(N,OC)*/,
                               const float *inp /*(N,IC)*/,
                               const float *w /*(OC,IC)*/, int N, int IC,
                               int OC);
void pcuda_bf16_matmul_backward(pcuda_model *dm, float *dinp /*(N,IC)*/,
                                float *dw /*(OC,IC)*/,
                                const float *dout /*(N,OC)*/,
                                const float *inp /*(N,IC)*/,
                                const float *w /*(OC,IC)*/, int N, int IC,
                                int OC);

/* Blocks of n threads covering `count` elements: ceil(count / n). */
unsigned pcuda_blocks(size_t count, unsigned n);

/* Elements of the bf16 GEMM operand scratch a (B,T) batch needs
 * (pcuda_model_bf16.c), for pcuda_model_batch_bytes. */
size_t pcuda_bf16_scratch_elems(const pl_config *c, int B, int T);

/* ---- layers the model and the cached forward share (pcuda_model.c) ---- */

/* out = inp · w^T (w stored (OC,IC), inside dm->params_memory) in the
 * model's dtype: the fp32 GEMM, or pcuda_bf16_matmul_forward for a bf16
 * model (so sampling sees the arithmetic the training forward does). */
void pcuda_linear_forward(pcuda_model *dm, float *out /*(N,OC)*/,
                          const float *inp /*(N,IC)*/,
                          const float *w /*(OC,IC)*/, int N, int IC, int OC);

/* out = wte[tokens] */
void pcuda_embedding_forward(pcuda_ctx *ctx, float *out /*(BT,C)*/,
                             const int32_t *tokens /*(BT)*/,
                             const float *wte /*(V,C)*/, int BT, int C);
/* out = inp * rstd * w per row, rstd = 1 / sqrt(mean(inp^2) + eps) */
void pcuda_rmsnorm_forward(pcuda_ctx *ctx, float *out /*(N,C)*/,
                           float *rstd /*(N)*/, const float *inp /*(N,C)*/,
                           const float *w /*(C)*/, int N, int C);
/* out = silu(gate) * up, h13 holding gate and up side by side */
void pcuda_swiglu_forward(pcuda_ctx *ctx, float *out /*(N,F)*/,
                          const float *h13 /*(N,2F)*/, int N, int F);
/* out = a + b (out may be a) */
void pcuda_residual_forward(pcuda_ctx *ctx, float *out, const float *a,
                            const float *b, size_t n);

/* The device sampler (pcuda_sample.c, sample.cu) with its scratch for up
 * to `rows` rows of `vocab` logits: device arrays in one allocation
 * (memory), their host copies in another (host). */
typedef struct pcuda_sampler {
  pcuda_ctx *ctx;
  int rows, vocab, vocab_p2; /* vocab_p2: a power of two >= vocab */
  double *w, *cw, *uniform;  /* device: (rows,vocab), (rows,vocab_p2), (rows) */
  int32_t *cid;              /* device (rows,vocab_p2) */
  int32_t *token, *n_kept;   /* device (rows) each */
  float *logprob, *logprob_sample; /* device (rows) each */
  void *memory;                    /* device */
  double *u_host; /* (rows): the caller's draws, one per row (pl_rng) */
  int32_t *token_host, *n_kept_host;
  float *logprob_host, *logprob_sample_host;
  void *host;
} pcuda_sampler;

/* Allocates a sampler for rows x vocab on ctx. PL_OK, PL_EINPUT (a size
 * below 1) or PL_EENV, with why filled. */
int pcuda_sampler_init(pcuda_sampler *sm, pcuda_ctx *ctx, int rows, int vocab,
                       char *why, size_t whylen);
void pcuda_sampler_free(pcuda_sampler *sm);

/* pl_sample for rows rows of logits on the backend (row b at logits +
 * b*row_stride; row_stride 0: all rows the same), with sm->u_host[b] as row
 * b's draw (ignored when greedy; the caller draws it from the row's pl_rng
 * as pl_sample would). Fills out (rows). PL_OK, PL_EINPUT (bad settings; a
 * non-finite logit, why naming the row and index, as pl_sample_batch) or
 * the backend's PL_EENV. */
int pcuda_sampler_run(pcuda_sampler *sm, const float *logits, size_t row_stride,
                      int rows, const pl_sampling *s, pl_sample_out *out,
                      char *why, size_t whylen);

/* The kernel names of kernel_list.h, by id. */
extern const char *const pcuda_kernel_names[PCUDA_NUM_KERNELS];

#ifdef __cplusplus
}
#endif
#endif
