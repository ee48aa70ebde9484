/*
 * tests/unit/test_rescore_fixture.c — results files whose stored rewards
 * were produced by a real formula, for `kernlab rescore` tests: rescoring
 * with the same formula must reproduce them exactly (rank correlation 1, no
 * advantage moves).
 *
 * The metrics are tests/unit/results_gen.h's 30 synthetic candidates (a
 * step every 8, two groups of 4 per step); the rewards and components come
 * from scoring each step+group with the given script, the way a campaign
 * does: the candidate as `kernlab eval` hands it to the engine
 * (lab/eval_glue.c), the context holding the candidate's whole group.
 *
 * usage:
 *   test_rescore_fixture OUT.h5 F.lua [--ungrouped] [--unscored K]
 *     --ungrouped: every candidate has group -1 (an `eval --out` file) and
 *     is scored alone;
 *     --unscored K: every candidate with id % K == K - 1 is stored without
 *     a reward (NaN), as one scored by no script.
 *   test_rescore_fixture          (no arguments: the ctest self-check)
 *     writes both kinds to a temporary folder with lua/reward/default.lua
 *     (KL_SOURCE_DIR) and checks that each stored reward is the sum of the
 *     stored components and that the groups are as asked.
 */
#include "kltest.h"
#include "results_gen.h"
#include "reward/reward.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define N_CANDIDATES 30

/* The engine's view of candidate rec, whose source is src_len bytes. */
static void to_rw(const res_candidate *rec, long src_len, const char **names,
                  rw_candidate *c) {
  rw_candidate_init(c);
  c->compiled = rec->compiled;
  c->correct = rec->correct;
  c->status = rec->status;
  c->backend = rec->backend;
  c->max_rel_err = rec->max_rel_err;
  c->max_abs_err = rec->max_abs_err;
  c->time_us = rec->time_us;
  c->baseline_us = rec->baseline_us;
  c->gflops = rec->gflops;
  c->regs = rec->regs;
  c->smem_bytes = rec->smem_bytes;
  c->spill_bytes = rec->spill_bytes;
  int n = 0;
  for (int b = 0; b < 4; b++)
    if (rec->flags >> b & 1) names[n++] = gen_flag_names[b];
  c->flags = names;
  c->n_flags = n;
  c->source_len = c->completion_len = src_len;
}

/* Writes the file; returns 0, or 1 with a message on stderr. */
static int write_fixture(const char *out, const char *script, int ungrouped,
                         int unscored) {
  char why[1024];
  rw_script *s = rw_load(script, NULL, why, sizeof why);
  if (!s) {
    fprintf(stderr, "test_rescore_fixture: %s\n", why);
    return 1;
  }
  const res_campaign_meta meta = {
      .config = "-- rescore fixture\n",
      .reward_script = script,
      .reward_sha256 = rw_sha256(s),
      .device = "cpu-emu (fixture)",
      .backend = "cpu-emu",
      .kernlab_version = "0.1",
      .seed = 42,
      .flag_names = gen_flag_names,
      .n_flags = 4,
  };
  int code;
  unlink(out);
  res_file *f = res_open_append(out, &meta, &code, why, sizeof why);
  if (!f) {
    fprintf(stderr, "test_rescore_fixture: %s\n", why);
    rw_free(s);
    return 1;
  }
  int rc = 0;
  /* results_gen's groups are runs of 4 consecutive ids (same step). */
  for (int64_t first = 0; first < N_CANDIDATES && !rc;) {
    int64_t m = ungrouped ? 1 : 4 - first % 4;
    if (first + m > N_CANDIDATES) m = N_CANDIDATES - first;
    res_candidate recs[4];
    char src[4][2048];
    size_t len[4];
    const char *names[4][4];
    rw_candidate cands[4];
    for (int64_t k = 0; k < m; k++) {
      gen_candidate(first + k, &recs[k]);
      if (ungrouped) recs[k].group = recs[k].sample = -1;
      len[k] = gen_source(first + k, src[k], sizeof src[k]);
      to_rw(&recs[k], (long)len[k], names[k], &cands[k]);
    }
    rw_context ctx = {recs[0].task, "fp32", 256, 256, 256, cands, (int)m};
    rw_components out_c[4];
    if (rw_score_group(s, &ctx, out_c, why, sizeof why) != RW_OK) {
      fprintf(stderr, "test_rescore_fixture: %s\n", why);
      rc = 1;
      for (int64_t k = 0; k < m; k++)
        rw_components_free(&out_c[k]);
      break;
    }
    for (int64_t k = 0; k < m && !rc; k++) {
      int64_t id = first + k;
      const char *cn[RW_MAX_COMPONENTS];
      double cv[RW_MAX_COMPONENTS];
      int nc = 0;
      if (unscored && id % unscored == unscored - 1) {
        recs[k].reward = NAN;
        memset(recs[k].reward_sha256, 0, sizeof recs[k].reward_sha256);
      } else {
        recs[k].reward = out_c[k].total;
        res_strset(recs[k].reward_sha256, sizeof recs[k].reward_sha256,
                   out_c[k].script_sha256);
        for (nc = 0; nc < out_c[k].n; nc++) {
          cn[nc] = out_c[k].items[nc].name;
          cv[nc] = out_c[k].items[nc].value;
        }
      }
      double samples[8];
      int ns = gen_samples(id, samples);
      if (res_append_candidate(f, &recs[k], src[k], len[k], samples, ns, cn, cv,
                               nc, NULL, why, sizeof why) != RES_OK) {
        fprintf(stderr, "test_rescore_fixture: %s\n", why);
        rc = 1;
      }
    }
    for (int64_t k = 0; k < m; k++)
      rw_components_free(&out_c[k]);
    first += m;
  }
  if (res_close(f, why, sizeof why) != RES_OK && !rc) {
    fprintf(stderr, "test_rescore_fixture: %s\n", why);
    rc = 1;
  }
  rw_free(s);
  return rc;
}

/* The self-check: the file holds what write_fixture meant to write. */
static void check_file(const char *path, int ungrouped) {
  char why[1024];
  int code;
  res_reader *r = res_open_read(path, &code, why, sizeof why);
  CHECK(r, "%s", why);
  if (!r) return;
  CHECK(res_count(r) == N_CANDIDATES, "%lld candidates",
        (long long)res_count(r));
  int distinct = 0;
  double last = NAN;
  for (int64_t i = 0; i < res_count(r); i++) {
    const res_candidate *c = res_get(r, i);
    CHECK(isfinite(c->reward), "candidate %lld has a reward", (long long)i);
    CHECK(ungrouped ? c->group == -1 : c->group == (i % 8) / 4,
          "candidate %lld group %d", (long long)i, c->group);
    const double *row = res_components(r, i);
    double sum = 0;
    for (int j = 0; j < res_component_count(r); j++)
      if (!isnan(row[j])) sum += row[j];
    CHECK(fabs(sum - c->reward) < 1e-12, "candidate %lld: %g != %g",
          (long long)i, sum, c->reward);
    distinct += i == 0 || c->reward != last;
    last = c->reward;
  }
  CHECK(distinct > 3, "rewards vary (%d distinct runs)", distinct);
  res_reader_close(r);
}

int main(int argc, char **argv) {
  (void)gen_append; /* results_gen.h's writer; this file appends its own */
  if (argc >= 3) {
    int ungrouped = 0, unscored = 0;
    for (int i = 3; i < argc; i++) {
      if (!strcmp(argv[i], "--ungrouped"))
        ungrouped = 1;
      else if (!strcmp(argv[i], "--unscored") && i + 1 < argc)
        unscored = atoi(argv[++i]);
      else {
        fprintf(stderr, "test_rescore_fixture: unknown option %s\n", argv[i]);
        return 2;
      }
    }
    return write_fixture(argv[1], argv[2], ungrouped, unscored);
  }
  const char *root = getenv("KL_SOURCE_DIR");
  char script[1024], dir[] = "/tmp/kl_rescore_XXXXXX", path[1100];
  snprintf(script, sizeof script, "%s/lua/reward/default.lua",
           root ? root : ".");
  CHECK(mkdtemp(dir), "mkdtemp");
  for (int ungrouped = 0; ungrouped < 2; ungrouped++) {
    snprintf(path, sizeof path, "%s/run%d.h5", dir, ungrouped);
    CHECK(write_fixture(path, script, ungrouped, 0) == 0, "writes %s", path);
    check_file(path, ungrouped);
    unlink(path);
  }
  rmdir(dir);
  return kl_test_done("test_rescore_fixture");
}
