/*
 * lab/run_internal.h — what lab/run_cmd.c shares with lab/run_queue.c (a
 * sampled row onto the evaluator's queue, and the progress bar) and
 * lab/run_update.c (the GRPO update of a step). Not a public header: the rest
 * of kernlab goes through lab/lab.h.
 */
#ifndef LAB_RUN_INTERNAL_H
#define LAB_RUN_INTERNAL_H

#include "lab/lab.h"
#include "lab/policy_device.h"
#include "sandbox/sandbox.h"

/* What the progress bar shows. tty 0: nothing is drawn. */
typedef struct progress {
  int tty;
  int step, steps, n_cand;
  int sampled, evaluated;
  double t_run, per_step; /* per_step: mean seconds per finished step */
} progress;

/* What the sampler's row callback needs to turn a finished row into a
 * candidate queued on the evaluator. */
typedef struct row_sink {
  lab_evaluator *ev;
  lab_eval_item *items; /* the step's; src becomes the decoded text */
  char (*labels)[48];   /* items[k].label points at labels[k] */
  const pl_tokenizer *tok;
  int step, group, G;
  int failed; /* a decode failed: why holds it */
  char why[256];
  progress *prog;
} row_sink;

void progress_draw(const progress *p);
void progress_clear(const progress *p);
/* lab_evaluator_wait's tick; ctx is a progress. */
void progress_tick(void *ctx, int finished);

/* pl_row_done_fn for pl_generate_notify; ctx is a row_sink. */
void on_row_done(void *ctx, const pl_generation *gn, int row);

/* "42s", "3m05s", "2h10m"; "-" for a negative or unknown time. */
void lab_fmt_eta(char *buf, size_t n, double s);

/* ---- lab/run_update.c: the GRPO update of a step ---- */

/* What one update reports for the step line and the /steps record. */
typedef struct update_out {
  pl_grpo_stats st;
  float grad_norm, lr;
} update_out;

/* One to num_iterations GRPO updates of the policy (and its reference
 * when beta > 0) on the step's completions: the (B = n_groups*G, T) batch
 * of prompt + completion tokens, targets only on completion tokens, old
 * log-probs from the sampler (temperature 1) or the first iteration.
 * gens (n_groups) hold G rows each; adv (n_groups*G). Returns PL_OK or a
 * PL_E* code with why. */
int lab_grpo_update(const lab_campaign *c, lab_policy *pol,
                    const int32_t *prompt, int plen, const pl_generation *gens,
                    int n_groups, const float *adv, update_out *u, char *why,
                    size_t whylen);

#endif
