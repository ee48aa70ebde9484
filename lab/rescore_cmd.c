/*
 * lab/rescore_cmd.c — `kernlab rescore RUN.h5 --reward F.lua [--json] [-n N]`:
 * re-applies a reward formula to the metrics a results file already holds,
 * without compiling or running anything, and shows what changed:
 *
 *   - Spearman rank correlation between the stored (old) totals and the new
 *     ones, over the candidates that have an old total (a NaN reward means
 *     "never scored"). Ties get the average of the ranks they span
 *     (fractional ranking), and rho is the Pearson correlation of those
 *     ranks, so it stays exact with ties; it is undefined (printed "n/a",
 *     JSON null) with fewer than two candidates or when either side is
 *     constant.
 *   - the top N (default 10) before and after: id, label, status, old and
 *     new total. Ties keep id order.
 *   - how GRPO group advantages move: for candidates with group >= 0, the
 *     group is every candidate of the same step and group, and
 *     A = (r - mean_group) / (std_group + 1e-4), as TRL computes it: mean
 *     and std skip rewards that are NaN, std has Bessel's correction (n-1),
 *     and an advantage that comes out NaN (a group of one) counts as 0. Old
 *     and new advantages are compared over the candidates with an old
 *     total: the mean absolute change and how many change sign (strictly:
 *     positive to negative or negative to positive; 0 is no sign).
 *
 * The candidate the script sees is rebuilt from the stored record
 * (build_candidate); the context of a grouped candidate holds its whole
 * step+group in id order, an ungrouped one a context with just itself.
 *
 * Read-only: the file is opened for SWMR read and never written (writing
 * the new rewards back is not done here). Exit codes as DESIGN.md: 2 for
 * bad usage, a bad results file or a broken script (the message names the
 * file, and the script's line for Lua errors), 3 for environment problems.
 */
#include "lab/lab.h"

#include "results/results.h"
#include "reward/reward.h"

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static const char synopsis[] = "rescore RUN.h5 --reward F.lua [--json] [-n N]";

#define ADV_EPS 1e-4

/* One candidate's old and new numbers. */
typedef struct rescore_row {
  const res_candidate *rec; /* owned by the reader */
  double old_total;         /* NaN: never scored */
  double new_total;
  double old_adv, new_adv; /* NaN outside a group */
} rescore_row;

static int usage(const char *msg, const char *arg) {
  fprintf(stderr, "kernlab rescore: %s%s%s\nusage: kernlab %s\n", msg,
          arg ? " " : "", arg ? arg : "", synopsis);
  return LAB_EXIT_USAGE;
}

/* ---- candidate and context from the stored record ------------------------
 */

/* Fills c from rec (field mapping of the rescore issue). flag_names must
 * hold RES_MAX_FLAGS entries; c->flags points into it, and the strings are
 * owned by r. errors is the stored error line (cut to 255 bytes; "" in a
 * schema-1 file, which did not keep it). Not stored, so left unmeasured:
 * percent_of_baseline (the engine derives it from time and baseline).
 * completion_len is not stored either: it is the source length, as for
 * `kernlab eval`. */
static void build_candidate(const res_reader *r, const res_candidate *rec,
                            const char **flag_names, char bit_names[][16],
                            rw_candidate *c) {
  rw_candidate_init(c);
  c->compiled = rec->compiled != 0;
  c->correct = rec->correct != 0;
  c->status = rec->status;
  c->errors = rec->error;
  c->backend = rec->backend;
  c->max_rel_err = rec->max_rel_err;
  c->max_abs_err = rec->max_abs_err;
  c->time_us = rec->time_us;
  c->baseline_us = rec->baseline_us;
  c->gflops = rec->gflops;
  c->regs = rec->regs;
  c->smem_bytes = rec->smem_bytes;
  c->spill_bytes = rec->spill_bytes;
  int n = 0;
  for (int b = 0; b < RES_MAX_FLAGS; b++) {
    if (!(rec->flags >> b & 1)) continue;
    const char *name = res_flag_name(r, b);
    if (!name || !*name) {
      /* A bit the file has no name for: passed on as "bit<N>", which a
       * formula treats as an unknown flag. */
      snprintf(bit_names[n], 16, "bit%d", b);
      name = bit_names[n];
    }
    flag_names[n++] = name;
  }
  c->flags = flag_names;
  c->n_flags = n;
  c->source_len = (long)rec->src_len;
  c->completion_len = (long)rec->src_len;
}

/* Task, dtype and target shape of rec's context, as `kernlab eval` builds
 * it. The dtype is the task name's prefix up to the first '_' ("fp32_256"
 * -> "fp32"); dtype must hold sizeof rec->task bytes. */
static void build_context(const res_candidate *rec, char *dtype,
                          rw_context *ctx) {
  memset(ctx, 0, sizeof *ctx);
  ctx->task = rec->task;
  size_t n = strcspn(rec->task, "_");
  memcpy(dtype, rec->task, n);
  dtype[n] = 0;
  ctx->dtype = rec->task[n] == '_' ? dtype : NULL;
  ctx->M = rec->shape_m;
  ctx->N = rec->shape_n;
  ctx->K = rec->shape_k;
  /* A candidate that never ran has no checked shape; the task name holds
   * the target ("fp32_256x256x256", or "fp32_256" for a cube). */
  if (ctx->M <= 0 && rec->task[n] == '_') {
    int m = 0, nn = 0, k = 0;
    int got = sscanf(rec->task + n + 1, "%dx%dx%d", &m, &nn, &k);
    if (got == 3)
      ctx->M = m, ctx->N = nn, ctx->K = k;
    else if (got == 1)
      ctx->M = ctx->N = ctx->K = m;
  }
}

/* ---- grouping -------------------------------------------------------------
 */

/* Sort key: grouped candidates by (step, group, id); ungrouped ones after
 * them, by id, each its own context. */
static int by_group(const void *a, const void *b) {
  const res_candidate *x = ((const rescore_row *)a)->rec,
                      *y = ((const rescore_row *)b)->rec;
  int gx = x->group >= 0, gy = y->group >= 0;
  if (gx != gy) return gx ? -1 : 1;
  if (gx) {
    if (x->step != y->step) return x->step < y->step ? -1 : 1;
    if (x->group != y->group) return x->group < y->group ? -1 : 1;
  }
  return x->id < y->id ? -1 : x->id > y->id;
}

/* Length of the run of rows starting at rows[i] that share one context. */
static int64_t run_length(const rescore_row *rows, int64_t i, int64_t n) {
  const res_candidate *a = rows[i].rec;
  if (a->group < 0) return 1;
  int64_t j = i + 1;
  while (j < n && rows[j].rec->group == a->group &&
         rows[j].rec->step == a->step)
    j++;
  return j - i;
}

/* Scores rows[0..m) (one context) with s. Returns RW_OK, or the script's
 * code with why naming the candidate and the script line. */
static int score_run(const res_reader *r, rw_script *s, rescore_row *rows,
                     int64_t m, char *why, size_t whylen) {
  rw_candidate *cands = calloc((size_t)m, sizeof *cands);
  rw_components *out = calloc((size_t)m, sizeof *out);
  const char **flags = calloc((size_t)m * RES_MAX_FLAGS, sizeof *flags);
  char(*bits)[16] = calloc((size_t)m * RES_MAX_FLAGS, sizeof *bits);
  if (!cands || !out || !flags || !bits) {
    free(cands), free(out), free(flags), free(bits);
    snprintf(why, whylen, "out of memory");
    return RW_EENV;
  }
  for (int64_t k = 0; k < m; k++)
    build_candidate(r, rows[k].rec, flags + k * RES_MAX_FLAGS,
                    bits + k * RES_MAX_FLAGS, &cands[k]);
  char dtype[sizeof rows[0].rec->task];
  rw_context ctx;
  build_context(rows[0].rec, dtype, &ctx);
  ctx.group = cands;
  ctx.n_group = (int)m;
  char inner[640]; /* leaves room for the prefix in why */
  int code = rw_score_group(s, &ctx, out, inner, sizeof inner);
  for (int64_t k = 0; k < m; k++) {
    if (code == RW_OK) rows[k].new_total = out[k].total;
    rw_components_free(&out[k]);
  }
  if (code != RW_OK) {
    /* "group[3]: lua/x.lua:12: ..." -> name the stored candidate. */
    int member = 0, skip = 0;
    if (sscanf(inner, "group[%d]: %n", &member, &skip) != 1 || !skip ||
        member < 1 || member > m)
      member = 1, skip = 0;
    const res_candidate *c = rows[member - 1].rec;
    char label[4 * sizeof c->label];
    snprintf(why, whylen, "candidate %lld (%s): %s", (long long)c->id,
             lab_printable(c->label, sizeof c->label, label, sizeof label),
             inner + skip);
  }
  free(cands), free(out), free(flags), free(bits);
  return code;
}

/* ---- statistics -----------------------------------------------------------
 */

typedef struct ranked {
  double v;
  int64_t i;
} ranked;

static int by_value(const void *a, const void *b) {
  const ranked *x = a, *y = b;
  if (x->v != y->v) return x->v < y->v ? -1 : 1;
  return x->i < y->i ? -1 : x->i > y->i;
}

/* Fractional ranks (1-based; ties get their average rank) of v[0..n) into
 * rank. Returns 0, or -1 when out of memory. */
static int fractional_ranks(const double *v, int64_t n, double *rank) {
  ranked *t = malloc((size_t)(n ? n : 1) * sizeof *t);
  if (!t) return -1;
  for (int64_t i = 0; i < n; i++)
    t[i] = (ranked){v[i], i};
  qsort(t, (size_t)n, sizeof *t, by_value);
  for (int64_t i = 0; i < n;) {
    int64_t j = i + 1;
    while (j < n && t[j].v == t[i].v)
      j++;
    double avg = 0.5 * (double)(i + 1 + j); /* mean of ranks i+1 .. j */
    for (int64_t k = i; k < j; k++)
      rank[t[k].i] = avg;
    i = j;
  }
  free(t);
  return 0;
}

/* Pearson correlation of x and y; NaN when n < 2 or either is constant. */
static double pearson(const double *x, const double *y, int64_t n) {
  if (n < 2) return NAN;
  double mx = 0, my = 0;
  for (int64_t i = 0; i < n; i++)
    mx += x[i], my += y[i];
  mx /= (double)n, my /= (double)n;
  double sxy = 0, sxx = 0, syy = 0;
  for (int64_t i = 0; i < n; i++) {
    sxy += (x[i] - mx) * (y[i] - my);
    sxx += (x[i] - mx) * (x[i] - mx);
    syy += (y[i] - my) * (y[i] - my);
  }
  if (sxx <= 0 || syy <= 0) return NAN;
  double rho = sxy / sqrt(sxx * syy);
  return rho > 1 ? 1 : rho < -1 ? -1 : rho;
}

/* Spearman's rho of old vs new totals over rows with an old total; *used
 * receives how many. Returns NaN when undefined; -2 when out of memory. */
static double spearman(const rescore_row *rows, int64_t n, int64_t *used) {
  double *a = malloc((size_t)(n ? n : 1) * 4 * sizeof *a);
  if (!a) return -2;
  double *old = a, *new = a + n, *rold = a + 2 * n, *rnew = a + 3 * n;
  int64_t m = 0;
  for (int64_t i = 0; i < n; i++)
    if (!isnan(rows[i].old_total)) {
      old[m] = rows[i].old_total;
      new[m++] = rows[i].new_total;
    }
  *used = m;
  double rho = -2;
  if (!fractional_ranks(old, m, rold) && !fractional_ranks(new, m, rnew))
    rho = pearson(rold, rnew, m);
  free(a);
  return rho;
}

/* GRPO advantages of the rows of one context, from the totals picked by
 * `which` (0 old, 1 new), as TRL computes them (see the file header). */
static void advantages(rescore_row *rows, int64_t m, int which) {
  double sum = 0, n = 0;
  for (int64_t k = 0; k < m; k++) {
    double v = which ? rows[k].new_total : rows[k].old_total;
    if (!isnan(v)) sum += v, n++;
  }
  double mean = n ? sum / n : NAN, ss = 0;
  for (int64_t k = 0; k < m; k++) {
    double v = which ? rows[k].new_total : rows[k].old_total;
    if (!isnan(v)) ss += (v - mean) * (v - mean);
  }
  double std = n > 1 ? sqrt(ss / (n - 1)) : NAN;
  for (int64_t k = 0; k < m; k++) {
    double v = which ? rows[k].new_total : rows[k].old_total;
    double a = (v - mean) / (std + ADV_EPS);
    if (isnan(a)) a = 0; /* TRL: NaN advantages become 0 */
    if (which)
      rows[k].new_adv = a;
    else
      rows[k].old_adv = a;
  }
}

typedef struct adv_summary {
  int64_t groups, members; /* contexts with group >= 0; rows compared */
  double mean_abs_change;
  int64_t sign_changes;
} adv_summary;

/* ---- output ---------------------------------------------------------------
 */

static int by_old_desc(const void *a, const void *b) {
  const rescore_row *x = *(const rescore_row *const *)a,
                    *y = *(const rescore_row *const *)b;
  int nx = isnan(x->old_total), ny = isnan(y->old_total);
  if (nx != ny) return nx ? 1 : -1;
  if (!nx && x->old_total != y->old_total)
    return x->old_total > y->old_total ? -1 : 1;
  return x->rec->id < y->rec->id ? -1 : x->rec->id > y->rec->id;
}

static int by_new_desc(const void *a, const void *b) {
  const rescore_row *x = *(const rescore_row *const *)a,
                    *y = *(const rescore_row *const *)b;
  if (x->new_total != y->new_total) return x->new_total > y->new_total ? -1 : 1;
  return x->rec->id < y->rec->id ? -1 : x->rec->id > y->rec->id;
}

static void json_number(FILE *f, double v) {
  if (isfinite(v))
    fprintf(f, "%.17g", v);
  else
    fputs("null", f);
}

static void print_top_json(FILE *f, rescore_row *const *top, int64_t k) {
  fputc('[', f);
  for (int64_t i = 0; i < k; i++) {
    fprintf(f, "%s{\"rank\":%lld,\"id\":%lld,\"label\":", i ? "," : "",
            (long long)i + 1, (long long)top[i]->rec->id);
    lab_json_string(f, top[i]->rec->label);
    fputs(",\"status\":", f);
    lab_json_string(f, top[i]->rec->status);
    fputs(",\"old\":", f);
    json_number(f, top[i]->old_total);
    fputs(",\"new\":", f);
    json_number(f, top[i]->new_total);
    fputc('}', f);
  }
  fputc(']', f);
}

/* A total for the table: "-" for never scored, else lab_fmt_reward. */
static const char *fmt_total(double v, char *buf, size_t cap) {
  if (isnan(v)) {
    snprintf(buf, cap, "-");
    return buf;
  }
  return lab_fmt_reward(buf, cap, "%+.4f", v);
}

/* One table row per candidate; the label (a file path, any length) comes
 * last so long ones do not push the numbers out of their columns, and goes
 * through lab_printable like every label a terminal table shows. */
static void print_top_text(FILE *f, const char *title, rescore_row *const *top,
                           int64_t k) {
  fprintf(f, "\n%s\n  %4s %6s  %-16s %12s %12s  %s\n", title, "rank", "id",
          "status", "old total", "new total", "label");
  for (int64_t i = 0; i < k; i++) {
    char old[32], new[32], label[sizeof top[i]->rec->label * 4], st[4 * 16 + 1];
    fprintf(f, "  %4lld %6lld  %s %12s %12s  %s\n", (long long)i + 1,
            (long long)top[i]->rec->id,
            lab_cell(top[i]->rec->status, sizeof top[i]->rec->status, 16, st,
                     sizeof st),
            fmt_total(top[i]->old_total, old, sizeof old),
            fmt_total(top[i]->new_total, new, sizeof new),
            lab_printable(top[i]->rec->label, sizeof top[i]->rec->label, label,
                          sizeof label));
  }
}

/* ---- the command ----------------------------------------------------------
 */

int lab_rescore(int argc, char **argv) {
  const char *run = NULL, *script = NULL;
  int json = 0;
  long top_n = 10;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (!strcmp(a, "--json")) {
      json = 1;
    } else if (!strcmp(a, "--reward")) {
      if (i + 1 >= argc) return usage("--reward needs a script", NULL);
      script = argv[++i];
    } else if (!strcmp(a, "-n")) {
      if (i + 1 >= argc) return usage("-n needs a count", NULL);
      char *end;
      errno = 0;
      top_n = strtol(argv[++i], &end, 10);
      if (!*argv[i] || *end || errno || top_n < 1)
        return usage("-n expects a count >= 1, got", argv[i]);
    } else if (!strcmp(a, "--write")) {
      return usage("--write is not supported: rescore only reads the file",
                   NULL);
    } else if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
      printf("usage: kernlab %s\n", synopsis);
      return LAB_EXIT_OK;
    } else if (a[0] == '-' && a[1]) {
      return usage("unknown option", a);
    } else if (!run) {
      run = a;
    } else {
      return usage("one results file at a time; extra argument", a);
    }
  }
  if (!run) return usage("missing RUN.h5", NULL);
  if (!script) return usage("missing --reward F.lua", NULL);

  char why[1024];
  int code = RES_EINPUT;
  res_reader *r = res_open_read(run, &code, why, sizeof why);
  if (!r) {
    fprintf(stderr, "kernlab rescore: %s\n", why);
    return code == RES_EENV ? LAB_EXIT_ENV : LAB_EXIT_USAGE;
  }
  rw_script *s = rw_load(script, NULL, why, sizeof why);
  if (!s) {
    fprintf(stderr, "kernlab rescore: %s\n", why);
    res_reader_close(r);
    return rw_load_error() == RW_EENV ? LAB_EXIT_ENV : LAB_EXIT_USAGE;
  }

  int exit_code = LAB_EXIT_OK;
  int64_t n = res_count(r);
  rescore_row *rows = calloc((size_t)(n ? n : 1), sizeof *rows);
  rescore_row **order = calloc((size_t)(n ? n : 1), sizeof *order);
  if (!rows || !order) {
    fprintf(stderr, "kernlab rescore: out of memory\n");
    exit_code = LAB_EXIT_ENV;
    goto done;
  }
  for (int64_t i = 0; i < n; i++) {
    rows[i].rec = res_get(r, i);
    rows[i].old_total = rows[i].rec->reward;
    rows[i].old_adv = rows[i].new_adv = NAN;
  }

  /* Score context by context, and compute advantages within each group. */
  qsort(rows, (size_t)n, sizeof *rows, by_group);
  /* Each member of a group is scored with the whole group in its context,
   * built anew for each: work grows with the square of a group's size. A
   * campaign's groups hold at most LAB_MAX_GROUP_SIZE; an edited file with
   * one group of 20,000 kept rescore busy for minutes (the hostile-HDF5
   * review). Refused before anything is scored. */
  for (int64_t i = 0, m; i < n; i += m) {
    m = run_length(rows, i, n);
    if (m > LAB_MAX_GROUP_SIZE) {
      fprintf(stderr,
              "kernlab rescore: %s: step %lld, group %d holds %lld "
              "candidates; a campaign's groups hold at most %d (group_size): "
              "the file was edited\n",
              run, (long long)rows[i].rec->step, (int)rows[i].rec->group,
              (long long)m, LAB_MAX_GROUP_SIZE);
      exit_code = LAB_EXIT_USAGE;
      goto done;
    }
  }
  adv_summary adv = {0};
  double abs_sum = 0;
  for (int64_t i = 0; i < n;) {
    int64_t m = run_length(rows, i, n);
    int rc = score_run(r, s, rows + i, m, why, sizeof why);
    if (rc != RW_OK) {
      fprintf(stderr, "kernlab rescore: %s\n", why);
      exit_code = rc == RW_EENV ? LAB_EXIT_ENV : LAB_EXIT_USAGE;
      goto done;
    }
    if (rows[i].rec->group >= 0) {
      advantages(rows + i, m, 0);
      advantages(rows + i, m, 1);
      adv.groups++;
      for (int64_t k = i; k < i + m; k++) {
        if (isnan(rows[k].old_total)) continue;
        adv.members++;
        abs_sum += fabs(rows[k].new_adv - rows[k].old_adv);
        if ((rows[k].old_adv > 0 && rows[k].new_adv < 0) ||
            (rows[k].old_adv < 0 && rows[k].new_adv > 0))
          adv.sign_changes++;
      }
    }
    i += m;
  }
  adv.mean_abs_change = adv.members ? abs_sum / (double)adv.members : NAN;

  int64_t n_rho = 0;
  double rho = spearman(rows, n, &n_rho);
  if (rho == -2) {
    fprintf(stderr, "kernlab rescore: out of memory\n");
    exit_code = LAB_EXIT_ENV;
    goto done;
  }
  int64_t changed = 0, scored = 0;
  for (int64_t i = 0; i < n; i++) {
    if (isnan(rows[i].old_total)) continue;
    scored++;
    changed += rows[i].old_total != rows[i].new_total;
  }

  /* Top N before (scored candidates only) and after. */
  for (int64_t i = 0; i < n; i++)
    order[i] = &rows[i];
  qsort(order, (size_t)n, sizeof *order, by_old_desc);
  int64_t k_before = top_n < scored ? top_n : scored;
  rescore_row **before =
      malloc((size_t)(k_before ? k_before : 1) * sizeof *before);
  if (!before) {
    fprintf(stderr, "kernlab rescore: out of memory\n");
    exit_code = LAB_EXIT_ENV;
    goto done;
  }
  memcpy(before, order, (size_t)k_before * sizeof *before);
  qsort(order, (size_t)n, sizeof *order, by_new_desc);
  int64_t k_after = top_n < n ? top_n : n;

  const char *old_script = res_attr(r, "reward_script");
  /* The file names the formula it started with; hot reloads during the
   * campaign scored later candidates with other versions of it (each
   * candidate keeps its own sha256): say how many versions the old totals
   * come from. */
  const char *versions[64];
  int n_versions = 0;
  for (int64_t i = 0; i < n; i++) {
    const char *v = rows[i].rec->reward_sha256;
    if (isnan(rows[i].old_total) || !v[0]) continue;
    int seen = 0;
    for (int j = 0; j < n_versions && !seen; j++)
      seen = !strcmp(versions[j], v);
    if (!seen && n_versions < 64) versions[n_versions++] = v;
  }
  if (json) {
    printf("{\"file\":");
    lab_json_string(stdout, run);
    printf(",\"script\":");
    lab_json_string(stdout, script);
    printf(",\"script_sha256\":\"%s\",\"old_script\":", rw_sha256(s));
    lab_json_string(stdout, old_script);
    printf(",\"old_script_sha256\":");
    lab_json_string(stdout, res_attr(r, "reward_sha256"));
    printf(",\"old_script_versions\":%d", n_versions);
    printf(",\"candidates\":%lld,\"scored_before\":%lld,\"changed\":%lld",
           (long long)n, (long long)scored, (long long)changed);
    printf(",\"spearman\":{\"rho\":");
    json_number(stdout, rho);
    printf(",\"n\":%lld,\"ties\":\"average\"},\"top_before\":",
           (long long)n_rho);
    print_top_json(stdout, before, k_before);
    printf(",\"top_after\":");
    print_top_json(stdout, order, k_after);
    if (adv.groups) {
      printf(",\"groups\":{\"groups\":%lld,\"candidates\":%lld,"
             "\"mean_abs_change\":",
             (long long)adv.groups, (long long)adv.members);
      json_number(stdout, adv.mean_abs_change);
      printf(",\"sign_changes\":%lld}", (long long)adv.sign_changes);
    } else {
      printf(",\"groups\":null");
    }
    /* Every candidate, in id order, so a reader can recompute the above
     * (the record's id is its row index). */
    for (int64_t j = 0; j < n; j++)
      order[rows[j].rec->id] = &rows[j];
    printf(",\"rows\":[");
    for (int64_t i = 0; i < n; i++) {
      const rescore_row *w = order[i];
      printf("%s{\"id\":%lld,\"step\":%lld,\"group\":%d,\"old\":", i ? "," : "",
             (long long)i, (long long)w->rec->step, (int)w->rec->group);
      json_number(stdout, w->old_total);
      printf(",\"new\":");
      json_number(stdout, w->new_total);
      printf(",\"old_adv\":");
      json_number(stdout, w->old_adv);
      printf(",\"new_adv\":");
      json_number(stdout, w->new_adv);
      putchar('}');
    }
    printf("]}\n");
  } else {
    printf("rescore %s: %lld candidates (%lld scored before), %lld totals "
           "changed; nothing was compiled or run, the file is unchanged\n",
           run, (long long)n, (long long)scored, (long long)changed);
    char shown[4096], old_sha[64];
    /* an attribute of the file: printable, like the formula's name */
    const char *sha_attr = res_attr(r, "reward_sha256");
    printf("old formula: %s (sha256 %.12s",
           *old_script ? lab_printable(old_script, strlen(old_script), shown,
                                       sizeof shown)
                       : "-",
           *sha_attr ? lab_printable(sha_attr, strnlen(sha_attr, 12), old_sha,
                                     sizeof old_sha)
                     : "-");
    if (n_versions > 1)
      printf("; the stored totals come from %d%s versions of it, reloaded "
             "during the campaign",
             n_versions, n_versions == 64 ? " or more" : "");
    printf(")\nnew formula: %s (sha256 %.12s)\n", script, rw_sha256(s));
    printf("\nrank correlation (Spearman; ties get their average rank; "
           "%lld candidates with an old total): ",
           (long long)n_rho);
    if (isnan(rho))
      printf("n/a (needs two or more candidates and non-constant totals)\n");
    else
      printf("%+.4f\n", rho);
    char title[64];
    snprintf(title, sizeof title, "top %ld before (by old total):", top_n);
    print_top_text(stdout, title, before, k_before);
    if (!k_before) printf("  (no candidate has an old total)\n");
    snprintf(title, sizeof title, "top %ld after (by new total):", top_n);
    print_top_text(stdout, title, order, k_after);
    printf("\ngroup advantages (GRPO: (r - mean) / (std + 1e-4) within each "
           "step+group, std with n-1):\n");
    if (!adv.groups)
      printf("  no groups: no candidate has a group >= 0, so there are no "
             "advantages to compare\n");
    else
      printf("  %lld group(s), %lld candidates with an old total: mean "
             "|change| %.4f, %lld change sign\n",
             (long long)adv.groups, (long long)adv.members,
             isnan(adv.mean_abs_change) ? 0.0 : adv.mean_abs_change,
             (long long)adv.sign_changes);
  }
  free(before);

done:
  free(order);
  free(rows);
  rw_free(s);
  res_reader_close(r);
  return exit_code;
}
