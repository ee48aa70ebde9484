/*
 * policy/policy.h — the one public header of the policy module: the model
 * that writes kernels (tokenizer, decoder-only transformer forward and
 * backward in fp32 on the CPU, sampler, AdamW, checkpoints).
 *
 * The CPU code is the readable reference (llm.c style: name_forward /
 * name_backward pairs, outputs first, sizes last, shapes in comments, one
 * allocation per tensor family); policy/cuda/ mirrors it (pcuda.h). Prefix:
 * pl_. Errors are values: functions return PL_OK or a PL_E* code and write a
 * one-line reason into why.
 *
 * Sections below belong to their files: tokenizer (policy/tokenizer.c),
 * model and optimiser (policy/model.c, policy/adamw.c), sampler and
 * checkpoints (policy/sampler.c, policy/checkpoint.c).
 */
#ifndef POLICY_POLICY_H
#define POLICY_POLICY_H

#include <stddef.h>
#include <stdint.h>

enum {
  PL_OK = 0,
  PL_EINPUT = 2, /* a bad file or argument (matches the CLI exit code) */
  PL_EENV = 3,   /* out of memory, I/O failure */
};

/* ---- tokenizer (policy/tokenizer.c) ---- */
/* Byte-level BPE (file comment of policy/tokenizer.c has the details).
 * Ids 0..255 are the bytes, so any byte string round-trips exactly; then
 * the special tokens; then one id per merge in rank order. Encoding never
 * produces a special id (the caller adds bos/eos). Merges never cross the
 * pre-split chunks (identifier, punctuation and whitespace runs, each at
 * most PL_TOK_MAX_CHUNK bytes). */
typedef struct pl_tokenizer pl_tokenizer;

enum {
  PL_TOK_PAD = 256,         /* <|pad|> */
  PL_TOK_BOS = 257,         /* <|bos|> */
  PL_TOK_EOS = 258,         /* <|eos|>: end of kernel */
  PL_TOK_FIRST_MERGE = 259, /* id of merge rank 0 */
  PL_TOK_MAX_VOCAB = 65536,
  PL_TOK_MAX_CHUNK = 64, /* bytes; also the longest token */
  PL_TOK_FORMAT_VERSION = 1,
};

/* Trains on n_texts byte strings (texts[i], lens[i] bytes; NULs allowed)
 * up to vocab ids (259..PL_TOK_MAX_VOCAB). Stops early when no pair occurs
 * twice, so pl_tok_vocab_size may be less than vocab. Deterministic: the
 * same texts give the same tokenizer whatever their order. On PL_OK *out is
 * the caller's (pl_tok_free); PL_EINPUT for a bad vocab or empty corpus. */
int pl_tok_train(pl_tokenizer **out, const char *const *texts,
                 const size_t *lens, int n_texts, int vocab, char *why,
                 size_t why_len);
/* Writes / reads a .tok file. Loading checks magic, version, size,
 * sha256, header fields and that every merge uses existing ids; the
 * message names the file. PL_EINPUT bad file, PL_EENV I/O or memory. */
int pl_tok_save(const pl_tokenizer *t, const char *path, char *why,
                size_t why_len);
int pl_tok_load(pl_tokenizer **out, const char *path, char *why,
                size_t why_len);
/* The same from memory (a tokenizer embedded in a checkpoint): serialize
 * allocates *buf (the caller frees it); parse names the buffer `name` in
 * its messages. */
int pl_tok_serialize(const pl_tokenizer *t, uint8_t **buf, size_t *len);
int pl_tok_parse(pl_tokenizer **out, const void *data, size_t len,
                 const char *name, char *why, size_t why_len);
void pl_tok_free(pl_tokenizer *t);

/* Number of ids (259 + merges). */
int pl_tok_vocab_size(const pl_tokenizer *t);
/* sha256 (64 hex chars) of the file content before its checksum: the
 * tokenizer's identity, stored by checkpoints. Owned by t. */
const char *pl_tok_hash(const pl_tokenizer *t);
/* The bytes of one id (specials: their names, e.g. "<|eos|>"), *len bytes,
 * not NUL-terminated, owned by t; NULL for an id outside the vocab. */
const char *pl_tok_piece(const pl_tokenizer *t, int32_t id, size_t *len);

/* Encodes n bytes into *ids (*n_ids <= n of them; malloc'd, the caller
 * frees it, also when n is 0). Fails only when out of memory. */
int pl_tok_encode(const pl_tokenizer *t, const void *bytes, size_t n,
                  int32_t **ids, size_t *n_ids, char *why, size_t why_len);
/* Decodes n ids into *out (*out_len bytes plus a NUL; malloc'd, the
 * caller frees it). Specials decode to their names. PL_EINPUT for an id
 * outside the vocab, naming its position. */
int pl_tok_decode(const pl_tokenizer *t, const int32_t *ids, size_t n,
                  char **out, size_t *out_len, char *why, size_t why_len);

/* ---- model and optimiser (policy/model.c, policy/adamw.c) ---- */
/*
 * The model: a decoder-only transformer in fp32 (llama-style).
 *
 *   x = wte[token]                                   token embedding, no
 *                                                    position embedding
 *   for each layer:
 *     x += wo * attn(rope(q), rope(k), v)            q,k,v = wqkv * rms(x)
 *     x += w2 * (silu(w1 * rms(x)) * (w3 * rms(x)))  SwiGLU; w1,w3 = w13
 *   logits = wte * rms(x)                            head TIED to wte
 *
 * RMSNorm: y = x / sqrt(mean(x^2) + 1e-5) * weight (pre-norm, and a final
 * one). RoPE: theta 10000, applied to q and k of every head, rotating
 * INTERLEAVED pairs (2i, 2i+1) of the head dimension by pos * theta^(-2i/hs)
 * (llama2.c / Meta layout, not the half-split of HF). Attention: causal,
 * scale 1/sqrt(hs), no biases anywhere, no dropout.
 *
 * Init (pl_model_init): every matrix ~ normal(0, 0.02) from our own seeded
 * generator (splitmix64 + Box-Muller), except the residual projections wo
 * and w2, whose std is 0.02/sqrt(2*n_layers) (GPT-2's scaling, so the
 * residual stream does not grow with depth); RMSNorm weights = 1.
 *
 * Weights are stored PyTorch-style as (out, in): y = x * W^T. Each tensor is
 * contiguous and stacked over layers, in the order of pl_params.
 */
typedef struct {
  int32_t vocab;    /* V: tokens */
  int32_t d_model;  /* C: model width, a multiple of n_heads */
  int32_t n_layers; /* L */
  int32_t n_heads;  /* NH; head size hs = C/NH, even (RoPE pairs) */
  int32_t d_ff;     /* F: SwiGLU hidden size; pl_default_ff(C) = 8C/3 */
  int32_t max_seq;  /* longest sequence; sizes the RoPE tables */
} pl_config;

/* 8*d/3 rounded to the nearest multiple of 32 (at least 32). */
int pl_default_ff(int d_model);

/* Checks that cfg is usable (positive sizes, C % NH == 0, hs even); returns
 * PL_OK or PL_EINPUT with the offending field named in why. */
int pl_config_check(const pl_config *cfg, char *why, size_t why_len);

#define PL_NUM_PARAM_TENSORS 8
typedef struct {
  float *wte;       /* (V,C)    embedding and (tied) output head */
  float *rms_att;   /* (L,C)    pre-attention RMSNorm weight */
  float *wqkv;      /* (L,3C,C) rows [0,C) q, [C,2C) k, [2C,3C) v */
  float *wo;        /* (L,C,C)  attention output projection */
  float *rms_ffn;   /* (L,C)    pre-MLP RMSNorm weight */
  float *w13;       /* (L,2F,C) rows [0,F) gate w1, [F,2F) up w3 */
  float *w2;        /* (L,C,F)  MLP down projection */
  float *rms_final; /* (C)      final RMSNorm weight */
} pl_params;

/* Names and element counts of the parameter tensors, in pl_params order
 * (the order they lie in memory and in checkpoints). */
extern const char *const pl_param_names[PL_NUM_PARAM_TENSORS];
void pl_param_sizes(const pl_config *cfg, size_t sizes[PL_NUM_PARAM_TENSORS]);
/* 1 for the tensors AdamW decays (wqkv, wo, w13, w2), 0 for norms and wte. */
int pl_param_decays(int tensor);

/* Forward activations for a (B,T) batch, plus the backward's scratch; all in
 * one allocation (acts_memory). Stacked tensors are per layer. */
typedef struct {
  float *encoded;  /* (B,T,C)      wte[tokens], the residual stream's start */
  float *ln1;      /* (L,B,T,C)    rms_att(x) */
  float *ln1_rstd; /* (L,B,T) */
  float *qkv;      /* (L,B,T,3C)   q,k after RoPE, v */
  float *att;      /* (L,B,NH,T,T) softmax probabilities (0 above diag) */
  float *atty;     /* (L,B,T,C)    attention output before wo */
  float *res_att;  /* (L,B,T,C)    residual after attention */
  float *ln2;      /* (L,B,T,C) */
  float *ln2_rstd; /* (L,B,T) */
  float *h13;      /* (L,B,T,2F)   gate and up pre-activations */
  float *hmul;     /* (L,B,T,F)    silu(gate) * up */
  float *res_ffn;  /* (L,B,T,C)    residual after the MLP */
  float *lnf;      /* (B,T,C) */
  float *lnf_rstd; /* (B,T) */
  float *logits;   /* (B,T,V) */
  float *lse;      /* (B,T)        log-sum-exp of each logits row */
  float *losses;   /* (B,T)        -log p(target); 0 where target == -1 */
  /* backward scratch (contents undefined between calls) */
  float *dlogits; /* (B,T,V) */
  float *dres;    /* (B,T,C)      gradient of the residual stream */
  float *dln;     /* (B,T,C) */
  float *datty;   /* (B,T,C) */
  float *dqkv;    /* (B,T,3C) */
  float *dh13;    /* (B,T,2F) */
  float *dhmul;   /* (B,T,F) */
  float *datt;    /* (PL_POOL_MAX,T,T) each thread's head's dP / dS */
  float *part;    /* (PL_POOL_MAX,max(C,V)) each thread's partial sums */
} pl_acts;

typedef struct {
  pl_config cfg;
  pl_params params; /* points into params_memory */
  pl_params grads;  /* points into grads_memory; same layout */
  float *params_memory;
  float *grads_memory; /* gradients accumulate (+=) until pl_model_zero_grad */
  size_t num_params;
  size_t param_sizes[PL_NUM_PARAM_TENSORS];
  float *rope_cos, *rope_sin; /* (max_seq, hs/2) */
  /* activations: allocated by the first forward, grown when (B,T) needs */
  pl_acts acts;
  float *acts_memory;
  size_t acts_capacity; /* floats */
  int B, T;             /* the last forward's batch */
  int32_t *tokens;      /* (B,T) copies of the last forward's inputs */
  int32_t *targets;     /* (B,T) or all -1 when forward had none */
  int has_targets;
  float mean_loss; /* the last forward's, or -1 without targets */
} pl_model;

/* Allocates params and grads for cfg and fills params deterministically
 * from seed (see above); grads start at zero. Returns PL_OK, PL_EINPUT (bad
 * cfg) or PL_EENV (out of memory), with why filled. The model owns its
 * memory; release it with pl_model_free. */
int pl_model_init(pl_model *m, const pl_config *cfg, uint64_t seed, char *why,
                  size_t why_len);
void pl_model_free(pl_model *m);

/* Uses n threads for the matmuls (OpenBLAS) and for the element-wise loops,
 * attention and AdamW (policy/parallel.c). Default: OpenBLAS's own count. */
void pl_set_num_threads(int n);

/* Internal (policy/parallel.c): the fork-join pool behind the model's and
 * AdamW's loops. pl_parallel_for runs fn(ctx, begin, end, slot) over
 * contiguous slices of [0,n), each at least min_slice long, slot in
 * [0, threads) naming the slice's thread (for per-thread scratch), the
 * calling thread doing slot 0; it returns when every slice is done, and
 * returns the number of slices. Inline (one slice) when nested, when
 * another region is running, or with one thread. */
#define PL_POOL_MAX 8
typedef void (*pl_par_fn)(void *ctx, size_t begin, size_t end, int slot);
int pl_parallel_for(pl_par_fn fn, void *ctx, size_t n, size_t min_slice);
void pl_pool_set_threads(int n);
int pl_pool_threads(void); /* the count a region uses, <= PL_POOL_MAX */

/* The linear layers' GEMM. Every linear layer and the tied head, forward
 * and backward (pl_model_forward/backward, pl_forward_cached), computes
 *   C = alpha op(A) op(B) + beta C,  row-major, op(X) = trans ? X^T : X,
 * with cblas_sgemm's meaning of M, N, K and the leading dimensions. By
 * default that is cblas_sgemm itself. A hook may take these calls (the
 * lab's --policy-matmul: a kernel a campaign found, run on the CPU
 * emulator): it returns 0 when it computed C, nonzero to leave the call to
 * BLAS. Attention's per-head products always stay on BLAS. The hook is
 * process-wide: set it before any compute and not while a model runs;
 * NULL restores BLAS. Without a hook the CPU path is what it was (one
 * pointer test per GEMM). The first call of every new shape also runs
 * through BLAS and the two products are compared (kl_compare_fp32); a
 * hook that disagrees is dropped, that call keeping BLAS's product
 * (policy/gemm_hook.c). Setting a hook resets that record. */
typedef int (*pl_gemm_hook)(void *ctx, int trans_a, int trans_b, int M, int N,
                            int K, float alpha, const float *A, int lda,
                            const float *B, int ldb, float beta, float *C,
                            int ldc);
void pl_set_gemm_hook(pl_gemm_hook fn, void *ctx);
/* One linear-layer GEMM: through the hook when one is set and takes it,
 * else cblas_sgemm (row-major). */
void pl_linear_gemm(int trans_a, int trans_b, int M, int N, int K, float alpha,
                    const float *A, int lda, const float *B, int ldb,
                    float beta, float *C, int ldc);
/* 1 with why filled when the hook was dropped for disagreeing with BLAS,
 * else 0; *checked (may be NULL) gets the number of shapes checked. */
int pl_gemm_hook_dropped(long long *checked, char *why, size_t whylen);
/* The element bound kl_compare_fp32 needs for one such call, in S (laid
 * out as C): |alpha| |op(A)| |op(B)| + |beta| |C0|, by BLAS on absolute
 * values. 0, or -1 when out of memory. */
int pl_gemm_bound(int trans_a, int trans_b, int M, int N, int K, float alpha,
                  const float *A, int lda, const float *B, int ldb, float beta,
                  const float *C0, float *S, int ldc);
/* The same without the hook: BLAS always (what a hook's work is checked
 * against). */
void pl_blas_gemm(int trans_a, int trans_b, int M, int N, int K, float alpha,
                  const float *A, int lda, const float *B, int ldb, float beta,
                  float *C, int ldc);

/* Runs the model on tokens (B,T), every value in [0,V), T <= max_seq.
 * Logits land in m->acts.logits (B,T,V). With targets (B,T) (-1 = no loss
 * at that position) it returns the mean cross-entropy over positions with
 * target != -1 (0 when there are none) and keeps -log p(target) per
 * position in m->acts.losses; with targets NULL it returns -1. Returns NAN
 * when the arguments are out of range or memory runs out (message on
 * stderr). */
float pl_model_forward(pl_model *m, const int32_t *tokens,
                       const int32_t *targets, int B, int T);

/* The bytes of activations (and their gradients) a (B,T) forward and
 * backward of a model of config c keeps; the attention's B n_heads T^2
 * per layer dominates a long batch. As a double: it can pass 2^64. */
double pl_model_acts_bytes(const pl_config *c, int B, int T);

/* Sets every gradient to zero. */
void pl_model_zero_grad(pl_model *m);

/* Adds the gradient of the last forward's mean loss to m->grads. Needs a
 * forward with targets; returns PL_OK, PL_EINPUT (no such forward) or
 * PL_EENV (out of memory). */
int pl_model_backward(pl_model *m);

/* The GRPO hook. Adds to m->grads the gradient of a loss whose derivative
 * with respect to logp[b,t] = log softmax(logits[b,t])[targets[b,t]] is
 * dloss_dlogp[b,t] (B,T), for the targets of the last forward (positions
 * with target -1 contribute nothing). Since d logp / d logits = onehot - p,
 *   dloss/dlogits[b,t,:] = dloss_dlogp[b,t] * (onehot(target) - softmax)
 *                        = (softmax - onehot) * (-dloss_dlogp[b,t]).
 * So the plain mean cross-entropy is dloss_dlogp = -1/N on each of the N
 * counted positions, and a policy-gradient loss -A*logp is dloss_dlogp = -A.
 * Logits are taken at temperature 1. Returns as pl_model_backward. */
int pl_model_backward_weighted(pl_model *m, const float *dloss_dlogp);

/* AdamW (policy/adamw.c): decoupled weight decay on the tensors
 * pl_param_decays names, bias correction, clipping by the global gradient
 * norm, and a schedule: linear warm-up over warmup_steps to lr, then
 * cosine (or linear) decay to lr*final_lr_frac at total_steps, flat after.
 * The update, torch.optim.AdamW's: p -= lr*(mhat/(sqrt(vhat)+eps) + wd*p). */
enum { PL_SCHED_COSINE = 0, PL_SCHED_LINEAR = 1 };
typedef struct {
  float lr; /* peak learning rate */
  float beta1, beta2, eps;
  float weight_decay;
  float grad_clip;     /* max global L2 norm; <= 0: no clipping */
  int warmup_steps;    /* 0: start at lr */
  int total_steps;     /* end of the decay */
  float final_lr_frac; /* lr at total_steps, as a fraction of lr */
  int schedule;        /* PL_SCHED_COSINE or PL_SCHED_LINEAR */
} pl_adamw_config;

/* Sensible defaults for priming: lr 3e-4, betas (0.9, 0.95), eps 1e-8,
 * wd 0.1, clip 1.0, warm-up 100 of 1000 steps, cosine to 10%. */
pl_adamw_config pl_adamw_defaults(void);

typedef struct {
  pl_adamw_config cfg;
  float *m, *v; /* (num_params) each; both in state_memory */
  float *state_memory;
  size_t n;
  int64_t step; /* updates done so far */
} pl_adamw;

/* The learning rate of update number step (0-based). */
float pl_adamw_lr_at(const pl_adamw_config *cfg, int64_t step);

/* Allocates zeroed state for model m. Returns PL_OK, PL_EINPUT (bad cfg) or
 * PL_EENV. Free with pl_adamw_free. */
int pl_adamw_init(pl_adamw *opt, const pl_model *m, const pl_adamw_config *cfg,
                  char *why, size_t why_len);
void pl_adamw_free(pl_adamw *opt);

/* One update of m->params from m->grads at lr = pl_adamw_lr_at(step), after
 * clipping; step advances. Returns the global gradient norm before
 * clipping. Gradients are left as they were (call pl_model_zero_grad). */
float pl_adamw_step(pl_adamw *opt, pl_model *m);

/* ---- sampler and checkpoints (policy/sampler.c, policy/checkpoint.c) ---- */
/* Sampling turns one row of logits into one token (policy/sampler.c).
 *
 * Order, as HF transformers' generate: temperature, then top-p, then min-p,
 * then renormalise and draw. Both filters are measured on the full
 * temperature-scaled distribution p = softmax(logits / T) and each keeps a
 * prefix of the tokens sorted by p (descending; ties by lower id), so the
 * kept set is the shorter prefix:
 *   top-p: the smallest prefix whose mass is >= top_p (1 = off);
 *   min-p: every token with p >= min_p * p_max (0 = off).
 * The argmax always survives. temperature 0 is greedy: the argmax, ties to
 * the lowest id, and no random number is drawn.
 *
 * Log-probabilities (pl_sample_out):
 *   logprob        log softmax(logits / T)[token], no truncation (T = 1
 *                  when greedy). This is the policy's log-prob that GRPO's
 *                  ratio and KL use: TRL divides the logits by the sampling
 *                  temperature and takes log_softmax, ignoring top-p/min-p.
 *                  The trainer must recompute the same number from its own
 *                  forward pass: pl_token_logprob gives it.
 *   logprob_sample log of the probability the token was actually drawn with
 *                  (after truncation and renormalisation; 0 when greedy):
 *                  for importance-sampling corrections and diagnostics.
 * Logits must be finite (NaN or +-inf is an error naming the index); mask a
 * token with a large negative finite value such as -1e30. Probabilities are
 * computed in double with the maximum subtracted. */

/* xoshiro256** state; seed it with pl_rng_seed*, then it is yours to copy. */
typedef struct pl_rng {
  uint64_t s[4];
} pl_rng;

/* Seeds from one 64-bit value through splitmix64 (same as stream 0). */
void pl_rng_seed(pl_rng *rng, uint64_t seed);
/* Seeds an independent stream, e.g. one per sequence g of a group, so a
 * sequence's tokens do not depend on how many others run beside it. */
void pl_rng_seed_stream(pl_rng *rng, uint64_t seed, uint64_t stream);
uint64_t pl_rng_next(pl_rng *rng);
/* A uniform double in [0, 1) from the top 53 bits of pl_rng_next. */
double pl_rng_uniform(pl_rng *rng);

typedef struct pl_sampling {
  float temperature; /* >= 0; 0 = greedy */
  float top_p;       /* (0, 1]; 1 = off */
  float min_p;       /* [0, 1]; 0 = off */
} pl_sampling;

/* {temperature 1, top_p 1, min_p 0}: plain sampling from the policy. */
pl_sampling pl_sampling_default(void);
/* PL_OK, or PL_EINPUT with the field and the expected range in why. */
int pl_sampling_validate(const pl_sampling *s, char *why, size_t whylen);

typedef struct pl_sample_out {
  int token;
  float logprob;        /* log softmax(logits / T)[token]; see above */
  float logprob_sample; /* log q(token) under the truncated distribution */
  int n_kept;           /* tokens left after top-p and min-p */
} pl_sample_out;

/* Bytes of scratch pl_sample and friends use for this vocab; pass a buffer
 * of that size (caller-owned, reusable, 8-byte aligned as from malloc) to
 * avoid an allocation per token, or NULL to let each call allocate. */
size_t pl_sample_scratch_bytes(int vocab);

/* Draws one token from logits (vocab,) under s, advancing rng by one draw
 * (none when greedy). Returns PL_OK, PL_EINPUT (bad settings or logits;
 * why says which) or PL_EENV (no memory). */
int pl_sample(const float *logits, int vocab, const pl_sampling *s, pl_rng *rng,
              void *scratch, pl_sample_out *out, char *why, size_t whylen);

/* The same for rows sequences at once: logits (rows, vocab) row-major,
 * rngs (rows,) one stream per row, out (rows,). Stops at the first bad row
 * (why starts "row g: "); the rows before it are already drawn. */
int pl_sample_batch(const float *logits, int rows, int vocab,
                    const pl_sampling *s, pl_rng *rngs, void *scratch,
                    pl_sample_out *out, char *why, size_t whylen);

/* The distribution pl_sample draws from, spelled out: the kept token ids in
 * draw order (probability descending, ties by id) into ids (vocab,), their
 * renormalised probabilities into probs (vocab,; may be NULL), the count into
 * *n_kept. For tests and for explaining a setting. */
int pl_sampling_support(const float *logits, int vocab, const pl_sampling *s,
                        void *scratch, int *ids, double *probs, int *n_kept,
                        char *why, size_t whylen);

/* log softmax(logits / temperature)[token] (temperature 0 counts as 1): the
 * number pl_sample reports as logprob, for the trainer to agree with. */
int pl_token_logprob(const float *logits, int vocab, float temperature,
                     int token, float *logprob, char *why, size_t whylen);

/* Checkpoints (policy/checkpoint.c): one file holding the model config, the
 * tokenizer's identity, the parameters and (optionally) AdamW's state.
 *
 * Layout, all little-endian, version 1:
 *   header, 256 bytes:
 *     0   char[4] magic "KLCK"       4   u32 version (1)
 *     8   u32 header_bytes (256)     12  u32 flags (bit 0: optimiser state)
 *     16  i32 vocab   20 i32 d_model   24 i32 n_layers   28 i32 n_heads
 *     32  i32 d_ff    36 i32 max_seq   40 f32 rope_theta 44 f32 norm_eps
 *     48  u64 step (training steps done)
 *     56  u64 n_params (= pl_config_param_count(config))
 *     64  u64 opt_step (AdamW's t for bias correction; 0 without state)
 *     72  char[64] tokenizer sha256, lowercase hex, no NUL
 *     136 u64 run_id (the campaign run that wrote it; 0: none, as prime
 *         and files from before the field)
 *     144 zeros to 256 (reserved; must be zero in version 1)
 *   params: n_params f32
 *   if flags bit 0: m (n_params f32), then v (n_params f32)
 *   trailer: 32 bytes, the sha256 of every byte before it.
 *
 * The params array is stored flat, as the model holds it (pl_params order,
 * see the model section). pl_config_param_count counts that layout from the
 * config alone, so a loader needs no model code; it must equal the sum of
 * pl_param_sizes (the head is tied to wte, no biases):
 *   wte V*C + rms_att L*C + wqkv L*3C*C + wo L*C*C + rms_ffn L*C
 *   + w13 L*2F*C + w2 L*C*F + rms_final C
 *   = V*C + L*(2C + 4C^2 + 3*C*F) + C. */

#define PL_CKPT_MAGIC "KLCK"
#define PL_CKPT_VERSION 1
#define PL_CKPT_HEADER_BYTES 256
#define PL_CKPT_FLAG_OPTIMISER 1u
/* Configs past these caps are typos or corruption, not models: 2^32
 * parameters would already be 16 GiB of fp32 before optimiser state. */
#define PL_CKPT_MAX_PARAMS (1ull << 32)
#define PL_CKPT_MAX_DIM (1 << 24) /* any one of vocab, d_model, d_ff, ... */
/* max_seq does not enter the parameter count, so the file's size does not
 * bound it, yet the RoPE tables (max_seq x head size floats) and a
 * sampler's KV cache grow with it; attention is quadratic in it too. A
 * 2^16-token kernel is far past any the lab asks for (prime writes 2048). */
#define PL_CKPT_MAX_SEQ (1 << 16)
#define PL_CKPT_MAX_LAYERS 1024
/* AdamW's step count: past 2^53 its double no longer counts by one, and a
 * value that large (or a negative int64) is corruption; beta^t needs t >= 1
 * after the increment. */
#define PL_CKPT_MAX_OPT_STEP (1ull << 53)

typedef struct pl_ckpt_header {
  pl_config config;
  float rope_theta;          /* RoPE base the model used (10000) */
  float norm_eps;            /* RMSNorm epsilon the model used (1e-5) */
  char tokenizer_sha256[65]; /* 64 lowercase hex characters + NUL */
  uint64_t step;             /* training steps done */
  uint64_t n_params;         /* filled in by save; checked by load */
  uint64_t opt_step;         /* AdamW's t; kept only with m and v */
  uint32_t flags;            /* filled in by save: m and v given or not */
  uint64_t run_id; /* `kernlab run`'s results file's run_id; 0: none */
  /* filled in by load: the file's sha256 trailer (64 hex digits), which
   * load checked against the contents; tells two checkpoints apart */
  char sha256[65];
} pl_ckpt_header;

/* The parameter count of the layout above, or 0 when the config is not one
 * a checkpoint may hold (sizes < 1 or past PL_CKPT_MAX_DIM, n_heads not
 * dividing d_model into an even head size, more than PL_CKPT_MAX_PARAMS). */
uint64_t pl_config_param_count(const pl_config *c);

/* PL_OK when params, m and v (n each; m, v may be NULL) are finite and v
 * is non-negative; else PL_EINPUT naming the first bad value, its tensor
 * and layer, after `where`. A training loop asks this before it saves: a
 * non-finite value means the update diverged, which pl_ckpt_save refuses
 * too. */
int pl_ckpt_values_finite(const pl_config *c, const float *params, size_t n,
                          const float *m, const float *v, const char *where,
                          char *why, size_t whylen);

/* Writes a checkpoint atomically: to "path.tmp.PID" in the same folder,
 * fsync'd, renamed over path, folder fsync'd; on any failure the temporary
 * file is removed and path is untouched. params (n,) with n the config's
 * count; m and v (n,) both or neither (NULL: no optimiser state). Returns
 * PL_OK, PL_EINPUT (bad header or sizes) or PL_EENV (I/O), why naming the
 * file and field. */
int pl_ckpt_save(const char *path, const pl_ckpt_header *h, const float *params,
                 size_t n, const float *m, const float *v, char *why,
                 size_t whylen);

/* Reads and validates a checkpoint: magic, version, flags, exact file size,
 * the trailer checksum, then every header field and n_params against the
 * config. On PL_OK fills *out and hands back malloc'd arrays the caller
 * frees: *params (n_params,), and *m, *v (n_params,) when the file has
 * optimiser state, else NULL (m and v may be NULL pointers to skip loading
 * them). On failure nothing is allocated and why names the file and what was
 * wrong: PL_EINPUT for a bad file, PL_EENV when it cannot be read. */
int pl_ckpt_load(const char *path, pl_ckpt_header *out, float **params,
                 float **m, float **v, char *why, size_t whylen);

/* The header alone, validated as pl_ckpt_load validates it (the file's
 * size included, not its checksum): PL_OK with *out, or PL_EINPUT/PL_EENV
 * with why. For a check before a save (whose run's checkpoint is there?). */
int pl_ckpt_peek(const char *path, pl_ckpt_header *out, char *why,
                 size_t whylen);

/* Compares the checkpoint's tokenizer hash with the one of the tokenizer
 * about to be used (64 hex characters); PL_EINPUT with both hashes and what
 * it means when they differ. */
int pl_ckpt_check_tokenizer(const pl_ckpt_header *h, const char *sha256_hex,
                            char *why, size_t whylen);

/* ---- GRPO math (policy/grpo.c) ---- */
/*
 * Pure functions, no model: rewards -> advantages, and per-token log-probs
 * -> the GRPO loss and its gradient d loss / d logp, which
 * pl_model_backward_weighted turns into parameter gradients. The formulas
 * are TRL's GRPOTrainer (shared/research/policy-anchors.md §3.2), checked
 * against float64 PyTorch golden values (tests/data/grpo_golden.json) and a
 * torch re-implementation (tests/python/test_grpo_torch.py).
 *
 * Advantages (completions grouped in order: group g = rows g*G .. g*G+G-1):
 *   A_i = r_i - mean_group(r)                     (scale_rewards none)
 *   A_i = (r_i - mean_group(r)) / (std + 1e-4)    (group: std of the group;
 *                                                  batch: std of all rewards)
 *   std with Bessel's correction (divide by n-1). NaN rewards are left out
 *   of means and stds and get A = 0; so does every row when a std is over
 *   fewer than 2 rewards (TRL: nanstd is NaN, NaN advantages become 0).
 *
 * Per-token loss, token t of completion i (l = logp, the current policy):
 *   rho  = exp(l - l_old)
 *   L    = -min(rho*A_i, clamp(rho, 1-eps_low, 1+eps_high)*A_i)
 *          + beta * (exp(l_ref - l) - (l_ref - l) - 1)        (k3 KL)
 *   dL/dl = -rho*A_i*[unclipped] + beta*(1 - exp(l_ref - l)),
 *   clipped iff A_i > 0 and rho > 1+eps_high, or A_i < 0 and rho < 1-eps_low.
 * Aggregation over the mask m (B,T) (weights; 0/1 in practice):
 *   grpo     (1/B) sum_i [ sum_t m L / max(sum_t m, 1) ]
 *   bnpo     sum_it m L / max(sum_it m, 1)
 *   dr_grpo  sum_it m L / (B * max_completion_length)
 *   dapo     sum_it m L / max(num_items, 1), num_items = cfg->num_items or,
 *            when that is 0, sum_it m (this call's active tokens)
 * grpo, bnpo and dr_grpo are then divided by grad_accum_steps (TRL); dapo
 * is not, its num_items being the token count of the whole optimiser step.
 * dloss_dlogp[i,t] = weight(i,t) * m[i,t] * dL/dl: 0 where m is 0.
 */
enum {
  PL_GRPO_LOSS_GRPO = 0, /* DeepSeekMath: mean over sequences of token means */
  PL_GRPO_LOSS_BNPO = 1, /* token mean over the micro-batch */
  PL_GRPO_LOSS_DR_GRPO = 2, /* token sum / (B * max_completion_length) */
  PL_GRPO_LOSS_DAPO = 3,    /* token sum / tokens of the optimiser step */
};
enum {
  PL_GRPO_SCALE_GROUP = 0, /* divide by the group's std (+1e-4) */
  PL_GRPO_SCALE_BATCH = 1, /* divide by the whole batch's std (+1e-4) */
  PL_GRPO_SCALE_NONE = 2,  /* no division (Dr. GRPO) */
};

typedef struct pl_grpo_config {
  int loss_type;             /* PL_GRPO_LOSS_* */
  int scale_rewards;         /* PL_GRPO_SCALE_* */
  double beta;               /* k3 KL coefficient, >= 0; 0: no reference */
  double eps_low, eps_high;  /* clip range [1-eps_low, 1+eps_high] */
  int max_completion_length; /* dr_grpo's constant normaliser, >= 1 */
  int mask_truncated;        /* 1: truncated completions get no loss */
  int grad_accum_steps;      /* grpo/bnpo/dr_grpo divide by it; 0 = 1 */
  double num_items;          /* dapo's normaliser; 0: this call's tokens */
} pl_grpo_config;

/* TRL's defaults: dapo, group scaling, beta 0, eps 0.2/0.2, max length 512,
 * no truncation masking, no accumulation, num_items 0. */
pl_grpo_config pl_grpo_defaults(void);

/* PL_OK, or PL_EINPUT with the field and the expected range in why. */
int pl_grpo_config_check(const pl_grpo_config *cfg, char *why, size_t why_len);

/* Group-relative advantages of n_groups*G rewards (grouped in order) into
 * adv (n_groups*G), by scale_rewards (PL_GRPO_SCALE_*) as above, computed
 * in double. PL_EINPUT (why says which) for n_groups < 1, G < 1 or an
 * unknown scale. */
int pl_grpo_advantages(float *adv, const double *rewards, int n_groups, int G,
                       int scale_rewards, char *why, size_t why_len);

typedef struct pl_grpo_stats {
  double loss;          /* the aggregated loss (also what the gradient is of) */
  double policy_loss;   /* its clipped-surrogate part */
  double kl_loss;       /* its beta * k3 part (loss = policy_loss + kl_loss) */
  double kl_mean;       /* masked token mean of k3 (0 when beta = 0) */
  double ratio_mean;    /* masked token mean of rho */
  double clip_low;      /* fraction of active tokens with A<0, rho<1-eps_low */
  double clip_high;     /* fraction with A>0, rho>1+eps_high */
  double clip_fraction; /* clip_low + clip_high */
  double active_tokens; /* sum of the mask after truncation masking */
} pl_grpo_stats;

/* The loss of one micro-batch of B completions of T tokens and its
 * gradient. Inputs (B,T) row-major: logp (current policy), old_logp
 * (behaviour policy; NULL: the same as logp, so rho = 1, TRL's
 * num_iterations = 1 case), ref_logp (frozen reference; may be NULL only
 * when beta = 0), mask (B,T) (completion mask, 0 on padding), advantages
 * (B) (one per completion, from pl_grpo_advantages or a slice of it),
 * truncated (B) (nonzero: the completion hit the length limit; NULL: none
 * did; used only with mask_truncated). Writes dloss_dlogp (B,T) and *stats
 * (stats->loss is the loss). All arithmetic in double. Returns PL_OK or
 * PL_EINPUT (bad config, sizes or a missing ref_logp; why says which);
 * nothing is written on failure. The caller owns every buffer. */
int pl_grpo_loss(float *dloss_dlogp, pl_grpo_stats *stats,
                 const pl_grpo_config *cfg, const float *logp,
                 const float *old_logp, const float *ref_logp,
                 const float *advantages, const float *mask,
                 const uint8_t *truncated, int B, int T, char *why,
                 size_t why_len);

/* ---- generation with a KV cache (policy/generate.c) ---- */
/* Sampling-time inference: the forward with a KV cache, and G completions
 * of one prompt decoded as a batch (the per-step matmuls are (G_live,C) by
 * the weights), each row with its own RNG stream pl_rng_seed_stream(seed,
 * row), so a row's tokens do not depend on how many run beside it. The math
 * is policy/model.c's; the cached logits match pl_model_forward's to float
 * summation order (tests/unit/test_generate.c: 1e-4). */

/* Keys and values of every layer for G rows of up to max_seq positions,
 * after RoPE: k and v are (L,G,max_seq,C) each, in one allocation (memory).
 * scratch is the cached forward's working memory, grown on demand. */
typedef struct pl_kv_cache {
  int L, G, max_seq, C;
  float *k, *v; /* (L,G,max_seq,C) each; point into memory */
  float *memory;
  float *scratch;
  size_t scratch_cap; /* floats */
} pl_kv_cache;

/* Allocates a cache for G rows of max_seq positions (1..cfg->max_seq).
 * Returns PL_OK, PL_EINPUT (bad G or max_seq) or PL_EENV, with why filled.
 * The cache owns its memory; release it with pl_kv_cache_free. */
int pl_kv_cache_init(pl_kv_cache *kv, const pl_config *cfg, int G, int max_seq,
                     char *why, size_t whylen);
void pl_kv_cache_free(pl_kv_cache *kv);

/* Copies positions [0,n_pos) of row src to row dst in every layer (a shared
 * prompt, prefilled once). PL_OK, or PL_EINPUT for rows or n_pos out of
 * range. */
int pl_kv_cache_copy_prefix(pl_kv_cache *kv, int src, int dst, int n_pos);

/* Runs tokens (B,T) through the model: token (b,t) belongs to cache row
 * rows[b] (rows NULL: row b; rows distinct) at position pos0 + t, and
 * attends to that row's positions 0..pos0+t, whose keys and values must be
 * in the cache already (positions pos0.. are written by this call). Writes
 * logits (B,T,V) at temperature 1. Returns PL_OK, PL_EINPUT (a size,
 * position, row or token out of range, or a cache for another model) or
 * PL_EENV (no memory for the scratch), with why filled. */
int pl_forward_cached(const pl_model *m, pl_kv_cache *kv, const int32_t *tokens,
                      const int *rows, int B, int T, int pos0, float *logits,
                      char *why, size_t whylen);

/* Why a generated row stopped. */
enum {
  PL_STOP_EOS = 1,     /* sampled the end token (kept as its last token) */
  PL_STOP_MAX_NEW = 2, /* max_new tokens without the end token */
  PL_STOP_MAX_SEQ = 3, /* prompt + completion reached the model's max_seq */
};

/* G completions; row g's token i is tokens[g*max_new + i] for i <
 * lengths[g] (the end token included when it stopped the row), -1 past it.
 * logprobs is pl_sample_out.logprob of each token (log softmax(logits/T) at
 * the token, untruncated: GRPO's old log-prob, what pl_token_logprob gives
 * from a full forward), logprobs_sample its logprob_sample; both 0 past the
 * length. truncated[g] = 1 when the row stopped without its end token
 * (stop[g] PL_STOP_MAX_NEW or PL_STOP_MAX_SEQ). One allocation (memory). */
typedef struct pl_generation {
  int G, max_new;         /* max_new: the rows' stride, at most the room max_seq
                           * leaves after the prompt (a request of 10^6 tokens
                           * allocates no more than can be generated) */
  int max_new_asked;      /* what the caller asked for (0: max_new) */
  int32_t *tokens;        /* (G,max_new) */
  float *logprobs;        /* (G,max_new) */
  float *logprobs_sample; /* (G,max_new) */
  int32_t *lengths;       /* (G) */
  int32_t *stop;          /* (G) PL_STOP_* */
  uint8_t *truncated;     /* (G) */
  void *memory;
} pl_generation;

/* Samples G completions of prompt (prompt_len tokens, 1..max_seq-1): the
 * prompt is prefilled once and its keys and values copied to every row;
 * then each step feeds the last token of every unfinished row as one batch
 * and draws the next with pl_sample under sampling, row g from stream
 * pl_rng_seed_stream(seed, g). A row stops at eos_id (-1: no end token), at
 * max_new tokens, or when prompt + completion reach max_seq. Fills *out,
 * which the caller releases with pl_generation_free. Returns PL_OK, PL_EINPUT
 * (G < 1, max_new < 1, a prompt empty, too long or with tokens outside the
 * vocab, eos_id out of range, bad sampling settings) or PL_EENV, with why
 * filled; on error *out holds nothing. */
int pl_generate(const pl_model *m, const int32_t *prompt, int prompt_len, int G,
                int max_new, int eos_id, const pl_sampling *sampling,
                uint64_t seed, pl_generation *out, char *why, size_t whylen);

/* pl_generate, and on_row(ctx, out, g) is called as soon as row g stops
 * (its tokens, log-probs, length and stop are final then), so a caller can
 * start working on finished rows while the others are still sampled. The
 * callback runs on the sampling thread; on_row may be NULL. */
typedef void (*pl_row_done_fn)(void *ctx, const pl_generation *out, int row);
int pl_generate_notify(const pl_model *m, const int32_t *prompt, int prompt_len,
                       int G, int max_new, int eos_id,
                       const pl_sampling *sampling, uint64_t seed,
                       pl_generation *out, pl_row_done_fn on_row, void *ctx,
                       char *why, size_t whylen);

void pl_generation_free(pl_generation *g);

/* ---- the host side of generation, shared with its device twin
 * (policy/cuda/pcuda_generate.c), so both check the same things with the
 * same words and stop rows by the same rules ---- */

/* Writes fmt into why (when why and whylen) and returns rc. */
int pl_fail(char *why, size_t whylen, int rc, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* pl_kv_cache_init's checks of G and max_seq: PL_OK or PL_EINPUT. */
int pl_kv_cache_check(const pl_config *cfg, int G, int max_seq, char *why,
                      size_t whylen);
/* pl_forward_cached's checks for a cache of L layers, width C, G rows and
 * max_seq positions: PL_OK or PL_EINPUT. */
int pl_forward_cached_check(const pl_config *cfg, int L, int C, int G,
                            int max_seq, const int32_t *tokens, const int *rows,
                            int B, int T, int pos0, char *why, size_t whylen);
/* pl_generate's checks of its arguments: PL_OK or PL_EINPUT. */
int pl_generate_check(const pl_config *cfg, const int32_t *prompt,
                      int prompt_len, int G, int max_new, int eos_id,
                      const pl_sampling *sampling, char *why, size_t whylen);
/* out for G rows of max_new tokens in one block: tokens -1, the rest 0.
 * PL_OK or PL_EENV. */
int pl_generation_alloc(pl_generation *out, int G, int max_new);
/* Records so as token i of row g (a row holds at most cap tokens); returns
 * 1 when the row stops there (stop and truncated set), else 0. */
int pl_generation_record(pl_generation *out, int g, int i,
                         const pl_sample_out *so, int eos_id, int cap);

#endif
