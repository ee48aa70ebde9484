/*
 * lab/run_queue.c — the campaign's evaluation queue and its progress bar
 * (lab/run_cmd.c runs the loop).
 */
#include "lab/run_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- evaluation overlapping sampling: a queue served by one thread per
 * sandbox slot ----
 *
 * The slot threads live as long as the campaign (a slot's workers are tied
 * to the thread that started them through PR_SET_PDEATHSIG, so long-lived
 * threads also keep warm workers warm). The sampler pushes a candidate as
 * soon as its row stops (pl_generate_notify), so the first finished
 * completions are compiled and run while the rest of the group, and the
 * next groups, are still being sampled. */

static void *eval_thread(void *arg) {
  eval_worker *w = arg;
  eval_queue *q = w->q;
  kl_executor ex;
  sbx_slot_executor(w->slot, &ex);
  pthread_mutex_lock(&q->mu);
  for (;;) {
    while (q->taken == q->pushed && !q->quit)
      pthread_cond_wait(&q->more, &q->mu);
    if (q->taken == q->pushed) break; /* quit and nothing left */
    candidate *c = &q->c[q->order[q->taken++]];
    kl_eval_options opts = q->opts;
    opts.exec = &ex;
    pthread_mutex_unlock(&q->mu);
    c->rc = kl_eval_source(c->label, c->src, c->len, &opts, &c->r);
    pthread_mutex_lock(&q->mu);
    q->finished++;
    pthread_cond_signal(&q->done);
  }
  pthread_mutex_unlock(&q->mu);
  return NULL;
}

/* Starts one thread per slot. Returns how many started (0: the caller
 * evaluates on its own thread in eval_wait). */
int eval_start(eval_queue *q, eval_worker *w, sbx_slot **slots, int n_slots) {
  int started = 0;
  for (int i = 0; i < n_slots; i++) {
    w[i] = (eval_worker){q, slots[i], 0, 0};
    if (pthread_create(&w[i].tid, NULL, eval_thread, &w[i]) != 0) break;
    w[i].started = 1;
    started++;
  }
  return started;
}

void eval_begin_step(eval_queue *q, uint64_t seed) {
  pthread_mutex_lock(&q->mu);
  q->pushed = q->taken = q->finished = 0;
  q->opts.seed = seed;
  pthread_mutex_unlock(&q->mu);
}

void eval_push(eval_queue *q, int k) {
  pthread_mutex_lock(&q->mu);
  q->order[q->pushed++] = k;
  pthread_cond_signal(&q->more);
  pthread_mutex_unlock(&q->mu);
}

int eval_finished(eval_queue *q) {
  pthread_mutex_lock(&q->mu);
  int f = q->finished;
  pthread_mutex_unlock(&q->mu);
  return f;
}

void eval_stop(eval_queue *q, eval_worker *w, int n) {
  pthread_mutex_lock(&q->mu);
  q->quit = 1;
  pthread_cond_broadcast(&q->more);
  pthread_mutex_unlock(&q->mu);
  for (int i = 0; i < n; i++)
    if (w[i].started) pthread_join(w[i].tid, NULL);
}

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
  candidate *cd = &s->cands[k];
  const int32_t *t = gn->tokens + (size_t)row * gn->max_new;
  int shown = gn->stop[row] == PL_STOP_EOS ? L - 1 : L;
  snprintf(cd->label, sizeof cd->label, "s%d.g%d.i%d", s->step, s->group, row);
  if (pl_tok_decode(s->tok, t, (size_t)shown, &cd->src, &cd->len, s->why,
                    sizeof s->why) != PL_OK) {
    s->failed = 1;
    /* Still queued, as an empty source: it fails to compile like any
     * garbage, and the step reports the decode error. */
    free(cd->src);
    cd->src = calloc(1, 1);
    cd->len = 0;
  }
  eval_push(s->q, k);
  s->prog->sampled++;
  s->prog->evaluated = eval_finished(s->q);
  progress_draw(s->prog);
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
