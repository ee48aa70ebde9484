/*
 * results/report_plots.c — the SVG plots of the HTML report
 * (results/report.c writes the rest of the page). Drawn here, in C, as SVG
 * primitives with data-* attributes that say what they show (the report
 * test reads them back from Chromium's DOM):
 *   - reward mean and max per step          (/steps, two polylines)
 *   - correct fraction per step             (/steps, one polyline)
 *   - best time against step                (/steps polyline + each correct
 *                                            candidate as a dot)
 *   - time histogram of correct kernels     (/candidates, rect per bin)
 *   - mean of each reward component         (/reward_components, bars)
 *   - components of the top candidates by reward (stacked bars: positive
 *     parts up from zero, negative parts down)
 * and, for a report on several files (res__plot_compare), the best correct
 * time so far against evaluations, one staircase per file on a log time
 * axis (times of a search and a campaign span decades), with an HTML
 * legend of the file names under it.
 * A plot without data is a <p class="empty"> saying why instead. Strings
 * from the file go through res__html_esc (results/report.c).
 */
#include "results/internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static void esc(FILE *f, const char *s) {
  res__html_esc(f, s, strlen(s));
}

/* ---- numbers ------------------------------------------------------------- */

static int is_num(double v) {
  return !isnan(v) && !isinf(v);
}

/* A "nice" tick spacing (1, 2 or 5 times a power of ten) giving about
 * `target` intervals over span. */
static double nice_step(double span, int target) {
  if (!(span > 0) || !isfinite(span)) return 1; /* callers keep spans sane */
  double raw = span / target, mag = pow(10, floor(log10(raw))), r = raw / mag;
  return (r < 1.5 ? 1 : r < 3 ? 2 : r < 7 ? 5 : 10) * mag;
}

/* Data past +-1e300 (an edited file's 1e308) is drawn at the edge: the
 * span of -1e308 to 1e308 is infinite, and every coordinate computed over
 * it came out NaN. */
#define AXIS_MAX 1e300
static double axis_clamp(double v) {
  return v > AXIS_MAX ? AXIS_MAX : v < -AXIS_MAX ? -AXIS_MAX : v;
}

/* Pads a range too narrow to draw: a single value, or values so large that
 * their difference is below a double's precision there (at 1e20, lo - 0.5
 * is lo). */
static void pad_degenerate(double *lo, double *hi, double least) {
  *lo = axis_clamp(*lo), *hi = axis_clamp(*hi);
  double mid = 0.5 * *lo + 0.5 * *hi;
  if (*hi - *lo > fabs(mid) * 1e-9) return;
  double pad = fabs(mid) * 0.1 > least ? fabs(mid) * 0.1 : least;
  *lo = mid - pad, *hi = mid + pad;
}

/* Widens [*lo, *hi] to whole ticks; returns the tick spacing. A degenerate
 * range is padded so a single value sits mid-axis. */
static double nice_range(double *lo, double *hi, int integer) {
  *lo = axis_clamp(*lo), *hi = axis_clamp(*hi);
  if (!(*hi > *lo)) {
    double pad = fabs(*lo) > 0 ? fabs(*lo) * 0.1 : 1;
    if (integer && pad < 1) pad = 1;
    *lo -= pad, *hi += pad;
  }
  pad_degenerate(lo, hi, integer ? 1 : 1e-300);
  double step = nice_step(*hi - *lo, 5);
  if (integer && step < 1) step = 1;
  *lo = floor(*lo / step + 1e-9) * step;
  *hi = ceil(*hi / step - 1e-9) * step;
  return step;
}

/* How many ticks from a to b (inclusive, with slack for rounding) at
 * spacing step, at most MAX_TICKS. The loops count ticks rather than add
 * step until past b: at 1e20 a step of 16 adds nothing to a double, and
 * such a loop wrote ticks until the disk was full. */
#define MAX_TICKS 200
static int tick_count(double a, double b, double step) {
  if (!(step > 0) || !isfinite(a) || !isfinite(b) || b < a) return 0;
  if (a + step == a) return 1; /* below the precision at a */
  double n = floor((b - a) / step + 1e-6) + 1;
  return n > MAX_TICKS ? MAX_TICKS : (int)n;
}

/* A tick label with as many decimals as the spacing needs. */
static void tick_label(char *buf, size_t n, double v, double step, int pct) {
  if (pct) v *= 100, step *= 100;
  int dec = step >= 1 ? 0 : (int)ceil(-log10(step) - 1e-9);
  if (dec > 6) dec = 6;
  if (fabs(v) < step * 1e-6) v = 0; /* no "-0" */
  if (fabs(v) >= 1e6)
    snprintf(buf, n, "%.3g%s", v, pct ? "%" : "");
  else
    snprintf(buf, n, "%.*f%s", dec, v, pct ? "%" : "");
}

/* ---- SVG plots ----------------------------------------------------------- */

enum { W = 540, H = 300, PL = 64, PR = 16, PT = 30, PB = 46 };

static const char *const palette[] = {"#4e79a7", "#f28e2b", "#59a14f",
                                      "#e15759", "#76b7b2", "#edc948",
                                      "#b07aa1", "#9c755f"};
#define PALETTE(i) palette[(i) % (int)(sizeof palette / sizeof *palette)]

/* Axes of one plot: the data range each spans and the tick spacing. */
typedef struct plot {
  FILE *f;
  double x0, x1, xstep, y0, y1, ystep;
  int ypct; /* y ticks as percentages */
  int ylog; /* y0, y1 are log10 of the values; ticks at 1, 2, 5 x 10^k */
} plot;

/* A coordinate the SVG can hold: never NaN or infinite (a browser drops
 * such an element), and far points kept at a finite distance. */
static double coord(double v, double fallback) {
  if (!isfinite(v)) return fallback;
  return v > 1e6 ? 1e6 : v < -1e6 ? -1e6 : v;
}

static double px(const plot *p, double x) {
  double span = p->x1 - p->x0;
  return coord(PL + (axis_clamp(x) - p->x0) / span * (W - PL - PR), PL);
}

static double py(const plot *p, double y) {
  double span = p->y1 - p->y0;
  return coord(H - PB - (axis_clamp(y) - p->y0) / span * (H - PT - PB), H - PB);
}

/* Opens a <figure> with its caption. */
static void figure_begin(FILE *f, const char *id, const char *caption) {
  fprintf(f, "<figure class=\"plot\" id=\"%s\"><figcaption>%s</figcaption>\n",
          id, caption);
}

/* A figure with no plot, only the reason there is none. */
static void figure_empty(FILE *f, const char *id, const char *caption,
                         const char *why) {
  figure_begin(f, id, caption);
  fprintf(f, "<p class=\"empty\">%s</p></figure>\n", why);
}

/* One horizontal grid line with its label at data value y. */
static void y_tick(const plot *p, double y, const char *lab) {
  fprintf(p->f,
          "<line class=\"grid\" x1=\"%d\" x2=\"%d\" y1=\"%.1f\" "
          "y2=\"%.1f\"/><text class=\"tick\" x=\"%d\" y=\"%.1f\" "
          "text-anchor=\"end\">%s</text>\n",
          PL, W - PR, py(p, y), py(p, y), PL - 6, py(p, y) + 4, lab);
}

/* Opens the <svg> and draws grid, ticks and axis labels. xlabels == 0
 * leaves the x axis unlabelled (bar charts label their own). */
static void plot_begin(const plot *p, const char *id, const char *xlabel,
                       const char *ylabel, int xlabels) {
  FILE *f = p->f;
  fprintf(f,
          "<svg class=\"chart\" data-plot=\"%s\" viewBox=\"0 0 %d %d\" "
          "width=\"%d\" height=\"%d\" role=\"img\">\n",
          id, W, H, W, H);
  char lab[32];
  int ny = p->ylog ? 0 : tick_count(p->y0, p->y1, p->ystep);
  for (int i = 0; i < ny; i++) {
    double y = p->y0 + i * p->ystep;
    tick_label(lab, sizeof lab, y, p->ystep, p->ypct);
    y_tick(p, y, lab);
  }
  /* Log axis: 1, 2, 5 per decade, or 1 alone when the range is wide. */
  int wide = p->y1 - p->y0 > 2.5;
  int logok = p->ylog && isfinite(p->y0) && isfinite(p->y1) &&
              fabs(p->y0) < 400 && fabs(p->y1) < 400; /* decades of doubles */
  for (int d = logok ? (int)floor(p->y0) : 1; logok && d <= (int)ceil(p->y1);
       d++)
    for (int m = 1; m <= 5; m += m == 1 ? 1 : 3) {
      double y = d + log10((double)m);
      if ((wide && m > 1) || y < p->y0 - 1e-9 || y > p->y1 + 1e-9) continue;
      snprintf(lab, sizeof lab, "%g", m * pow(10, d));
      y_tick(p, y, lab);
    }
  int nx = xlabels ? tick_count(p->x0, p->x1, p->xstep) : 0;
  for (int i = 0; i < nx; i++) {
    double x = p->x0 + i * p->xstep;
    tick_label(lab, sizeof lab, x, p->xstep, 0);
    fprintf(f,
            "<line class=\"axis\" x1=\"%.1f\" x2=\"%.1f\" y1=\"%d\" "
            "y2=\"%d\"/><text class=\"tick\" x=\"%.1f\" y=\"%d\" "
            "text-anchor=\"middle\">%s</text>\n",
            px(p, x), px(p, x), H - PB, H - PB + 4, px(p, x), H - PB + 16, lab);
  }
  fprintf(f,
          "<line class=\"axis\" x1=\"%d\" x2=\"%d\" y1=\"%d\" y2=\"%d\"/>"
          "<line class=\"axis\" x1=\"%d\" x2=\"%d\" y1=\"%d\" y2=\"%d\"/>\n",
          PL, W - PR, H - PB, H - PB, PL, PL, PT, H - PB);
  fprintf(f,
          "<text class=\"label\" x=\"%d\" y=\"%d\" "
          "text-anchor=\"middle\">%s</text>\n"
          "<text class=\"label\" transform=\"translate(14 %d) rotate(-90)\" "
          "text-anchor=\"middle\">%s</text>\n",
          (PL + W - PR) / 2, H - 8, xlabel, (PT + H - PB) / 2, ylabel);
}

/* One legend entry; k counts entries from the right. */
static void legend(FILE *f, int k, const char *color, const char *name) {
  int x = W - PR - 150 * (k + 1) + 20;
  fprintf(f,
          "<rect x=\"%d\" y=\"8\" width=\"14\" height=\"10\" fill=\"%s\"/>"
          "<text class=\"legend\" x=\"%d\" y=\"17\">",
          x, color, x + 18);
  res__html_esc_short(f, name, 20);
  fputs("<title>", f);
  esc(f, name);
  fputs("</title></text>\n", f);
}

/* One line series; points with a non-finite (or, with skip_neg, negative)
 * y are left out. Dots with a tooltip are drawn when there are few. */
typedef struct series {
  const char *key, *name, *color;
  const double *x, *y;
  int n, skip_neg;
} series;

static int usable(const series *s, int i) {
  return is_num(s->y[i]) && !(s->skip_neg && s->y[i] < 0);
}

static void draw_series(const plot *p, const series *s) {
  FILE *f = p->f;
  int n = 0;
  for (int i = 0; i < s->n; i++)
    n += usable(s, i);
  fprintf(f,
          "<polyline class=\"series\" data-series=\"%s\" data-n=\"%d\" "
          "fill=\"none\" stroke=\"%s\" stroke-width=\"2\" points=\"",
          s->key, n, s->color);
  for (int i = 0, k = 0; i < s->n; i++)
    if (usable(s, i))
      fprintf(f, "%s%.1f,%.1f", k++ ? " " : "", px(p, s->x[i]), py(p, s->y[i]));
  fputs("\"/>\n", f);
  if (n > 120) return;
  for (int i = 0; i < s->n; i++)
    if (usable(s, i))
      fprintf(f,
              "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3\" fill=\"%s\"><title>"
              "step %g: %s %.4g</title></circle>\n",
              px(p, s->x[i]), py(p, s->y[i]), s->color, s->x[i], s->name,
              s->y[i]);
}

/* Axis range over every usable point of the series (x always, y unless
 * fixed by the caller). */
static void series_range(const series *s, int ns, double *x0, double *x1,
                         double *y0, double *y1) {
  *x0 = *y0 = INFINITY, *x1 = *y1 = -INFINITY;
  for (int k = 0; k < ns; k++)
    for (int i = 0; i < s[k].n; i++) {
      if (!usable(&s[k], i)) continue;
      *x0 = fmin(*x0, s[k].x[i]), *x1 = fmax(*x1, s[k].x[i]);
      *y0 = fmin(*y0, s[k].y[i]), *y1 = fmax(*y1, s[k].y[i]);
    }
}

/* Steps as columns: x = step number, one array per /steps field. */
typedef struct step_cols {
  int n;
  double *x, *mean, *max, *correct, *best;
} step_cols;

static void plot_reward(FILE *f, const step_cols *sc) {
  const char *cap = "Reward per step: mean and max";
  series s[2] = {
      {"reward_max", "max", "#e15759", sc->x, sc->max, sc->n, 0},
      {"reward_mean", "mean", "#4e79a7", sc->x, sc->mean, sc->n, 0},
  };
  plot p = {.f = f};
  series_range(s, 2, &p.x0, &p.x1, &p.y0, &p.y1);
  if (!sc->n || !is_num(p.y0)) {
    figure_empty(f, "plot-reward", cap,
                 sc->n ? "No step has a reward yet."
                       : "No policy steps recorded in this file.");
    return;
  }
  p.xstep = nice_range(&p.x0, &p.x1, 1);
  p.ystep = nice_range(&p.y0, &p.y1, 0);
  figure_begin(f, "plot-reward", cap);
  plot_begin(&p, "reward", "step", "reward", 1);
  for (int k = 0; k < 2; k++) {
    legend(f, k, s[k].color, s[k].name);
    draw_series(&p, &s[k]);
  }
  fputs("</svg></figure>\n", f);
}

static void plot_correct(FILE *f, const step_cols *sc) {
  const char *cap = "Correct fraction per step";
  series s = {"correct_frac", "correct", "#59a14f", sc->x,
              sc->correct,    sc->n,     1};
  plot p = {.f = f, .ypct = 1};
  double y0, y1;
  series_range(&s, 1, &p.x0, &p.x1, &y0, &y1);
  if (!sc->n || !is_num(y0)) {
    figure_empty(f, "plot-correct", cap,
                 "No policy steps recorded in this file.");
    return;
  }
  p.xstep = nice_range(&p.x0, &p.x1, 1);
  /* 0% to 100%, unless a (broken) step reports a fraction outside it:
   * then the axis widens rather than drawing off the plot. */
  p.y0 = fmin(0, y0), p.y1 = fmax(1, y1), p.ystep = 0.2;
  if (p.y0 < 0 || p.y1 > 1) p.ystep = nice_range(&p.y0, &p.y1, 0);
  figure_begin(f, "plot-correct", cap);
  plot_begin(&p, "correct", "step", "correct kernels", 1);
  draw_series(&p, &s);
  fputs("</svg></figure>\n", f);
}

/* Best time per step from /steps, with every correct, timed candidate that
 * belongs to a step as a grey dot behind it. */
static void plot_best(FILE *f, const res_reader *r, const step_cols *sc,
                      const char *unit) {
  const char *cap = "Best time against step";
  series s = {"best_time_us", "best time", "#f28e2b", sc->x,
              sc->best,       sc->n,       1};
  plot p = {.f = f};
  series_range(&s, 1, &p.x0, &p.x1, &p.y0, &p.y1);
  int64_t dots = 0;
  for (int64_t i = 0; i < res_count(r); i++) {
    const res_candidate *c = res_get(r, i);
    if (!c->correct || !(c->time_us > 0 && is_num(c->time_us)) || c->step < 0)
      continue;
    dots++;
    p.x0 = fmin(p.x0, (double)c->step), p.x1 = fmax(p.x1, (double)c->step);
    p.y0 = fmin(p.y0, c->time_us), p.y1 = fmax(p.y1, c->time_us);
  }
  if (!is_num(p.y0)) {
    figure_empty(f, "plot-best", cap,
                 sc->n ? "No correct, timed kernel in any step yet."
                       : "No policy steps recorded in this file.");
    return;
  }
  p.xstep = nice_range(&p.x0, &p.x1, 1);
  if (p.y0 > 0 && p.y0 < 0.5 * p.y1) p.y0 = 0;
  p.ystep = nice_range(&p.y0, &p.y1, 0);
  figure_begin(f, "plot-best", cap);
  plot_begin(&p, "best", "step", unit, 1);
  fprintf(f, "<g class=\"cands\" data-n=\"%lld\">\n", (long long)dots);
  for (int64_t i = 0; i < res_count(r); i++) {
    const res_candidate *c = res_get(r, i);
    if (!c->correct || !(c->time_us > 0 && is_num(c->time_us)) || c->step < 0)
      continue;
    fprintf(f,
            "<circle class=\"cand\" cx=\"%.1f\" cy=\"%.1f\" r=\"2.5\">"
            "<title>candidate %lld: %.4g us</title></circle>\n",
            px(&p, (double)c->step), py(&p, c->time_us), (long long)c->id,
            c->time_us);
  }
  fputs("</g>\n", f);
  legend(f, 0, s.color, "best so far");
  legend(f, 1, "#bab0ac", "correct kernel");
  if (sc->n) draw_series(&p, &s);
  fputs("</svg></figure>\n", f);
}

/* Histogram of the median times of correct kernels: about sqrt(n) equal
 * bins (5 to 30) over [min, max]. */
static void plot_hist(FILE *f, const res_reader *r, const char *unit) {
  const char *cap = "Time distribution of correct kernels";
  double lo = INFINITY, hi = -INFINITY;
  int64_t n = 0;
  for (int64_t i = 0; i < res_count(r); i++) {
    const res_candidate *c = res_get(r, i);
    if (!c->correct || !(c->time_us > 0 && is_num(c->time_us))) continue;
    lo = fmin(lo, c->time_us), hi = fmax(hi, c->time_us), n++;
  }
  if (!n) {
    figure_empty(f, "plot-hist", cap,
                 res_count(r) ? "No correct, timed kernel in this file."
                              : "No candidates in this file.");
    return;
  }
  int bins = (int)ceil(sqrt((double)n));
  bins = bins < 5 ? 5 : bins > 30 ? 30 : bins;
  pad_degenerate(&lo, &hi, 0.5);
  double width = (hi - lo) / bins;
  int64_t count[30] = {0}, most = 0;
  for (int64_t i = 0; i < res_count(r); i++) {
    const res_candidate *c = res_get(r, i);
    if (!c->correct || !(c->time_us > 0 && is_num(c->time_us))) continue;
    double q = (c->time_us - lo) / width; /* no int overflow past 2^31 */
    count[q < 1 ? 0 : q >= bins ? bins - 1 : (int)q]++;
  }
  for (int b = 0; b < bins; b++)
    most = count[b] > most ? count[b] : most;
  plot p = {.f = f, .x0 = lo, .x1 = hi, .y0 = 0, .y1 = (double)most};
  p.xstep = nice_step(hi - lo, 5);
  p.ystep = nice_range(&p.y0, &p.y1, 1);
  figure_begin(f, "plot-hist", cap);
  plot_begin(&p, "hist", unit, "kernels", 0);
  double first = ceil(lo / p.xstep) * p.xstep;
  int nt = tick_count(first, hi, p.xstep);
  for (int i = 0; i < nt; i++) {
    double x = first + i * p.xstep;
    if (x > hi) break;
    char lab[32];
    tick_label(lab, sizeof lab, x, p.xstep, 0);
    fprintf(f,
            "<text class=\"tick\" x=\"%.1f\" y=\"%d\" "
            "text-anchor=\"middle\">%s</text>\n",
            px(&p, x), H - PB + 16, lab);
  }
  for (int b = 0; b < bins; b++) {
    double a = lo + b * width, top = py(&p, (double)count[b]);
    fprintf(f,
            "<rect class=\"bar\" data-count=\"%lld\" x=\"%.1f\" y=\"%.1f\" "
            "width=\"%.1f\" height=\"%.1f\" fill=\"#4e79a7\"><title>%.4g to "
            "%.4g: %lld kernel%s</title></rect>\n",
            (long long)count[b], px(&p, a) + 1, top,
            px(&p, a + width) - px(&p, a) - 2, H - PB - top, a, a + width,
            (long long)count[b], count[b] == 1 ? "" : "s");
  }
  fputs("</svg></figure>\n", f);
}

/* Mean of each reward component over the candidates that have it, as
 * horizontal bars from zero. */
static void plot_comp_mean(FILE *f, const res_reader *r) {
  const char *cap = "Reward components: mean per component";
  int k = res_component_count(r);
  if (!k || !res_count(r)) {
    figure_empty(f, "plot-components", cap,
                 k ? "No candidates in this file."
                   : "No reward components in this file.");
    return;
  }
  double *mean = calloc((size_t)k, sizeof *mean);
  int64_t *cnt = calloc((size_t)k, sizeof *cnt);
  if (!mean || !cnt) {
    free(mean), free(cnt);
    figure_empty(f, "plot-components", cap, "Out of memory.");
    return;
  }
  /* a running mean, each term no larger than the largest value: a plain
   * sum of four 1e308 components is infinite (the report review's file
   * drew width="inf"), and so is 1e308 - -1e308 */
  for (int64_t i = 0; i < res_count(r); i++) {
    const double *v = res_components(r, i);
    for (int j = 0; v && j < k; j++)
      if (is_num(v[j])) {
        double c = (double)++cnt[j];
        mean[j] = mean[j] - mean[j] / c + v[j] / c;
      }
  }
  plot p = {.f = f, .y0 = 0, .y1 = 1, .ystep = 1};
  p.x0 = p.x1 = 0;
  for (int j = 0; j < k; j++)
    p.x0 = fmin(p.x0, mean[j]), p.x1 = fmax(p.x1, mean[j]);
  p.xstep = nice_range(&p.x0, &p.x1, 0);
  /* The plot's y axis is unused: rows are laid out by hand, so draw the
   * frame with an empty y tick set. */
  figure_begin(f, "plot-components", cap);
  fprintf(f,
          "<svg class=\"chart\" data-plot=\"components\" viewBox=\"0 0 %d "
          "%d\" width=\"%d\" height=\"%d\" role=\"img\">\n",
          W, H, W, H);
  int left = 130;
  double span = p.x1 - p.x0, plotw = W - PR - left;
#define CX(v) coord(left + (axis_clamp(v) - p.x0) / span * plotw, left)
  int nt = tick_count(p.x0, p.x1, p.xstep);
  for (int i = 0; i < nt; i++) {
    double x = p.x0 + i * p.xstep;
    char lab[32];
    tick_label(lab, sizeof lab, x, p.xstep, 0);
    fprintf(f,
            "<line class=\"grid\" x1=\"%.1f\" x2=\"%.1f\" y1=\"%d\" "
            "y2=\"%d\"/><text class=\"tick\" x=\"%.1f\" y=\"%d\" "
            "text-anchor=\"middle\">%s</text>\n",
            CX(x), CX(x), PT, H - PB, CX(x), H - PB + 16, lab);
  }
  double row = (double)(H - PT - PB) / k, bar = fmin(row * 0.7, 28);
  for (int j = 0; j < k; j++) {
    double y = PT + row * j + (row - bar) / 2;
    double a = CX(fmin(0, mean[j])), b = CX(fmax(0, mean[j]));
    fprintf(f, "<text class=\"tick\" x=\"%d\" y=\"%.1f\" text-anchor=\"end\">",
            left - 6, y + bar / 2 + 4);
    res__html_esc_short(f, res_component_name(r, j), 18);
    fprintf(f,
            "</text><rect class=\"comp\" data-component=\"%d\" "
            "data-mean=\"%.6g\" x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" "
            "height=\"%.1f\" fill=\"%s\"><title>",
            j, mean[j], a, y, fmax(b - a, 1), bar, PALETTE(j));
    esc(f, res_component_name(r, j));
    fprintf(f, ": mean %.4g over %lld candidates</title></rect>\n", mean[j],
            (long long)cnt[j]);
  }
  fprintf(f,
          "<line class=\"axis\" x1=\"%.1f\" x2=\"%.1f\" y1=\"%d\" y2=\"%d\"/>"
          "<text class=\"label\" x=\"%.1f\" y=\"%d\" "
          "text-anchor=\"middle\">mean value (candidates that have the "
          "component)</text>\n</svg></figure>\n",
          CX(0), CX(0), PT, H - PB, left + plotw / 2, H - 8);
#undef CX
  free(mean), free(cnt);
}

static int by_reward(const void *a, const void *b) {
  const res_candidate *x = *(const res_candidate *const *)a,
                      *y = *(const res_candidate *const *)b;
  if (x->reward != y->reward) return x->reward > y->reward ? -1 : 1;
  return x->id < y->id ? -1 : 1;
}

/* The components of the (up to) 12 highest-reward candidates as stacked
 * columns: positive parts stack up from zero, negative parts down; a black
 * tick marks the stored total. */
static void plot_comp_top(FILE *f, const res_reader *r,
                          const res_candidate **rows) {
  const char *cap = "Reward components of the top candidates by reward";
  int k = res_component_count(r), m = 0;
  for (int64_t i = 0; i < res_count(r); i++)
    if (is_num(res_get(r, i)->reward)) rows[m++] = res_get(r, i);
  if (!k || !m) {
    figure_empty(f, "plot-stacked", cap,
                 k ? "No scored candidates in this file."
                   : "No reward components in this file.");
    return;
  }
  qsort(rows, (size_t)m, sizeof *rows, by_reward);
  if (m > 12) m = 12;
  plot p = {.f = f, .x0 = 0, .x1 = m, .xstep = 1, .y0 = 0, .y1 = 0};
  for (int c = 0; c < m; c++) {
    const double *v = res_components(r, rows[c]->id);
    double up = 0, down = 0;
    for (int j = 0; v && j < k; j++)
      if (is_num(v[j])) *(v[j] > 0 ? &up : &down) += v[j];
    p.y0 = fmin(p.y0, fmin(down, rows[c]->reward));
    p.y1 = fmax(p.y1, fmax(up, rows[c]->reward));
  }
  p.ystep = nice_range(&p.y0, &p.y1, 0);
  figure_begin(f, "plot-stacked", cap);
  plot_begin(&p, "stacked", "candidate id (highest reward first)", "reward", 0);
  for (int j = 0; j < k && j < 3; j++)
    legend(f, 2 - j, PALETTE(j), res_component_name(r, j));
  double colw = (double)(W - PL - PR) / m, barw = fmin(colw * 0.7, 40);
  for (int c = 0; c < m; c++) {
    const double *v = res_components(r, rows[c]->id);
    double x = PL + colw * c + (colw - barw) / 2, up = 0, down = 0;
    fprintf(f, "<g class=\"stack\" data-id=\"%lld\">\n",
            (long long)rows[c]->id);
    for (int j = 0; v && j < k; j++) {
      if (!is_num(v[j]) || v[j] == 0) continue;
      double *base = v[j] > 0 ? &up : &down, a = *base, b = *base + v[j];
      *base = b;
      fprintf(f,
              "<rect class=\"part\" x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" "
              "height=\"%.1f\" fill=\"%s\"><title>candidate %lld, ",
              x, py(&p, fmax(a, b)), barw, fabs(py(&p, a) - py(&p, b)),
              PALETTE(j), (long long)rows[c]->id);
      esc(f, res_component_name(r, j));
      fprintf(f, ": %.4g</title></rect>\n", v[j]);
    }
    fprintf(f,
            "<line class=\"total\" x1=\"%.1f\" x2=\"%.1f\" y1=\"%.1f\" "
            "y2=\"%.1f\"><title>candidate %lld: reward %.4g</title></line>\n"
            "<text class=\"tick\" x=\"%.1f\" y=\"%d\" "
            "text-anchor=\"middle\">%lld</text></g>\n",
            x - 3, x + barw + 3, py(&p, rows[c]->reward),
            py(&p, rows[c]->reward), (long long)rows[c]->id, rows[c]->reward,
            x + barw / 2, H - PB + 16, (long long)rows[c]->id);
  }
  fprintf(f,
          "<line class=\"axis\" x1=\"%d\" x2=\"%d\" y1=\"%.1f\" "
          "y2=\"%.1f\"/>\n</svg></figure>\n",
          PL, W - PR, py(&p, 0), py(&p, 0));
}

/* ---- several files: best time against evaluations ---- */

/* Best correct, unflagged time so far after each candidate of r, in id
 * order (the order of evaluation); -1 before the first. best (n). */
static void best_so_far(const res_reader *r, double *best, int64_t n) {
  double b = -1;
  for (int64_t i = 0; i < n; i++) {
    const res_candidate *c = res_get(r, i);
    if (c->correct && c->time_us > 0 && !c->flags && (b < 0 || c->time_us < b))
      b = c->time_us;
    best[i] = b;
  }
}

void res__plot_compare(FILE *f, const res_reader *const *runs,
                       const char *const *names, const unsigned char *left_out,
                       int n_runs, const char *unit) {
  const char *cap = "Best time so far against evaluations, one line per file";
  int64_t most = 0, total = 0;
  for (int k = 0; k < n_runs; k++) {
    most = res_count(runs[k]) > most ? res_count(runs[k]) : most;
    total += res_count(runs[k]);
  }
  double *best = malloc(sizeof *best * (size_t)(total ? total : 1));
  if (!best) {
    figure_empty(f, "plot-compare", cap, "Out of memory.");
    return;
  }
  plot p = {.f = f,
            .x0 = 0,
            .x1 = (double)most,
            .y0 = INFINITY,
            .y1 = -INFINITY,
            .ylog = 1};
  double *b = best;
  for (int k = 0; k < n_runs; k++) {
    best_so_far(runs[k], b, res_count(runs[k]));
    for (int64_t i = 0; i < res_count(runs[k]) && !left_out[k]; i++)
      if (b[i] > 0 && is_num(b[i]))
        p.y0 = fmin(p.y0, log10(b[i])), p.y1 = fmax(p.y1, log10(b[i]));
    b += res_count(runs[k]);
  }
  int drawn = 0;
  for (int k = 0; k < n_runs; k++)
    drawn += !left_out[k];
  if (!is_num(p.y0) || !is_num(p.y1)) {
    free(best);
    figure_empty(f, "plot-compare", cap,
                 drawn ? "No file holds a correct, timed kernel yet."
                       : "No two files' times compare (see above).");
    return;
  }
  /* Whole 1-2-5 steps around the data, so the ends carry ticks. */
  static const double steps[] = {1, 2, 5, 10};
  double lo = pow(10, p.y0), hi = pow(10, p.y1);
  double dlo = pow(10, floor(p.y0)), dhi = pow(10, floor(p.y1));
  int i = 2;
  while (i > 0 && steps[i] * dlo > lo * (1 + 1e-9))
    i--;
  p.y0 = log10(steps[i] * dlo);
  i = 0;
  while (i < 3 && steps[i] * dhi < hi * (1 - 1e-9))
    i++;
  p.y1 = log10(steps[i] * dhi);
  if (!(p.y1 > p.y0)) p.y0 -= 0.15, p.y1 += 0.15;
  p.xstep = nice_range(&p.x0, &p.x1, 1);
  figure_begin(f, "plot-compare", cap);
  plot_begin(&p, "compare", "evaluations (candidates in the order evaluated)",
             unit, 1);
  b = best;
  for (int k = 0; k < n_runs; k++) {
    int64_t n = res_count(runs[k]), pts = 0;
    if (left_out[k]) { /* its times on this axis would read as comparable */
      b += n;
      continue;
    }
    fprintf(f,
            "<polyline class=\"series\" data-series=\"compare-%d\" "
            "data-evaluations=\"%lld\" data-best=\"%.6g\" fill=\"none\" "
            "stroke=\"%s\" stroke-width=\"2\" points=\"",
            k, (long long)n, n ? b[n - 1] : -1.0, PALETTE(k));
    /* A staircase: level until the evaluation that improves it. */
    for (int64_t j = 0; j < n; j++) {
      if (b[j] <= 0 || (j > 0 && b[j] == b[j - 1] && j + 1 < n)) continue;
      if (j > 0 && b[j - 1] > 0 && b[j] != b[j - 1])
        fprintf(f, "%s%.1f,%.1f", pts++ ? " " : "", px(&p, (double)j + 1),
                py(&p, log10(b[j - 1])));
      fprintf(f, "%s%.1f,%.1f", pts++ ? " " : "", px(&p, (double)j + 1),
              py(&p, log10(b[j])));
    }
    fputs("\"><title>", f);
    esc(f, names[k]);
    fputs("</title></polyline>\n", f);
    b += n;
  }
  fputs("</svg>\n<ul class=\"legend-list\">\n", f);
  for (int k = 0; k < n_runs; k++) {
    if (left_out[k]) continue;
    fprintf(f,
            "<li data-series=\"compare-%d\"><svg class=\"swatch\" "
            "width=\"14\" height=\"10\"><rect width=\"14\" height=\"10\" "
            "fill=\"%s\"/></svg> ",
            k, PALETTE(k));
    esc(f, names[k]);
    fputs("</li>\n", f);
  }
  fputs("</ul></figure>\n", f);
  free(best);
}

int res__report_plots(FILE *f, const res_reader *r, const char *unit, char *why,
                      size_t whylen) {
  int64_t n = res_count(r), ns = res_step_count(r);
  double *cols = malloc((size_t)(ns ? ns : 1) * 5 * sizeof *cols);
  const res_candidate **rows = malloc((size_t)(n ? n : 1) * sizeof *rows);
  if (!cols || !rows) {
    free(cols), free(rows);
    snprintf(why, whylen, "out of memory for %lld candidates, %lld steps",
             (long long)n, (long long)ns);
    return RES_EENV;
  }
  step_cols sc = {.n = (int)ns,
                  .x = cols,
                  .mean = cols + ns,
                  .max = cols + 2 * ns,
                  .correct = cols + 3 * ns,
                  .best = cols + 4 * ns};
  for (int64_t i = 0; i < ns; i++) {
    const res_step *s = res_get_step(r, i);
    sc.x[i] = (double)s->step, sc.mean[i] = s->reward_mean;
    sc.max[i] = s->reward_max, sc.correct[i] = s->correct_frac;
    sc.best[i] = s->best_time_us;
  }
  plot_reward(f, &sc);
  plot_correct(f, &sc);
  plot_best(f, r, &sc, unit);
  plot_hist(f, r, unit);
  plot_comp_mean(f, r);
  plot_comp_top(f, r, rows);
  free(cols), free(rows);
  return RES_OK;
}
