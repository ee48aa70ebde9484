/*
 * lab/policy_device.h — where the policy computes for `kernlab prime`,
 * `run` and `generate` (--policy-device cpu|gpu|auto, --policy-dtype
 * fp32|bf16): the CPU model of
 * policy/policy.h, or its twin on a device through the policy's CUDA
 * runtime (policy/cuda/pcuda.h). Not a public header: prime_cmd.c,
 * run_cmd.c and generate_cmd.c share it with lab/policy_device.c and
 * lab/policy_matmul.c.
 *
 * The CPU model stays the one of record: checkpoints are written from it,
 * so on a device lab_policy_sync copies the parameters and AdamW's state
 * back before each save. Every other call goes to the device when there is
 * one, and to the CPU otherwise, with the same meaning (pcuda.h's functions
 * mirror the CPU's).
 *
 * It also declares --policy-matmul RUN.h5 (lab/policy_matmul.c): a kernel
 * from a results file behind the policy's GEMMs, on either side.
 */
#ifndef LAB_POLICY_DEVICE_H
#define LAB_POLICY_DEVICE_H

#include "policy/cuda/pcuda.h"
#include "policy/policy.h"

enum { LAB_POLICY_CPU = 0, LAB_POLICY_GPU = 1, LAB_POLICY_AUTO = 2 };

/* "cpu" | "gpu" | "auto" -> LAB_POLICY_*, or -1. */
int lab_policy_device_parse(const char *arg);

/* --policy-dtype: "fp32" | "bf16" -> PCUDA_DTYPE_*, or -1. */
int lab_policy_dtype_parse(const char *arg);

/* What --policy-dtype dtype gives once --policy-device mode opened ctx:
 * fp32 is fp32 everywhere; bf16 (bf16 GEMM operands, fp32 master weights:
 * pcuda.h) is a device path, so it is a usage error with mode cpu, and
 * with auto and no device the policy runs in fp32 on the CPU, saying so
 * on stderr (cmd names the command). bf16 with --policy-matmul
 * (with_matmul) is a usage error: the candidate kernel stands in for the
 * fp32 GEMMs only. *out gets the dtype to use. LAB_EXIT_OK or
 * LAB_EXIT_USAGE with why. */
int lab_policy_dtype_resolve(int dtype, int mode, const pcuda_ctx *ctx,
                             int with_matmul, const char *cmd, int *out,
                             char *why, size_t whylen);

/* Opens the device for mode, early (before any compute), so that a run
 * asked for the GPU fails at once: cpu gives *ctx NULL; gpu gives the
 * device or LAB_EXIT_ENV with why saying what is missing (no fatbin in
 * this build, no driver, no device); auto gives the device when one
 * answers, else NULL and a line on stderr ("cmd: --policy-device auto: ...;
 * the policy runs on the CPU"). Returns LAB_EXIT_OK or LAB_EXIT_ENV. */
int lab_policy_device_open(int mode, const char *cmd, pcuda_ctx **ctx,
                           char *why, size_t whylen);

/* Both of the above, as the commands use them: opens the device for mode
 * (lab_policy_device_open), then resolves dtype into *dtype_out
 * (lab_policy_dtype_resolve; the device is closed again when that fails).
 * Returns LAB_EXIT_OK, LAB_EXIT_ENV (no device for gpu) or LAB_EXIT_USAGE
 * (a dtype that cannot be), with why. */
int lab_policy_open(int mode, int dtype, int with_matmul, const char *cmd,
                    pcuda_ctx **ctx, int *dtype_out, char *why, size_t whylen);

typedef struct lab_policy {
  pl_model *m;    /* the CPU model: the reference and the one saved */
  pl_adamw *opt;  /* its optimiser (NULL: no updates) */
  pl_model *ref;  /* the frozen reference model, or NULL */
  pcuda_ctx *ctx; /* NULL: everything on the CPU */
  pcuda_model dm, dref;
  pcuda_adamw dopt;
  char desc[160]; /* lab_policy_describe's */
} lab_policy;

/* Binds m (and opt, ref, either may be NULL) to ctx (NULL: the CPU): on a
 * device, copies the parameters, AdamW's moments and step, and the
 * reference to it, the device models in dtype (PCUDA_DTYPE_*; bf16 needs
 * ctx, see lab_policy_dtype_resolve). The lab_policy takes ctx
 * (lab_policy_close closes it). Returns LAB_EXIT_OK, LAB_EXIT_USAGE (bf16
 * without a device) or LAB_EXIT_ENV (device memory) with why. */
int lab_policy_init(lab_policy *p, pcuda_ctx *ctx, int dtype, pl_model *m,
                    pl_adamw *opt, pl_model *ref, char *why, size_t whylen);
void lab_policy_close(lab_policy *p);

/* What a GRPO update of B rows of T tokens needs beyond what p holds now
 * (*need: the activations and their gradients, the reference model's too
 * when p has one; pl_model_acts_bytes or pcuda_model_batch_bytes) and what
 * it can have (*room: this machine's physical memory for the CPU policy,
 * the device's free memory plus the arena's unused part for a device's),
 * both in bytes. On a device the candidates' workers take their own share
 * later, so a need near the room may still fail; this finds the campaigns
 * that cannot fit at all. PL_OK, or PL_EENV with why (the device did not
 * answer). */
int lab_policy_batch_room(lab_policy *p, int B, int T, double *need,
                          double *room, char *why, size_t whylen);

/* "cpu", or the device's description and the GEMMs' dtype. */
const char *lab_policy_describe(const lab_policy *p);

/* pl_model_forward of the policy (use_ref 0) or of the reference (1); the
 * per-token losses (B,T) of that forward in *losses (host memory, valid
 * until the next call). */
float lab_policy_forward(lab_policy *p, int use_ref, const int32_t *tokens,
                         const int32_t *targets, int B, int T,
                         const float **losses);
void lab_policy_zero_grad(lab_policy *p);
/* pl_model_backward (dloss_dlogp NULL) or pl_model_backward_weighted. */
int lab_policy_backward(lab_policy *p, const float *dloss_dlogp);
/* pl_adamw_step; p->opt->step advances on both paths. */
float lab_policy_step(lab_policy *p);
/* Copies the device's parameters and AdamW state into p->m and p->opt (a
 * no-op on the CPU). PL_OK or PL_EENV with why. */
int lab_policy_sync(lab_policy *p, char *why, size_t whylen);

/* pl_generate_notify on the policy. */
int lab_policy_generate(lab_policy *p, const int32_t *prompt, int prompt_len,
                        int G, int max_new, int eos_id,
                        const pl_sampling *sampling, uint64_t seed,
                        pl_generation *out, pl_row_done_fn on_row, void *ctx,
                        char *why, size_t whylen);

/* ---- --policy-matmul RUN.h5 (lab/policy_matmul.c) ---- */

typedef struct lab_matmul lab_matmul;

/* Takes path's best correct, unflagged kernel (lab_best_candidate), checks
 * its text again, builds it for the policy's backend (ctx NULL: the CPU
 * emulator; else NVRTC and ctx's device), checks it against the default
 * path on cfg's GEMMs at 1, 67 and min(rows, 512) tokens, and routes the
 * policy's GEMMs through it: a pl_gemm_hook on the CPU, pcuda_set_matmul on
 * the device. lab/policy_matmul.c says which GEMMs, the tolerance and what
 * trust this implies. Returns LAB_EXIT_OK with *out (close it with
 * lab_policy_matmul_close before ctx is closed), LAB_EXIT_USAGE (no such
 * kernel, a kernel that fails the checks, does not build, or disagrees)
 * or LAB_EXIT_ENV (I/O, no compiler or NVRTC), with why saying which. */
int lab_policy_matmul_open(const char *path, pcuda_ctx *ctx,
                           const pl_config *cfg, int64_t rows, lab_matmul **out,
                           char *why, size_t whylen);
/* Puts the default GEMMs back and frees mm (NULL: nothing). */
void lab_policy_matmul_close(lab_matmul *mm);
/* One line about the kernel and its check, owned by mm. */
const char *lab_policy_matmul_describe(const lab_matmul *mm);
/* One line about its use so far into buf: how many GEMMs went through it
 * (on the CPU), and whether it failed on the way (then -1). */
int lab_policy_matmul_report(const lab_matmul *mm, char *buf, size_t len);

#endif
