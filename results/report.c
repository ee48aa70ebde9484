/*
 * results/report.c — `kernlab report`: one self-contained HTML page about a
 * results file (public entry point res_report_html in results.h). This file
 * writes the page: its frame and style, the summary tiles, the status
 * counts, the leaderboard, the campaign's attributes, and the HTML escaping
 * every string from the file goes through; results/report_plots.c draws
 * the SVG plots in the middle.
 *
 * The page is plain HTML + CSS with inline SVG: no script, no font, no
 * image, no link leaves the file, and a Content-Security-Policy meta tag
 * (default-src 'none') makes the browser refuse anything that would.
 *
 * Everything that comes from the file (sources above all, but also labels,
 * statuses, names and attributes) is hostile text: it goes through
 * res__html_esc, which leaves no '<', '&' or quote unescaped, so it cannot
 * end the <pre> or attribute it sits in. It does not validate UTF-8: the
 * page declares UTF-8 and a browser shows a bad sequence as U+FFFD, which
 * cannot form markup.
 *
 * Several files (a campaign and its search baselines): the page opens with
 * a comparison section (res__plot_compare's plot and a table of each
 * file's best); everything after it is about the first file, so a report
 * on one file is unchanged. "Best" there is correct and unflagged, as a
 * campaign's own "best so far". A file of another task or backend than
 * the first file holding candidates (res_comparable) is named in a note
 * and its times are left out of the plot and of the speed column.
 *
 * Not done here: reading the file (results/reader.c) and choosing where the
 * page goes (lab/report_cmd.c).
 */
#include "results/internal.h"

#include "kernels/kernels.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- escaping ------------------------------------------------------------ */

size_t res_utf8_char(const char *s, size_t n) {
  const unsigned char *p = (const unsigned char *)s;
  if (n == 0) return 0;
  if (p[0] < 0x80) return 1;
  size_t len = p[0] >= 0xC2 && p[0] <= 0xDF   ? 2
               : p[0] >= 0xE0 && p[0] <= 0xEF ? 3
               : p[0] >= 0xF0 && p[0] <= 0xF4 ? 4
                                              : 0; /* C0, C1: overlong */
  if (!len || len > n) return 0;
  for (size_t i = 1; i < len; i++)
    if ((p[i] & 0xC0) != 0x80) return 0;
  /* the second byte's range: no overlong forms, surrogates, or past
   * U+10FFFF */
  if ((p[0] == 0xE0 && p[1] < 0xA0) || (p[0] == 0xED && p[1] > 0x9F) ||
      (p[0] == 0xF0 && p[1] < 0x90) || (p[0] == 0xF4 && p[1] > 0x8F))
    return 0;
  return len;
}

uint32_t res_bidi_control(const char *s, size_t len) {
  const unsigned char *p = (const unsigned char *)s;
  uint32_t cp = len == 2   ? (uint32_t)(p[0] & 0x1F) << 6 | (p[1] & 0x3F)
                : len == 3 ? (uint32_t)(p[0] & 0x0F) << 12 |
                                 (uint32_t)(p[1] & 0x3F) << 6 | (p[2] & 0x3F)
                           : 0;
  int bidi = cp == 0x061C || cp == 0x200E || cp == 0x200F ||
             (cp >= 0x202A && cp <= 0x202E) || (cp >= 0x2066 && cp <= 0x2069);
  return bidi ? cp : 0;
}

/* Writes n bytes of s as HTML text safe inside an element or a quoted
 * attribute. C0 controls other than tab, newline and CR (and DEL), and
 * bytes that are not UTF-8 (the page says it is), become U+FFFD: a NUL
 * would otherwise end the text for some readers. A direction control
 * (res_bidi_control) is written as a visible mark, ⟨U+202E⟩, in text
 * alone (no markup: the same escape serves attributes). */
void res__html_esc(FILE *f, const char *s, size_t n) {
  for (size_t i = 0; i < n; i++) {
    unsigned char c = (unsigned char)s[i];
    if (c >= 0x80) {
      size_t len = res_utf8_char(s + i, n - i);
      uint32_t bidi = len ? res_bidi_control(s + i, len) : 0;
      if (!len) {
        fputs("&#xFFFD;", f);
      } else if (bidi) {
        fprintf(f, "&#x27E8;U+%04X&#x27E9;", (unsigned)bidi);
        i += len - 1;
      } else {
        fwrite(s + i, 1, len, f);
        i += len - 1;
      }
      continue;
    }
    switch (c) {
    case '<':
      fputs("&lt;", f);
      break;
    case '>':
      fputs("&gt;", f);
      break;
    case '&':
      fputs("&amp;", f);
      break;
    case '"':
      fputs("&quot;", f);
      break;
    case '\'':
      fputs("&#39;", f);
      break;
    default:
      if ((c < 0x20 && c != '\t' && c != '\n' && c != '\r') || c == 0x7f)
        fputs("&#xFFFD;", f);
      else
        fputc(c, f);
    }
  }
}

static void esc(FILE *f, const char *s) {
  res__html_esc(f, s, strlen(s));
}

/* At most max bytes of s, escaped, cut at a UTF-8 character boundary and
 * ending in an ellipsis when cut: for names in plots, where space is fixed
 * (the full name goes in the element's <title>). */
void res__html_esc_short(FILE *f, const char *s, size_t max) {
  size_t n = strlen(s);
  if (n <= max) {
    res__html_esc(f, s, n);
    return;
  }
  while (max > 0 && ((unsigned char)s[max] & 0xC0) == 0x80)
    max--;
  res__html_esc(f, s, max);
  fputs("&hellip;", f);
}

/* A fixed-size record string (NUL-padded, perhaps without a NUL when it
 * fills the array). */
static void esc_field(FILE *f, const char *s, size_t cap) {
  res__html_esc(f, s, strnlen(s, cap));
}
#define ESC_FIELD(f, arr) esc_field(f, arr, sizeof(arr))

static int is_num(double v) {
  return !isnan(v) && !isinf(v);
}

/* ---- tables -------------------------------------------------------------- */

static void attr_row(FILE *f, const res_reader *r, const char *name,
                     const char *label) {
  const char *v = res_attr(r, name);
  if (!v[0]) return;
  fprintf(f, "<tr><th>%s</th><td>", label);
  esc(f, v);
  fputs("</td></tr>\n", f);
}

static void campaign_table(FILE *f, const res_reader *r) {
  fputs("<section id=\"campaign\"><h2>Campaign</h2><table class=\"kv\">\n", f);
  attr_row(f, r, "created", "created");
  attr_row(f, r, "device", "device");
  attr_row(f, r, "backend", "backend");
  attr_row(f, r, "kernlab_version", "kernlab");
  attr_row(f, r, "nvrtc_version", "NVRTC");
  attr_row(f, r, "driver_version", "driver");
  attr_row(f, r, "hdf5_version", "HDF5");
  attr_row(f, r, "reward_script", "reward script");
  attr_row(f, r, "reward_sha256", "reward sha256");
  fprintf(f,
          "<tr><th>seed</th><td>%llu</td></tr>\n<tr><th>schema</th>"
          "<td>%d</td></tr>\n</table>\n",
          (unsigned long long)res_seed(r), res_schema_version(r));
  const char *config = res_attr(r, "config");
  if (config[0]) {
    fputs("<details><summary>campaign config</summary><pre>", f);
    esc(f, config);
    fputs("</pre></details>\n", f);
  }
  fputs("</section>\n", f);
}

/* How many candidates ended in each status, most common first (ties by
 * name). Sorted, then counted by runs: a search of the statuses seen so
 * far for each candidate took 45 s for 100,000 candidates of distinct
 * statuses (the report review). */
#define STATUS_LEN sizeof((res_candidate *)0)->status
static int by_status(const void *a, const void *b) {
  return strncmp(*(const char *const *)a, *(const char *const *)b, STATUS_LEN);
}
typedef struct status_count {
  const char *name;
  int64_t n;
} status_count;
static int by_count(const void *a, const void *b) {
  const status_count *x = a, *y = b;
  if (x->n != y->n) return x->n > y->n ? -1 : 1;
  return strncmp(x->name, y->name, STATUS_LEN);
}
static void status_table(FILE *f, const res_reader *r) {
  int64_t n = res_count(r), k = 0;
  const char **name = malloc((size_t)(n ? n : 1) * sizeof *name);
  status_count *cnt = malloc((size_t)(n ? n : 1) * sizeof *cnt);
  if (!name || !cnt) {
    free(name), free(cnt);
    return;
  }
  for (int64_t i = 0; i < n; i++)
    name[i] = res_get(r, i)->status;
  qsort(name, (size_t)n, sizeof *name, by_status);
  for (int64_t i = 0; i < n; i++) {
    if (k == 0 || by_status(&name[i], &cnt[k - 1].name))
      cnt[k++] = (status_count){name[i], 0};
    cnt[k - 1].n++;
  }
  qsort(cnt, (size_t)k, sizeof *cnt, by_count);
  fputs("<table class=\"status\"><tr><th>status</th><th>candidates</th></tr>\n",
        f);
  for (int64_t j = 0; j < k; j++) {
    fputs("<tr><td>", f);
    esc_field(f, cnt[j].name, STATUS_LEN);
    fprintf(f, "</td><td class=\"num\">%lld</td></tr>\n", (long long)cnt[j].n);
  }
  fputs("</table>\n", f);
  free(name), free(cnt);
}

static int by_time(const void *a, const void *b) {
  const res_candidate *x = *(const res_candidate *const *)a,
                      *y = *(const res_candidate *const *)b;
  if (x->time_us != y->time_us) return x->time_us < y->time_us ? -1 : 1;
  return x->id < y->id ? -1 : 1;
}

static void num_cell(FILE *f, const char *fmt, double v) {
  fputs("<td class=\"num\">", f);
  if (is_num(v) && v >= 0)
    fprintf(f, fmt, v);
  else
    fputs("&ndash;", f);
  fputs("</td>", f);
}

/* The n fastest correct, timed kernels, each followed by a row holding its
 * components and source in a <details>. */
static void leaderboard(FILE *f, const res_reader *r,
                        const res_candidate **rows, int top_n) {
  int64_t m = 0;
  for (int64_t i = 0; i < res_count(r); i++) {
    const res_candidate *c = res_get(r, i);
    if (c->correct && c->time_us > 0) rows[m++] = c;
  }
  qsort(rows, (size_t)m, sizeof *rows, by_time);
  fputs("<section id=\"leaderboard\"><h2>Leaderboard</h2>\n", f);
  if (!m) {
    fprintf(f, "<p class=\"empty\">%s</p></section>\n",
            res_count(r) ? "No correct, timed kernel in this file."
                         : "No candidates in this file.");
    return;
  }
  fprintf(f,
          "<p>The %lld fastest of %lld correct, timed kernels, by median "
          "time. Open a row's source below it.</p>\n",
          (long long)(m < top_n ? m : top_n), (long long)m);
  fputs("<table class=\"board\"><thead><tr><th>#</th><th>id</th><th>step</th>"
        "<th>status</th><th>time (us)</th><th>&times; baseline</th>"
        "<th>GFLOP/s</th><th>reward</th><th>regs</th><th>smem</th>"
        "<th>flags</th><th>label</th></tr></thead><tbody>\n",
        f);
  /* which rows' sources were written out (none named when out of memory) */
  unsigned char *shown = calloc((size_t)(m < top_n ? m : top_n), 1);
  for (int64_t k = 0; k < m && k < top_n; k++) {
    const res_candidate *c = rows[k];
    fprintf(f,
            "<tr class=\"cand%s\" data-id=\"%lld\"><td class=\"num\">%lld</td>"
            "<td class=\"num\">%lld</td>",
            c->flags ? " flagged" : "", (long long)c->id, (long long)k + 1,
            (long long)c->id);
    num_cell(f, "%.0f", (double)c->step); /* -1: not from a campaign */
    fputs("<td>", f);
    ESC_FIELD(f, c->status);
    fputs("</td>", f);
    num_cell(f, "%.3f", c->time_us);
    num_cell(f, "%.2f", c->baseline_us > 0 ? c->baseline_us / c->time_us : NAN);
    num_cell(f, "%.1f", c->gflops);
    fputs("<td class=\"num\">", f);
    if (is_num(c->reward))
      fprintf(f, "%.3f", c->reward);
    else
      fputs("&ndash;", f);
    fputs("</td>", f);
    num_cell(f, "%.0f", c->regs);
    num_cell(f, "%.0f", c->smem_bytes);
    fputs("<td>", f);
    for (int b = 0; b < 64; b++) {
      if (!(c->flags >> b & 1)) continue;
      const char *name = res_flag_name(r, b);
      fputs("<span class=\"flag\">", f);
      if (name)
        esc(f, name);
      else
        fprintf(f, "bit%d", b);
      fputs("</span> ", f);
    }
    fputs("</td><td>", f);
    ESC_FIELD(f, c->label);
    fprintf(f, "</td></tr>\n<tr class=\"src\"><td colspan=\"12\"><details>"
               "<summary>source, ");
    char *src = NULL, why[512];
    size_t len = 0;
    int ok = res_source(r, c->id, &src, &len, why, sizeof why) == RES_OK;
    fprintf(f, "%zu bytes", ok ? len : (size_t)c->src_len);
    const double *v = res_components(r, c->id);
    for (int j = 0; v && j < res_component_count(r); j++) {
      if (!is_num(v[j])) continue;
      fputs(" &middot; ", f);
      esc(f, res_component_name(r, j));
      fprintf(f, " %+.4g", v[j]);
    }
    /* a source shown in an earlier row is named, not repeated: policies
     * write the same kernel again and again, and fifty copies of a 256 KiB
     * source of quotes (each one &quot;) made a 77 MB page (the report
     * review) */
    const res_candidate *same = NULL;
    for (int64_t e = 0; shown && ok && !same && e < k; e++)
      if (shown[e] && rows[e]->src_len == c->src_len &&
          !memcmp(rows[e]->src_sha256, c->src_sha256, sizeof c->src_sha256))
        same = rows[e];
    fputs("</summary><pre>", f);
    if (same)
      fprintf(f, "(the source of candidate %lld, above)", (long long)same->id);
    else if (ok)
      res__html_esc(f, src, len);
    if (shown)
      shown[k] = ok && !same;
    else
      fputs("(source unavailable: ", f), esc(f, why), fputs(")", f);
    fputs("</pre></details></td></tr>\n", f);
    free(src);
  }
  free(shown);
  fputs("</tbody></table></section>\n", f);
}

/* ---- several files ------------------------------------------------------- */

/* One row per file: candidates, correct, best correct unflagged time, the
 * kernel and the evaluation that reached it, and its speed relative to the
 * best of the files comparable with the reference (left_out[k] unset);
 * a file left out says "not comparable" there, with why in its title. */
static void compare_table(FILE *f, const res_reader *const *runs,
                          const char *const *names,
                          const unsigned char *left_out, int n) {
  double overall = INFINITY;
  for (int k = 0; k < n; k++)
    for (int64_t i = 0; i < res_count(runs[k]) && !left_out[k]; i++) {
      const res_candidate *c = res_get(runs[k], i);
      if (c->correct && c->time_us > 0 && !c->flags)
        overall = fmin(overall, c->time_us);
    }
  fputs("<table class=\"compare\"><tr><th>file</th><th>candidates</th>"
        "<th>correct</th><th>best time (us)</th><th>reached at "
        "evaluation</th><th>speed vs the best file</th><th>best kernel</th>"
        "</tr>\n",
        f);
  for (int k = 0; k < n; k++) {
    const res_candidate *best = NULL;
    int64_t correct = 0;
    for (int64_t i = 0; i < res_count(runs[k]); i++) {
      const res_candidate *c = res_get(runs[k], i);
      correct += c->correct;
      if (c->correct && c->time_us > 0 && !c->flags &&
          (!best || c->time_us < best->time_us))
        best = c;
    }
    fprintf(f, "<tr class=\"file%s\" data-series=\"compare-%d\"><td>",
            left_out[k] ? " not-comparable" : "", k);
    esc(f, names[k]);
    fprintf(f, "</td><td class=\"num\">%lld</td><td class=\"num\">%lld</td>",
            (long long)res_count(runs[k]), (long long)correct);
    num_cell(f, "%.3f", best ? best->time_us : NAN);
    num_cell(f, "%.0f", best ? (double)best->id + 1 : NAN);
    if (left_out[k])
      fputs("<td class=\"num\">not comparable</td>", f);
    else
      num_cell(f, "%.0f%%", best ? 100.0 * overall / best->time_us : NAN);
    fputs("<td>", f);
    if (best) ESC_FIELD(f, best->label);
    fputs("</td></tr>\n", f);
  }
  fputs("</table>\n", f);
}

static void comparison(FILE *f, const res_reader *r, const res_report_opts *o,
                       const char *unit) {
  enum { MAX_RUNS = 64 };
  const res_reader *runs[MAX_RUNS];
  const char *names[MAX_RUNS];
  int n = 0;
  runs[n] = r, names[n++] = o->title;
  for (int k = 0; k < o->n_compare && n < MAX_RUNS; k++)
    runs[n] = o->compare[k], names[n++] = o->compare_names[k];
  /* Times of another task or backend are not compared: a 64^3 search's
   * best made a 256^3 campaign read "speed vs the best file: 5%" (the
   * walkthrough review). Each file is held against the reference (the
   * first with candidates), as `kernlab search` holds a run against its
   * exhaustive baseline (lab/compare.c); the others are named, and left
   * out of the plot and of the speed column. */
  unsigned char left_out[MAX_RUNS] = {0};
  int ref = res_compare_reference(runs, n);
  char why[1024];
  for (int k = 0; k < n; k++)
    left_out[k] = !res_comparable(runs[ref], names[ref], runs[k], names[k], why,
                                  sizeof why);
  fputs("<section id=\"comparison\"><h2>Comparison</h2>\n<p>", f);
  fprintf(f,
          "%d files side by side (a campaign and its search baselines, "
          "say): the best correct, unflagged kernel so far against the "
          "number of candidates evaluated. The sections below are about "
          "the first file, ",
          n);
  esc(f, o->title);
  fputs(".</p>\n", f);
  /* a reference of several tasks is every file's reason: said once */
  int ref_mixed = !res_comparable(runs[ref], names[ref], runs[ref], names[ref],
                                  why, sizeof why);
  for (int k = 0; k < n; k++) {
    if (!left_out[k] || (ref_mixed && k != ref)) continue;
    res_comparable(runs[ref], names[ref], runs[k], names[k], why, sizeof why);
    fputs("<p class=\"note not-comparable\">", f);
    esc(f, why);
    if (ref_mixed) {
      fputs("; no file's times are compared.</p>\n", f);
    } else {
      fputs("; the times of ", f);
      esc(f, names[k]);
      fputs(" are left out of the plot and of the speed column.</p>\n", f);
    }
  }
  fputs("<div class=\"compare-plot\">\n", f);
  res__plot_compare(f, runs, names, left_out, n, unit);
  fputs("</div>\n", f);
  compare_table(f, runs, names, left_out, n);
  fputs("</section>\n", f);
}

/* ---- the page ------------------------------------------------------------ */

static const char css[] =
    "body{font:14px/1.45 system-ui,-apple-system,'Segoe UI',Roboto,sans-serif;"
    "margin:0;background:#f6f7f9;color:#1f2328}"
    "main{max-width:1140px;margin:0 auto;padding:16px 20px 40px}"
    "h1{font-size:22px;margin:8px 0 2px}h2{font-size:17px;margin:22px 0 8px}"
    ".sub{color:#57606a;margin:0 0 12px;word-break:break-all}"
    ".tiles{display:flex;flex-wrap:wrap;gap:10px}"
    ".tile{background:#fff;border:1px solid #d0d7de;border-radius:6px;"
    "padding:8px 14px;min-width:110px}"
    ".tile b{display:block;font-size:20px}.tile span{color:#57606a;"
    "font-size:12px}"
    ".note{background:#fff8c5;border:1px solid #d4a72c;border-radius:6px;"
    "padding:6px 12px}"
    ".plots{display:grid;grid-template-columns:repeat(2,1fr);gap:12px}"
    "figure{margin:0;background:#fff;border:1px solid #d0d7de;"
    "border-radius:6px;padding:8px}"
    "figcaption{font-weight:600;margin:0 0 4px 4px}"
    "svg.chart{width:100%;height:auto;display:block}"
    "svg .grid{stroke:#eaeef2}svg .axis{stroke:#57606a}"
    "svg .tick,svg .legend{font-size:11px;fill:#57606a}"
    "svg .label{font-size:12px;fill:#1f2328}"
    "svg .cand{fill:#bab0ac}svg .total{stroke:#1f2328;stroke-width:2}"
    ".compare-plot{max-width:760px;margin:0 0 12px}"
    "ul.legend-list{list-style:none;margin:4px 0 0 8px;padding:0;"
    "font-size:12px;color:#57606a;word-break:break-all}"
    "ul.legend-list svg{vertical-align:middle}"
    ".empty{color:#57606a;font-style:italic;padding:30px 10px;"
    "text-align:center}"
    "table{border-collapse:collapse;background:#fff}"
    "th,td{border:1px solid #d0d7de;padding:3px 8px;text-align:left;"
    "vertical-align:top}"
    "th{background:#f0f2f5}td.num{text-align:right;"
    "font-variant-numeric:tabular-nums}"
    "table.board{width:100%}tr.flagged td{background:#fff1f0}"
    ".flag{background:#cf222e;color:#fff;border-radius:3px;padding:0 5px;"
    "font-size:12px}"
    "tr.src td{border-top:none;padding:0 8px 2px}"
    "summary{cursor:pointer;color:#0969da;font-size:12px}"
    "pre{background:#f6f8fa;border:1px solid #d0d7de;padding:8px;"
    "overflow:auto;max-height:480px;font:12px/1.4 ui-monospace,"
    "'DejaVu Sans Mono',monospace;white-space:pre}";

static void tile(FILE *f, const char *value, const char *what) {
  fprintf(f, "<div class=\"tile\"><b>%s</b><span>%s</span></div>\n", value,
          what);
}

/* A tile's number: 3 decimals, or 4 significant digits with an exponent
 * from 1e15 on ("%.3f" of 1e100 is 104 characters, which a 64-byte buffer
 * cut to a number that read as 1e62); a dash for none. */
static const char *tile_num(char *v, size_t len, double x) {
  if (!is_num(x))
    snprintf(v, len, "&ndash;");
  else
    snprintf(v, len, fabs(x) < 1e15 ? "%.3f" : "%.4g", x);
  return v;
}

static void summary(FILE *f, const res_reader *r, int64_t nsteps,
                    const char *unit) {
  int64_t n = res_count(r), correct = 0, compiled = 0, flagged = 0;
  double best = INFINITY, best_reward = -INFINITY;
  for (int64_t i = 0; i < n; i++) {
    const res_candidate *c = res_get(r, i);
    correct += c->correct, compiled += c->compiled, flagged += c->flags != 0;
    /* as the comparison and a campaign's best: a flagged kernel's time
     * is not a result (the report review's page headlined a kernel that
     * leaked through printf) */
    if (c->correct && !c->flags && c->time_us > 0)
      best = fmin(best, c->time_us);
    if (is_num(c->reward)) best_reward = fmax(best_reward, c->reward);
  }
  char v[64];
  fputs("<div class=\"tiles\" id=\"summary\">\n", f);
  snprintf(v, sizeof v, "%lld", (long long)n);
  tile(f, v, "candidates");
  snprintf(v, sizeof v, "%lld", (long long)compiled);
  tile(f, v, "compiled");
  if (n)
    snprintf(v, sizeof v, "%lld (%.0f%%)", (long long)correct,
             100.0 * (double)correct / (double)n);
  else
    snprintf(v, sizeof v, "0");
  tile(f, v, "correct");
  snprintf(v, sizeof v, "%lld", (long long)flagged);
  tile(f, v, "flagged");
  snprintf(v, sizeof v, "%lld", (long long)nsteps);
  tile(f, v, "policy steps");
  tile(f, tile_num(v, sizeof v, best), unit);
  tile(f, tile_num(v, sizeof v, best_reward), "best reward");
  fputs("</div>\n", f);
  if (!n)
    fputs("<p class=\"empty\" id=\"no-candidates\">This file holds no "
          "candidates yet.</p>\n",
          f);
  if (!nsteps)
    fputs("<p class=\"empty\" id=\"no-steps\">This file holds no policy "
          "steps (an eval leaderboard, or a campaign before its first "
          "step).</p>\n",
          f);
}

int res_report_html(const res_reader *r, const res_report_opts *o, FILE *out,
                    char *why, size_t whylen) {
  int64_t n = res_count(r), ns = res_step_count(r);
  int emu = 0;
  for (int64_t i = 0; i < n && !emu; i++)
    emu = !strcmp(res_get(r, i)->backend, "cpu-emu");
  const char *unit = emu ? "best time (us, CPU emulator)" : "best time (us)";
  const char *axis =
      emu ? "median time (us, CPU emulator)" : "median time (us)";
  const res_candidate **rows = malloc((size_t)(n ? n : 1) * sizeof *rows);
  if (!rows) {
    snprintf(why, whylen, "out of memory for %lld candidates", (long long)n);
    return RES_EENV;
  }

  fputs("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
        "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src "
        "'none'; style-src 'unsafe-inline'\">\n"
        "<meta name=\"viewport\" content=\"width=device-width\">\n<title>"
        "kernlab report: ",
        out);
  esc(out, o->title);
  fprintf(out, "</title>\n<style>%s</style></head>\n<body><main>\n", css);
  fputs("<h1>kernlab report</h1>\n<p class=\"sub\">", out);
  esc(out, o->title);
  for (int k = 0; k < o->n_compare; k++) {
    fputs(" &middot; ", out);
    esc(out, o->compare_names[k]);
  }
  fputs("</p>\n", out);
  summary(out, r, ns, unit);
  if (emu)
    fputs("<p class=\"note\">cpu-emu times are CPU times of the emulator, "
          "not GPU speed.</p>\n",
          out);
  if (o->n_compare > 0) comparison(out, r, o, unit);
  fputs("<section id=\"plots\"><h2>Campaign progress</h2>\n"
        "<div class=\"plots\">\n",
        out);
  if (res__report_plots(out, r, axis, why, whylen) != RES_OK) {
    free(rows);
    return RES_EENV;
  }
  fputs("</div></section>\n<section id=\"statuses\"><h2>Outcomes</h2>\n", out);
  if (n)
    status_table(out, r);
  else
    fputs("<p class=\"empty\">No candidates in this file.</p>\n", out);
  fputs("</section>\n", out);
  leaderboard(out, r, rows, o->top_n > 0 ? o->top_n : 50);
  campaign_table(out, r);
  fputs("</main></body></html>\n", out);
  free(rows);
  int err = kl_stream_errno(out);
  if (err) {
    snprintf(why, whylen, "write failed: %s", strerror(err));
    return RES_EENV;
  }
  return RES_OK;
}
