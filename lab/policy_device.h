/*
 * lab/policy_device.h — where the policy computes for `kernlab prime` and
 * `kernlab run` (--policy-device cpu|gpu|auto): the CPU model of
 * policy/policy.h, or its twin on a device through the policy's CUDA
 * runtime (policy/cuda/pcuda.h). Not a public header: prime_cmd.c and
 * run_cmd.c share it with lab/policy_device.c.
 *
 * The CPU model stays the one of record: checkpoints are written from it,
 * so on a device lab_policy_sync copies the parameters and AdamW's state
 * back before each save. Every other call goes to the device when there is
 * one, and to the CPU otherwise, with the same meaning (pcuda.h's functions
 * mirror the CPU's).
 */
#ifndef LAB_POLICY_DEVICE_H
#define LAB_POLICY_DEVICE_H

#include "policy/cuda/pcuda.h"
#include "policy/policy.h"

enum { LAB_POLICY_CPU = 0, LAB_POLICY_GPU = 1, LAB_POLICY_AUTO = 2 };

/* "cpu" | "gpu" | "auto" -> LAB_POLICY_*, or -1. */
int lab_policy_device_parse(const char *arg);

/* Opens the device for mode, early (before any compute), so that a run
 * asked for the GPU fails at once: cpu gives *ctx NULL; gpu gives the
 * device or LAB_EXIT_ENV with why saying what is missing (no fatbin in
 * this build, no driver, no device); auto gives the device when one
 * answers, else NULL and a line on stderr ("cmd: --policy-device auto: ...;
 * the policy runs on the CPU"). Returns LAB_EXIT_OK or LAB_EXIT_ENV. */
int lab_policy_device_open(int mode, const char *cmd, pcuda_ctx **ctx,
                           char *why, size_t whylen);

typedef struct lab_policy {
  pl_model *m;    /* the CPU model: the reference and the one saved */
  pl_adamw *opt;  /* its optimiser (NULL: no updates) */
  pl_model *ref;  /* the frozen reference model, or NULL */
  pcuda_ctx *ctx; /* NULL: everything on the CPU */
  pcuda_model dm, dref;
  pcuda_adamw dopt;
} lab_policy;

/* Binds m (and opt, ref, either may be NULL) to ctx (NULL: the CPU): on a
 * device, copies the parameters, AdamW's moments and step, and the
 * reference to it. The lab_policy takes ctx (lab_policy_close closes it).
 * Returns LAB_EXIT_OK or LAB_EXIT_ENV (device memory) with why. */
int lab_policy_init(lab_policy *p, pcuda_ctx *ctx, pl_model *m, pl_adamw *opt,
                    pl_model *ref, char *why, size_t whylen);
void lab_policy_close(lab_policy *p);

/* "cpu" or the device's description. */
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

#endif
