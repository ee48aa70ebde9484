/*
 * lab/compare.c — a campaign (or a search) against its two baselines:
 * the best kernel of the priming corpus, and exhaustive search over the
 * seed template space (lua/search_space.lua, `kernlab search exhaustive`).
 * `kernlab run` prints it at the end of a campaign, `kernlab search` at the
 * end of a search (lab_compare_print in lab/lab.h).
 *
 * Choices where the issue is silent:
 *   - "best" everywhere is the fastest correct kernel with no anti-cheat
 *     flag, as the campaign's own "best so far" (a flagged kernel is not a
 *     result, whatever its time);
 *   - the corpus's best is the fastest `train` kernel by the manifest's
 *     time (measured when the corpus was built, possibly at another shape);
 *     it is evaluated again here with the caller's options, so the two
 *     times printed side by side come from the same machine, backend,
 *     shape and baseline. Held-out kernels are left out: the policy never
 *     saw them, the question is whether it went beyond what it was shown;
 *   - "evaluations to reach 95% of the exhaustive best" counts candidates
 *     in id order (the order they were evaluated) up to the first whose
 *     time is <= exhaustive best / 0.95. Times of two files come from two
 *     runs, so on the noisy CPU emulator the answer is good to a few
 *     percent; a file for another task shape or backend is not compared,
 *     nor an exhaustive search cut short by --limit (its config line says
 *     "partial": lab/search_cmd.c says why), nor one that stopped before
 *     its last evaluation (fewer candidates than its config line's count).
 */
#include "lab/lab.h"

#include "sandbox/sandbox.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The fastest correct, unflagged kernel of a results file. */
typedef struct best_kernel {
  int64_t n;          /* the file's evaluations (step >= 0) */
  int64_t id;         /* -1: none */
  double time_us;     /* its median time */
  double baseline_us; /* the baseline stored with it */
  char label[129];
  char backend[17]; /* of the first candidate */
  int code;         /* why the file did not open: */
  char why[1024];   /* RES_EINPUT / RES_EENV and a reason */
} best_kernel;

static int usable(const res_candidate *c) {
  return c->correct && c->time_us > 0 && !c->flags;
}

/* A campaign's or a search's own evaluations: `kernlab eval --out` may add
 * candidates (step -1) to their file, which run --resume keeps and leaves
 * out; the comparison leaves them out too (neither the run's best nor one
 * of its evaluations). */
static int evaluation(const res_candidate *c) {
  return c->step >= 0;
}

static int64_t best_of(const res_reader *r, int evaluations_only) {
  int64_t best = -1, n = res_count(r);
  double best_us = 0;
  for (int64_t i = 0; i < n; i++) {
    const res_candidate *c = res_get(r, i);
    if (evaluations_only && !evaluation(c)) continue;
    if (!usable(c) || (best >= 0 && c->time_us >= best_us)) continue;
    best = i;
    best_us = c->time_us;
  }
  return best;
}

int64_t lab_best_candidate(const res_reader *r) {
  return best_of(r, 0);
}

/* Opens path and finds its best kernel; NULL with b->code and b->why when
 * the file does not open. The caller closes the reader. */
static res_reader *read_best(const char *path, best_kernel *b) {
  memset(b, 0, sizeof *b);
  b->id = -1;
  res_reader *r = res_open_read(path, &b->code, b->why, sizeof b->why);
  if (!r) return NULL;
  int64_t n = res_count(r);
  for (int64_t i = 0; i < n; i++) {
    const res_candidate *c = res_get(r, i);
    if (!evaluation(c)) continue;
    if (!b->n++)
      snprintf(b->backend, sizeof b->backend, "%.*s", (int)sizeof c->backend,
               c->backend);
  }
  b->id = best_of(r, 1);
  if (b->id >= 0) {
    const res_candidate *c = res_get(r, b->id);
    b->time_us = c->time_us;
    b->baseline_us = c->baseline_us;
    snprintf(b->label, sizeof b->label, "%.*s", (int)sizeof c->label, c->label);
  }
  return r;
}

/* ", 7.85x the baseline's speed" or "" when there is no baseline ("785%
 * of the baseline" read as a time, the opposite). */
static void pct_of_baseline(char *buf, size_t n, double baseline, double t) {
  if (baseline > 0 && t > 0)
    snprintf(buf, n, ", %.2fx the baseline's speed", baseline / t);
  else
    buf[0] = 0;
}

/* ---- the priming corpus's best train kernel ---- */

/* Finds the fastest train kernel in dir/MANIFEST.tsv (lab/corpus_cmd.c
 * writes it: name, config, split, status, time_us_cpu_emu). Returns 0 with
 * its name and manifest time, or -1 with why. */
static int corpus_best(const char *dir, char *name, size_t namelen,
                       double *time_us, char *why, size_t whylen) {
  char path[1200];
  snprintf(path, sizeof path, "%s/MANIFEST.tsv", dir);
  /* a FIFO (or /dev/zero) in its place would block the finished run's
   * comparison for ever (the campaign-file review found it) */
  FILE *f = kl_fopen_regular(path, NULL);
  if (!f && errno == ENOENT) {
    snprintf(why, whylen,
             "no priming corpus at %s (no MANIFEST.tsv; build one with "
             "`kernlab corpus --out %s`)",
             dir, dir);
    return -1;
  }
  if (!f) {
    snprintf(why, whylen, "%.900s: %s", path, kl_fopen_error(errno));
    return -1;
  }
  char line[2048];
  int found = 0, in_long = 0;
  while (fgets(line, sizeof line, f)) {
    /* a line longer than the buffer is skipped whole: its tail read as a
     * record named a kernel that was never listed (the checkpoint
     * review) */
    size_t ll = strlen(line);
    int longline = !(ll > 0 && line[ll - 1] == '\n') && !feof(f);
    int skip = in_long || longline;
    in_long = longline;
    if (skip) continue;
    char *field[5], *save = NULL, *p = line;
    int k = 0;
    line[strcspn(line, "\r\n")] = 0;
    for (; k < 5 && (field[k] = strtok_r(p, "\t", &save)); k++)
      p = NULL;
    /* a name is a file of train/: "../x" would reach out of it; and one
     * `kernlab corpus` writes (lab/lua_script.c): an escape sequence in a
     * hand-edited or downloaded manifest reached the terminal raw, in the
     * line that names the corpus's best */
    char shown[sizeof line];
    if (k < 5 || strcmp(field[2], "train") || strchr(field[0], '/') ||
        strcmp(lab_printable(field[0], strlen(field[0]), shown, sizeof shown),
               field[0]))
      continue;
    char *end;
    double t = strtod(field[4], &end);
    if (*end || !(t > 0) || (found && t >= *time_us)) continue;
    snprintf(name, namelen, "%s", field[0]);
    *time_us = t;
    found = 1;
  }
  fclose(f);
  if (!found) snprintf(why, whylen, "%.900s lists no timed train kernel", path);
  return found ? 0 : -1;
}

static void print_corpus(const char *dir, const best_kernel *run,
                         const kl_eval_options *opts, FILE *out) {
  char name[512], why[1024];
  double manifest_us = 0;
  if (corpus_best(dir, name, sizeof name, &manifest_us, why, sizeof why)) {
    fprintf(out, "compare: corpus: %s\n", why);
    return;
  }
  char path[2048], *src = NULL;
  size_t len = 0;
  snprintf(path, sizeof path, "%s/train/%s.cu", dir, name);
  if (kl_source_load(path, &src, &len, why, sizeof why) != KL_OK) {
    fprintf(out, "compare: corpus: %s\n", why);
    return;
  }
  kl_eval_options o = *opts;
  sbx_slot *own = NULL;
  kl_executor ex;
  if (!o.exec && (own = sbx_slot_new(NULL))) {
    sbx_slot_executor(own, &ex);
    o.exec = &ex;
  }
  kl_result r;
  int rc = kl_eval_source(name, src, len, &o, &r);
  free(src);
  sbx_slot_free(own);
  if (rc != KL_OK || !r.correct || !(r.time_us > 0)) {
    fprintf(out,
            "compare: corpus: its best train kernel %s did not evaluate "
            "here: %s%s%s\n",
            name, r.status, r.error[0] ? ": " : "", r.error);
    return;
  }
  char pct[64], vs[128] = "";
  pct_of_baseline(pct, sizeof pct, opts->baseline_us, r.time_us);
  if (run->id >= 0)
    snprintf(vs, sizeof vs, "; the best kernel above is %.2fx %s",
             run->time_us <= r.time_us ? r.time_us / run->time_us
                                       : run->time_us / r.time_us,
             run->time_us <= r.time_us ? "faster" : "slower");
  fprintf(out,
          "compare: priming corpus best (train, %s/MANIFEST.tsv): %s, "
          "%.1f us here%s (%.1f us in the manifest, at the corpus's "
          "shape)%s\n",
          dir, name, r.time_us, pct, manifest_us, vs);
}

/* ---- evaluations to reach 95% of the exhaustive best ---- */

static void print_95(const char *run_h5, const res_reader *run,
                     const best_kernel *rb, const char *exhaustive_h5,
                     FILE *out) {
  best_kernel eb;
  res_reader *ex = read_best(exhaustive_h5, &eb);
  if (!ex) {
    if (access(exhaustive_h5, F_OK) != 0)
      fprintf(out,
              "compare: 95%% of the exhaustive best: no exhaustive search "
              "results at %s (make them with `kernlab search exhaustive "
              "CAMPAIGN.lua`, which writes the campaign's `exhaustive` "
              "file)\n",
              exhaustive_h5);
    else
      fprintf(out, "compare: 95%% of the exhaustive best: %s\n", eb.why);
    return;
  }
  /* an exhaustive search's file (its config is describe_search's text in
   * lab/search_cmd.c): a random search's, or a campaign's, best is no
   * baseline for "95% of the exhaustive best" */
  static const char tag[] = "-- kernlab search exhaustive:";
  int exhaustive = !strncmp(res_attr(ex, "config"), tag, sizeof tag - 1);
  /* times of another task or backend are no baseline (results/task.c;
   * the report on several files asks the same) */
  char why[1024];
  int comparable =
      res_comparable(ex, exhaustive_h5, run, run_h5, why, sizeof why);
  if (!exhaustive) {
    fprintf(out,
            "compare: 95%% of the exhaustive best: %s is not an exhaustive "
            "search's results (its config does not start with \"%s\"); make "
            "them with `kernlab search exhaustive CAMPAIGN.lua`\n",
            exhaustive_h5, tag);
    res_reader_close(ex);
    return;
  }
  /* a sweep cut short by --limit (lab/search_cmd.c): the best of its first
   * N configurations is not the space's best, and a run measured against
   * it would look closer to the optimum than it is */
  static const char partial[] = "-- kernlab search exhaustive: partial (";
  const char *config = res_attr(ex, "config");
  if (!strncmp(config, partial, sizeof partial - 1)) {
    const char *what = config + sizeof partial - 1;
    int len = (int)strcspn(what, ")\n");
    fprintf(out,
            "compare: 95%% of the exhaustive best: %s is a partial exhaustive "
            "search (%.*s), not a sweep of the whole space: its best is no "
            "baseline; run `kernlab search exhaustive CAMPAIGN.lua` without "
            "--limit for one\n",
            exhaustive_h5, len, what);
    res_reader_close(ex);
    return;
  }
  /* a sweep stopped short (Ctrl-C, a kill, a full disk): its config
   * line says how many evaluations were planned, the file holds fewer.
   * Left at the campaign's `exhaustive` name, it was read as the space's
   * best, and a re-run refuses to replace it (the search review found an
   * exhaustive search interrupted after 6 of 112 "reached after 1 of 4") */
  long long planned = 0;
  if (sscanf(config + sizeof tag - 1, " %lld evaluations of", &planned) == 1 &&
      eb.n < planned) {
    fprintf(out,
            "compare: 95%% of the exhaustive best: %s is an exhaustive search "
            "that stopped after %lld of its %lld evaluations (interrupted or "
            "killed), not a sweep of the whole space: its best is no "
            "baseline; remove it and run `kernlab search exhaustive "
            "CAMPAIGN.lua` again\n",
            exhaustive_h5, (long long)eb.n, planned);
    res_reader_close(ex);
    return;
  }
  res_reader_close(ex);
  if (eb.id < 0) {
    fprintf(out,
            "compare: 95%% of the exhaustive best: %s holds no correct "
            "kernel to compare with\n",
            exhaustive_h5);
    return;
  }
  if (!comparable) {
    fprintf(out, "compare: 95%% of the exhaustive best: %s\n", why);
    return;
  }
  double target = eb.time_us / 0.95;
  int64_t reached = -1, k = 0; /* k: the run's evaluations so far */
  for (int64_t i = 0; i < res_count(run) && reached < 0; i++) {
    const res_candidate *c = res_get(run, i);
    if (!evaluation(c)) continue;
    k++;
    if (usable(c) && c->time_us <= target) reached = k;
  }
  fprintf(out,
          "compare: 95%% of the exhaustive best (%.1f us, %s, in %s; "
          "target <= %.1f us): ",
          eb.time_us, eb.label, exhaustive_h5, target);
  if (reached > 0)
    fprintf(out, "reached after %lld of %lld evaluations\n", (long long)reached,
            (long long)rb->n);
  else if (rb->id >= 0)
    fprintf(out,
            "not reached in %lld evaluations (best %.1f us, %.0f%% of the "
            "exhaustive best's speed)\n",
            (long long)rb->n, rb->time_us, 100.0 * eb.time_us / rb->time_us);
  else
    fprintf(out, "not reached in %lld evaluations (no correct kernel)\n",
            (long long)rb->n);
}

int lab_compare_print(const char *run_h5, const char *exhaustive_h5,
                      const char *corpus_dir, const kl_eval_options *opts,
                      FILE *out) {
  best_kernel rb;
  res_reader *run = read_best(run_h5, &rb);
  if (!run) {
    fprintf(out, "compare: %s\n", rb.why);
    return rb.code == RES_EENV ? LAB_EXIT_ENV : LAB_EXIT_USAGE;
  }
  double baseline =
      opts && opts->baseline_us > 0 ? opts->baseline_us : rb.baseline_us;
  if (rb.id >= 0) {
    char pct[64];
    pct_of_baseline(pct, sizeof pct, baseline, rb.time_us);
    fprintf(out,
            "compare: best correct kernel of %s: %.1f us (%s)%s, %s (id "
            "%lld; %lld evaluations)\n",
            run_h5, rb.time_us, rb.backend, pct, rb.label, (long long)rb.id,
            (long long)rb.n);
  } else {
    fprintf(out,
            "compare: %s holds no correct, unflagged kernel (%lld "
            "evaluations)\n",
            run_h5, (long long)rb.n);
  }
  if (corpus_dir && opts) print_corpus(corpus_dir, &rb, opts, out);
  if (exhaustive_h5) print_95(run_h5, run, &rb, exhaustive_h5, out);
  res_reader_close(run);
  fflush(out);
  return 0;
}
