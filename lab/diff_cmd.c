/*
 * lab/diff_cmd.c — `kernlab diff RUN.h5 ID1 ID2`: two candidates side by
 * side (status, time, reward and each reward component, resources, flags,
 * with deltas) followed by a unified diff of their sources. The line diff is
 * a plain LCS table after trimming the common prefix and suffix: candidate
 * sources are small and differ in a few places, so nothing cleverer (Myers)
 * is needed; pairs too different for the table's cap say so instead.
 *
 * Exit codes as DESIGN.md: 2 for bad usage, a bad file or an unknown id.
 */
#include "lab/lab.h"

#include "results/results.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static const char diff_synopsis[] = "diff RUN.h5 ID1 ID2";

typedef struct lines {
  const char **at; /* start of each line */
  int *len;        /* without the newline */
  int n;
} lines;

static int split_lines(const char *s, size_t len, lines *out) {
  int cap = 1;
  for (size_t i = 0; i < len; i++)
    cap += s[i] == '\n';
  out->at = malloc((size_t)cap * sizeof *out->at);
  out->len = malloc((size_t)cap * sizeof *out->len);
  out->n = 0;
  if (!out->at || !out->len) return -1;
  size_t start = 0;
  for (size_t i = 0; i <= len; i++) {
    if (i == len || s[i] == '\n') {
      if (i == len && i == start) break; /* no empty last line after \n */
      out->at[out->n] = s + start;
      out->len[out->n++] = (int)(i - start);
      start = i + 1;
    }
  }
  return 0;
}

static int same_line(const lines *a, int i, const lines *b, int j) {
  return a->len[i] == b->len[j] &&
         !memcmp(a->at[i], b->at[j], (size_t)a->len[i]);
}

/* An edit script: ' ' keep, '-' only in a, '+' only in b. */
typedef struct edit {
  char op;
  int a, b; /* line indices (the one that applies) */
} edit;

#define DIFF_MAX_CELLS (32L * 1024 * 1024)

/* LCS by dynamic programming after trimming the common prefix and suffix
 * (candidate sources differ in a few places, so the table stays small).
 * Returns the number of edits, or -1 when the table would be too big. */
static int line_diff(const lines *a, const lines *b, edit *out) {
  int pre = 0, suf = 0;
  while (pre < a->n && pre < b->n && same_line(a, pre, b, pre))
    pre++;
  while (suf < a->n - pre && suf < b->n - pre &&
         same_line(a, a->n - 1 - suf, b, b->n - 1 - suf))
    suf++;
  int n = a->n - pre - suf, m = b->n - pre - suf;
  if ((long)(n + 1) * (m + 1) > DIFF_MAX_CELLS) return -1;
  /* L[i][j] = LCS length of a[pre+i..pre+n) and b[pre+j..pre+m). */
  int *L = calloc((size_t)(n + 1) * (size_t)(m + 1), sizeof *L);
  if (!L) return -1;
#define AT(i, j) L[(size_t)(i) * (size_t)(m + 1) + (size_t)(j)]
  for (int i = n - 1; i >= 0; i--)
    for (int j = m - 1; j >= 0; j--)
      AT(i, j) =
          same_line(a, pre + i, b, pre + j)
              ? AT(i + 1, j + 1) + 1
              : (AT(i + 1, j) > AT(i, j + 1) ? AT(i + 1, j) : AT(i, j + 1));
  int k = 0;
  for (int i = 0; i < pre; i++)
    out[k++] = (edit){' ', i, i};
  int i = 0, j = 0;
  while (i < n || j < m) {
    if (i < n && j < m && same_line(a, pre + i, b, pre + j)) {
      out[k++] = (edit){' ', pre + i, pre + j};
      i++, j++;
    } else if (i < n && (j == m || AT(i + 1, j) >= AT(i, j + 1))) {
      out[k++] = (edit){'-', pre + i, pre + j}; /* deletions first */
      i++;
    } else {
      out[k++] = (edit){'+', pre + i, pre + j};
      j++;
    }
  }
#undef AT
  free(L);
  for (int s = 0; s < suf; s++)
    out[k++] = (edit){' ', pre + n + s, pre + m + s};
  return k;
}

/* Prints the edits as unified-diff hunks with 3 lines of context. */
static void print_hunks(const lines *a, const lines *b, const edit *e, int n) {
  const int ctx = 3;
  int i = 0;
  while (i < n) {
    while (i < n && e[i].op == ' ')
      i++;
    if (i >= n) break;
    int start = i - ctx < 0 ? 0 : i - ctx, end = i;
    /* extend over changes separated by at most 2*ctx unchanged lines */
    for (;;) {
      while (end < n && e[end].op != ' ')
        end++;
      int next = end;
      while (next < n && e[next].op == ' ')
        next++;
      if (next < n && next - end <= 2 * ctx)
        end = next;
      else {
        end = end + ctx > n ? n : end + ctx;
        break;
      }
    }
    int a0 = -1, b0 = -1, an = 0, bn = 0;
    for (int k = start; k < end; k++) {
      if (e[k].op != '+') {
        if (a0 < 0) a0 = e[k].a;
        an++;
      }
      if (e[k].op != '-') {
        if (b0 < 0) b0 = e[k].b;
        bn++;
      }
    }
    if (a0 < 0) a0 = e[start].a;
    if (b0 < 0) b0 = e[start].b;
    printf("@@ -%d,%d +%d,%d @@\n", an ? a0 + 1 : a0, an, bn ? b0 + 1 : b0, bn);
    for (int k = start; k < end; k++) {
      const lines *l = e[k].op == '+' ? b : a;
      int idx = e[k].op == '+' ? e[k].b : e[k].a;
      /* a source line shown on a terminal: its control bytes as '?' (the
       * text itself is `kernlab show --source`'s, byte-exact) */
      char shown[4096];
      int len = l->len[idx] < 1000 ? l->len[idx] : 1000;
      printf("%c%s%s\n", e[k].op,
             lab_printable_line(l->at[idx], (size_t)len, shown, sizeof shown),
             len < l->len[idx] ? "..." : "");
    }
    i = end;
  }
}

static void delta_row(const char *name, double x, double y, const char *fmt) {
  char a[32], b[32];
  lab_fmt_num(a, sizeof a, fmt, x);
  lab_fmt_num(b, sizeof b, fmt, y);
  printf("  %-16s %14s %14s", name, a, b);
  if (!isnan(x) && !isnan(y) && x >= 0 && y >= 0 && x != y) {
    printf("  %+.4g", y - x);
    if (x != 0) printf(" (%+.1f%%)", 100 * (y - x) / fabs(x));
  }
  printf("\n");
}

static void signed_row(const char *name, double x, double y) {
  char a[32], b[32];
  printf("  %-16s %14s %14s", name, lab_fmt_reward(a, sizeof a, "%.4f", x),
         lab_fmt_reward(b, sizeof b, "%.4f", y));
  if (!isnan(x) && !isnan(y) && x != y) printf("  %+.4g", y - x);
  printf("\n");
}

int lab_diff(int argc, char **argv) {
  const char *args[3];
  int na = 0;
  for (int i = 1; i < argc; i++) {
    if (argv[i][0] == '-' && argv[i][1] &&
        (argv[i][1] < '0' || argv[i][1] > '9'))
      return lab_usage("diff", "unknown option", argv[i], diff_synopsis);
    if (na == 3)
      return lab_usage("diff", "unexpected argument", argv[i], diff_synopsis);
    args[na++] = argv[i];
  }
  if (na != 3)
    return lab_usage("diff", "needs a results file and two candidate ids", NULL,
                     diff_synopsis);
  int exit = 0;
  res_reader *r = lab_open_run("diff", args[0], &exit);
  if (!r) return exit;
  int64_t id1 = lab_parse_id("diff", r, args[0], args[1]);
  int64_t id2 = id1 < 0 ? -1 : lab_parse_id("diff", r, args[0], args[2]);
  if (id1 < 0 || id2 < 0) {
    res_reader_close(r);
    return LAB_EXIT_USAGE;
  }
  const res_candidate *x = res_get(r, id1), *y = res_get(r, id2);
  char *sa = NULL, *sb = NULL, why[1024];
  size_t la = 0, lb = 0;
  if (res_source(r, id1, &sa, &la, why, sizeof why) != RES_OK ||
      res_source(r, id2, &sb, &lb, why, sizeof why) != RES_OK) {
    fprintf(stderr, "kernlab diff: %s\n", why);
    free(sa);
    res_reader_close(r);
    return LAB_EXIT_USAGE;
  }
  printf("%s: candidate %lld -> %lld\n", args[0], (long long)id1,
         (long long)id2);
  printf("  %-16s %14lld %14lld\n", "id", (long long)id1, (long long)id2);
  printf("  %-16s %14s %14s\n", "status", x->status, y->status);
  printf("  %-16s %14s %14s\n", "backend", x->backend, y->backend);
  delta_row("time_us", x->time_us, y->time_us, "%.3f");
  delta_row("gflops", x->gflops, y->gflops, "%.2f");
  delta_row("baseline_us", x->baseline_us, y->baseline_us, "%.3f");
  delta_row("max_rel_err", x->max_rel_err, y->max_rel_err, "%.3g");
  signed_row("reward", x->reward, y->reward);
  const double *cx = res_components(r, id1), *cy = res_components(r, id2);
  for (int j = 0; j < res_component_count(r); j++) {
    char name[80];
    snprintf(name, sizeof name, "  %s", res_component_name(r, j));
    if (cx && cy && !(isnan(cx[j]) && isnan(cy[j])))
      signed_row(name, cx[j], cy[j]);
  }
  delta_row("regs", x->regs, y->regs, "%.0f");
  delta_row("smem_bytes", x->smem_bytes, y->smem_bytes, "%.0f");
  delta_row("spill_bytes", x->spill_bytes, y->spill_bytes, "%.0f");
  char fx[2048], fy[2048]; /* shown whole: a diff is for reading */
  lab_flag_list(r, x->flags, ",", fx, sizeof fx);
  lab_flag_list(r, y->flags, ",", fy, sizeof fy);
  printf("  %-16s %14s %14s\n", "flags", fx, fy);

  char lx[4 * sizeof x->label], ly[4 * sizeof y->label];
  printf("--- %lld %s\n+++ %lld %s\n", (long long)id1,
         lab_printable(x->label, sizeof x->label, lx, sizeof lx),
         (long long)id2,
         lab_printable(y->label, sizeof y->label, ly, sizeof ly));
  int rc = LAB_EXIT_OK;
  lines a = {0}, b = {0};
  edit *e = NULL;
  if (split_lines(sa, la, &a) || split_lines(sb, lb, &b) ||
      !(e = malloc((size_t)(a.n + b.n + 1) * sizeof *e))) {
    fprintf(stderr, "kernlab diff: out of memory\n");
    rc = LAB_EXIT_ENV;
  } else if (!memcmp(x->src_sha256, y->src_sha256, 32)) {
    printf("(identical sources)\n");
  } else {
    int n = line_diff(&a, &b, e);
    if (n < 0)
      printf("(sources too different to diff line by line: %d and %d lines)\n",
             a.n, b.n);
    else
      print_hunks(&a, &b, e, n);
  }
  free(e);
  free(a.at), free(a.len), free(b.at), free(b.len);
  free(sa), free(sb);
  res_reader_close(r);
  return rc;
}
