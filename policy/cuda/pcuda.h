/*
 * policy/cuda/pcuda.h — the one public header of the policy's CUDA runtime:
 * the decoder of policy/model.c and the AdamW of policy/adamw.c, mirrored
 * kernel by kernel in CUDA (as llm.c's train_gpt2.cu mirrors
 * train_gpt2.c). The CPU code is the reference; every function here has the
 * CPU twin's name with the prefix pcuda_, and every kernel the name of the
 * CPU layer function it mirrors plus _kernel (rmsnorm_forward ->
 * rmsnorm_forward_kernel in policy/cuda/rmsnorm.cu). Prefix: pcuda_.
 *
 * Two backends run the same kernel sources:
 *   - device: policy/cuda/kernels.cu compiled by nvcc for sm_90 at build
 *     time into a fatbin embedded in the binary as data, loaded with the
 *     driver API's cuModuleLoadData. libcuda.so.1 and libcublas are opened
 *     with dlopen (as kernels/gpu.c does), so there is no link-time
 *     dependency on CUDA: one binary runs with or without a GPU, and says
 *     which library or device is missing. GEMMs (the linear layers and the
 *     tied head) go through cublasSgemm (fp32 math, no TF32); when cuBLAS
 *     cannot be loaded, or PCUDA_GEMM_TILED asks for it, through the plain
 *     tiled kernel of policy/cuda/matmul.cu, and pcuda_describe says which.
 *     Without nvcc at build time there is no fatbin and the device backend
 *     answers PL_EENV saying so.
 *   - cpu-emu: the same kernels compiled by the host C++ compiler against
 *     the emulator's shim (kernels/emu/cuda_shim.h) into the test library
 *     klpolicy_cuda_emu, launched through kl_emu_launch with real barriers
 *     and warp shuffles. This is how the kernels are tested on machines
 *     without a GPU (tests/unit/test_policy_cuda.c); GEMMs use the tiled
 *     kernel. It is a correctness tool, never a way to train fast.
 *
 * Memory: "device" pointers are plain pointers in the C types the CPU code
 * uses (float *, int32_t *); on a device they hold device addresses and
 * must not be dereferenced on the host (use pcuda_upload/pcuda_download),
 * on cpu-emu they are host memory. The model reuses policy.h's pl_params
 * for its device tensors, so the same field names point at the same
 * tensors on both sides. Buffers come from the context's memory arena
 * (pcuda_arena.c: large backend chunks, reused as sizes change;
 * pcuda_mem_stats), and every operation of a context runs on its one
 * stream, in order (pcuda_device.c). A context is used by the thread that
 * opened it: on a device, that thread's current CUDA context is the one
 * pcuda_device_open made current (the driver keeps one per thread), and
 * the calls of any other thread would fail with CUDA_ERROR_INVALID_CONTEXT.
 *
 * Errors are values, and sticky: the first failure of a backend call is
 * kept in the context, later calls do nothing, and pcuda_status reports it
 * (a device fault shows up at the next synchronising call). Functions
 * return PL_OK or PL_EENV (backend failure, out of memory) / PL_EINPUT (bad
 * arguments), with a one-line reason.
 *
 * Determinism: no kernel uses atomics; reductions are fixed trees. Two runs
 * on the same backend give the same bits. Compared with the CPU, sums run
 * in another order (and nvcc contracts a*b+c into FMAs), so results agree
 * to fp32 rounding, not bit for bit: tests/unit/test_policy_cuda.c states
 * the tolerances.
 *
 * Sampling (policy/cuda/pcuda_generate.c, pcuda_sample.c) mirrors
 * policy/generate.c and policy/sampler.c: a KV cache on the backend, the
 * cached forward (one query per token row against its cache row), and the
 * sampler (temperature, top-p, min-p) as a kernel. The RNG is NOT ported:
 * each row's pl_rng stays on the host and draws u with pl_rng_uniform
 * exactly when pl_sample would; the kernel turns (logits, u) into the token
 * with the CPU's arithmetic (weights in double, the same candidate
 * shortcut, the same sorted order for the draw), so a fixed seed gives the
 * CPU's tokens unless a draw lands within rounding of a CDF boundary
 * (tests/unit/test_policy_cuda_gen.c holds pcuda_generate to pl_generate).
 * A decode step uploads the fed tokens and draws and downloads four
 * numbers per row.
 *
 * bf16 with fp32 master weights (policy/cuda/pcuda_model_bf16.c, bf16.cu;
 * pcuda_model_init_dtype with PCUDA_DTYPE_BF16; pcuda_model_init is fp32
 * and that path is unchanged by it). What is in which precision:
 *   - parameters: fp32, the master copy (params_memory); AdamW reads the
 *     fp32 gradients and updates the master in fp32 with the fp32 kernel,
 *     then casts the whole master into the bf16 copy (params_bf16, round to
 *     nearest even), once per update (and on init and set_params). An
 *     update smaller than half a bf16 step is kept in the master and
 *     reaches the copy when the steps add up; without the master it would
 *     vanish (tests/unit/test_policy_cuda_bf16.c checks both).
 *   - GEMMs (every linear layer and the tied head, forward and backward):
 *     both operands bf16 (the weight from the bf16 copy; the activation or
 *     activation gradient rounded to bf16 into a scratch just before the
 *     GEMM), products and sums in fp32, the output fp32. On a device this
 *     is cublasGemmEx (CUDA_R_16BF A and B, CUDA_R_32F C,
 *     CUBLAS_COMPUTE_32F: tensor cores); without cuBLAS, and on the
 *     emulator, the tiled kernel's bf16 variant.
 *   - everything else in fp32, with the fp32 path's kernels: the embedding
 *     lookup and the norms read the fp32 master weights; RMSNorm, RoPE,
 *     attention (scores, softmax), SwiGLU, the residual stream, the loss
 *     and its gradient, and every stored activation stay fp32.
 *   - gradients: fp32, accumulated in fp32 (the GEMMs accumulate into
 *     them with beta = 1 in fp32).
 * This is a documented subset of llm.c's scheme (pcuda_model_bf16.c says
 * why): the arithmetic of PyTorch's autocast for linear layers, but with
 * fp32 GEMM outputs, and activations stored in fp32, so the bf16 path
 * saves GEMM time (tensor cores), not activation memory (it adds the bf16
 * weight copy and a scratch). Sampling (pcuda_generate, the cached
 * forward) of a bf16 model runs the same bf16 GEMMs, so the logprobs it
 * reports are the ones the GRPO update's forward computes.
 *
 * A candidate kernel can stand in for cuBLAS behind the fp32 GEMMs (the
 * lab's --policy-matmul; pcuda_set_matmul, at the end of this file);
 * tests/bench/bench_policy_cuda.c measures training and sampling on a
 * device against the CPU, such a kernel and PyTorch.
 *
 * Attention (attention.cu) is tiled: 32-row tiles of one head staged
 * through shared memory, but not fused flash attention: the forward
 * stores P (B,NH,T,T) as the CPU does and the backward reads it.
 *
 * Not here yet (later slices of issue #10): bf16 activation storage; a
 * decode step is some 12 launches per layer (no CUDA graph, no fusion). A
 * candidate kernel (pcuda_set_matmul) replaces the fp32 GEMMs only. The
 * cached (sampling) attention walks chunks of 256 positions with a running
 * softmax, split over blocks when the (row, head) pairs are few; the
 * sampler's sort is a bitonic sort per row in global memory. None of the
 * kernels has been timed on a device.
 */
#ifndef POLICY_CUDA_PCUDA_H
#define POLICY_CUDA_PCUDA_H

#include "policy/policy.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- backends (policy/cuda/pcuda_runtime.c, pcuda_device.c, emu.cpp) ---- */

typedef struct pcuda_ctx pcuda_ctx;

enum {
  PCUDA_GEMM_AUTO = 0,  /* cuBLAS on a device when it loads, else tiled */
  PCUDA_GEMM_TILED = 1, /* always the tiled kernel of matmul.cu */
};

/* 1 when this binary holds the nvcc-built fatbin (nvcc was found at build
 * time), else 0. */
int pcuda_has_fatbin(void);

/* Opens device 0 through the driver API (dlopen'd), loads the embedded
 * fatbin and, with PCUDA_GEMM_AUTO, cuBLAS. On PL_OK *out is the caller's
 * (pcuda_close). PL_EENV with why saying what is missing: no fatbin in this
 * build, no driver, no device, a module that does not load. */
int pcuda_device_open(pcuda_ctx **out, int gemm, char *why, size_t whylen);

/* Opens the emulator backend, `threads` OS threads (0: all cores). Defined
 * only in the test library klpolicy_cuda_emu. */
int pcuda_emu_open(pcuda_ctx **out, int threads, char *why, size_t whylen);

/* Emulator only (test library): reverse 1 makes every block resume its
 * threads from the last one down, 0 from thread 0 up (the default). A
 * kernel missing a barrier reads what the threads scheduled before it
 * wrote, so its result depends on the order: the tests run both. PL_OK,
 * or PL_EINPUT for a context that is not the emulator's. */
int pcuda_emu_set_reverse(pcuda_ctx *ctx, int reverse);

/* Waits for the context's work, then releases it: every chunk of its
 * memory arena (buffers not freed yet go with them; a pointer from it is
 * dead after this), and on a device the stream, cuBLAS, the modules and
 * the primary context reference. */
void pcuda_close(pcuda_ctx *ctx);

/* "cpu-emu (tiled GEMM)" or "NVIDIA H200 (sm_90), cuBLAS GEMM" etc.; owned
 * by ctx. */
const char *pcuda_describe(const pcuda_ctx *ctx);

/* Waits for every launched kernel, then returns PL_OK, or the first error
 * (sticky) with its reason in why. */
int pcuda_status(pcuda_ctx *ctx, char *why, size_t whylen);

/* Device memory. alloc returns NULL (and records the error) on failure;
 * free(NULL) does nothing. upload/download/zero return PL_OK or the sticky
 * error; download waits for the kernels before it. */
void *pcuda_alloc(pcuda_ctx *ctx, size_t bytes);
void pcuda_free(pcuda_ctx *ctx, void *dev);
int pcuda_upload(pcuda_ctx *ctx, void *dev, const void *host, size_t bytes);
int pcuda_download(pcuda_ctx *ctx, void *host, const void *dev, size_t bytes);
int pcuda_zero(pcuda_ctx *ctx, void *dev, size_t bytes);

/* What the context's memory arena (policy/cuda/pcuda_arena.c) holds:
 * pcuda_alloc carves 256-byte aligned buffers out of chunks taken from the
 * backend (cuMemAlloc) and pcuda_free gives them back to the arena, so a
 * buffer freed and reallocated costs no backend call. PCUDA_ARENA=off in
 * the environment makes each buffer its own backend allocation. */
typedef struct pcuda_mem_stats {
  size_t in_use;        /* bytes in live buffers (rounded up to 256, with the
                           emulator's red zones) */
  size_t peak;          /* the most in_use has been */
  size_t reserved;      /* bytes held from the backend in chunks */
  int chunks;           /* chunks held now */
  unsigned long allocs; /* pcuda_alloc calls that succeeded */
  unsigned long backend_allocs; /* chunks taken from the backend so far */
  unsigned long backend_frees;  /* chunks given back so far */
  int arena;                    /* 0 with PCUDA_ARENA=off */
} pcuda_mem_stats;

void pcuda_mem_stats_get(const pcuda_ctx *ctx, pcuda_mem_stats *out);

/* How many more bytes ctx could hand out now: the backend's free memory
 * plus what the arena holds but has not handed out (a fragmented arena may
 * not fit one buffer of that size; the callers' margins are wide). PL_OK,
 * or the sticky error with why. */
int pcuda_mem_room(pcuda_ctx *ctx, double *bytes, char *why, size_t whylen);

/* Kernel launches and GEMM calls (cuBLAS's or the tiled kernel's, a
 * candidate's) made on ctx so far: what a decode step costs in launches
 * (bench_policy_cuda prints it per step). */
unsigned long pcuda_launches(const pcuda_ctx *ctx);

/* ---- the model (policy/cuda/pcuda_model.c), mirroring policy/model.c ---- */

/* The model's precision (pcuda_model_init_dtype). */
enum {
  PCUDA_DTYPE_FP32 = 0, /* everything fp32 (pcuda_model_init) */
  PCUDA_DTYPE_BF16 = 1, /* bf16 GEMM operands, fp32 master weights, fp32
                           gradients and the rest (see the top of this
                           file) */
};

/* A bf16 value as its 16 bits (the top half of the fp32 bits). */
typedef uint16_t pcuda_bf16;

/* Activations of a (B,T) batch on the backend: pl_acts's fields with the
 * same names, shapes and meanings, plus what the device path needs. One
 * allocation (acts_memory). Differences from the CPU: datt holds dS of
 * every (b, h) at once, (B,NH,T,T) instead of one head's (T,T); dloss
 * is the per-token loss gradient the backward starts from. */
typedef struct pcuda_acts {
  float *encoded, *ln1, *ln1_rstd, *qkv, *att, *atty, *res_att, *ln2, *ln2_rstd,
      *h13, *hmul, *res_ffn, *lnf, *lnf_rstd, *logits, *lse, *losses;
  float *dlogits, *dres, *dln, *datty, *dqkv, *dh13, *dhmul;
  float *datt;         /* (B,NH,T,T) dS of every head */
  float *dloss;        /* (B,T) d loss / d (-logp) per token */
  float *dw_partial;   /* (ceil(BT/128),C) RMSNorm weight-gradient partials */
  int32_t *tokens;     /* (B,T) the last forward's inputs, on the backend */
  int32_t *targets;    /* (B,T), -1 where there is no loss */
  int32_t *token_runs; /* (3BT+1) the embedding backward's runs of equal
                          tokens (pcuda_model.c, token_runs) */
} pcuda_acts;

typedef struct pcuda_model {
  pcuda_ctx *ctx;
  pl_config cfg;
  pl_params params; /* device pointers into params_memory */
  pl_params grads;  /* device pointers into grads_memory; same layout */
  float *params_memory, *grads_memory; /* (num_params) each, device */
  size_t num_params;
  size_t param_sizes[PL_NUM_PARAM_TENSORS];
  float *rope_cos, *rope_sin; /* (max_seq, hs/2), device, from the CPU's */
  pcuda_acts acts;
  float *acts_memory;   /* device */
  size_t acts_capacity; /* floats */
  int B, T;
  int32_t *tokens, *targets; /* (B,T) host copies of the last forward's */
  float *host_scratch;       /* (B,T) on the host: after a forward with
                                targets the per-token losses (-log p of the
                                target, 0 where it is -1), as pl_acts.losses,
                                until the next backward (its dloss) */
  int32_t *host_runs;        /* host: token_runs and its V+1 counters */
  size_t host_capacity;      /* elements of tokens, targets, host_scratch */
  int has_targets;
  float mean_loss; /* the last forward's, or -1 without targets */
  /* the bf16 path (pcuda_model_init_dtype); all zero for fp32 */
  int dtype;                /* PCUDA_DTYPE_FP32 or PCUDA_DTYPE_BF16 */
  pcuda_bf16 *params_bf16;  /* (num_params) device: the master weights
                               rounded to bf16, pl_params order, refreshed
                               after each update */
  pcuda_bf16 *bf16_scratch; /* device: a GEMM's operands rounded to bf16 */
  size_t bf16_scratch_cap;  /* elements of bf16_scratch */
} pcuda_model;

/* Builds the backend twin of the CPU model m: the same config, its current
 * parameters and RoPE tables copied to the backend, gradients zero. The
 * twin does not keep m. Returns PL_OK or PL_EENV (backend error, out of
 * memory) with why filled. Release with pcuda_model_free. */
int pcuda_model_init(pcuda_model *dm, pcuda_ctx *ctx, const pl_model *m,
                     char *why, size_t whylen);
void pcuda_model_free(pcuda_model *dm);

/* Copies all parameters (num_params floats, pl_params order) from / to the
 * host. PL_OK or the backend's sticky error. */
int pcuda_model_set_params(pcuda_model *dm, const float *params);
int pcuda_model_get_params(pcuda_model *dm, float *params);
/* Copies all gradients to the host. */
int pcuda_model_get_grads(pcuda_model *dm, float *grads);

/* pl_model_forward on the backend: tokens and targets are host arrays (B,T)
 * with the same rules; logits stay on the backend in dm->acts.logits. Waits
 * for the kernels (it sums the losses on the host). Returns the mean loss,
 * -1 without targets, NAN on bad arguments or a backend error (message on
 * stderr, as the CPU's). */
float pcuda_model_forward(pcuda_model *dm, const int32_t *tokens,
                          const int32_t *targets, int B, int T);

/* The backend bytes a forward and backward of a (B,T) batch take beyond the
 * parameters, gradients and optimiser state (the activations, their
 * gradients, and for bf16 the GEMM operand scratch), as pl_model_acts_bytes
 * counts them for the CPU: a double, since a batch a campaign file can ask
 * for overflows size_t. */
double pcuda_model_batch_bytes(const pl_config *c, int dtype, int B, int T);

/* pl_model_zero_grad. */
void pcuda_model_zero_grad(pcuda_model *dm);

/* pl_model_backward and pl_model_backward_weighted (dloss_dlogp: a host
 * array (B,T)). Return PL_OK, PL_EINPUT (no forward with targets) or
 * PL_EENV (backend error, why on stderr). */
int pcuda_model_backward(pcuda_model *dm);
int pcuda_model_backward_weighted(pcuda_model *dm, const float *dloss_dlogp);

/* ---- AdamW (policy/cuda/pcuda_adamw.c), mirroring policy/adamw.c ---- */

typedef struct pcuda_adamw {
  pcuda_ctx *ctx; /* the model's backend */
  pl_adamw_config cfg;
  float *m, *v;        /* (n) each, device, in state_memory */
  float *state_memory; /* device */
  double
      *norm_scratch; /* device: the norm's per-block partials, then the sum */
  size_t n;
  int64_t step; /* updates done so far */
} pcuda_adamw;

/* ---- bf16 with fp32 master weights (policy/cuda/pcuda_model_bf16.c) ---- */

/* fp32 -> bf16, round to nearest even, any NaN to the canonical 0x7fff:
 * the device's __float2bfloat16_rn, bit for bit. */
pcuda_bf16 pcuda_bf16_from_float(float f);
/* bf16 -> fp32, exact. */
float pcuda_bf16_to_float(pcuda_bf16 b);

/* "fp32", "bf16", or "?" for anything else. */
const char *pcuda_dtype_name(int dtype);

/* pcuda_model_init with a dtype: PCUDA_DTYPE_FP32 is pcuda_model_init
 * itself; PCUDA_DTYPE_BF16 adds the bf16 copy of the weights (cast from the
 * master) and makes every forward and backward GEMM a bf16 one. Returns
 * PL_OK, PL_EINPUT (unknown dtype) or PL_EENV, with why filled. The rest of
 * the API is the same for both; pcuda_model_get_params returns the fp32
 * master. Release with pcuda_model_free. */
int pcuda_model_init_dtype(pcuda_model *dm, pcuda_ctx *ctx, const pl_model *m,
                           int dtype, char *why, size_t whylen);

/* Copies the bf16 copy of the weights (num_params, pl_params order) to the
 * host. PL_OK, PL_EINPUT (an fp32 model has none) or the sticky error. */
int pcuda_model_get_params_bf16(pcuda_model *dm, pcuda_bf16 *params);

/* pl_adamw_init for the backend twin: zeroed state. PL_OK, PL_EINPUT (bad
 * cfg, the CPU's check and message) or PL_EENV. */
int pcuda_adamw_init(pcuda_adamw *opt, pcuda_model *dm,
                     const pl_adamw_config *cfg, char *why, size_t whylen);
void pcuda_adamw_free(pcuda_adamw *opt);

/* pl_adamw_step on the backend: returns the global gradient norm before
 * clipping (NAN on a backend error). */
float pcuda_adamw_step(pcuda_adamw *opt, pcuda_model *dm);

/* ---- sampling (policy/cuda/pcuda_sample.c, pcuda_generate.c), mirroring
 * policy/sampler.c and policy/generate.c ---- */

/* pl_sample_batch for rows rows of logits already on the backend: row b at
 * logits + b*row_stride (device; row_stride 0: every row the same), rngs
 * (rows,) on the host, one draw each unless greedy. PL_OK, PL_EINPUT (bad
 * settings or sizes; a non-finite logit, why "row g: sampling: logit i is
 * ...") or PL_EENV (backend). */
int pcuda_sample_batch(pcuda_ctx *ctx, const float *logits, size_t row_stride,
                       int rows, int vocab, const pl_sampling *s, pl_rng *rngs,
                       pl_sample_out *out, char *why, size_t whylen);

/* pl_kv_cache on the backend: k and v (L,G,max_seq,C) each, after RoPE,
 * the CPU's layout; scratch holds the cached forward's activations, grown
 * on demand, and its logits. */
typedef struct pcuda_kv_cache {
  pcuda_ctx *ctx;
  int L, G, max_seq, C;
  float *k, *v;          /* device, in memory */
  float *memory;         /* device */
  float *scratch;        /* device */
  size_t scratch_floats; /* floats the scratch holds */
  float *logits;         /* device (B*T,V): the last pcuda_forward_cached's */
  int32_t *host_ids;     /* host: tokens then rows of the last call */
  size_t host_cap;       /* int32 slots of host_ids */
} pcuda_kv_cache;

/* pl_kv_cache_init / free / copy_prefix on the backend (the same checks
 * and messages; PL_EENV for backend memory). */
int pcuda_kv_cache_init(pcuda_kv_cache *kv, pcuda_ctx *ctx,
                        const pl_config *cfg, int G, int max_seq, char *why,
                        size_t whylen);
void pcuda_kv_cache_free(pcuda_kv_cache *kv);
int pcuda_kv_cache_copy_prefix(pcuda_kv_cache *kv, int src, int dst, int n_pos);

/* pl_forward_cached on the backend: tokens (B,T) and rows (B, NULL: row b)
 * are host arrays with the CPU's rules; the logits (B*T,V) stay on the
 * backend in kv->logits. Waits for the kernels. Returns PL_OK, PL_EINPUT
 * (the CPU's checks) or PL_EENV (backend), with why filled. */
int pcuda_forward_cached(pcuda_model *dm, pcuda_kv_cache *kv,
                         const int32_t *tokens, const int *rows, int B, int T,
                         int pos0, char *why, size_t whylen);

/* pl_generate / pl_generate_notify on the backend's model: the same
 * arguments, checks, streams (pl_rng_seed_stream(seed, g) on the host),
 * stop rules and output (release with pl_generation_free); on_row runs on
 * the calling thread as each row stops. Returns PL_OK, PL_EINPUT or PL_EENV
 * (why says which). */
int pcuda_generate(pcuda_model *dm, const int32_t *prompt, int prompt_len,
                   int G, int max_new, int eos_id, const pl_sampling *sampling,
                   uint64_t seed, pl_generation *out, char *why, size_t whylen);
int pcuda_generate_notify(pcuda_model *dm, const int32_t *prompt,
                          int prompt_len, int G, int max_new, int eos_id,
                          const pl_sampling *sampling, uint64_t seed,
                          pl_generation *out, pl_row_done_fn on_row, void *ctx,
                          char *why, size_t whylen);

/* ---- a candidate's matmul behind the GEMMs: the lab's --policy-matmul
 * (policy/cuda/pcuda_runtime.c, pcuda_device.c, pack.cu) ----
 *
 * A kernel of the candidate contract (kernels/abi.h) computes C = A·B, NN,
 * row-major, contiguous (lda K, ldb N, ldc N), alpha 1, beta 0. With one
 * installed, every fp32 pcuda_gemm (the linear layers and the tied head,
 * forward and backward, and the cached forward of pcuda_generate) goes
 * through it, whatever its shape (the contract promises every M, N, K >=
 * 1): an operand that is transposed or has a wider leading dimension is
 * packed into a contiguous scratch first (pack_matrix_kernel), and unless
 * the product can go straight into C (alpha 1, beta 0, ldc N) it lands in
 * the scratch and scale_add_kernel writes alpha·product + beta·C. The
 * packing costs O(MK + KN + MN) against the GEMM's O(MNK). Attention's
 * kernels and the bf16 path's GEMMs do not use it. Trust: the kernel runs
 * in the policy's context with the policy's memory in reach (lab/
 * policy_matmul.c says what the lab checks before installing one). */

/* Computes C (M,N) = A (M,K) · B (K,N), contiguous, on the backend: 0, or
 * -1 with why filled (pcuda_gemm makes it the context's sticky error). */
typedef int (*pcuda_matmul_fn)(void *impl, const float *A, const float *B,
                               float *C, int M, int N, int K, char *why,
                               size_t whylen);

/* Routes ctx's GEMMs through fn (called with impl); fn NULL goes back to
 * cuBLAS or the tiled kernel. The caller keeps impl alive while installed.
 * Frees the scratch when uninstalling.
 *
 * The first call of each (M, N, K) also runs the default path and the two
 * products are compared on the host by kl_compare_fp32 (kernels.h: every
 * element finite and within 2e-4 x sum_k |a_ik||b_kj|, the bound computed
 * on the device by the default path on absolute values, and a relative
 * Frobenius error within 2e-5; the same rule as the CPU hook's,
 * policy/gemm_hook.c, and the lab's check before the first use). A kernel that
 * disagrees is dropped: that call and every later one take the default
 * path, and pcuda_matmul_dropped says why. A check before the first use
 * (the lab's) covers a few shapes only; a kernel may be wrong at others
 * (a decode step's two rows, say), and the policy must not train on a
 * wrong product. Installing resets the record. */
void pcuda_set_matmul(pcuda_ctx *ctx, pcuda_matmul_fn fn, void *impl);
/* 1 with why filled when the installed matmul was dropped, else 0; *checked
 * (may be NULL) gets the number of shapes checked. */
int pcuda_matmul_dropped(pcuda_ctx *ctx, long long *checked, char *why,
                         size_t whylen);

/* Device backend only: loads cubin (an sm_90 cubin of the contract, e.g.
 * kl_nvrtc_compile's) into ctx's context, finds `matmul`, and installs it
 * with its launch geometry launch = {block_x, block_y, tile_rows,
 * tile_cols, dyn_smem_bytes} (kl_launch's order; the caller validated it).
 * Grid (ceil(N/tile_cols), ceil(M/tile_rows)), as the harness launches it.
 * PL_OK, PL_EINPUT (not a device context) or PL_EENV with why (a module
 * that does not load, no `matmul`). The module lives until pcuda_close. */
int pcuda_device_load_matmul(pcuda_ctx *ctx, const void *cubin,
                             size_t cubin_size, const int launch[5], char *why,
                             size_t whylen);

/* pcuda_gemm for callers outside policy/cuda (the lab's check of a
 * candidate against the default path): row-major C = alpha op(A) op(B) +
 * beta C on the backend (pointers are device memory), through the
 * installed candidate when use_matmul is 1 and one is installed, else
 * through cuBLAS or the tiled kernel. PL_OK or the sticky error. */
int pcuda_linear_gemm(pcuda_ctx *ctx, int use_matmul, float *c, const float *a,
                      const float *b, int M, int N, int K, int lda, int ldb,
                      int ldc, int trans_a, int trans_b, float alpha,
                      float beta);

#ifdef __cplusplus
}
#endif
#endif
