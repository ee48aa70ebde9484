/*
 * tests/unit/results_gen.h — deterministic synthetic candidates for the
 * results store tests: candidate i's record, source, timing samples and
 * reward components are a pure function of i, so a test that only knows how
 * many appends completed can check every byte the file holds.
 *
 * Every 4th candidate reuses the source of candidate i - 1 (dedup); from
 * candidate 10 on a third component, "speed_bonus", appears (a hot reload
 * that adds a column).
 */
#ifndef RESULTS_GEN_H
#define RESULTS_GEN_H

#include "results/results.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const gen_flag_names[] = {"nan_output", "canary_touched",
                                             "input_modified", "timer_read"};

#if defined(__GNUC__)
#define GEN_MAYBE_UNUSED __attribute__((unused))
#else
#define GEN_MAYBE_UNUSED
#endif

static int64_t gen_source_index(int64_t i) {
  return (i % 4 == 3) ? i - 1 : i;
}

/* Writes candidate i's source into buf (cap bytes); returns its length. */
static size_t gen_source(int64_t i, char *buf, size_t cap) {
  int64_t s = gen_source_index(i);
  int tile = 8 << (s % 3);
  int n = snprintf(buf, cap,
                   "// candidate %lld\n"
                   "KL_LAUNCH(%d, %d, %d, %d, 0);\n"
                   "extern \"C\" __global__ void matmul(const float* A, const "
                   "float* B, float* C, int M, int N, int K) {\n"
                   "  int r = blockIdx.y * %d + threadIdx.y;\n"
                   "  int c = blockIdx.x * %d + threadIdx.x;\n"
                   "  if (r >= M || c >= N) return;\n"
                   "  float acc = 0.f;\n"
                   "  for (int k = 0; k < K; ++k) acc += A[r * K + k] * "
                   "B[k * N + c]; // unroll %lld\n"
                   "  C[r * N + c] = acc;\n"
                   "}\n",
                   (long long)s, tile, tile, tile, tile, tile, tile,
                   (long long)(s % 5));
  return (size_t)n < cap ? (size_t)n : cap - 1;
}

static int gen_samples(int64_t i, double *out) {
  int n = (int)(i % 6); /* 0..5 samples; candidates with 0 were not timed */
  for (int k = 0; k < n; k++)
    out[k] = 100.0 + (double)i + 0.25 * k;
  return n;
}

static int gen_components(int64_t i, const char **names, double *values) {
  static const char *all[] = {"correctness", "speed", "speed_bonus"};
  int n = i >= 10 ? 3 : 2;
  for (int k = 0; k < n; k++) {
    names[k] = all[k];
    values[k] = (double)i * (k + 1) - 0.5;
  }
  return n;
}

static void gen_candidate(int64_t i, res_candidate *c) {
  memset(c, 0, sizeof *c);
  c->step = i / 8;
  c->group = (int32_t)(i % 8) / 4;
  c->sample = (int32_t)(i % 4);
  snprintf(c->task, sizeof c->task, "fp32_%d", 256);
  snprintf(c->label, sizeof c->label, "sample-%lld.cu", (long long)i);
  snprintf(c->backend, sizeof c->backend, "cpu-emu");
  c->compiled = i % 7 != 5;
  c->correct = c->compiled && i % 5 != 4;
  snprintf(c->status, sizeof c->status, "%s",
           !c->compiled ? "compile_error"
           : c->correct ? "ok"
                        : "wrong");
  c->max_rel_err = c->correct ? 1e-7 * (double)(i % 3) : 0.5;
  c->max_abs_err = c->max_rel_err * 2;
  c->time_us = c->compiled ? 100.0 + (double)i : -1;
  c->time_min_us = c->compiled ? 99.0 + (double)i : -1;
  c->time_max_us = c->compiled ? 101.0 + (double)i : -1;
  c->baseline_us = 400.0;
  c->gflops = c->compiled ? 2.0 * 256 * 256 * 256 / (c->time_us * 1e3) : -1;
  c->reward = (double)i * 3 - 1.0;
  c->regs = 32 + (int32_t)(i % 16);
  c->smem_bytes = (int32_t)(i % 3) * 4096;
  c->spill_bytes = 0;
  c->stack_bytes = -1;
  c->block_x = c->block_y = 16;
  c->tile_rows = c->tile_cols = 16;
  c->shape_m = c->shape_n = c->shape_k = 256;
  c->flags = (uint64_t)(i % 9 == 8) << 1 | (uint64_t)(i % 11 == 10);
  c->seed = 1234 + (uint64_t)i;
  c->compile_ms = 12.5;
  c->wall_unix = 1.7e9 + (double)i;
  snprintf(c->reward_sha256, sizeof c->reward_sha256, "%064d", 7);
  /* i % 6 samples (gen_samples), each the mean of a batch of 4 */
  c->timed_launches = (int32_t)(i % 6) * 4;
}

static void gen_step(int64_t s, res_step *st) {
  memset(st, 0, sizeof *st);
  st->step = s;
  st->n_candidates = 8;
  st->reward_mean = (double)s;
  st->reward_std = 0.5;
  st->reward_max = (double)s + 2;
  st->reward_min = (double)s - 2;
  st->correct_frac = 0.5 + 0.01 * (double)s;
  st->kl = 0.01 * (double)s;
  st->loss = 1.0 / ((double)s + 1);
  st->entropy = 2.0;
  st->clip_frac = 0.1;
  st->len_mean = 300;
  st->best_time_us = 100.0 + (double)s;
  st->lr = 1e-5;
  st->grad_norm = 1.0;
  st->wall_s = (double)s * 10;
}

/* Appends candidate i (and step i / 8 after every 8th). Returns RES_OK. */
static int gen_append(res_file *f, int64_t i, char *why, size_t whylen) {
  char src[2048];
  double samples[8], values[4];
  const char *names[4];
  res_candidate c;
  gen_candidate(i, &c);
  size_t len = gen_source(i, src, sizeof src);
  int ns = gen_samples(i, samples);
  int nc = gen_components(i, names, values);
  int64_t id = -1;
  int rc = res_append_candidate(f, &c, src, len, samples, ns, names, values, nc,
                                &id, why, whylen);
  if (rc != RES_OK) return rc;
  if (id != i) {
    snprintf(why, whylen, "append gave id %lld, expected %lld", (long long)id,
             (long long)i);
    return RES_EENV;
  }
  if (i % 8 == 7) {
    res_step st;
    gen_step(i / 8, &st);
    rc = res_append_step(f, &st, why, whylen);
  }
  return rc;
}

/* Writes a new file at path of candidates 0..n-1 (gen_append) and closes
 * it. Returns RES_OK, or the first failure's code with its reason in why. */
GEN_MAYBE_UNUSED static int gen_file(const char *path,
                                     const res_campaign_meta *meta, int64_t n,
                                     char *why, size_t whylen) {
  int code = RES_EENV;
  res_file *f = res_open_append(path, meta, &code, why, whylen);
  if (!f) return code;
  int rc = RES_OK;
  for (int64_t i = 0; i < n && rc == RES_OK; i++)
    rc = gen_append(f, i, why, whylen);
  char cwhy[512];
  int crc = res_close(f, cwhy, sizeof cwhy);
  if (rc == RES_OK && crc != RES_OK) {
    snprintf(why, whylen, "%s", cwhy);
    rc = crc;
  }
  return rc;
}

/* Checks candidate i as read back. Returns a description of the first
 * mismatch in why and 0, or 1 when everything matches. */
GEN_MAYBE_UNUSED static int gen_verify(const res_reader *r, int64_t i,
                                       char *why, size_t whylen) {
  res_candidate want;
  gen_candidate(i, &want);
  const res_candidate *got = res_get(r, i);
  if (!got) return snprintf(why, whylen, "%lld: missing", (long long)i), 0;
#define SAME(f)                                                                \
  do {                                                                         \
    if (memcmp(&got->f, &want.f, sizeof want.f))                               \
      return snprintf(why, whylen, "%lld: field " #f " differs",               \
                      (long long)i),                                           \
             0;                                                                \
  } while (0)
  SAME(step);
  SAME(group);
  SAME(sample);
  SAME(task);
  SAME(label);
  SAME(backend);
  SAME(status);
  SAME(compiled);
  SAME(correct);
  SAME(max_rel_err);
  SAME(time_us);
  SAME(baseline_us);
  SAME(gflops);
  SAME(reward);
  SAME(regs);
  SAME(smem_bytes);
  SAME(flags);
  SAME(error);
  SAME(timed_launches);
  SAME(seed);
  SAME(wall_unix);
  SAME(reward_sha256);
#undef SAME
  if (got->id != i) return snprintf(why, whylen, "%lld: id", (long long)i), 0;
  char want_src[2048], *src = NULL;
  size_t want_len = gen_source(i, want_src, sizeof want_src), len = 0;
  if (res_source(r, i, &src, &len, why, whylen) != RES_OK) return 0;
  int same = len == want_len && !memcmp(src, want_src, len);
  free(src);
  if (!same) return snprintf(why, whylen, "%lld: source", (long long)i), 0;
  double want_s[8], *s = NULL;
  int wn = gen_samples(i, want_s), n = 0;
  if (res_timings(r, i, &s, &n, why, whylen) != RES_OK) return 0;
  same = n == wn && (!n || !memcmp(s, want_s, (size_t)n * sizeof *s));
  free(s);
  if (!same) return snprintf(why, whylen, "%lld: timings", (long long)i), 0;
  const char *cn[4];
  double cv[4];
  int nc = gen_components(i, cn, cv);
  const double *row = res_components(r, i);
  for (int j = 0; j < res_component_count(r); j++) {
    const char *name = res_component_name(r, j);
    int k = -1;
    for (int q = 0; q < nc; q++)
      if (!strcmp(cn[q], name)) k = q;
    double w = k >= 0 ? cv[k] : NAN;
    if (!row || (isnan(w) ? !isnan(row[j]) : row[j] != w))
      return snprintf(why, whylen, "%lld: component %s", (long long)i, name), 0;
  }
  return 1;
}

#endif
