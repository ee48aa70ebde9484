/*
 * lab/run_internal.h — what lab/run_cmd.c shares with lab/run_queue.c (the
 * campaign's evaluation queue and progress bar) and lab/run_update.c (the
 * GRPO update of a step). Not a public header: the rest of kernlab goes
 * through lab/lab.h.
 */
#ifndef LAB_RUN_INTERNAL_H
#define LAB_RUN_INTERNAL_H

#include "lab/lab.h"
#include "lab/policy_device.h"
#include "sandbox/sandbox.h"

#include <pthread.h>

/* One completion of a step: its source and its evaluation. */
typedef struct candidate {
  char label[48];
  char *src; /* decoded completion, owned */
  size_t len;
  kl_result r;
  int rc;
} candidate;

/* The step's candidates, queued as their rows stop and served by one
 * thread per sandbox slot. */
typedef struct eval_queue {
  pthread_mutex_t mu;
  pthread_cond_t more; /* a candidate was pushed, or quit */
  pthread_cond_t done; /* a candidate finished */
  candidate *c;
  int *order;        /* indices in push order */
  int pushed, taken; /* this step's */
  int finished;      /* this step's evaluations completed */
  int quit;
  kl_eval_options opts; /* this step's (seed) */
} eval_queue;

typedef struct eval_worker {
  eval_queue *q;
  sbx_slot *slot;
  pthread_t tid;
  int started;
} eval_worker;

/* What the progress bar shows. tty 0: nothing is drawn. */
typedef struct progress {
  int tty;
  int step, steps, n_cand;
  int sampled, evaluated;
  double t_run, per_step; /* per_step: mean seconds per finished step */
} progress;

/* What the sampler's row callback needs to turn a finished row into a
 * queued candidate. */
typedef struct row_sink {
  eval_queue *q;
  candidate *cands;
  const pl_tokenizer *tok;
  int step, group, G;
  int failed; /* a decode failed: why holds it */
  char why[256];
  progress *prog;
} row_sink;

/* Starts one thread per slot; returns how many started (0: the caller
 * evaluates on its own thread). */
int eval_start(eval_queue *q, eval_worker *w, sbx_slot **slots, int n_slots);
/* A new step: empties the queue's counters, sets the evaluation seed. */
void eval_begin_step(eval_queue *q, uint64_t seed);
/* Queues candidate k. */
void eval_push(eval_queue *q, int k);
/* How many of this step's candidates are evaluated. */
int eval_finished(eval_queue *q);
/* Lets the threads finish what is queued, then joins them. */
void eval_stop(eval_queue *q, eval_worker *w, int n);

void progress_draw(const progress *p);
void progress_clear(const progress *p);

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
