/*
 * results/task.c — what a results file's candidates were timed for: their
 * task (dtype and target shape) and backend, and whether two files' times
 * can be compared at all (res_task_canonical, res_tasks, res_comparable,
 * res_compare_reference in results.h).
 *
 * The task lives in each candidate record (`task`, "fp32_256x256x256"),
 * not in a root attribute: a campaign's config text names its shape only
 * as Lua, and eval's files have the config "kernlab eval" and no shape at
 * all. `kernlab run --resume` already judges a file by its records' task
 * (lab/run_resume.c); everything else that asks "is this the same task" goes
 * through here so that the answers agree. Files from before the MxNxK
 * names call a cube's task "fp32_256": the same task as
 * "fp32_256x256x256", and compared as such.
 *
 * A time is only comparable with one of the same task on the same backend:
 * a 64^3 matmul is 16x less work than a 256^3 one, and cpu-emu times are
 * CPU times. lab/compare.c ("not comparable" in `kernlab search`) and the
 * report on several files ask res_comparable. Not done here: deciding what
 * a command does about a mismatch.
 */
#include "results/internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Parses digits at *p as one size >= 1; advances *p past them. */
static int parse_size(const char **p, long *v) {
  if (!(**p >= '0' && **p <= '9')) return -1;
  char *end;
  errno = 0;
  *v = strtol(*p, &end, 10);
  if (errno || *v < 1 || *v > (1L << 30)) return -1;
  *p = end;
  return 0;
}

void res_task_canonical(const char *task, char *out, size_t n) {
  size_t d = strcspn(task, "_");
  long s[3];
  const char *p = task + d + 1;
  int ok = task[d] == '_' && d > 0 && !parse_size(&p, &s[0]);
  if (ok && !*p) { /* "fp32_256": an older file's name for a cube */
    s[1] = s[2] = s[0];
  } else {
    ok = ok && *p++ == 'x' && !parse_size(&p, &s[1]) && *p++ == 'x' &&
         !parse_size(&p, &s[2]) && !*p;
  }
  if (ok)
    snprintf(out, n, "%.*s_%ldx%ldx%ld", (int)d, task, s[0], s[1], s[2]);
  else
    snprintf(out, n, "%s", task);
}

int res_tasks(const res_reader *r, res_task_count *out, int max) {
  int distinct = 0, more = 0;
  char name[RES_TASK_LEN];
  for (int64_t i = 0; i < res_count(r); i++) {
    res_task_canonical(res_get(r, i)->task, name, sizeof name);
    int k = 0;
    while (k < distinct && strcmp(out[k].task, name))
      k++;
    if (k < distinct) {
      out[k].count++;
    } else if (distinct < max) {
      snprintf(out[k].task, sizeof out[k].task, "%s", name);
      out[k].count = 1;
      distinct++;
    } else {
      more = 1; /* a task past the max'th: said, not kept */
    }
  }
  return distinct + more;
}

/* How many (task, backend) pairs r's candidates have: 0 (none), 1 (with
 * it in task and backend) or 2 (several; the first two named in kinds). */
static int timed_for(const res_reader *r, char *task, char *backend,
                     size_t backend_len, char *kinds, size_t kinds_len) {
  int n = 0;
  char name[RES_TASK_LEN];
  for (int64_t i = 0; i < res_count(r) && n < 2; i++) {
    const res_candidate *c = res_get(r, i);
    res_task_canonical(c->task, name, sizeof name);
    if (n == 0) {
      snprintf(task, RES_TASK_LEN, "%s", name);
      snprintf(backend, backend_len, "%.*s", (int)sizeof c->backend,
               c->backend);
      n = 1;
    } else if (strcmp(name, task) ||
               strncmp(c->backend, backend, sizeof c->backend)) {
      snprintf(kinds, kinds_len, "among them %s on %s and %s on %.*s", task,
               backend, name, (int)sizeof c->backend, c->backend);
      n = 2;
    }
  }
  return n;
}

int res_comparable(const res_reader *a, const char *name_a, const res_reader *b,
                   const char *name_b, char *why, size_t whylen) {
  char ta[RES_TASK_LEN], tb[RES_TASK_LEN], ba[17], bb[17], kinds[256];
  int na = timed_for(a, ta, ba, sizeof ba, kinds, sizeof kinds);
  if (na == 2) {
    snprintf(why, whylen,
             "not comparable: %s holds candidates of several tasks or "
             "backends (%s)",
             name_a, kinds);
    return 0;
  }
  int nb = timed_for(b, tb, bb, sizeof bb, kinds, sizeof kinds);
  if (nb == 2) {
    snprintf(why, whylen,
             "not comparable: %s holds candidates of several tasks or "
             "backends (%s)",
             name_b, kinds);
    return 0;
  }
  if (na && nb && (strcmp(ta, tb) || strcmp(ba, bb))) {
    snprintf(why, whylen, "not comparable: %s is %s on %s, %s is %s on %s",
             name_a, ta, ba, name_b, tb, bb);
    return 0;
  }
  return 1;
}

int res_compare_reference(const res_reader *const *runs, int n) {
  for (int k = 0; k < n; k++)
    if (res_count(runs[k]) > 0) return k;
  return 0;
}
