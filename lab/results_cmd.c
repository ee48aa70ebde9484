/*
 * lab/results_cmd.c — the commands that read a results file: top, show,
 * and the helpers every results command shares (declared in lab/lab.h;
 * export lives in lab/export_cmd.c, diff in lab/diff_cmd.c, report in
 * lab/report_cmd.c).
 * They only read (SWMR read: safe while a campaign is still
 * writing the file, and after a crash). Exit codes as DESIGN.md: 2 for bad
 * usage or a bad file (not HDF5, newer schema, truncated, unknown id), 3
 * for environment problems.
 *
 * Times are labelled with their backend: cpu-emu times are CPU times and are
 * never presented as GPU speed.
 */
#include "lab/lab.h"

#include "results/results.h"
#include "sandbox/sandbox.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- shared helpers (lab/lab.h says what each does) ----------------------
 */

int lab_usage(const char *cmd, const char *msg, const char *arg,
              const char *synopsis) {
  fprintf(stderr, "kernlab %s: %s%s%s\nusage: kernlab %s\n", cmd, msg,
          arg ? " " : "", arg ? arg : "", synopsis);
  return LAB_EXIT_USAGE;
}

int lab_arg_long(const char *s, long lo, long hi, long *out) {
  char *end;
  errno = 0;
  long v = s ? strtol(s, &end, 10) : 0;
  if (!s || end == s || *end || errno || v < lo || v > hi) return -1;
  *out = v;
  return 0;
}

int lab_output_ok(const char *path, const char *const *inputs, int n_inputs,
                  const char *magic, size_t magic_len, char *why,
                  size_t whylen) {
  struct stat st, lst, in;
  if (!path[0]) {
    snprintf(why, whylen, "wants a file name, got ''");
    return -1;
  }
  if (lstat(path, &lst) != 0) return 0; /* nothing there yet */
  if (S_ISLNK(lst.st_mode)) {
    snprintf(why, whylen,
             "%s is a symbolic link: writing beside it and renaming would "
             "replace the link, not its target; name the file itself",
             path);
    return -1;
  }
  if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
    snprintf(why, whylen, "%s is a folder; name the file to write", path);
    return -1;
  }
  if (stat(path, &st) != 0 || !S_ISREG(st.st_mode)) {
    snprintf(why, whylen,
             "%s exists and is not a regular file (%s); name another path",
             path,
             S_ISDIR(st.st_mode)                          ? "a folder"
             : S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode) ? "a device"
             : S_ISFIFO(st.st_mode)                       ? "a FIFO"
                                                          : "not a file");
    return -1;
  }
  for (int i = 0; i < n_inputs; i++)
    if (stat(inputs[i], &in) == 0 && in.st_dev == st.st_dev &&
        in.st_ino == st.st_ino) {
      snprintf(why, whylen, "%s is one of the inputs; name another path", path);
      return -1;
    }
  /* an HDF5 file (a results file, say) is nobody's report or export */
  static const char hdf5[8] = "\x89HDF\r\n\x1a\n";
  char head[16] = {0}; /* a magic is at most 16 bytes */
  FILE *f = kl_fopen_regular(path, NULL);
  size_t got = f ? fread(head, 1, sizeof head, f) : 0;
  if (f) fclose(f);
  if (magic_len > sizeof head) magic_len = sizeof head;
  if (got >= 8 && !memcmp(head, hdf5, 8)) {
    snprintf(why, whylen,
             "%s is an HDF5 file (results?), not one this command writes; "
             "name another path",
             path);
    return -1;
  }
  if (magic && st.st_size > 0 &&
      (got < magic_len || memcmp(head, magic, magic_len))) {
    snprintf(why, whylen,
             "%s exists and is not a file this command writes (its first "
             "bytes are not the format's); name another path",
             path);
    return -1;
  }
  return 0;
}

int lab_arg_u64(const char *s, uint64_t lo, uint64_t *out) {
  char *end;
  errno = 0;
  /* strtoull reads "-1" as 2^64 - 1 and skips leading blanks: a seed of
   * "-1" or " 5" is a typo, not a number */
  if (!s || !isdigit((unsigned char)s[0])) return -1;
  unsigned long long v = strtoull(s, &end, 10);
  if (*end || errno || v < lo) return -1;
  *out = (uint64_t)v;
  return 0;
}

int lab_arg_double(const char *s, double lo, double hi, double *out) {
  char *end;
  double v = s ? strtod(s, &end) : 0;
  /* NaN fails both comparisons, so it is refused with the rest */
  if (!s || end == s || *end || !(v >= lo && v <= hi)) return -1;
  *out = v;
  return 0;
}

res_reader *lab_open_run(const char *cmd, const char *path, int *exit) {
  char why[1024];
  int code = RES_EINPUT;
  res_reader *r = res_open_read(path, &code, why, sizeof why);
  if (!r) {
    fprintf(stderr, "kernlab %s: %s\n", cmd, why);
    *exit = code == RES_EENV ? LAB_EXIT_ENV : LAB_EXIT_USAGE;
  }
  return r;
}

int64_t lab_parse_id(const char *cmd, const res_reader *r, const char *path,
                     const char *s) {
  char *end;
  errno = 0;
  /* digits only: strtoll also takes leading spaces and a sign (" 1",
   * "+1"), and the text is echoed as a terminal may show it */
  long long v = *s >= '0' && *s <= '9' ? strtoll(s, &end, 10) : -1;
  if (v < 0 || *end || errno) {
    char shown[4 * 64];
    fprintf(stderr,
            "kernlab %s: '%s' is not a candidate id (expected a number from "
            "0)\n",
            cmd, lab_printable(s, strnlen(s, 64), shown, sizeof shown));
    return -1;
  }
  if (v >= res_count(r)) {
    if (res_count(r))
      fprintf(stderr,
              "kernlab %s: %s: no candidate with id %lld (ids are 0 to "
              "%lld)\n",
              cmd, path, v, (long long)res_count(r) - 1);
    else
      fprintf(stderr,
              "kernlab %s: %s: no candidate with id %lld (the file "
              "holds no candidates)\n",
              cmd, path, v);
    return -1;
  }
  return v;
}

void lab_flag_list(const res_reader *r, uint64_t flags, const char *sep,
                   char *out, size_t len) {
  out[0] = 0;
  size_t used = 0;
  for (int b = 0; b < 64; b++) {
    if (!(flags >> b & 1)) continue;
    const char *name = res_flag_name(r, b);
    char tmp[32];
    if (!name) snprintf(tmp, sizeof tmp, "bit%d", b), name = tmp;
    int n = snprintf(out + used, len - used, "%s%s", used ? sep : "", name);
    if (n < 0 || (size_t)n >= len - used) break;
    used += (size_t)n;
  }
  if (!used) snprintf(out, len, "-");
}

const char *lab_fmt_num(char *buf, size_t len, const char *fmt, double v) {
  /* past 1e15 a fixed format prints digits a double does not hold (1.2345e40
   * came out as 12344999999999999218686), and it may not fit buf */
  if (isnan(v) || v < 0)
    snprintf(buf, len, "-");
  else if (isfinite(v) && v >= 1e15)
    snprintf(buf, len, "%.4g", v);
  else if (snprintf(buf, len, fmt, v) >= (int)len)
    snprintf(buf, len, "%.4g", v);
  return buf;
}

const char *lab_fmt_reward(char *buf, size_t len, const char *fmt, double v) {
  /* Past fmt's fixed decimals either way (a formula edited to a scale of
   * 1e-5 printed 0.0000 everywhere): four significant digits instead,
   * keeping fmt's "+", if it has one. */
  if (isfinite(v) && (fabs(v) >= 1e6 || (v != 0 && fabs(v) < 1e-3)))
    snprintf(buf, len, fmt[1] == '+' ? "%+.4g" : "%.4g", v);
  else
    snprintf(buf, len, fmt, v);
  return buf;
}

void lab_sha_hex(const uint8_t sha[32], char out[65]) {
  for (int i = 0; i < 32; i++)
    snprintf(out + 2 * i, 3, "%02x", sha[i]);
}

static int any_cpu_emu(const res_reader *r) {
  for (int64_t i = 0; i < res_count(r); i++)
    if (!strcmp(res_get(r, i)->backend, "cpu-emu")) return 1;
  return 0;
}

/* ---- top ------------------------------------------------------------------
 */

static const char top_synopsis[] = "top RUN.h5 [-n N] [--by time|reward]";

static void print_top_header(void) {
  printf("%4s %5s %5s %-14s %-8s %10s %8s %7s %9s %4s %6s %-16s %s\n", "rank",
         "id", "step", "status", "backend", "time_us", "GFLOP/s", "x base",
         "reward", "regs", "smem", "flags", "label");
}

/* One ranked candidate and the index of its task in the file's list
 * (res_tasks): a file of several tasks is ranked task by task. */
typedef struct top_row {
  const res_candidate *c;
  int task;
} top_row;

static int by_time(const void *a, const void *b) {
  const top_row *p = a, *q = b;
  const res_candidate *x = p->c, *y = q->c;
  if (p->task != q->task) return p->task < q->task ? -1 : 1;
  if (x->time_us != y->time_us) return x->time_us < y->time_us ? -1 : 1;
  return x->id < y->id ? -1 : 1;
}

static int by_reward(const void *a, const void *b) {
  const top_row *p = a, *q = b;
  const res_candidate *x = p->c, *y = q->c;
  if (p->task != q->task) return p->task < q->task ? -1 : 1;
  if (x->reward != y->reward) return x->reward > y->reward ? -1 : 1;
  return x->id < y->id ? -1 : 1;
}

int lab_top(int argc, char **argv) {
  const char *path = NULL, *by = "time";
  long n = 10;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "-n") && i + 1 < argc) {
      char *end;
      n = strtol(argv[++i], &end, 10);
      if (*end || n <= 0)
        return lab_usage("top", "-n wants a positive count, got", argv[i],
                         top_synopsis);
    } else if (!strcmp(argv[i], "--by") && i + 1 < argc) {
      by = argv[++i];
      if (strcmp(by, "time") && strcmp(by, "reward"))
        return lab_usage("top", "--by wants time or reward, got", by,
                         top_synopsis);
    } else if (i + 1 == argc &&
               (!strcmp(argv[i], "-n") || !strcmp(argv[i], "--by"))) {
      return lab_usage("top", "missing value after", argv[i], top_synopsis);
    } else if (argv[i][0] == '-') {
      return lab_usage("top", "unknown option", argv[i], top_synopsis);
    } else if (!path) {
      path = argv[i];
    } else {
      return lab_usage("top", "unexpected argument", argv[i], top_synopsis);
    }
  }
  if (!path)
    return lab_usage("top", "no results file given", NULL, top_synopsis);
  int exit = 0;
  res_reader *r = lab_open_run("top", path, &exit);
  if (!r) return exit;
  int64_t total = res_count(r), correct = 0, m = 0;
  top_row *rows = malloc((size_t)(total ? total : 1) * sizeof *rows);
  /* A file holds one task (eval --out refuses another), but older ones
   * may hold several: a 64^3 kernel ranked first above 256^3 ones for
   * doing 16x less work (the walkthrough review). Such a file is said to
   * be one and ranked task by task; tasks past the MAX_TASKS'th share the
   * last list. */
  enum { MAX_TASKS = 16 };
  res_task_count tasks[MAX_TASKS];
  int n_tasks = res_tasks(r, tasks, MAX_TASKS);
  if (!rows) {
    res_reader_close(r);
    return LAB_EXIT_ENV;
  }
  int rank_time = !strcmp(by, "time");
  for (int64_t i = 0; i < total; i++) {
    const res_candidate *c = res_get(r, i);
    correct += c->correct;
    /* an infinite time (an edited file) is no fastest kernel */
    if (!(rank_time ? c->correct && c->time_us > 0 && isfinite(c->time_us)
                    : !isnan(c->reward)))
      continue;
    char task[RES_TASK_LEN];
    res_task_canonical(c->task, task, sizeof task);
    int t = 0;
    while (t < n_tasks && t < MAX_TASKS - 1 && strcmp(tasks[t].task, task))
      t++;
    rows[m++] = (top_row){c, t};
  }
  qsort(rows, (size_t)m, sizeof *rows, rank_time ? by_time : by_reward);
  if (n_tasks > 1) {
    fprintf(stderr,
            "kernlab top: warning: %s holds candidates of %d%s tasks, whose "
            "times do not compare:",
            path, n_tasks > MAX_TASKS ? MAX_TASKS : n_tasks,
            n_tasks > MAX_TASKS ? " or more" : "");
    for (int t = 0; t < n_tasks && t < MAX_TASKS; t++) {
      char shown[4 * RES_TASK_LEN];
      fprintf(stderr, "%s %s (%lld candidates)", t ? "," : "",
              lab_printable(tasks[t].task, strlen(tasks[t].task), shown,
                            sizeof shown),
              (long long)tasks[t].count);
    }
    fprintf(stderr, "; ranked task by task below\n");
  }
  printf("%s: %lld candidates, %lld correct; ranked by %s%s\n", path,
         (long long)total, (long long)correct,
         rank_time ? "median time (correct kernels only)" : "reward",
         any_cpu_emu(r) ? "; cpu-emu times are CPU times, not GPU speed" : "");
  int64_t rank = 0;
  for (int64_t k = 0; k < m; k++) {
    if (k == 0 || rows[k].task != rows[k - 1].task) {
      rank = 0;
      const char *task = tasks[rows[k].task].task;
      char shown[4 * RES_TASK_LEN];
      if (n_tasks > 1)
        printf("%stask %s%s:\n", k ? "\n" : "",
               lab_printable(task, strlen(task), shown, sizeof shown),
               n_tasks > MAX_TASKS && rows[k].task == MAX_TASKS - 1
                   ? " and the tasks after it"
                   : "");
      print_top_header();
    }
    if (++rank > n) continue;
    const res_candidate *c = rows[k].c;
    char t[24], g[24], x[24], rw[24], fl[2048], sm[24] = "-";
    lab_fmt_num(t, sizeof t, "%.2f", c->time_us);
    lab_fmt_num(g, sizeof g, "%.1f", c->gflops);
    if (c->time_us > 0 && c->baseline_us > 0)
      snprintf(x, sizeof x, "%.2f", c->baseline_us / c->time_us);
    else
      snprintf(x, sizeof x, "-");
    if (isnan(c->reward))
      snprintf(rw, sizeof rw, "-");
    else
      lab_fmt_reward(rw, sizeof rw, "%.3f", c->reward);
    /* static + dynamic (KL_LAUNCH's), as eval's table: the static figure
     * alone showed 0 for a kernel whose tiles are all dynamic */
    if (c->smem_bytes >= 0 && c->dyn_smem_bytes >= 0)
      snprintf(sm, sizeof sm, "%lld",
               (long long)c->smem_bytes + c->dyn_smem_bytes);
    lab_flag_list(r, c->flags, ",", fl, sizeof fl);
    char label[4 * sizeof c->label], st[4 * 14 + 1], be[4 * 8 + 1],
        fls[4 * 16 + 1];
    printf("%4lld %5lld %5lld %s %s %10s %8s %7s %9s %4d %6s %s %s\n",
           (long long)rank, (long long)c->id, (long long)c->step,
           lab_cell(c->status, sizeof c->status, 14, st, sizeof st),
           lab_cell(c->backend, sizeof c->backend, 8, be, sizeof be), t, g, x,
           rw, c->regs, sm, lab_cell(fl, sizeof fl, 16, fls, sizeof fls),
           lab_printable(c->label, sizeof c->label, label, sizeof label));
  }
  if (!m) print_top_header();
  if (!m)
    printf("(no %s)\n",
           rank_time ? "correct, timed candidates" : "scored candidates");
  free(rows);
  res_reader_close(r);
  return LAB_EXIT_OK;
}

/* ---- show -----------------------------------------------------------------
 */

/* show --ptx: results files keep the source, not the PTX (schema 3), so
 * the source is compiled again for compute_90 by NVRTC in the sandbox's
 * compile worker (the text is a policy's: never compiled in this process)
 * and the PTX printed. The same NVRTC options as the lab's sm_90 compile,
 * with the virtual architecture: the PTX ptxas turned into the cubin the
 * candidate ran as on a GPU. */
static int show_ptx(const res_reader *r, const char *path, int64_t id) {
  char *src = NULL, why[1024];
  size_t len = 0;
  if (res_source(r, id, &src, &len, why, sizeof why) != RES_OK) {
    fprintf(stderr, "kernlab show: %s\n", why);
    return LAB_EXIT_USAGE;
  }
  sbx_limits limits = {60, 60, 0};
  sbx_slot *slot = sbx_slot_new(&limits);
  kl_executor ex;
  kl_compiled cc;
  memset(&cc, 0, sizeof cc);
  int rc = KL_EENV;
  snprintf(why, sizeof why, "out of memory for a sandbox slot");
  if (slot) {
    sbx_slot_executor(slot, &ex);
    rc = ex.compile(ex.ctx, src, len, "compute_90", &cc, why, sizeof why);
  }
  int exit = LAB_EXIT_OK;
  if (rc == KL_OK) {
    fwrite(cc.cubin, 1, cc.cubin_size, stdout);
  } else if (rc == KL_ECOMPILE || rc == KL_ETIMEOUT || rc == KL_EOOM) {
    fprintf(stderr, "kernlab show: %s: candidate %lld does not compile: %s\n",
            path, (long long)id, why);
    exit = LAB_EXIT_USAGE;
  } else {
    fprintf(stderr, "kernlab show: %s: candidate %lld: no PTX: %s\n", path,
            (long long)id, why);
    exit = LAB_EXIT_ENV;
  }
  kl_compiled_free(&cc);
  sbx_slot_free(slot);
  free(src);
  return exit;
}

static const char show_synopsis[] = "show RUN.h5 ID [--source|--ptx|--stats]";

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

/* Linear-interpolated quantile of sorted v[0..n). */
static double quantile(const double *v, int n, double q) {
  double pos = q * (n - 1);
  int lo = (int)pos;
  if (lo >= n - 1) return v[n - 1];
  return v[lo] + (pos - lo) * (v[lo + 1] - v[lo]);
}

static int show_stats(const res_reader *r, int64_t id) {
  const res_candidate *c = res_get(r, id);
  double *s = NULL;
  int n = 0;
  char why[512];
  if (res_timings(r, id, &s, &n, why, sizeof why) != RES_OK) {
    fprintf(stderr, "kernlab show: %s\n", why);
    return LAB_EXIT_USAGE;
  }
  printf("candidate %lld: %d timing samples (%s, microseconds)", (long long)id,
         n, c->backend);
  /* 0: a file from before schema 3, which did not say */
  if (c->timed_launches > n)
    printf(", over %d timed launches (short ones were timed in batches: a "
           "sample is a batch's mean)",
           c->timed_launches);
  printf("\n");
  if (n) {
    printf("  samples  ");
    for (int i = 0; i < n; i++)
      printf("%s%.3f", i ? " " : "", s[i]);
    printf("\n");
    /* the summary is of the finite samples: a NaN is no order for qsort,
     * and the quantiles of [9, nan, 1, 8, nan, ...] came out unsorted with
     * a maximum of 7 (the report review) */
    int all = n;
    n = 0;
    for (int i = 0; i < all; i++)
      if (isfinite(s[i])) s[n++] = s[i];
    if (n < all)
      printf("  (%d of %d samples are not finite numbers: left out below)\n",
             all - n, all);
  }
  if (n) {
    double sum = 0, sq = 0;
    for (int i = 0; i < n; i++)
      sum += s[i];
    double mean = sum / n;
    for (int i = 0; i < n; i++)
      sq += (s[i] - mean) * (s[i] - mean);
    double sd = n > 1 ? sqrt(sq / (n - 1)) : 0;
    qsort(s, (size_t)n, sizeof *s, cmp_double);
    printf("  min %.3f  p20 %.3f  median %.3f  p80 %.3f  max %.3f\n", s[0],
           quantile(s, n, 0.2), quantile(s, n, 0.5), quantile(s, n, 0.8),
           s[n - 1]);
    printf("  mean %.3f  stddev %.3f  (%.2f%% of the mean)\n", mean, sd,
           mean > 0 ? 100 * sd / mean : 0);
  }
  free(s);
  return LAB_EXIT_OK;
}

static void show_metrics(const res_reader *r, const res_candidate *c,
                         size_t src_len) {
  char a[32], b[32], d[32], rw[32], fl[512], sha[65];
  char label[4 * sizeof c->label];
  printf("candidate %lld  %s\n", (long long)c->id,
         lab_printable(c->label, sizeof c->label, label, sizeof label));
  printf("  task        %s  (target %dx%dx%d)  step %lld  group %d  sample "
         "%d\n",
         c->task, c->shape_m, c->shape_n, c->shape_k, (long long)c->step,
         c->group, c->sample);
  printf("  status      %s  compiled %s  correct %s\n", c->status,
         c->compiled ? "yes" : "no", c->correct ? "yes" : "no");
  printf("  error       max rel %s  max abs %s\n",
         lab_fmt_num(a, sizeof a, "%.3g", c->max_rel_err),
         lab_fmt_num(b, sizeof b, "%.3g", c->max_abs_err));
  printf("  time        median %s us  min %s  max %s  samples %u  (%s)\n",
         lab_fmt_num(a, sizeof a, "%.3f", c->time_us),
         lab_fmt_num(b, sizeof b, "%.3f", c->time_min_us),
         lab_fmt_num(d, sizeof d, "%.3f", c->time_max_us), c->timing_count,
         c->backend);
  printf("  baseline    %s us",
         lab_fmt_num(a, sizeof a, "%.3f", c->baseline_us));
  if (c->time_us > 0 && c->baseline_us > 0)
    printf("  speedup %.2fx", c->baseline_us / c->time_us);
  printf("  GFLOP/s %s\n", lab_fmt_num(a, sizeof a, "%.2f", c->gflops));
  char rg[16], sm[16], sp[16], st[16];
  printf("  resources   regs %s  smem %s B  spill %s B  stack %s B\n",
         lab_fmt_num(rg, sizeof rg, "%.0f", c->regs),
         lab_fmt_num(sm, sizeof sm, "%.0f", c->smem_bytes),
         lab_fmt_num(sp, sizeof sp, "%.0f", c->spill_bytes),
         lab_fmt_num(st, sizeof st, "%.0f", c->stack_bytes));
  if (c->block_x < 0) /* no KL_LAUNCH read: not compiled */
    printf("  launch      -\n");
  else
    printf("  launch      block %dx%d  tile %dx%d  dynamic smem %d B\n",
           c->block_x, c->block_y, c->tile_rows, c->tile_cols,
           c->dyn_smem_bytes);
  lab_flag_list(r, c->flags, ", ", fl, sizeof fl);
  printf("  flags       %s\n", fl);
  if (c->error[0])
    printf("  message     %.*s\n", (int)sizeof c->error, c->error);
  if (isnan(c->reward))
    printf("  reward      - (not scored)\n");
  else
    printf("  reward      %s  (script sha256 %.16s)\n",
           lab_fmt_reward(rw, sizeof rw, "%.4f", c->reward),
           c->reward_sha256[0] ? c->reward_sha256 : "-");
  const double *comp = res_components(r, c->id);
  for (int j = 0; j < res_component_count(r); j++)
    if (comp && !isnan(comp[j]))
      printf("    %-24s %s\n", res_component_name(r, j),
             lab_fmt_reward(rw, sizeof rw, "%+.4f", comp[j]));
  printf("  seed        %llu  compile %s ms\n", (unsigned long long)c->seed,
         lab_fmt_num(a, sizeof a, "%.1f", c->compile_ms));
  lab_sha_hex(c->src_sha256, sha);
  printf("  source      %zu bytes  sha256 %s\n", src_len, sha);
}

int lab_show(int argc, char **argv) {
  const char *path = NULL, *ids = NULL, *mode = NULL;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--source") || !strcmp(argv[i], "--ptx") ||
        !strcmp(argv[i], "--stats")) {
      if (mode && strcmp(mode, argv[i]))
        return lab_usage("show", "choose one of --source, --ptx, --stats; got",
                         argv[i], show_synopsis);
      mode = argv[i];
    } else if (argv[i][0] == '-' && argv[i][1]) {
      return lab_usage("show", "unknown option", argv[i], show_synopsis);
    } else if (!path) {
      path = argv[i];
    } else if (!ids) {
      ids = argv[i];
    } else {
      return lab_usage("show", "unexpected argument", argv[i], show_synopsis);
    }
  }
  if (!path || !ids)
    return lab_usage("show", "needs a results file and a candidate id", NULL,
                     show_synopsis);
  int exit = 0;
  res_reader *r = lab_open_run("show", path, &exit);
  if (!r) return exit;
  int64_t id = lab_parse_id("show", r, path, ids);
  if (id < 0) {
    res_reader_close(r);
    return LAB_EXIT_USAGE;
  }
  int rc = LAB_EXIT_OK;
  if (mode && !strcmp(mode, "--ptx")) {
    rc = show_ptx(r, path, id);
  } else if (mode && !strcmp(mode, "--stats")) {
    rc = show_stats(r, id);
  } else {
    char *src = NULL, why[1024];
    size_t len = 0;
    if (res_source(r, id, &src, &len, why, sizeof why) != RES_OK) {
      fprintf(stderr, "kernlab show: %s\n", why);
      rc = LAB_EXIT_USAGE;
    } else if (mode) {
      fwrite(src, 1, len, stdout);
    } else {
      show_metrics(r, res_get(r, id), len);
      printf("\n");
      /* for a terminal: a policy's text may hold escape sequences; --source
       * keeps the bytes exact */
      lab_fput_printable(src, len, stdout);
      if (len && src[len - 1] != '\n') printf("\n");
    }
    free(src);
  }
  res_reader_close(r);
  return rc;
}
