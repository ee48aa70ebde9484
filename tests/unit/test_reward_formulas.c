/*
 * tests/unit/test_reward_formulas.c — the shipped formulas in lua/reward/
 * on the built-in fixture group: each validates, gives the order a user
 * expects (correct fast > correct slow > wrong > compile error), penalises
 * a flagged kernel against its clean twin, and gives the values worked out
 * by hand in the comments below.
 */
#include "reward/reward.h"

#include "kltest.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { FAST, SLOW, WRONG, TIMEOUT, COMPILE_ERROR, FLAGGED, UNKNOWN_FLAG };

static rw_script *load_formula(const char *name) {
  const char *root = getenv("KL_SOURCE_DIR");
  char path[1024], why[512];
  snprintf(path, sizeof path, "%s/lua/reward/%s", root ? root : ".", name);
  rw_script *s = rw_load(path, NULL, why, sizeof why);
  CHECK(s != NULL, "%s: %s", name, why);
  if (s) CHECK(rw_validate(s, why, sizeof why) == RW_OK, "%s: %s", name, why);
  return s;
}

static double total_of(rw_script *s, const rw_candidate *c) {
  rw_context ctx;
  rw_fixture_context(&ctx);
  rw_components out;
  char why[512];
  int rc = rw_score(s, c, &ctx, &out, why, sizeof why);
  CHECK(rc == RW_OK, "%s", why);
  double t = rc == RW_OK ? out.total : NAN;
  rw_components_free(&out);
  return t;
}

/* totals for the fixture group, checked against hand-computed values */
static void check_formula(const char *name, const double want[7]) {
  rw_script *s = load_formula(name);
  if (!s) return;
  int n;
  const rw_candidate *g = rw_fixture_group(&n);
  double t[7];
  for (int i = 0; i < 7; i++) {
    t[i] = total_of(s, &g[i]);
    CHECK(fabs(t[i] - want[i]) < 1e-3, "%s: fixture[%d] total %.4f, want %.4f",
          name, i, t[i], want[i]);
  }
  CHECK(t[FAST] > t[SLOW] && t[SLOW] > t[WRONG] && t[WRONG] > t[COMPILE_ERROR],
        "%s: order fast %.3f slow %.3f wrong %.3f compile %.3f", name, t[FAST],
        t[SLOW], t[WRONG], t[COMPILE_ERROR]);
  /* a flagged kernel scores below its clean twin, known flag or not */
  for (int k = FLAGGED; k <= UNKNOWN_FLAG; k++) {
    rw_candidate twin = g[k];
    twin.flags = NULL;
    twin.n_flags = 0;
    double clean = total_of(s, &twin);
    CHECK(t[k] < clean - 4, "%s: flagged %.3f vs clean twin %.3f", name, t[k],
          clean);
  }
  /* group scoring agrees with one-by-one scoring */
  rw_context ctx;
  rw_fixture_context(&ctx);
  rw_components out[7];
  char why[512];
  int rc = rw_score_group(s, &ctx, out, why, sizeof why);
  CHECK(rc == RW_OK, "%s group: %s", name, why);
  for (int i = 0; rc == RW_OK && i < 7; i++) {
    CHECK(out[i].total == t[i], "%s group[%d] %g vs %g", name, i, out[i].total,
          t[i]);
    rw_components_free(&out[i]);
  }
  rw_free(s);
}

int main(void) {
  /* default.lua: build + correct + speed (log2 ratio clipped [-1, 3]) +
   * cheat. fast: 1 + min(3, log2 12.5); slow: 1 + log2(1/1.5);
   * flagged: 1 - 20 - 20; unknown flag: 1 - 10. */
  const double def[7] = {4, 1 + log2(1000.0 / 1500), -0.5, -0.75, -1, -39, -9};
  check_formula("default.lua", def);

  /* unsloth.lua: works + no_cheating + correctness + speed/100.
   * fast: 1 + 1 + (3 + 3) + 12.5/100; slow: 1 + 1 + 6 - 1.5/100;
   * wrong: 1 + 1 + (-3 + 0) + 25/100; timeout: 1 + 1 - 2; compile error:
   * -2 - 20; flagged: 1 - 20 + 6 + 50/100; unknown: 1 - 20 + 6 + 2/100. */
  const double uns[7] = {8.125, 7.985, -0.75, 0, -22, -12.5, -12.98};
  check_formula("unsloth.lua", uns);

  /* distance.lua: build + accuracy + pass + speed + cheat.
   * fast: 2 + 1 + 3; slow: 2 + 1 - 0.5; wrong (rel 0.31):
   * 2 - 0.5 log10(0.31 / 1e-5); timeout: -3; compile error: -1 - 3;
   * flagged: 3 - 20; unknown: 3 - 10. */
  const double dist[7] = {6,   2.5, 2 - 0.5 * log10(0.31 / 1e-5), -3, -4,
                          -17, -7};
  check_formula("distance.lua", dist);

  /* distance.lua: a near miss scores above a wild miss, and below any
   * correct kernel */
  rw_script *s = load_formula("distance.lua");
  if (s) {
    int n;
    rw_candidate near = rw_fixture_group(&n)[WRONG], wild = near;
    near.max_rel_err = 3e-5;
    wild.max_rel_err = 0.5;
    double tn = total_of(s, &near), tw = total_of(s, &wild);
    double slow = total_of(s, &rw_fixture_group(&n)[SLOW]);
    CHECK(tn > tw + 1, "near %.3f wild %.3f", tn, tw);
    CHECK(slow > tn, "correct slow %.3f near miss %.3f", slow, tn);
    rw_free(s);
  }
  return kl_test_done("test_reward_formulas");
}
