/*
 * lab/run_internal.h — what lab/run_cmd.c shares with lab/run_queue.c (a
 * sampled row onto the evaluator's queue, and the progress bar),
 * lab/run_update.c (the GRPO update of a step), lab/run_resume.c (what
 * --resume continues from, and the command that continues a stopped run)
 * and lab/run_room.c (the memory and disk a run needs, checked first).
 * Not a public header: the rest of kernlab goes through lab/lab.h.
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

/* Whether a step's update can teach anything: some advantage of adv (n)
 * is not 0, or the campaign has a KL term (beta > 0). Without either the
 * loss's gradient is 0 and AdamW would move the weights along its momentum
 * and weight decay alone. */
int lab_update_has_signal(const lab_campaign *c, const float *adv, int n);

/* Says once more at the end of a run (on stderr) how many of the steps_run
 * steps taught nothing: unscored (no candidate scored) and flat (every
 * group's rewards equal); their lines scrolled by, and the run still exits
 * 0. Nothing when both are 0. */
void lab_warn_unlearnt(int unscored, int flat, int steps_run);

/* The exit code for a policy/ (PL_E*) error: 3 for PL_EENV, else 2. */
int lab_pl_exit(int rc);

/* ---- lab/run_room.c: what a run needs, checked before its first step ---- */

/* Memory for an update of the campaign's whole step (group_size x
 * prompts_per_step rows of up to T tokens) on pol's side, the reference
 * model's included (lab_policy_batch_room). LAB_EXIT_OK, LAB_EXIT_USAGE
 * (too large: why names the fields to change) or LAB_EXIT_ENV (the device
 * did not answer). */
int lab_run_room_update(lab_policy *pol, const lab_campaign *c, int T,
                        char *why, size_t whylen);

/* Disk for a checkpoint at ckpt_out: as large as the one there, or as
 * start_ckpt. LAB_EXIT_OK (also when the folder cannot be asked: the save
 * says why) or LAB_EXIT_ENV with why. */
int lab_run_room_checkpoint(const char *ckpt_out, const char *start_ckpt,
                            char *why, size_t whylen);

/* ---- lab/run_resume.c: what --resume continues from ---- */

/* What an earlier run of this campaign left in the results file. */
typedef struct prior {
  int64_t steps_done;  /* /steps records */
  int64_t *recorded;   /* (steps) candidates already stored per step */
  double best_time_us; /* best correct time; -1 none */
  double wall_s;       /* the last step's wall_s */
  int64_t candidates;  /* candidate records */
  uint64_t run_id;     /* the file's run_id attribute; 0: none (older) */
  /* the file's checkpoint_sha256 attribute: the run's starting checkpoint
   * (64 hex digits; "": a file from before it was recorded) */
  char checkpoint_sha256[65];
  /* The step a killed run left partly recorded (step steps_done): the
   * file's reward (NaN: unscored) and correctness of each of its
   * candidates by group * group_size + sample, so that its /steps record
   * describes the candidates the file holds, not the re-run's. */
  double *file_reward;
  uint8_t *file_correct, *file_has;
  int config_edited; /* the campaign's text is not the file's config */
  /* the baseline the file's run records hold (the first one's, with its
   * backend, and the file's device); us -1: no record has one */
  lab_known_baseline baseline;
  int64_t baseline_others; /* run records holding another baseline */
} prior;

/* A new run's id: 64 random bits, never 0 (0 is "none" in a checkpoint). */
uint64_t lab_new_run_id(void);

/* What is at the run's output, before anything is loaded: *have_out says
 * whether the results file c->out exists. Without resume an existing one
 * is refused; with resume a missing one is, and an existing one is read
 * into *pr (whose recorded (c->steps) and file_* (prompts_per_step x
 * group_size) arrays the caller allocated, zeroed, and frees), refused
 * when another campaign (task, seed or group shape), `kernlab eval` or
 * `kernlab search` wrote it. Refused either way: a checkpoint ckpt_out
 * that is the campaign's starting checkpoint, or one whose results file
 * is gone. Returns 0, or an exit code with the reason already printed on
 * stderr. */
int lab_resume_check(const lab_campaign *c, const char *ckpt_out, int resume,
                     prior *pr, int *have_out);

/* The policy a run continues from. model (h its header) holds the
 * campaign's starting checkpoint; where the file records steps, or
 * --resume finds the run's checkpoint ckpt_out (have_ckpt), it is replaced
 * by that checkpoint, *ck_m and *ck_v receiving its AdamW moments (the
 * caller frees them), after checking that the checkpoint is the file's
 * run's (its run id) and at one of its steps. *start_step: the step to
 * start at (0 when not resumed). Step 1 recorded but not checkpointed is
 * said on stderr and re-run from the starting checkpoint. Where the
 * starting checkpoint is still used (a re-run from it, or the KL's
 * reference), it must be the one the file records (checkpoint_sha256),
 * else exit 2. Returns 0, or an
 * exit code with the reason already printed on stderr. */
int lab_resume_policy(int resume, int have_ckpt, const lab_campaign *c,
                      const char *ckpt_out, const prior *pr,
                      const pl_tokenizer *tok, pl_model *model,
                      pl_ckpt_header *h, float **ck_m, float **ck_v,
                      int *start_step);

/* Prints how an interrupted run stopped (stopped_at of steps done, or all
 * of them), where its results and checkpoint are (ckpt_out NULL: the run
 * has saved none yet, which is said), and, when steps remain, the command
 * that continues it: "kernlab" and argv (argc words, flags and all, quoted
 * for a shell) with --resume added when resume is 0. */
void lab_print_interrupted(int argc, char **argv, int resume, int stopped_at,
                           int steps, const char *out, const char *ckpt_out);

#endif
