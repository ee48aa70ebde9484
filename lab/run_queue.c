/*
 * lab/run_queue.c — evaluation overlapping sampling, and the progress bar
 * (lab/run_cmd.c runs the loop). The sampler calls on_row_done as soon as
 * a row stops (pl_generate_notify); the row's completion is decoded and
 * queued on the evaluator (lab/evaluator.c), whose slot threads compile
 * and run it while the rest of the group, and the next groups, are still
 * being sampled.
 */
#include "lab/run_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- progress: a bar redrawn in place on a terminal, nothing otherwise
 * (the one line per step is printed either way) ---- */

void progress_draw(const progress *p) {
  if (!p->tty) return;
  /* The campaign's fraction done: finished steps, plus this step's share
   * (sampling and evaluation as halves). */
  double in_step =
      p->n_cand ? 0.5 * (p->sampled + p->evaluated) / p->n_cand : 0;
  double frac = (p->step + in_step) / (p->steps > 0 ? p->steps : 1);
  if (frac > 1) frac = 1;
  char bar[31], eta[32];
  int fill = (int)(frac * 30 + 0.5);
  for (int i = 0; i < 30; i++)
    bar[i] = i < fill ? '#' : '.';
  bar[30] = 0;
  lab_fmt_eta(eta, sizeof eta,
              p->per_step > 0 ? p->per_step * (p->steps - p->step - in_step)
                              : -1);
  printf("\r[%s] %3.0f%%  step %d/%d  sampled %d/%d  evaluated %d/%d  ETA "
         "%s\033[K",
         bar, 100 * frac, p->step + 1, p->steps, p->sampled, p->n_cand,
         p->evaluated, p->n_cand, eta);
  fflush(stdout);
}

void progress_clear(const progress *p) {
  if (p->tty) fputs("\r\033[K", stdout);
}

/* A finished row: completion up to <|eos|> -> source text -> the queue. */
void on_row_done(void *ctx, const pl_generation *gn, int row) {
  row_sink *s = ctx;
  int k = s->group * s->G + row, L = gn->lengths[row];
  const int32_t *t = gn->tokens + (size_t)row * gn->max_new;
  int shown = gn->stop[row] == PL_STOP_EOS ? L - 1 : L;
  snprintf(s->labels[k], sizeof s->labels[k], "s%d.g%d.i%d", s->step, s->group,
           row);
  char *src = NULL;
  size_t len = 0;
  if (pl_tok_decode(s->tok, t, (size_t)shown, &src, &len, s->why,
                    sizeof s->why) != PL_OK) {
    s->failed = 1;
    /* Still queued, as an empty source: it fails to compile like any
     * garbage, and the step reports the decode error. */
    free(src);
    src = calloc(1, 1);
    len = 0;
  }
  s->items[k] = (lab_eval_item){.label = s->labels[k], .src = src, .len = len};
  lab_evaluator_push(s->ev, k);
  s->prog->sampled++;
  s->prog->evaluated = lab_evaluator_finished(s->ev);
  progress_draw(s->prog);
}

void progress_tick(void *ctx, int finished) {
  progress *p = ctx;
  p->evaluated = finished;
  progress_draw(p);
}

void lab_fmt_eta(char *buf, size_t n, double s) {
  if (s < 0 || !isfinite(s))
    snprintf(buf, n, "-");
  else if (s < 90)
    snprintf(buf, n, "%.0fs", s);
  else if (s < 5400)
    snprintf(buf, n, "%dm%02ds", (int)s / 60, (int)s % 60);
  else
    snprintf(buf, n, "%dh%02dm", (int)s / 3600, (int)s / 60 % 60);
}
