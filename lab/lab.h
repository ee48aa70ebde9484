/*
 * lab/lab.h — the `kernlab` command: subcommands and their shared helpers.
 *
 * lab/ is the top of the dependency graph (lab -> kernels). Each subcommand
 * is a function `int lab_<name>(int argc, char **argv)` returning the exit
 * code from DESIGN.md: 0 ran, 2 bad usage or bad input file, 3 environment
 * problem.
 */
#ifndef LAB_LAB_H
#define LAB_LAB_H

#include "kernels/kernels.h"
#include "policy/policy.h"
#include "results/results.h"
#include "reward/reward.h"

#include <stdint.h>
#include <stdio.h>

enum { LAB_EXIT_OK = 0, LAB_EXIT_USAGE = 2, LAB_EXIT_ENV = 3 };

/* kernlab eval FILE.cu... [--backend auto|cpu-emu|gpu] [--shape MxNxK]...
 *   [--seed S] [--threads N] [--jobs N] [--timeout S] [--compile-timeout S]
 *   [--reward F.lua] [--out RUN.h5] [--json]
 * --timeout: wall deadline in seconds for one candidate's runs (120). */
int lab_eval(int argc, char **argv);

/* kernlab sandbox --explain [--pfc] */
int lab_sandbox(int argc, char **argv);

/* kernlab flags [--json] | --scan FILE.cu... (lab/flags_cmd.c) */
int lab_flags(int argc, char **argv);

/* kernlab tokenizer train [--corpus DIR|FILE...] [--vocab N] --out FILE.tok
 * kernlab tokenizer encode|decode|info --tok FILE.tok (lab/tokenizer_cmd.c) */
int lab_tokenizer(int argc, char **argv);

/* Results files (lab/results_cmd.c, lab/diff_cmd.c, lab/report_cmd.c); each
 * reads RUN.h5 and exits 2 for a bad file or an unknown id:
 *   kernlab top RUN.h5 [-n N] [--by time|reward]
 *   kernlab show RUN.h5 ID [--source|--ptx|--stats]
 *   kernlab diff RUN.h5 ID1 ID2
 *   kernlab export RUN.h5 --format csv|jsonl [-o FILE] [--source]
 *   kernlab report RUN.h5 -o report.html [-n N] */
int lab_top(int argc, char **argv);
int lab_show(int argc, char **argv);
int lab_diff(int argc, char **argv);
int lab_export(int argc, char **argv);
int lab_report(int argc, char **argv);

/* Helpers the results commands share (lab/results_cmd.c). */

/* Prints "kernlab CMD: MSG [ARG]" and the usage line; returns
 * LAB_EXIT_USAGE. arg may be NULL. */
int lab_usage(const char *cmd, const char *msg, const char *arg,
              const char *synopsis);
/* Opens a results file for reading; on failure prints one line naming the
 * file and the reason, sets *exit (2 bad file, 3 environment) and returns
 * NULL. The caller closes the reader with res_reader_close. */
res_reader *lab_open_run(const char *cmd, const char *path, int *exit);
/* Parses s as one of r's candidate ids; prints the problem and returns -1
 * when it is not one. */
int64_t lab_parse_id(const char *cmd, const res_reader *r, const char *path,
                     const char *s);
/* Writes the names of flags' set bits, joined by sep, into out (len bytes);
 * "-" when none is set. */
void lab_flag_list(const res_reader *r, uint64_t flags, const char *sep,
                   char *out, size_t len);
/* Formats v with fmt into buf, or "-" for NaN and negative ("not
 * measured") values. Returns buf. */
const char *lab_fmt_num(char *buf, size_t len, const char *fmt, double v);

/* ---- lab/eval_glue.c: a kl_result for the other modules ---- */

/* Names of the set flag bits, at most max; returns how many. */
int lab_flag_names(uint64_t flags, const char **names, int max);
/* names: room for max_names flag names, borrowed by c. */
void lab_rw_candidate(const kl_result *r, long source_len, const char **names,
                      int max_names, rw_candidate *c);
/* reward may be NULL (not scored). */
void lab_res_candidate(const kl_result *r, const rw_components *reward,
                       const char *task, res_candidate *c);

/* kernlab rescore RUN.h5 --reward F.lua [--json] [-n N] (lab/rescore_cmd.c):
 * re-applies a reward formula to stored metrics; read-only. */
int lab_rescore(int argc, char **argv);

/* kernlab corpus [--script lua/corpus.lua] [--out DIR] [--shape MxNxK]
 * [--jobs N] (lab/corpus_cmd.c) */
int lab_corpus(int argc, char **argv);

/* kernlab generate --ckpt F --tok F.tok --prompt TEXT [-n G] [--max-tokens N]
 * [--temperature T] [--top-p P] [--min-p M] [--seed S] (lab/generate_cmd.c) */
int lab_generate(int argc, char **argv);

/* kernlab prime [--corpus DIR] [--out CKPT] [--steps N] ... (lab/prime_cmd.c)
 */
int lab_prime(int argc, char **argv);
/* The task header every prompt starts with (priming and campaigns). */
const char *lab_prompt_header(void);

/* Writes s as a JSON string literal (with quotes) to f. */
void lab_json_string(FILE *f, const char *s);

/* ---- campaigns (lab/campaign.c; lua/campaigns/quick.lua documents the
 * fields and their defaults) ---- */
typedef struct lab_campaign {
  char name[128]; /* the file's base name without .lua */
  char path[1024];
  char *text; /* the file's bytes (stored in the results file), owned */
  int M, N, K;
  char backend[16];
  char checkpoint[1024], tokenizer[1024], reward[1024], out[1024];
  int group_size, prompts_per_step, steps;
  pl_sampling sampling;
  int max_tokens;
  pl_grpo_config grpo; /* loss_type, scale_rewards, beta, eps, truncation */
  int num_iterations;
  float lr, weight_decay, clip;
  int warmup;
  uint64_t seed;
} lab_campaign;

/* Runs the campaign file in a plain Lua state (base, string, table, math;
 * no io/os/require) and validates the table it returns into *c, defaults
 * filled in. Returns 0, or LAB_EXIT_USAGE with one line in why naming the
 * file and the field ("quick.lua: grpo.loss_type: expected one of ...") or
 * the file:line of a Lua error; LAB_EXIT_ENV when out of memory. Checks
 * that the checkpoint, tokenizer and reward files exist. Free with
 * lab_campaign_free. */
int lab_campaign_load(const char *path, lab_campaign *c, char *why,
                      size_t whylen);
void lab_campaign_free(lab_campaign *c);

/* kernlab run [CAMPAIGN.lua] [--out RUN.h5] [--resume] (lab/run_cmd.c) */
int lab_run(int argc, char **argv);

#endif
