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

/* 130: 128 + SIGINT, what a shell reports for a command Ctrl-C stopped;
 * `kernlab run` returns it when an interrupt stopped it after a step. */
enum {
  LAB_EXIT_OK = 0,
  LAB_EXIT_USAGE = 2,
  LAB_EXIT_ENV = 3,
  LAB_EXIT_INTERRUPTED = 130
};

/* In a command with an `int exit_code` and a `cleanup:` label: prints
 * "kernlab CMD: MESSAGE" on stderr, sets exit_code and jumps to cleanup. */
#define LAB_FAIL(cmd, code, ...)                                               \
  do {                                                                         \
    fprintf(stderr, "kernlab " cmd ": " __VA_ARGS__);                          \
    fputc('\n', stderr);                                                       \
    exit_code = (code);                                                        \
    goto cleanup;                                                              \
  } while (0)

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

/* Results files (lab/results_cmd.c, lab/export_cmd.c, lab/diff_cmd.c,
 * lab/report_cmd.c); each reads RUN.h5 and exits 2 for a bad file or an
 * unknown id:
 *   kernlab top RUN.h5 [-n N] [--by time|reward]
 *   kernlab show RUN.h5 ID [--source|--ptx|--stats]
 *   kernlab diff RUN.h5 ID1 ID2
 *   kernlab export RUN.h5 --format csv|jsonl [-o FILE] [--source]
 *   kernlab report RUN.h5 [MORE.h5...] -o report.html [-n N] */
int lab_top(int argc, char **argv);
int lab_show(int argc, char **argv);
int lab_diff(int argc, char **argv);
int lab_export(int argc, char **argv);
int lab_report(int argc, char **argv);

/* Ctrl-C and SIGTERM for a long command (lab/interrupt.c): the first
 * signal sets the flag lab_interrupted returns (the signal's number) and
 * prints "CMD: interrupted: FIRST (interrupt again to stop at once)"; the
 * second removes tmp (may be NULL: a file being written beside its final
 * name) and ends the process by the signal's default action. With first
 * NULL the first signal already does what the second would. uninstall
 * puts back the handlers that were there before (nothing when none was
 * installed). */
void lab_interrupt_install(const char *cmd, const char *first, const char *tmp);
/* One more file for the second signal to remove (four in all). */
void lab_interrupt_also_remove(const char *tmp);
/* Holds a stop-at-once signal while on: a pair of renames that must both
 * happen (a checkpoint and its tokenizer) runs between hold(1) and
 * hold(0), which then stops if a signal asked meanwhile. Process-wide:
 * the signal may reach any thread. */
void lab_interrupt_hold(int on);
int lab_interrupted(void);
void lab_interrupt_uninstall(void);

/* Helpers the results commands share (lab/results_cmd.c). */

/* A command-line number that must be all of s and within [lo, hi]
 * (finite for doubles: "nan" and "inf" are refused). 0 with *out set, or
 * -1 and *out untouched. */
int lab_arg_long(const char *s, long lo, long hi, long *out);
int lab_arg_double(const char *s, double lo, double hi, double *out);
/* s (at most len bytes) for a terminal table: control characters (an
 * escape sequence, a newline) and bytes that are not UTF-8 become '?', so a
 * label (a file name, a policy's text) cannot rewrite the screen or break
 * the table's lines. Returns buf (cap bytes). */
const char *lab_printable(const char *s, size_t len, char *buf, size_t cap);
/* The same for a line of source text: tabs are kept. */
const char *lab_printable_line(const char *s, size_t len, char *buf,
                               size_t cap);
/* A table cell of width characters: s made printable (as lab_printable),
 * padded with spaces, or cut to width - 1 characters and an ellipsis when
 * longer, so that a cut value reads as one ("crashed:SIGSEG..." was
 * "crashed:SIGSEG", a status that does not exist) and a cut never splits a
 * UTF-8 character. Width is in terminal columns: a wide (CJK, fullwidth,
 * emoji) character takes two, a combining mark none, so rows stay aligned
 * whatever the names hold. buf needs 4 * width + 1 bytes; returns buf. */
const char *lab_cell(const char *s, size_t len, int width, char *buf,
                     size_t cap);
/* Writes s (len bytes) to f as a terminal may show it: newlines and tabs
 * kept, other control bytes and bytes that are not UTF-8 as '?'. */
void lab_fput_printable(const char *s, size_t len, FILE *f);
/* Whether a command may write its output file at path (by writing beside
 * it and renaming): 0, or -1 with why (starting with the path). Nothing
 * there is fine; what is there is replaced only when it is a regular file
 * (not a folder, device, FIFO, or a symbolic link, which the rename would
 * replace instead of its target), none of the n inputs, not an HDF5 file,
 * and, with magic, empty or starting with its magic_len bytes. '' is
 * refused. */
int lab_output_ok(const char *path, const char *const *inputs, int n_inputs,
                  const char *magic, size_t magic_len, char *why,
                  size_t whylen);
/* A task shape "MxNxK" (lab/eval.c): sizes >= 1 and each matrix under
 * 2^28 elements; 0 with *out set, or -1. */
int lab_arg_shape(const char *s, kl_shape *out);
/* The same for an unsigned 64-bit number of at least lo, in decimal
 * digits only (a seed: "-1", "5x", " 5" and "0x10" are refused). */
int lab_arg_u64(const char *s, uint64_t lo, uint64_t *out);

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
/* A reward for a terminal line: fmt (decimals) while 1e-3 <= |v| < 1e6
 * (or v is 0), else four significant digits with an exponent (a formula
 * may return 1e300, which "%f" prints as 301 digits, or work at a scale
 * of 1e-5, which "%.4f" prints as 0.0000); "nan", "inf" as printf says
 * them. */
const char *lab_fmt_reward(char *buf, size_t len, const char *fmt, double v);
/* A stored SHA-256 digest (32 bytes: a candidate's src_sha256) as 64
 * lowercase hex characters and a NUL in out (show and export print it). */
void lab_sha_hex(const uint8_t sha[32], char out[65]);

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

/* A checkpoint and its tokenizer (lab/policy_files.c). lab_tok_load is
 * pl_tok_load; when the tokenizer is missing, the message names a leftover
 * TOK.tmp.PID holding the tokenizer ckpt_path (may be NULL) records (a
 * prime killed between its two renames). lab_load_model loads a checkpoint
 * into a fresh m checked against tok (its hash and vocab size), the same
 * advice added to a mismatch when tok_path is given; m_out and v_out (may
 * be NULL) receive the AdamW moments when the file has them. */
int lab_tok_load(pl_tokenizer **tok, const char *tok_path,
                 const char *ckpt_path, char *why, size_t whylen);
int lab_load_model(pl_model *m, pl_ckpt_header *h, const char *path,
                   const pl_tokenizer *tok, const char *tok_path, float **m_out,
                   float **v_out, char *why, size_t whylen);

/* kernlab prime [--corpus DIR] [--out CKPT] [--steps N] ... (lab/prime_cmd.c)
 */
int lab_prime(int argc, char **argv);
/* The task header every prompt starts with (priming and campaigns). */
const char *lab_prompt_header(void);

/* Writes s as a JSON string literal (with quotes) to f. */
void lab_json_string(FILE *f, const char *s);
/* The same for n bytes that may hold NUL (a source: \u0000 in JSON). */
void lab_json_string_n(FILE *f, const char *s, size_t n);

/* ---- campaigns (lab/campaign.c; lua/campaigns/quick.lua documents the
 * fields and their defaults) ---- */

/* The largest group_size a campaign takes; a results file's group (one
 * step's, one prompt's samples) holds no more. */
#define LAB_MAX_GROUP_SIZE 1024

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
  double timeout_s; /* wall deadline for one candidate's runs */
  uint64_t seed;
  /* Baselines (kernlab search, and run's closing comparison): */
  char corpus[1024];     /* the priming corpus folder ("runs/corpus") */
  char exhaustive[1024]; /* exhaustive search results
                            ("runs/<name>-exhaustive.h5") */
} lab_campaign;

/* Runs the campaign file in a plain Lua state (base, string, table, math;
 * no io/os/require) and validates the table it returns into *c, defaults
 * filled in. Returns 0, or LAB_EXIT_USAGE with one line in why naming the
 * file and the field ("quick.lua: grpo.loss_type: expected one of ...") or
 * the file:line of a Lua error; LAB_EXIT_ENV when out of memory. Checks
 * that the checkpoint, tokenizer and reward files exist. Free with
 * lab_campaign_free. path NULL: the built-in default, lab_quick_campaign. */
int lab_campaign_load(const char *path, lab_campaign *c, char *why,
                      size_t whylen);
/* The text of lua/campaigns/quick.lua as it was at build time. */
extern const char lab_quick_campaign[];
void lab_campaign_free(lab_campaign *c);
/* Sets c->out to out (run's --out): 0, or LAB_EXIT_USAGE with why when it
 * does not fit c->out whole (cut short, it named another file). */
int lab_campaign_set_out(lab_campaign *c, const char *out, char *why,
                         size_t whylen);
/* lab_campaign_load's flags: LAB_CAMPAIGN_NO_POLICY skips the checks that
 * the checkpoint and tokenizer exist (kernlab search uses no policy);
 * LAB_CAMPAIGN_NO_FILES skips the reward file's too. */
enum { LAB_CAMPAIGN_NO_POLICY = 1, LAB_CAMPAIGN_NO_FILES = 2 };
int lab_campaign_load_flags(const char *path, int flags, lab_campaign *c,
                            char *why, size_t whylen);
/* A campaign from its text, as a results file's config attribute keeps it
 * (label names it in messages): read as lab_campaign_load reads a file,
 * but no file it names needs to exist (NO_POLICY | NO_FILES), so that what
 * a run was started with can be read after its files have moved. Returns
 * as lab_campaign_load; free with lab_campaign_free. */
int lab_campaign_from_text(const char *label, const char *text, lab_campaign *c,
                           char *why, size_t whylen);

/* kernlab run [CAMPAIGN.lua] [--out RUN.h5] [--resume] (lab/run_cmd.c) */
int lab_run(int argc, char **argv);

/* ---- restricted Lua states and seed scripts (lab/lua_script.c) ---- */

struct lua_State;
/* The state a configuration script (a campaign file, a seed script) runs
 * in: reward.h's rw_sandbox_open, the reward scripts' sandbox (base,
 * string, table and math; no files, no environment; memory cap; pcall
 * cannot swallow the limits), with max_instructions per call and
 * LAB_LUA_WALL_MS, kind naming the scripts in messages. Call with
 * rw_sandbox_call; close with rw_free. NULL, with why, when out of
 * memory. */
/* Pushes t[key] of the table at idx and returns its type, raw: a script's
 * tables are read outside any protected call, where an __index that errs
 * would abort the lab and one that loops would hang it. */
int lab_lua_field(struct lua_State *L, int idx, const char *key);
#define LAB_LUA_WALL_MS 60000.0
#define LAB_LUA_MEM_BYTES ((size_t)256 << 20)
/* a seed script rewrites the #defines of a 10 KB text with gsub: one
 * quantifier is n^2 ~ 1e8 steps in the worst case (well under a second) */
#define LAB_LUA_PATTERN_STEPS 2e9
rw_script *lab_lua_open(const char *path, const char *kind,
                        long long max_instructions, char *why, size_t whylen);

/* One configuration a seed script returns: a seed kernel with its #define
 * values set (lua/corpus.lua, lua/search_space.lua). */
typedef struct lab_seed_variant {
  char name[128];   /* unique per variant for search spaces */
  char config[128]; /* the configuration (corpus: shared by its styles) */
  char *source;     /* NUL-terminated, owned */
  size_t len;
} lab_seed_variant;

/* How a corpus script splits its configurations (lua/corpus.lua): either
 * the fastest `fraction` of them as measured, or the configurations it
 * names (holdout = {...}), which keeps the split, and everything primed
 * from it, independent of timing noise. At most one of the two is set. */
#define LAB_HOLDOUT_MAX 64
typedef struct lab_seed_split {
  double fraction; /* holdout_fraction, 0 when absent */
  int n_names;     /* holdout = { "config", ... } */
  char names[LAB_HOLDOUT_MAX][128];
} lab_seed_split;

/* Runs the seed script at path in lab_lua_open's state: it returns a table
 * { generate = function(kl) ... end, holdout_fraction = x (optional),
 * holdout = { names } (optional) }; generate is called with kl.seed(name)
 * (the text of seeds_dir/<name>; names are [a-z0-9_.]) and returns a list
 * of {name, config, source} tables (config defaults to name; names are
 * unique file names: letters, digits, _ - + ., not starting with '.'). *split
 * (may be NULL) receives the holdout fields; a name that no variant's config
 * has is an error. Returns 0, or -1 with why naming the script (and
 * file:line for Lua errors). Free *out with lab_seed_variants_free. */
int lab_seed_script_run(const char *path, const char *seeds_dir,
                        lab_seed_variant **out, int *n, lab_seed_split *split,
                        char *why, size_t whylen);
void lab_seed_variants_free(lab_seed_variant *v, int n);

/* ---- evaluation on sandbox slots (lab/evaluator.c), shared by the
 * commands that evaluate many candidates (search; run can use it too) ---- */

/* The seed of one (step, group, purpose) of a campaign: a pure function of
 * its arguments, never 0. step -1 is "before the first step". */
uint64_t lab_derive_seed(uint64_t seed, int step, int group, int purpose);
/* Seconds on the monotonic clock (for durations and ETAs). */
double lab_now_s(void);
/* mkdir -p of dir, and of path's folder. Return 0 or -1 (errno set; a
 * file where a folder should be is ENOTDIR). */
int lab_make_dir(const char *dir);
int lab_make_parent(const char *path);
/* The exit status for an output that could not be prepared (err from
 * lab_prepare_out): LAB_EXIT_USAGE when the path is wrong (a folder that
 * cannot exist, a file where a folder should be, too long), LAB_EXIT_ENV
 * when the system refuses a good path (permissions, a read-only or full
 * disk). Every command that writes a file by name says so alike: eval
 * said 3 and report 2 for the same `-o afile/x`. */
int lab_out_exit(int err);
/* Whether path can name a results file to create: not empty, not ending in
 * '/' or naming "." or "..", not an existing folder. 0, or -1 with why
 * ("WHERE ...: ...", one line; where says where the path came from:
 * "--out", "the campaign's out") filled; checked before lab_make_parent,
 * which would make "x/" a folder. */
int lab_out_path_ok(const char *path, const char *where, char *why,
                    size_t whylen);
/* Whether a file can be written beside path as kl_outfile writes it (its
 * temporary created and removed): 0, or the errno with why ("cannot write
 * PATH: ...") filled. For commands that compute for minutes before they
 * write: a missing or read-only folder is said first. */
int lab_try_write(const char *path, char *why, size_t whylen);
/* Readies path's folder for an output, before the work that fills it: makes
 * the folder when missing (lab_make_parent: `runs/` in a fresh clone, which
 * the README's commands assume), then lab_try_write. Every command that
 * writes a file by name does this, so a missing folder is made by all of
 * them and one that cannot be made or written is said before any work. 0,
 * or the errno with why ("cannot create the folder DIR for PATH: ..." or
 * lab_try_write's) filled. */
int lab_prepare_out(const char *path, char *why, size_t whylen);

struct sbx_slot;
typedef struct lab_evaluator {
  char backend[16];        /* resolved: "cpu-emu" or "gpu" */
  char task[48];           /* "fp32_MxNxK" */
  kl_eval_options opts;    /* backend, the task shape, threads per slot,
                              baseline_us; exec is per slot */
  double baseline_us;      /* cuBLAS (gpu) or the naive seed; -1 untimed */
  int baseline_reused;     /* 1: baseline_us is the known one given to start,
                              not timed here */
  char baseline_note[400]; /* why a known baseline was not reused: "timed
                              on BACKEND (DEVICE), this run is on ..."; "" */
  struct sbx_slot **slots;
  int n_slots;
  struct lab_pool *pool; /* the queue and one thread per slot, from the
                            first batch to lab_evaluator_stop */
} lab_evaluator;

/* A baseline timed before, at the campaign's task shape: the one a resumed
 * campaign's records hold (`kernlab run --resume`), with where it was
 * timed. */
typedef struct lab_known_baseline {
  double us;        /* > 0; anything else: none known */
  char backend[16]; /* the backend its records were evaluated on */
  char device[160]; /* the file's device attribute (kl_backend_device) */
} lab_known_baseline;

/* Resolves c's backend, loads NVRTC (a warning on stderr when absent),
 * starts min(cores, max_parallel) sandbox slots and times the baseline at
 * c's task shape (cuBLAS SGEMM on gpu, the naive seed on cpu-emu) with
 * inputs from seed. With known (may be NULL) timed on the backend and
 * device resolved now, its us is taken instead of timing (baseline_reused
 * 1); a known one timed elsewhere is not, and baseline_note says where it
 * was timed. Notes and warnings go to stderr prefixed "kernlab ". Returns
 * 0, or an exit code (3: no device for gpu, cannot start a slot) with why.
 * Free with lab_evaluator_stop (also after a failure). */
int lab_evaluator_start(lab_evaluator *e, const lab_campaign *c,
                        int max_parallel, uint64_t seed,
                        const lab_known_baseline *known, char *why,
                        size_t whylen);
void lab_evaluator_stop(lab_evaluator *e);

/* opts = e->opts with exec on slot 0 (ex, filled here, must outlive
 * opts): for a single evaluation outside lab_evaluator_run. */
void lab_evaluator_options(lab_evaluator *e, kl_executor *ex,
                           kl_eval_options *opts);

/* One candidate to evaluate; label and src are borrowed. */
typedef struct lab_eval_item {
  const char *label;
  const char *src;
  size_t len;
  kl_result r; /* out: the result, r.baseline_us set */
  int rc;      /* out: kl_eval_source's return */
} lab_eval_item;

/* Evaluates items[0..n) with kl_eval_source, inputs from seed, on the
 * evaluator's threads, one per slot (as many at a time as there are
 * slots). The threads live until lab_evaluator_stop: sandbox workers die
 * with the thread that started them. 0, or -1 out of memory. */
int lab_evaluator_run(lab_evaluator *e, lab_eval_item *items, int n,
                      uint64_t seed);

/* The same as a queue, for items that become ready one by one (`kernlab
 * run` queues a completion as soon as its row stops sampling):
 * lab_evaluator_begin starts a batch over items (at most cap pushes) with
 * inputs from seed; lab_evaluator_push(e, k) queues items[k], and a slot
 * thread takes it at once; lab_evaluator_finished counts the batch's
 * finished items; lab_evaluator_wait returns when n pushed items are
 * evaluated (or all pushed ones, if fewer), calling tick (NULL: none) with
 * the count at least every 250 ms, and sets their r.baseline_us. begin
 * returns 0, or -1 out of memory. */
int lab_evaluator_begin(lab_evaluator *e, lab_eval_item *items, int cap,
                        uint64_t seed);
void lab_evaluator_push(lab_evaluator *e, int k);
int lab_evaluator_finished(lab_evaluator *e);
void lab_evaluator_wait(lab_evaluator *e, int n,
                        void (*tick)(void *ctx, int finished), void *ctx);

/* Scores items[0..n) with script in groups of group_size (the last group
 * may be smaller), ctx = the task and the group, as a campaign step does;
 * comps (n, zeroed by the caller) receive the components (an unscored
 * candidate keeps an empty one). Returns how many groups failed to score,
 * why holding the first failure; -1 when out of memory. */
int lab_score_groups(rw_script *script, const lab_eval_item *items, int n,
                     int group_size, const char *task, const kl_shape *shape,
                     rw_components *comps, char *why, size_t whylen);
/* Fills s's n_candidates, reward mean/std/max/min (over scored candidates;
 * NaN when none) and correct_frac from one step's items and comps. */
void lab_step_stats(const lab_eval_item *items, const rw_components *comps,
                    int n, res_step *s);
/* The same from values: reward[k] (NaN: not scored) and correct[k]. */
void lab_step_stats_of(const double *reward, const uint8_t *correct, int n,
                       res_step *s);
/* Appends one evaluated item to store with its reward components (reward
 * NULL or unscored: none) at (step, group, sample). Returns RES_OK or
 * RES_EENV with why. */
int lab_record_candidate(res_file *store, const lab_eval_item *it,
                         const rw_components *reward, const char *task,
                         int step, int group, int sample, char *why,
                         size_t whylen);

/* why, made to start with "path: " unless it already names the path
 * there (the results store's messages do). */
void lab_name_path(const char *path, char *why, size_t whylen);

/* Opens (creating it with the campaign's attributes: config_text, the
 * reward script's path and hash, backend, seed, the flag names; device
 * "cpu", the machine the lab runs on) the results file at path for
 * appending; fresh: only a new file (res_create), since the command found
 * none at its start and one there now is another process's; run_id and
 * checkpoint_sha256 (either may be NULL) the new file's attributes of
 * those names (`kernlab run`'s id and its starting checkpoint). Returns NULL
 * with why and *exit (2 not a results file or not new, 3 I/O) when it
 * cannot; why starts with the path. Close with res_close. */
res_file *lab_results_open(const char *path, int fresh, const char *config_text,
                           const char *reward_path, rw_script *script,
                           const char *backend, uint64_t seed,
                           const char *run_id, const char *checkpoint_sha256,
                           int *exit, char *why, size_t whylen);

/* ---- baselines (lab/compare.c) ---- */

/* Prints how the results file run_h5 compares with the two baselines:
 *   best     its best correct, unflagged kernel (time, speed-up over the
 *            baseline, label) or that there is none;
 *   corpus   the fastest `train` kernel of corpus_dir/MANIFEST.tsv,
 *            evaluated now with opts (the caller's backend, task shape,
 *            seed, baseline; opts->exec NULL: a sandbox slot of its own),
 *            so both times come from the same machine and run;
 *   95%      how many evaluations (candidates in id order) run_h5 needed
 *            to reach 95% of the exhaustive best, i.e. a time <=
 *            best_exhaustive / 0.95, or that it did not; a line naming
 *            exhaustive_h5 and how to make it when it is absent, and one
 *            saying so when its task or backend differs from run_h5's.
 * One line each on out, prefixed "compare: ". corpus_dir or exhaustive_h5
 * NULL skips that part. Returns 0, or LAB_EXIT_USAGE / LAB_EXIT_ENV when
 * run_h5 cannot be read (a line on out says why). */
int lab_compare_print(const char *run_h5, const char *exhaustive_h5,
                      const char *corpus_dir, const kl_eval_options *opts,
                      FILE *out);

/* A results file's best kernel, as lab_compare_print (and --policy-matmul,
 * lab/policy_matmul.c) mean it: the fastest correct candidate (time_us >
 * 0) with no anti-cheat flag. Its id, or -1 when r holds none. */
int64_t lab_best_candidate(const res_reader *r);

/* kernlab search random|exhaustive CAMPAIGN.lua [--out FILE.h5]
 * [--budget N] [--exhaustive FILE.h5] [--space FILE.lua] [--limit N]
 * [--list] (lab/search_cmd.c) */
int lab_search(int argc, char **argv);

#endif
