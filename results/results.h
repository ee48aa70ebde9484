/*
 * results/results.h — the one public header of the results module: the HDF5
 * campaign store (schema, writer, reader).
 *
 * One HDF5 file per campaign (or one per user leaderboard for `kernlab eval
 * --out`). h5py reads it without kernlab. Prefix: res_. Errors are values:
 * functions return a RES_* status and write a one-line reason into a
 * caller-supplied buffer (`why`, `whylen`). RES_EINPUT and RES_EENV match the
 * CLI exit codes 2 and 3.
 *
 * Schema (version RES_SCHEMA_VERSION; every dataset is chunked and extendable
 * along its unlimited dimensions, every record is plain fixed-size data):
 *
 *   /                      attributes: kind = "kernlab-results",
 *                          schema_version, created, config (the campaign's
 *                          config text), reward_script, reward_sha256,
 *                          device, backend, kernlab_version, hdf5_version,
 *                          nvrtc_version, driver_version, seed, flag_names
 *                          (bit i of a candidate's `flags` is flag_names[i])
 *   /candidates            compound res_candidate records, [n]; the row index
 *                          is the candidate's id. Schema 2 added the field
 *                          `error` (the evaluation's error line), schema 3
 *                          the last, `timed_launches` (the launches behind
 *                          the samples: more than timing_count where short
 *                          launches were timed in batches, each sample
 *                          their mean); an older file reads with them
 *                          empty (0) and takes appends in its own schema
 *                          (records without them)
 *   /source_bytes          uint8 byte heap, [bytes]; a candidate's source is
 *                          [src_off, src_off + src_len), sha256 src_sha256.
 *                          Identical sources are stored once.
 *   /timings               float64 raw timing samples in microseconds, [m];
 *                          a candidate's are [timing_off, +timing_count)
 *   /reward_components     float64 [n, k]: candidate i's value of component
 *                          j; NaN where a candidate has no such component.
 *                          Grows along both axes: a reward script may add a
 *                          component mid-campaign (hot reload); at most
 *                          RES_MAX_COMPONENT_NAMES columns.
 *   /reward_component_names  uint8 [k, RES_NAME_LEN]: NUL-padded name of
 *                          column j. The authoritative list; the attribute
 *                          `names` on /reward_components holds the names
 *                          known when the file was created (SWMR forbids
 *                          changing attributes later).
 *   /steps                 compound res_step records, one per policy step
 *
 * Crash safety: SWMR. The writer creates every object up front, switches to
 * single-writer/multiple-reader mode (H5Fstart_swmr_write, libver latest)
 * and only ever appends along unlimited dimensions; after each candidate it
 * flushes the file. SWMR orders metadata flushes so the on-disk file is
 * coherent at every instant, which is what a kill -9 sees (the page cache
 * survives the process). Chosen over a checksummed log rebuilt into HDF5
 * because it keeps one file that live readers (`kernlab top` during a
 * campaign, h5py with swmr=True) can follow, with no second format and no
 * rebuild step; the cost is that no new objects or attributes can appear
 * after creation (hence the pre-created datasets above) and that files are
 * not compressed (a compressed partial chunk is rewritten to fresh space on
 * every flush and SWMR never recycles space). Extra guards:
 *   - an append writes the source, samples and components, flushes, and
 *     only then writes the record (SWMR keeps each dataset coherent but
 *     does not order flushes across datasets);
 *   - each record carries a crc32 of its fields, so a record whose row
 *     became visible before all its bytes is recognised as the work in
 *     flight and ignored (readers stop at the first bad crc or the first
 *     record pointing outside the heaps; the writer overwrites it). Only
 *     the last records can be in flight: a complete record after a bad one
 *     means the file was damaged after it was written, so readers say on
 *     stderr how many records they do not read (and refuse the file, exit 2
 *     from the commands, when that is all of them), and writers (in place or
 *     by a rebuild) refuse to append rather than overwrite or drop them;
 *   - a new file is built under a temporary name and renamed into place once
 *     complete, so a kill during creation leaves no half-made file;
 *   - every allocation is page-aligned and metadata blocks are a page long,
 *     so no object header straddles two pages: the kernel copies a write
 *     page by page and a kill -9 between two pages tore a /steps header
 *     (1 crash-test run in 30) until then.
 * Readers and writers bound HDF5's SWMR retries of a bad header to 16 (its
 * default 100, with a doubling sleep, waits without end on a torn one: a
 * writer reopening a file with a torn root header hung), and a damaged
 * /steps costs the step records, said on stderr, never the candidates.
 * After a crash the superblock still says "open for SWMR write": readers open
 * with H5F_ACC_SWMR_READ (h5py: swmr=True), which works for finished, live
 * and crashed files alike (HDF5 1.10 refuses a plain read-only open of such
 * a file). The next writer (it holds an OFD lock on the file, so it knows
 * no other kernlab writer is alive) does not clear the mark in place: the
 * crash test showed that reopening a killed file read-write lets HDF5 cut
 * it at a stale end-of-allocation on close, losing records. It rebuilds
 * instead (results/recover.c): valid content into a fresh file, renamed
 * over the old one. A cleanly closed file opens with plain
 * h5py.File(path) and is reopened in place.
 *
 * The store knows nothing about CUDA or Lua: the lab fills res_candidate from
 * kernels' kl_result and reward's components.
 */
#ifndef RESULTS_RESULTS_H
#define RESULTS_RESULTS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

enum {
  RES_OK = 0,
  RES_EINPUT = 2, /* not a results file, newer schema, truncated, bad id */
  RES_EENV = 3,   /* HDF5 failure, disk full, file busy */
};

/* 2: the candidates' error line; 3: their timed_launches */
#define RES_SCHEMA_VERSION 3
#define RES_NAME_LEN 64 /* component and flag names, NUL included */
#define RES_MAX_FLAGS 64
/* Distinct reward component names one file takes: every row holds every
 * column, so a formula that invents a name per candidate (a bug) would
 * grow the file with the square of the candidates. A formula's
 * components are a handful (reward.h: at most RW_MAX_COMPONENTS per call);
 * edits over a campaign add a few more. */
#define RES_MAX_COMPONENT_NAMES 256
/* One candidate's source and raw timing samples, at most: what the lab
 * accepts (KL_MAX_SOURCE_BYTES, KL_MAX_TIMING_SAMPLES). A record claiming
 * more is damaged (readers); an append of more keeps the first ones. */
#define RES_MAX_SOURCE_BYTES (256 * 1024)
#define RES_MAX_SAMPLES 1000

/* One evaluated candidate, as stored in /candidates. The caller fills the
 * measurement fields; the fields marked (store) are assigned by
 * res_append_candidate and are ignored on input. Strings are NUL-padded
 * fixed arrays (HDF5 fixed-length strings; h5py reads them as bytes). */
typedef struct res_candidate {
  int64_t id;      /* (store) row index in /candidates */
  int64_t step;    /* campaign step; -1 outside a campaign (eval --out) */
  int32_t group;   /* GRPO group within the step; -1 if none */
  int32_t sample;  /* index within the group; -1 if none */
  char task[32];   /* "fp32_MxNxK" ("fp32_256" in older files) */
  char label[128]; /* file name for eval, or a sample tag */
  char backend[16];
  char status[48]; /* ok, wrong, compile_error, timeout, crashed:<sig>, ... */
  uint8_t compiled, correct;
  double max_rel_err, max_abs_err;
  double time_us, time_min_us, time_max_us; /* median, min, max; -1 none */
  double baseline_us; /* baseline at the same shape; -1 if none */
  double gflops;      /* -1 if not timed */
  double reward;      /* total (sum of components); NaN if not scored */
  int32_t regs, smem_bytes, spill_bytes, stack_bytes; /* -1 unknown */
  int32_t block_x, block_y, tile_rows, tile_cols, dyn_smem_bytes;
  int32_t shape_m, shape_n, shape_k; /* the timed target shape */
  uint64_t flags;                    /* anti-cheat bits; see flag_names */
  uint64_t seed;
  double compile_ms;
  double wall_unix;       /* when it was evaluated (seconds since epoch) */
  char reward_sha256[65]; /* hash of the reward script that scored it */
  uint64_t src_off;       /* (store) */
  uint32_t src_len;       /* (store) */
  uint8_t src_sha256[32]; /* (store) */
  uint64_t timing_off;    /* (store) */
  uint32_t timing_count;  /* (store) */
  char error[256];        /* the evaluation's error line, cut to 255 bytes; ""
                             when none (schema 2; read as "" from schema 1) */
  int32_t timed_launches; /* behind the timing samples (schema 3; read as 0
                             from older files) */
  uint32_t crc;           /* (store) crc32 of every other field */
} res_candidate;

/* Per-step policy statistics, one record per step in /steps. */
typedef struct res_step {
  int64_t step;
  int32_t n_candidates;
  double reward_mean, reward_std, reward_max, reward_min;
  double correct_frac;
  double kl, loss, entropy, clip_frac, len_mean;
  double best_time_us; /* best correct time so far; -1 if none */
  double lr, grad_norm;
  double wall_s; /* seconds since the campaign started */
  uint32_t crc;  /* (store) */
} res_step;

/* Campaign attributes, written once when the file is created. NULL strings
 * are stored as "". */
typedef struct res_campaign_meta {
  const char *config; /* the campaign's config text (any size) */
  const char *reward_script, *reward_sha256;
  const char *device, *backend;
  const char *kernlab_version, *nvrtc_version, *driver_version;
  uint64_t seed;
  const char *const *flag_names; /* bit i -> name; may be NULL */
  int n_flags;
  const char *const *component_names; /* initial reward components */
  int n_components;
  /* `kernlab run`'s id of the run (16 hex digits; its checkpoints carry
   * it): the root attribute run_id, written when not NULL */
  const char *run_id;
  /* `kernlab run`'s starting checkpoint (the campaign's `checkpoint`): its
   * sha256 trailer, the root attribute checkpoint_sha256, written when not
   * NULL. --resume compares it with the file there now. */
  const char *checkpoint_sha256;
} res_campaign_meta;

/* ---- writer (results/store.c) -------------------------------------------- */

typedef struct res_file res_file;

/* Opens path for appending, creating it (with meta's attributes) if it does
 * not exist; an existing file keeps its attributes and meta is ignored.
 * Clears a crashed writer's mark. Returns NULL with a reason in why (and
 * *code = RES_EINPUT for a file that is not a kernlab results file or has a
 * newer schema, RES_EENV for I/O trouble or a file another process is
 * writing) when it cannot. The caller closes the result with res_close. */
res_file *res_open_append(const char *path, const res_campaign_meta *meta,
                          int *code, char *why, size_t whylen);

/* Creates path as res_open_append does, but only a new file: one that
 * exists (or appears while it is being created, as when two runs write the
 * same output) is refused with RES_EINPUT, never replaced or joined. */
res_file *res_create(const char *path, const res_campaign_meta *meta, int *code,
                     char *why, size_t whylen);

/* Appends one candidate: its source (stored once per distinct sha256), its
 * raw timing samples, its reward components (names mapped to columns; new
 * names add columns), then the record; flushes. c->id and the other (store)
 * fields are assigned; the new id is returned through *id (may be NULL).
 * Returns RES_OK or RES_EENV with a reason; on error the file still holds
 * every earlier candidate. */
int res_append_candidate(res_file *f, const res_candidate *c,
                         const char *source, size_t source_len,
                         const double *samples, int n_samples,
                         const char *const *comp_names,
                         const double *comp_values, int n_comp, int64_t *id,
                         char *why, size_t whylen);

/* Appends one /steps record and flushes. Returns RES_OK or RES_EENV. */
int res_append_step(res_file *f, const res_step *s, char *why, size_t whylen);

/* Number of candidates and of steps the file holds (valid records): where
 * a resumed campaign continues. */
int64_t res_file_count(const res_file *f);
int64_t res_file_step_count(const res_file *f);

/* Flushes and closes; clears the SWMR mark. Returns RES_OK or RES_EENV.
 * f is freed in every case; NULL is a no-op. */
int res_close(res_file *f, char *why, size_t whylen);

/* The length (1 to 4) of the valid UTF-8 character at s (n bytes
 * available), or 0 where the bytes are not UTF-8 (a stray continuation
 * byte, an overlong form, a surrogate, past U+10FFFF, cut short): the
 * report and the JSON writers put U+FFFD there, since a source or a label
 * is whatever bytes a policy or a file name held. */
size_t res_utf8_char(const char *s, size_t n);
/* The code point of the len-byte character at s (len from res_utf8_char)
 * when it is an invisible control of text direction (U+061C, U+200E,
 * U+200F, U+202A..U+202E, U+2066..U+2069), else 0. Shown as they are, they
 * reorder what a reader sees of a source: a comment's text can appear to
 * hold the code after it ("Trojan Source"), so the report and the terminal
 * show them as marks instead. */
uint32_t res_bidi_control(const char *s, size_t len);

/* ---- reader (results/reader.c) ------------------------------------------- */

typedef struct res_reader res_reader;

/* Opens a results file read-only (SWMR read: works while a writer appends
 * and after a crash). Returns NULL with *code = RES_EINPUT and a reason for
 * a missing file, a file that is not HDF5, not a kernlab results file, a
 * newer schema or a truncated file; RES_EENV for other HDF5 failures. */
res_reader *res_open_read(const char *path, int *code, char *why,
                          size_t whylen);
void res_reader_close(res_reader *r);

/* Valid candidates: records up to (not including) the first bad crc. */
int64_t res_count(const res_reader *r);
/* Pointer to candidate id's record, owned by the reader; NULL when out of
 * range. */
const res_candidate *res_get(const res_reader *r, int64_t id);

/* A string attribute of the root group ("" when absent), owned by r. */
const char *res_attr(const res_reader *r, const char *name);
int res_schema_version(const res_reader *r);
uint64_t res_seed(const res_reader *r);

/* Flag names (bit i -> names[i]); owned by r. */
int res_flag_count(const res_reader *r);
const char *res_flag_name(const res_reader *r, int bit);

/* Reward components: column names, and candidate id's values (NaN where the
 * candidate lacks one); both owned by r. res_components is NULL when id is
 * out of range or the candidate has no value at all (a row of NaN, or one
 * the file never wrote: past the matrix's rows or in a chunk never
 * stored). */
int res_component_count(const res_reader *r);
const char *res_component_name(const res_reader *r, int j);
const double *res_components(const res_reader *r, int64_t id);

/* Reads candidate id's source into a malloc'd NUL-terminated buffer owned
 * by the caller and checks it against src_sha256. Returns RES_OK, or
 * RES_EINPUT for an unknown id or a hash mismatch. */
int res_source(const res_reader *r, int64_t id, char **src, size_t *len,
               char *why, size_t whylen);

/* Reads candidate id's raw timing samples into a malloc'd array owned by the
 * caller (*samples is NULL when there are none). */
int res_timings(const res_reader *r, int64_t id, double **samples, int *n,
                char *why, size_t whylen);

/* Policy steps, owned by r. */
int64_t res_step_count(const res_reader *r);
const res_step *res_get_step(const res_reader *r, int64_t i);

/* ---- tasks (results/task.c) ---------------------------------------------- */

/* A candidate's task names its dtype and target shape, "fp32_MxNxK"; files
 * from before that call a cube's "fp32_256". RES_TASK_LEN holds either
 * form's canonical name. */
#define RES_TASK_LEN 48
/* Writes task's canonical name ("fp32_256" -> "fp32_256x256x256") into
 * out (n bytes); a name of neither form is copied as it is. */
void res_task_canonical(const char *task, char *out, size_t n);

typedef struct res_task_count {
  char task[RES_TASK_LEN]; /* canonical */
  int64_t count;           /* candidates of that task */
} res_task_count;
/* The distinct tasks of r's candidates, in order of first appearance:
 * at most max of them into out. Returns how many there are, or max + 1
 * when there are more than max. 0: no candidates. */
int res_tasks(const res_reader *r, res_task_count *out, int max);

/* Whether times of a and b (named name_a, name_b in messages) can be
 * compared: each file's candidates are of one task on one backend, the
 * same in both; a file without candidates compares with any. 1, or 0
 * with why: "not comparable: A is fp32_256x256x256 on cpu-emu, B is
 * fp32_64x64x64 on cpu-emu", or that one file holds several. */
int res_comparable(const res_reader *a, const char *name_a, const res_reader *b,
                   const char *name_b, char *why, size_t whylen);
/* Of n files compared side by side (a report on several files), the one
 * the others are compared with: the first that holds candidates (an empty
 * file has no task), 0 when none does. */
int res_compare_reference(const res_reader *const *runs, int n);

/* ---- report (results/report.c) ------------------------------------------- */

typedef struct res_report_opts {
  const char *title; /* shown on the page, e.g. the file's path */
  int top_n;         /* leaderboard rows; <= 0 means 50 */
  /* Other results files to compare with (e.g. a campaign and its search
   * baselines): n_compare readers and their names; 0 for none. */
  const res_reader *const *compare;
  const char *const *compare_names;
  int n_compare;
} res_report_opts;

/* Writes one self-contained HTML page about r to out: summary, SVG plots
 * (reward mean/max, correct fraction and best time per step, the time
 * histogram of correct kernels, reward components), status counts, the
 * top_n fastest correct kernels with their sources, the campaign's
 * attributes. With o->n_compare > 0 the page opens with a comparison of r
 * (named o->title) and the other files: best correct time so far against
 * evaluations, one line per file, and a table of each file's best; a file
 * whose times do not compare (res_comparable, against
 * res_compare_reference) is named in a note and left out of the plot and
 * of the speed column. The rest of the page is about r. No scripts and nothing
 * fetched from the network; every string from the files is HTML-escaped. Empty
 * files (no steps, no candidates) get a page that says so. Returns RES_OK, or
 * RES_EENV with a reason when out of memory or when writing to out fails. */
int res_report_html(const res_reader *r, const res_report_opts *o, FILE *out,
                    char *why, size_t whylen);

/* ---- helpers (results/schema.c) ------------------------------------------ */

/* crc32 (IEEE, as zlib) of a candidate's or step's fields, excluding crc. */
uint32_t res_candidate_crc(const res_candidate *c);
uint32_t res_step_crc(const res_step *s);

/* Copies s into a fixed array of n bytes, NUL-padding the rest. */
void res_strset(char *dst, size_t n, const char *s);

#endif
