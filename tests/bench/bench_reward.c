/*
 * tests/bench/bench_reward.c — what does one reward evaluation cost?
 *
 * Scores a candidate with lua/reward/default.lua in a context holding a
 * group of 8 (the fixture's seven kinds plus a second fast kernel), median
 * over many calls, and prints microseconds per candidate against the goal
 * of 50 us. Also, all measured in the same run and the same lua_State:
 *   - the named baseline: an empty Lua function called through the same
 *     protected call (message handler, budget hooks, the deadline alarm's
 *     two timer_settime calls) — the floor any formula pays;
 *   - the same function through a plain lua_pcall with the hooks off:
 *     what the protected call's limits cost on top;
 *   - rw_score with score() swapped for `function() return {} end`: what
 *     building c and ctx (with its group of 8) and reading the result cost;
 *   - rw_score_group: the whole group scored with ctx built once.
 * The ratio default / empty call says how much the formula itself costs.
 *
 * usage: bench_reward [SOURCE_DIR]
 */
#include "reward/internal.h"

#include <lauxlib.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define SAMPLES 51
#define CALLS 200 /* per sample */
#define GOAL_US 50.0

static double now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static double median(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, cmp);
  return v[n / 2];
}

static rw_candidate group[8];
static rw_context ctx;

static int run_score(rw_script *s, int i) {
  rw_components out;
  char why[256];
  int rc = rw_score(s, &group[i % 8], &ctx, &out, why, sizeof why);
  if (rc != RW_OK) fprintf(stderr, "bench_reward: %s\n", why);
  rw_components_free(&out);
  return rc;
}

/* median microseconds of one call of what(), per candidate */
#define MEASURE(result, per, body)                                             \
  do {                                                                         \
    double samples[SAMPLES];                                                   \
    for (int k = 0; k < SAMPLES; k++) {                                        \
      double t0 = now_us();                                                    \
      for (int i = 0; i < CALLS; i++) {                                        \
        body;                                                                  \
      }                                                                        \
      samples[k] = (now_us() - t0) / CALLS / (per);                            \
    }                                                                          \
    result = median(samples, SAMPLES);                                         \
  } while (0)

int main(int argc, char **argv) {
  const char *root = argc > 1 ? argv[1] : KL_DEFAULT_SOURCE_DIR;
  char path[1024], why[512];
  snprintf(path, sizeof path, "%s/lua/reward/default.lua", root);
  rw_script *s = rw_load(path, NULL, why, sizeof why);
  if (!s) {
    fprintf(stderr, "bench_reward: %s\n", why);
    return 1;
  }
  int n;
  const rw_candidate *fx = rw_fixture_group(&n);
  for (int i = 0; i < 7; i++)
    group[i] = fx[i];
  group[7] = fx[0];
  group[7].time_us = 120;
  rw_fixture_context(&ctx);
  ctx.group = group;
  ctx.n_group = 8;

  /* warm up */
  for (int i = 0; i < 1000; i++)
    if (run_score(s, i) != RW_OK) return 1;

  double t_default, t_group, t_empty_call, t_marshal;
  MEASURE(t_default, 1, run_score(s, i));

  rw_components out[8];
  MEASURE(t_group, 8, {
    rw_score_group(s, &ctx, out, why, sizeof why);
    for (int j = 0; j < 8; j++)
      rw_components_free(&out[j]);
  });

  /* the baseline: an empty Lua function through the same protected call */
  lua_State *L = s->L;
  luaL_loadstring(L, "return function() end");
  lua_call(L, 0, 1);
  int empty_ref = luaL_ref(L, LUA_REGISTRYINDEX);
  MEASURE(t_empty_call, 1, {
    lua_rawgeti(L, LUA_REGISTRYINDEX, empty_ref);
    rw__pcall(s, 0, 0, why, sizeof why);
  });

  /* the same, unprotected: what the limits themselves cost (hooks off
   * here; rw__pcall sets them again at its next call) */
  double t_plain_call;
  lua_sethook(L, NULL, 0, 0);
  MEASURE(t_plain_call, 1, {
    lua_rawgeti(L, LUA_REGISTRYINDEX, empty_ref);
    lua_pcall(L, 0, 0, 0);
  });

  /* marshalling: the same rw_score with an empty formula */
  luaL_loadstring(L, "return function() return {} end");
  lua_call(L, 0, 1);
  int saved = s->score_ref;
  s->score_ref = luaL_ref(L, LUA_REGISTRYINDEX);
  MEASURE(t_marshal, 1, run_score(s, i));
  s->score_ref = saved;

  printf("bench_reward: one reward evaluation, lua/reward/default.lua, "
         "context with a group of 8 (median of %d x %d calls)\n",
         SAMPLES, CALLS);
  printf("  baseline: empty Lua call, same state   %8.2f us\n", t_empty_call);
  printf("  plain lua_pcall, no hooks, no alarm    %8.2f us  (%.2fx "
         "baseline)\n",
         t_plain_call, t_plain_call / t_empty_call);
  printf("  rw_score, empty formula (marshalling)  %8.2f us  (%.1fx "
         "baseline)\n",
         t_marshal, t_marshal / t_empty_call);
  printf("  rw_score, default.lua                  %8.2f us  (%.1fx "
         "baseline)  goal < %.0f us: %s\n",
         t_default, t_default / t_empty_call, GOAL_US,
         t_default < GOAL_US ? "met" : "MISSED");
  printf("  rw_score_group, default.lua, per cand. %8.2f us  (%.1fx "
         "baseline)\n",
         t_group, t_group / t_empty_call);
  printf("  memory held by the state: %zu KiB\n", rw_memory_used(s) >> 10);
  rw_free(s);
  return t_default < GOAL_US ? 0 : 1;
}
