/*
 * lab/eval_glue.c — what `kernlab eval` hands to the other modules: a
 * kl_result as the reward engine's rw_candidate, and as the results store's
 * res_candidate. The lab is the only place that knows all three shapes
 * (kernels/ knows nothing of rewards, reward/ nothing of CUDA).
 */
#include "lab/lab.h"

#include <math.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

int lab_flag_names(uint64_t flags, const char **names, int max) {
  int n = 0;
  for (int bit = 0; bit < 64 && n < max; bit++) {
    if (!(flags & ((uint64_t)1 << bit))) continue;
    const char *name = kl_flag_name(bit);
    names[n++] = name ? name : "unknown_flag";
  }
  return n;
}

void lab_rw_candidate(const kl_result *r, long source_len, const char **names,
                      int max_names, rw_candidate *c) {
  rw_candidate_init(c);
  c->compiled = r->compiled;
  c->correct = r->correct;
  c->status = r->status;
  c->errors = r->error;
  c->backend = r->backend;
  if (r->n_checks > 0) {
    c->max_rel_err = r->max_rel_err;
    c->max_abs_err = r->max_abs_err;
  }
  c->time_us = r->time_us;
  c->baseline_us = r->baseline_us;
  c->gflops = r->gflops;
  c->regs = r->res.regs;
  c->smem_bytes = r->res.smem_bytes;
  c->spill_bytes = r->res.spill_stores >= 0 && r->res.spill_loads >= 0
                       ? r->res.spill_stores + r->res.spill_loads
                       : -1;
  c->n_flags = lab_flag_names(r->flags, names, max_names);
  c->flags = names;
  c->source_len = source_len;
  c->completion_len = source_len;
}

void lab_res_candidate(const kl_result *r, const rw_components *reward,
                       const char *task, res_candidate *c) {
  memset(c, 0, sizeof *c);
  c->step = -1;
  c->group = -1;
  c->sample = -1;
  res_strset(c->task, sizeof c->task, task);
  res_strset(c->label, sizeof c->label, r->file);
  res_strset(c->backend, sizeof c->backend, r->backend);
  res_strset(c->status, sizeof c->status, r->status);
  res_strset(c->error, sizeof c->error, r->error);
  c->timed_launches = r->timed_launches;
  c->compiled = (uint8_t)r->compiled;
  c->correct = (uint8_t)r->correct;
  c->max_rel_err = r->n_checks ? r->max_rel_err : -1;
  c->max_abs_err = r->n_checks ? r->max_abs_err : -1;
  c->time_us = r->time_us;
  c->time_min_us = r->time_min_us;
  c->time_max_us = r->time_max_us;
  c->baseline_us = r->baseline_us;
  c->gflops = r->gflops;
  c->reward = reward ? reward->total : NAN;
  c->regs = r->res.regs;
  c->smem_bytes = r->res.smem_bytes;
  c->spill_bytes = r->res.spill_stores >= 0 && r->res.spill_loads >= 0
                       ? r->res.spill_stores + r->res.spill_loads
                       : -1;
  c->stack_bytes = r->res.stack_bytes;
  if (r->has_launch) {
    c->block_x = r->launch.block_x;
    c->block_y = r->launch.block_y;
    c->tile_rows = r->launch.tile_rows;
    c->tile_cols = r->launch.tile_cols;
    c->dyn_smem_bytes = r->launch.dyn_smem_bytes;
  } else {
    c->block_x = c->block_y = c->tile_rows = c->tile_cols = -1;
    c->dyn_smem_bytes = -1;
  }
  if (r->n_checks > 0) {
    c->shape_m = r->checks[0].shape.M;
    c->shape_n = r->checks[0].shape.N;
    c->shape_k = r->checks[0].shape.K;
  } else {
    /* never checked (a compile error, a timeout): the target shape is the
     * task's, which show printed as "target 0x0x0" */
    char canon[RES_TASK_LEN];
    res_task_canonical(task, canon, sizeof canon);
    int m, n, k;
    if (sscanf(canon, "fp32_%dx%dx%d", &m, &n, &k) == 3) {
      c->shape_m = m;
      c->shape_n = n;
      c->shape_k = k;
    }
  }
  c->flags = r->flags;
  c->seed = r->seed;
  c->compile_ms = r->compile_ms;
  c->wall_unix = (double)time(NULL);
  if (reward)
    res_strset(c->reward_sha256, sizeof c->reward_sha256,
               reward->script_sha256);
}
