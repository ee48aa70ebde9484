/*
 * tests/unit/test_reward_reload.c — hot reload: an unchanged file is not
 * reloaded, a good edit replaces the formula (new sha256, new scores), and a
 * bad edit of any kind (syntax, runtime error on the fixture, NaN, endless
 * loop, deleted file) keeps the old formula and says why.
 */
#include "reward/reward.h"

#include "kernels/kernels.h"
#include "kltest.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static char tmpdir[] = "/tmp/kl-test-reload-XXXXXX";
static char path[256];

static void save(const char *text) {
  FILE *f = fopen(path, "wb");
  if (!f) return;
  fputs(text, f);
  fclose(f);
}

static double score_fast(rw_script *s) {
  int n;
  const rw_candidate *g = rw_fixture_group(&n);
  rw_components out;
  char why[512];
  int rc = rw_score(s, &g[0], NULL, &out, why, sizeof why);
  CHECK(rc == RW_OK, "%s", why);
  double t = out.total;
  rw_components_free(&out);
  return t;
}

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

#define GOOD(v) "return { score = function(c) return { v = " v " } end }\n"

static void expect_kept(rw_script **cur, const char *text, const char *want1,
                        const char *want2) {
  char before[65], why[512];
  snprintf(before, sizeof before, "%s", *cur ? rw_sha256(*cur) : "");
  rw_script *old = *cur;
  if (text)
    save(text);
  else
    unlink(path);
  double t0 = now_ms();
  int rc = rw_reload(cur, path, why, sizeof why);
  CHECK(now_ms() - t0 < 1000, "reload took %.0f ms", now_ms() - t0);
  CHECK(rc == RW_KEPT_OLD, "rc %d (%s)", rc, why);
  CHECK(*cur == old, "current replaced");
  if (*cur) CHECK(!strcmp(rw_sha256(*cur), before), "sha changed");
  CHECK(strstr(why, "kept the previous formula"), "why: %s", why);
  if (want1) CHECK(strstr(why, want1), "want '%s' in: %s", want1, why);
  if (want2) CHECK(strstr(why, want2), "want '%s' in: %s", want2, why);
  /* asking again gives the same answer */
  rc = rw_reload(cur, path, why, sizeof why);
  CHECK(rc == RW_KEPT_OLD && *cur == old, "second reload rc %d", rc);
  if (want1) CHECK(strstr(why, want1), "again: want '%s' in: %s", want1, why);
}

int main(void) {
  if (!mkdtemp(tmpdir)) return 1;
  snprintf(path, sizeof path, "%s/formula.lua", tmpdir);
  char why[512];
  rw_script *cur = NULL;

  /* first load through reload */
  expect_kept(&cur, "return {", "formula.lua:", NULL);
  CHECK(cur == NULL, "NULL kept");
  save(GOOD("1"));
  CHECK(rw_reload(&cur, path, why, sizeof why) == RW_RELOADED, "%s", why);
  if (!cur) return kl_test_done("test_reward_reload");
  char want_sha[65];
  kl_sha256_hex(GOOD("1"), strlen(GOOD("1")), want_sha);
  CHECK(!strcmp(rw_sha256(cur), want_sha), "sha %s", rw_sha256(cur));
  CHECK(score_fast(cur) == 1, "v1");

  /* unchanged: same object, nothing rebuilt (even if rewritten) */
  rw_script *same = cur;
  save(GOOD("1"));
  CHECK(rw_reload(&cur, path, why, sizeof why) == RW_UNCHANGED, "unchanged");
  CHECK(cur == same, "same script");

  /* a good edit */
  save(GOOD("2"));
  CHECK(rw_reload(&cur, path, why, sizeof why) == RW_RELOADED, "%s", why);
  CHECK(strcmp(rw_sha256(cur), want_sha) != 0, "new sha");
  CHECK(score_fast(cur) == 2, "v2");
  char sha2[65];
  snprintf(sha2, sizeof sha2, "%s", rw_sha256(cur));

  /* bad edits: each keeps v2 */
  expect_kept(&cur, "return { score = function(c)\n  return {\nend }\n",
              "formula.lua:3:", NULL);
  expect_kept(&cur,
              "return { score = function(c)\n"
              "  return { v = c.time_us * 2 } end }\n",
              "timeout candidate", "formula.lua:2:");
  expect_kept(&cur,
              "return { score = function(c)\n"
              "  return { v = c.compiled and 1 or 0/0 } end }\n",
              "'v' is NaN", "compile error candidate");
  expect_kept(&cur, "return { score = function(c)\n  while true do end end }\n",
              "budget", "formula.lua:2:");
  expect_kept(&cur, "return 3\n", "returned number", NULL);
  expect_kept(&cur, NULL, "cannot open", NULL);
  CHECK(!strcmp(rw_sha256(cur), sha2), "still v2");
  CHECK(score_fast(cur) == 2, "v2 still scores");

  /* and a fix is picked up */
  save(GOOD("3"));
  CHECK(rw_reload(&cur, path, why, sizeof why) == RW_RELOADED, "%s", why);
  CHECK(score_fast(cur) == 3, "v3");

  /* the shipped default validates through reload too */
  const char *root = getenv("KL_SOURCE_DIR");
  char def[1024];
  snprintf(def, sizeof def, "%s/lua/reward/default.lua", root ? root : ".");
  CHECK(rw_reload(&cur, def, why, sizeof why) == RW_RELOADED, "%s", why);

  /* A wall-clock deadline is not a verdict on the text: a busy machine
   * may miss it once. The same text is tried again at the next reload
   * (here with a current formula whose limits give it time), not refused
   * from memory. */
  rw_limits tight, loose;
  rw_limits_default(&tight);
  tight.wall_ms = 1;
  tight.instructions = 1000000000LL;
  loose = tight;
  loose.wall_ms = 60000;
  save(GOOD("4"));
  rw_free(cur);
  cur = rw_load(path, &tight, why, sizeof why);
  CHECK(cur != NULL, "load with a 1 ms deadline: %s", why);
  const char *slow = "local function spin() local x = 0\n"
                     "  for i = 1, 3000000 do x = x + i end return x end\n"
                     "return { score = function(c) spin() return { v = 5 } "
                     "end }\n";
  save(slow);
  CHECK(cur && rw_reload(&cur, path, why, sizeof why) == RW_KEPT_OLD &&
            strstr(why, "wall-clock deadline"),
        "the slow formula misses a 1 ms deadline: %s", why);
  rw_free(cur);
  save(GOOD("4"));
  cur = rw_load(path, &loose, why, sizeof why);
  save(slow);
  CHECK(cur && rw_reload(&cur, path, why, sizeof why) == RW_RELOADED,
        "with time, the same text loads (not refused from memory): %s", why);
  CHECK(cur && score_fast(cur) == 5, "v5");

  rw_free(cur);
  unlink(path);
  rmdir(tmpdir);
  return kl_test_done("test_reward_reload");
}
