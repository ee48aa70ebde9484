/*
 * results/internal.h — shared by the files of results/ only (not a public
 * header): the field lists of the two record types, from which both the
 * HDF5 compound types and the crc32 are generated, so they cannot drift;
 * the dataset names; and small HDF5 helpers.
 */
#ifndef RESULTS_INTERNAL_H
#define RESULTS_INTERNAL_H

#include "results/results.h"

#include <hdf5.h>

/* Field kinds: I64, I32, U64, U32, F64, BOOL (HDF5 enum FALSE/TRUE on int8,
 * which h5py reads as numpy bool), STR (fixed-length NUL-padded string the
 * size of the C array), SHA (uint8[32]). The crc field comes last and is
 * not listed. */
#define RES_CANDIDATE_FIELDS(X)                                                \
  X(id, I64)                                                                   \
  X(step, I64)                                                                 \
  X(group, I32)                                                                \
  X(sample, I32)                                                               \
  X(task, STR)                                                                 \
  X(label, STR)                                                                \
  X(backend, STR)                                                              \
  X(status, STR)                                                               \
  X(compiled, BOOL)                                                            \
  X(correct, BOOL)                                                             \
  X(max_rel_err, F64)                                                          \
  X(max_abs_err, F64)                                                          \
  X(time_us, F64)                                                              \
  X(time_min_us, F64)                                                          \
  X(time_max_us, F64)                                                          \
  X(baseline_us, F64)                                                          \
  X(gflops, F64)                                                               \
  X(reward, F64)                                                               \
  X(regs, I32)                                                                 \
  X(smem_bytes, I32)                                                           \
  X(spill_bytes, I32)                                                          \
  X(stack_bytes, I32)                                                          \
  X(block_x, I32)                                                              \
  X(block_y, I32)                                                              \
  X(tile_rows, I32)                                                            \
  X(tile_cols, I32)                                                            \
  X(dyn_smem_bytes, I32)                                                       \
  X(shape_m, I32)                                                              \
  X(shape_n, I32)                                                              \
  X(shape_k, I32)                                                              \
  X(flags, U64)                                                                \
  X(seed, U64)                                                                 \
  X(compile_ms, F64)                                                           \
  X(wall_unix, F64)                                                            \
  X(reward_sha256, STR)                                                        \
  X(src_off, U64)                                                              \
  X(src_len, U32)                                                              \
  X(src_sha256, SHA)                                                           \
  X(timing_off, U64)                                                           \
  X(timing_count, U32)                                                         \
  X(error, STR)          /* schema 2 on (res__field_since) */                  \
  X(timed_launches, I32) /* schema 3 on: new fields go last */

#define RES_STEP_FIELDS(X)                                                     \
  X(step, I64)                                                                 \
  X(n_candidates, I32)                                                         \
  X(reward_mean, F64)                                                          \
  X(reward_std, F64)                                                           \
  X(reward_max, F64)                                                           \
  X(reward_min, F64)                                                           \
  X(correct_frac, F64)                                                         \
  X(kl, F64)                                                                   \
  X(loss, F64)                                                                 \
  X(entropy, F64)                                                              \
  X(clip_frac, F64)                                                            \
  X(len_mean, F64)                                                             \
  X(best_time_us, F64)                                                         \
  X(lr, F64)                                                                   \
  X(grad_norm, F64)                                                            \
  X(wall_s, F64)

#define RES_DS_CANDIDATES "candidates"
#define RES_DS_SOURCE "source_bytes"
#define RES_DS_TIMINGS "timings"
#define RES_DS_COMPONENTS "reward_components"
#define RES_DS_COMPONENT_NAMES "reward_component_names"
#define RES_DS_STEPS "steps"
#define RES_KIND "kernlab-results"

/* Memory (= file) compound types; the caller closes them with H5Tclose. */
hid_t res__candidate_type(void);
hid_t res__step_type(void);

/* Checks the 8-byte HDF5 signature at offset 0 (kernlab files always put the
 * superblock there). Returns RES_OK or RES_EINPUT with a reason. */
int res__check_signature(const char *path, char *why, size_t whylen);

/* Checks that fid is a kernlab results file this code can read (kind and
 * schema_version attributes). Returns RES_OK or RES_EINPUT with a reason. */
int res__validate(hid_t fid, const char *path, char *why, size_t whylen);

/* Metadata read attempts for every SWMR open, reader's and writer's:
 * HDF5 retries a bad object header with a doubling sleep, 100 times by
 * default, which never ends on a torn one; 16 take well under a
 * millisecond. */
#define RES_READ_ATTEMPTS 16

/* The number of leading records that are complete: crc matches, id is the
 * row index, and source and samples lie inside the heaps' extents. The
 * rest is work that was in flight when a writer died. */
int64_t res__valid_prefix(const res_candidate *recs, int64_t n,
                          int64_t src_bytes, int64_t n_samples, int schema);

/* Reads the n rows of /candidates (ds, memory type `type`) in batches and
 * keeps its valid prefix: *out (malloc'd; NULL when n is 0) holds at least
 * the *prefix complete records. Reading stops past the first damaged
 * record's batch but for counting: whether the rows past the prefix can
 * be a killed writer's work in flight. A writer appends one record at a
 * time, in order, and flushes after each, so a crash leaves at most one
 * incomplete row, at the end. More than one, or a complete record after
 * an incomplete one, means the file was damaged after it was written (a
 * disk, a copy, an edit): those records must be neither dropped in
 * silence nor overwritten. what gets "" when the rows can be a crash's,
 * else one phrase. Returns 0, -1 when a read fails, -2 out of memory. */
int res__load_candidates(hid_t ds, hid_t type, int64_t n, int64_t src_bytes,
                         int64_t n_samples, int schema, res_candidate **out,
                         int64_t *prefix, char *what, size_t whatlen);

/* res__load_candidates for /steps (memory type `type`), whose records
 * are complete when their crc matches: *out (malloc'd; NULL when n is 0)
 * holds at least the *prefix complete records, read in batches, and at
 * most DAMAGE_SCAN_MAX rows past the first damaged one are read to count
 * the complete ones. what is "" when the rest can be a crash's, else one
 * phrase. The caller first checks the type's fields (res__field_problem):
 * a field missing from the file reads as zeros, which fail the crc. The
 * reader and the writer both load steps so. Returns 0, -1 when a read
 * fails, -2 out of memory. */
int res__load_steps(hid_t ds, hid_t type, int64_t n, res_step **out,
                    int64_t *prefix, char *what, size_t whatlen);

/* res__load_candidates' phrase (or res__load_steps') for a reader's file; ""
 * when there is none. */
const char *res__reader_damage(const res_reader *r);

/* The tail of every message about such a file. */
#define RES_DAMAGE_HINT                                                        \
  "a crash leaves damage only in the last record: this file was changed "      \
  "after it was written; write to a new file"

/* The schema that added the candidates' field `name` (1: the first). */
int res__field_since(const char *name);
/* The record crc as a file of schema `schema` computes it: over the
 * fields that schema has (schema 1 had no `error`, 2 no
 * `timed_launches`). */
uint32_t res__candidate_crc(const res_candidate *r, int schema);

/* Whether the link `name` in the root of fid is a hard link: NULL when it
 * is, else a phrase ("missing", "an external link (to another file)", ...).
 * A results file holds its own data: a soft or external link is refused
 * before anything follows it (an external link to a FIFO blocked every
 * reader in open(), one to another campaign's file took a writer's
 * appends). */
const char *res__link_problem(hid_t fid, const char *name);
/* res__link_problem for every dataset of the schema: RES_OK, or
 * RES_EINPUT with why naming the first dataset behind a link. */
int res__check_links(hid_t fid, const char *path, char *why, size_t whylen);
/* Opens the schema dataset `name` of fid: -1 unless its link is hard, and
 * with an access list that refuses to follow external links (a second
 * wall). HDF5's error stack is left quiet. The caller closes it. */
hid_t res__open_ds(hid_t fid, const char *name);
/* Why the compound records of ds do not read as mt (a file edited with
 * other tools): a field missing (one a later schema added may be, in an
 * older file), or of a type HDF5 cannot convert. 0 with out "" when
 * nothing is found. */
int res__field_problem(hid_t ds, hid_t mt, int schema, char *out, size_t n);

/* Current extent of a 1-D (or the first axis of a 2-D) dataset; -1 on
 * error. */
int64_t res__extent(hid_t ds, int axis);
/* The rows of ds that have storage behind them (a file's declared extent
 * can be edited to billions of rows with no data: unwritten chunks read as
 * the fill value, which no record passes). What readers allocate for. */
int64_t res__stored_rows(hid_t ds);

/* Reads [start, start + count) of a 1-D dataset (or rows of a 2-D one,
 * cols wide) with memory type mt into buf. Returns 0 or -1. */
int res__read_rows(hid_t ds, hid_t mt, int64_t start, int64_t count,
                   int64_t cols, void *buf);

/* Recovery after a killed writer (results/recover.c): rewrites path's valid
 * content into a fresh file and renames it over path. */
int res__rebuild(const char *path, int *lock_fd, char *why, size_t whylen);
/* The writer's lock on the file at path (store.c): RES_OK with *fd_out
 * holding it, or RES_EENV with why (another writer has it). */
int res__take_lock(const char *path, int *fd_out, char *why, size_t whylen);

/* Writer internals used by the rebuild: skip the per-append flushes (the
 * rebuilt file only counts once renamed into place), and the value of the
 * `created` attribute for the next file created (NULL: now). */
void res__set_noflush(res_file *f, int on);
extern const char *res__created_override;

/* Formats the innermost HDF5 error message into why (after prefix). */
void res__h5_error(char *why, size_t whylen, const char *prefix);

/* Before the first HDF5 call of an entry point (store.c): HDF5's error
 * stack is not printed (messages go through why), and its exit-time
 * cleanup is not installed. That cleanup closes the files still open, and
 * a file whose close already failed (a full disk: the flush cannot write)
 * is still in its table, half torn down; closing it again at exit crashed
 * the process (HDF5 1.10, H5F__close_cb). Every file the lab opens is
 * closed by it, so nothing is left for that cleanup to do. */
void res__hdf5_setup(void);

/* ---- the HTML report (results/report.c, results/report_plots.c) -------- */

/* Writes n bytes of s as HTML text, safe inside an element or a quoted
 * attribute: no '<', '>', '&' or quote survives, C0 controls but tab,
 * newline and CR become U+FFFD. */
void res__html_esc(FILE *f, const char *s, size_t n);
/* The same for at most max bytes of s, cut at a UTF-8 character boundary
 * with an ellipsis (names in plots, where space is fixed). */
void res__html_esc_short(FILE *f, const char *s, size_t max);
/* Writes the six plots' <figure>s; unit labels the time axes. Returns
 * RES_OK, or RES_EENV with a reason when out of memory. */
int res__report_plots(FILE *f, const res_reader *r, const char *unit, char *why,
                      size_t whylen);
/* The comparison <figure> of a report on several files: best correct,
 * unflagged time so far against evaluations (candidates in id order), one
 * line per run, named by names in the legend; a run whose left_out[k] is
 * set (not comparable with the others) is not drawn. */
void res__plot_compare(FILE *f, const res_reader *const *runs,
                       const char *const *names, const unsigned char *left_out,
                       int n_runs, const char *unit);

#endif
