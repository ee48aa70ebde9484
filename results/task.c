/*
 * results/task.c — what a results file's candidates were timed for: their
 * task, i.e. dtype and target shape (res_task_canonical, res_tasks in
 * results.h).
 *
 * The task lives in each candidate record (`task`, "fp32_256x256x256"),
 * not in a root attribute: a campaign's config text names its shape only
 * as Lua, and eval's files have the config "kernlab eval" and no shape at
 * all. `kernlab run --resume` already judges a file by its records' task
 * (lab/run_cmd.c); everything else that asks "is this the same task" goes
 * through here so that the answers agree. Files from before the MxNxK
 * names call a cube's task "fp32_256": the same task as
 * "fp32_256x256x256", and compared as such.
 *
 * A time is only comparable with one of the same task: a 64^3 matmul is
 * 16x less work than a 256^3 one. Not done here: deciding what a command
 * does about a mismatch.
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
