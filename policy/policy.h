/*
 * policy/policy.h — the one public header of the policy module: the model
 * that writes kernels (tokenizer, decoder-only transformer forward and
 * backward in fp32 on the CPU, sampler, AdamW, checkpoints).
 *
 * The CPU code is the readable reference (llm.c style: name_forward /
 * name_backward pairs, outputs first, sizes last, shapes in comments, one
 * allocation per tensor family); policy/cuda/ will mirror it. Prefix: pl_.
 * Errors are values: functions return PL_OK or a PL_E* code and write a
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
/* @@tokenizer@@ */

/* ---- model and optimiser (policy/model.c, policy/adamw.c) ---- */
/* @@model@@ */

/* ---- sampler and checkpoints (policy/sampler.c, policy/checkpoint.c) ---- */
/* @@sampler@@ */

#endif
