/*
 * tests/unit/test_reward.c — the reward engine against broken and hostile
 * scripts: every one must come back as a clear error (the right RW_* code,
 * a message naming the script and line) within a second, and never crash
 * or hang the test. Also the happy path: metrics in, components out,
 * nil for unmeasured values, flags as a set, JSON.
 *
 * Each script is written to a temporary folder from the text beside its
 * expectations, so a reader sees both at once.
 */
#include "reward/reward.h"

#include "kltest.h"

#include <math.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static char tmpdir[] = "/tmp/kl-test-reward-XXXXXX";

static const char *write_script(const char *name, const char *text) {
  static char path[256];
  snprintf(path, sizeof path, "%s/%s", tmpdir, name);
  if (!text) { /* a script that does not exist */
    unlink(path);
    return path;
  }
  FILE *f = fopen(path, "wb");
  if (!f) return path;
  fputs(text, f);
  fclose(f);
  return path;
}

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* A score() that returns r's body: "return {a = 1}" etc. */
static rw_script *load_text(const char *name, const char *text,
                            const rw_limits *lim, char *why, size_t len) {
  return rw_load(write_script(name, text), lim, why, len);
}

/* Loads name and scores a default candidate with it: both must succeed
 * (the script's own checks raise an error naming what differed). */
static void expect_score_ok(const char *name, const char *text,
                            const char *what) {
  char why[512];
  rw_script *s = load_text(name, text, NULL, why, sizeof why);
  CHECK(s != NULL, "%s: %s", name, why);
  if (!s) return;
  rw_candidate c;
  rw_candidate_init(&c);
  rw_components out;
  CHECK(rw_score(s, &c, NULL, &out, why, sizeof why) == RW_OK, "%s: %s", what,
        why);
  rw_components_free(&out);
  rw_free(s);
}

/* Loads name (expected to load), scores the fixture's first candidate, and
 * checks the error code, that why contains each of want1/want2 (NULL to
 * skip) and that it took under a second. */
static void expect_score_error_lim(const char *name, const char *text,
                                   const rw_limits *lim, int code,
                                   const char *want1, const char *want2) {
  char why[512] = "";
  double t0 = now_ms();
  rw_script *s = load_text(name, text, lim, why, sizeof why);
  CHECK(s != NULL, "%s: load failed: %s", name, why);
  if (!s) return;
  int n;
  const rw_candidate *g = rw_fixture_group(&n);
  rw_context ctx;
  rw_fixture_context(&ctx);
  rw_components out;
  int rc = rw_score(s, &g[0], &ctx, &out, why, sizeof why);
  double ms = now_ms() - t0;
  CHECK(rc == code, "%s: code %d, expected %d (%s)", name, rc, code, why);
  CHECK(out.n == 0 && out.items == NULL, "%s: components on failure", name);
  CHECK(strstr(why, name) != NULL, "%s: why does not name the script: %s", name,
        why);
  if (want1)
    CHECK(strstr(why, want1), "%s: want '%s' in: %s", name, want1, why);
  if (want2)
    CHECK(strstr(why, want2), "%s: want '%s' in: %s", name, want2, why);
  CHECK(strchr(why, '\n') == NULL, "%s: why is not one line", name);
  CHECK(ms < 1000, "%s: took %.0f ms", name, ms);
  /* the state must still work afterwards */
  rc = rw_score(s, &g[0], &ctx, &out, why, sizeof why);
  CHECK(rc == code, "%s: second call gave %d (%s)", name, rc, why);
  rw_components_free(&out);
  rw_free(s);
}

/* The same with the default limits. */
static void expect_score_error(const char *name, const char *text, int code,
                               const char *want1, const char *want2) {
  expect_score_error_lim(name, text, NULL, code, want1, want2);
}

static void expect_load_error_lim(const char *name, const char *text,
                                  const rw_limits *lim, int code,
                                  const char *want1, const char *want2) {
  char why[512] = "";
  double t0 = now_ms();
  rw_script *s = load_text(name, text, lim, why, sizeof why);
  double ms = now_ms() - t0;
  CHECK(s == NULL, "%s: loaded, expected failure", name);
  rw_free(s);
  CHECK(rw_load_error() == code, "%s: code %d, expected %d (%s)", name,
        rw_load_error(), code, why);
  CHECK(strstr(why, name) != NULL, "%s: why does not name the script: %s", name,
        why);
  if (want1)
    CHECK(strstr(why, want1), "%s: want '%s' in: %s", name, want1, why);
  if (want2)
    CHECK(strstr(why, want2), "%s: want '%s' in: %s", name, want2, why);
  CHECK(ms < 1000, "%s: took %.0f ms", name, ms);
}

/* The same with the default limits. */
static void expect_load_error(const char *name, const char *text, int code,
                              const char *want1, const char *want2) {
  expect_load_error_lim(name, text, NULL, code, want1, want2);
}

/* ---- happy path ---------------------------------------------------------- */

static void test_metrics_in_components_out(void) {
  const char *text =
      "local M = {}\n"
      "function M.score(c, ctx)\n"
      "  local r = {}\n"
      "  r.compiled = c.compiled and 1 or 0\n"
      "  r.correct = c.correct and 1 or 0\n"
      "  r.time = c.time_us or -1\n"
      "  r.pct = c.percent_of_baseline or -1\n"
      "  r.relerr_nil = c.max_rel_err == nil and 1 or 0\n"
      "  r.flag = c.flags.input_mutated and 1 or 0\n"
      "  r.nflags = 0; for _ in pairs(c.flags) do r.nflags = r.nflags + 1 end\n"
      "  r.status_ok = c.status == 'ok' and 1 or 0\n"
      "  r.shape = ctx.M * 10000 + ctx.N * 100 + ctx.K\n"
      "  r.group = #ctx.group\n"
      "  r.task = ctx.task == 'mm' and 1 or 0\n"
      "  r.regs = c.regs or -1\n"
      "  r.int = 3\n"
      "  return r\n"
      "end\n"
      "return M\n";
  char why[512];
  rw_script *s = load_text("metrics.lua", text, NULL, why, sizeof why);
  CHECK(s != NULL, "load: %s", why);
  if (!s) return;
  CHECK(strlen(rw_sha256(s)) == 64, "sha256 %s", rw_sha256(s));

  const char *flags[] = {"input_mutated", "timer_read"};
  rw_candidate c;
  rw_candidate_init(&c);
  c.compiled = 1;
  c.status = "ok";
  c.time_us = 50;
  c.baseline_us = 200;
  c.regs = 40;
  c.flags = flags;
  c.n_flags = 2;
  rw_candidate group[3];
  for (int i = 0; i < 3; i++)
    group[i] = c;
  rw_context ctx = {"mm", "fp32", 12, 34, 56, group, 3};
  rw_components out;
  int rc = rw_score(s, &c, &ctx, &out, why, sizeof why);
  CHECK(rc == RW_OK, "score: %s", why);
  double want[][2] = {{0}};
  (void)want;
  struct {
    const char *name;
    double v;
  } expect[] = {{"compiled", 1}, {"correct", 0},    {"time", 50},
                {"pct", 400},    {"relerr_nil", 1}, {"flag", 1},
                {"nflags", 2},   {"status_ok", 1},  {"shape", 123456},
                {"group", 3},    {"task", 1},       {"regs", 40},
                {"int", 3}};
  int nexp = (int)(sizeof expect / sizeof expect[0]);
  CHECK(out.n == nexp, "%d components", out.n);
  double total = 0;
  for (int i = 0; i < nexp; i++) {
    int found = 0;
    for (int j = 0; j < out.n; j++)
      if (!strcmp(out.items[j].name, expect[i].name)) {
        found = 1;
        CHECK(out.items[j].value == expect[i].v, "%s = %g, want %g",
              expect[i].name, out.items[j].value, expect[i].v);
      }
    CHECK(found, "component %s missing", expect[i].name);
    total += expect[i].v;
  }
  for (int j = 1; j < out.n; j++)
    CHECK(strcmp(out.items[j - 1].name, out.items[j].name) < 0,
          "components not sorted");
  CHECK(fabs(out.total - total) < 1e-9, "total %g want %g", out.total, total);
  CHECK(!strcmp(out.script_sha256, rw_sha256(s)), "sha in components");

  /* JSON */
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  rw_components_json(f, &out);
  fclose(f);
  CHECK(buf && buf[0] == '{' && buf[len - 1] == '}', "json: %s", buf);
  CHECK(strstr(buf, "\"pct\":400,"), "json: %s", buf);
  CHECK(strstr(buf, "\"total\":"), "json: %s", buf);
  char shakey[100];
  snprintf(shakey, sizeof shakey, "\"script_sha256\":\"%s\"}", rw_sha256(s));
  CHECK(strstr(buf, shakey), "json: %s", buf);
  free(buf);
  rw_components_free(&out);
  rw_components_free(&out); /* idempotent */

  /* no context at all */
  rc = rw_score(s, &c, NULL, &out, why, sizeof why);
  CHECK(rc == RW_ERUN, "ctx NULL: ctx.M is nil, arithmetic fails: %d %s", rc,
        why);
  CHECK(strstr(why, "metrics.lua:12:"), "line of ctx.M: %s", why);
  rw_components_free(&out);
  rw_free(s);
}

static void test_score_group(void) {
  const char *text = "return { score = function(c, ctx)\n"
                     "  return { index = ctx.index, n = #ctx.group,\n"
                     "           t = c.time_us or 0 }\n"
                     "end }\n";
  char why[512];
  rw_script *s = load_text("group.lua", text, NULL, why, sizeof why);
  CHECK(s != NULL, "load: %s", why);
  if (!s) return;
  rw_context ctx;
  rw_fixture_context(&ctx);
  rw_components out[16];
  int rc = rw_score_group(s, &ctx, out, why, sizeof why);
  CHECK(rc == RW_OK, "group: %s", why);
  for (int i = 0; rc == RW_OK && i < ctx.n_group; i++) {
    CHECK(out[i].n == 3, "member %d: %d components", i, out[i].n);
    CHECK(out[i].items[0].name[0] == 'i' && out[i].items[0].value == i + 1,
          "member %d index %g", i, out[i].items[0].value);
    double t = ctx.group[i].time_us > 0 ? ctx.group[i].time_us : 0;
    CHECK(out[i].items[2].value == t, "member %d time", i);
    rw_components_free(&out[i]);
  }
  CHECK(rw_validate(s, why, sizeof why) == RW_OK, "validate: %s", why);
  rw_free(s);

  /* a failure names the member */
  s = load_text("group_bad.lua",
                "return { score = function(c, ctx)\n"
                "  return { t = c.time_us * 2 } end }\n",
                NULL, why, sizeof why);
  CHECK(s != NULL, "load: %s", why);
  if (!s) return;
  rc = rw_score_group(s, &ctx, out, why, sizeof why);
  CHECK(rc == RW_ERUN, "code %d", rc);
  CHECK(strstr(why, "group[4]: ") && strstr(why, "group_bad.lua:2:"), "why: %s",
        why);
  /* the failing member (and any other without a time) stays unscored, the
   * rest of the group is scored */
  for (int i = 0; i < ctx.n_group; i++) {
    int timed = ctx.group[i].time_us >= 0; /* -1: nil in Lua */
    CHECK(timed ? out[i].n == 1 && out[i].script_sha256[0]
                : out[i].n == 0 && !out[i].script_sha256[0],
          "member %d (time %g): %d components", i + 1, ctx.group[i].time_us,
          out[i].n);
    rw_components_free(&out[i]);
  }
  rc = rw_validate(s, why, sizeof why);
  CHECK(rc == RW_ERUN && strstr(why, "timeout candidate"), "validate: %s", why);
  rw_free(s);
}

/* State a call leaves behind (an upvalue, a global) does not reach the
 * next call: the chunk runs afresh before each, so a reward depends on its
 * candidate and context only, and rescoring reproduces it. */
static void test_no_state_between_calls(void) {
  const char *text = "local n = 0\n"
                     "return { score = function(c, ctx)\n"
                     "  n = n + 1\n"
                     "  calls = (calls or 0) + 1\n"
                     "  return { n = n, g = calls } end }\n";
  char why[512];
  rw_script *s = load_text("state.lua", text, NULL, why, sizeof why);
  CHECK(s != NULL, "load: %s", why);
  if (!s) return;
  rw_context ctx;
  rw_fixture_context(&ctx);
  for (int round = 0; round < 2; round++) {
    rw_components out;
    CHECK(rw_score(s, &ctx.group[0], &ctx, &out, why, sizeof why) == RW_OK,
          "score: %s", why);
    CHECK(out.n == 2 && out.items[0].value == 1 && out.items[1].value == 1,
          "call %d: g %g n %g (1 and 1: nothing kept)", round + 1,
          out.n == 2 ? out.items[0].value : -1,
          out.n == 2 ? out.items[1].value : -1);
    rw_components_free(&out);
  }
  /* nor through _G, the environment's metatable, or ctx, in a group */
  rw_free(s);
  s = load_text("state2.lua",
                "return { score = function(c, ctx)\n"
                "  _G.k = (_G.k or 0) + 1\n"
                "  local mt = getmetatable(_ENV)\n"
                "  if mt then mt.__index.k2 = (mt.__index.k2 or 0) + 1 end\n"
                "  ctx.group.carried = (ctx.group.carried or 0) + 1\n"
                "  return { k = _G.k, x = ctx.group.carried } end }\n",
                NULL, why, sizeof why);
  rw_components g2[16];
  CHECK(s && rw_score_group(s, &ctx, g2, why, sizeof why) == RW_OK, "group: %s",
        why);
  for (int i = 0; s && i < ctx.n_group; i++) {
    CHECK(g2[i].n == 2 && g2[i].items[0].value == 1 &&
              g2[i].items[1].value == 1,
          "member %d: k %g x %g (1 and 1)", i + 1,
          g2[i].n == 2 ? g2[i].items[0].value : -1,
          g2[i].n == 2 ? g2[i].items[1].value : -1);
    rw_components_free(&g2[i]);
  }
  /* a member scored alone knows its place, as in a group */
  rw_free(s);
  s = load_text("index.lua",
                "return { score = function(c, ctx) return { i = ctx.index "
                "or 0 } end }\n",
                NULL, why, sizeof why);
  rw_components one;
  CHECK(s && rw_score(s, &ctx.group[2], &ctx, &one, why, sizeof why) == RW_OK &&
            one.n == 1 && one.items[0].value == 3,
        "ctx.index of group[3] scored alone: %g (%s)",
        s && one.n == 1 ? one.items[0].value : -1, why);
  rw_components_free(&one);
  rw_free(s);
  /* nor through the heap: one call's 40 MiB of garbage made the next
   * call's 25 MiB string.rep (a luaL_Buffer, allocated past Lua's
   * emergency collection) a memory error, so the fast candidate scored or
   * not by what was scored before it. A 5 s deadline: the copies are
   * slow under ASan on a loaded machine. */
  rw_limits slow = {0, 0, 5000, 0};
  s = load_text("heap.lua",
                "return { score = function(c, ctx)\n"
                "  local mib = ('x'):rep(1 << 20)\n"
                "  if not c.correct then\n"
                "    local t = {}\n"
                "    for i = 1, 40 do t[i] = mib .. i end\n"
                "    return { x = 0 }\n"
                "  end\n"
                "  return { x = #mib:rep(25) // (1 << 20) }\n"
                "end }\n",
                &slow, why, sizeof why);
  CHECK(s != NULL, "heap.lua: %s", why);
  for (int round = 0; s && round < 3; round++) {
    int who = round == 1 ? 2 : 0; /* fast, wrong, fast */
    rw_components h;
    int rc = rw_score(s, &ctx.group[who], &ctx, &h, why, sizeof why);
    CHECK(rc == RW_OK && h.total == (who ? 0 : 25),
          "heap.lua call %d (candidate %d): %d %s", round + 1, who + 1, rc,
          why);
    rw_components_free(&h);
  }
  rw_free(s);
  s = load_text("state.lua", text, NULL, why, sizeof why);
  if (!s) return;
  rw_components g[16];
  CHECK(rw_score_group(s, &ctx, g, why, sizeof why) == RW_OK, "group: %s", why);
  for (int i = 0; i < ctx.n_group; i++) {
    CHECK(g[i].n == 2 && g[i].items[0].value == 1 && g[i].items[1].value == 1,
          "member %d: nothing kept from the members before", i + 1);
    rw_components_free(&g[i]);
  }
  rw_free(s);
}

/* pairs visits keys by value: Lua seeds its string hashes per state (time
 * and addresses), so next's order, and a reward that depended on it (the
 * first flag, a sum of fractional penalties), changed from run to run. A
 * key cleared during the loop is skipped; __pairs is kept. */
static void test_pairs_order(void) {
  expect_score_ok(
      "pairs.lua",
      "return { score = function(c, ctx)\n"
      "  local t = { hotel = 1, alpha = 1, golf = 1, charlie = 1, echo = 1,\n"
      "              bravo = 1, foxtrot = 1, delta = 1, [3] = 1, [1.5] = 1,\n"
      "              [-2] = 1, [true] = 1, [false] = 1 }\n"
      "  local seen = {}\n"
      "  for k in pairs(t) do\n"
      "    seen[#seen + 1] = tostring(k)\n"
      "    if k == 'echo' then t.foxtrot = nil end\n"
      "  end\n"
      "  local m = setmetatable({}, { __pairs = function()\n"
      "    return function(_, k) if not k then return 'meta', 1 end end\n"
      "  end })\n"
      "  for k in pairs(m) do seen[#seen + 1] = k end\n"
      "  local want = '-2 1.5 3 alpha bravo charlie delta echo golf hotel '\n"
      "    .. 'false true meta'\n"
      "  local got = table.concat(seen, ' ')\n"
      "  if got ~= want then error(got) end\n"
      "  return { x = 1 }\n"
      "end }\n",
      "pairs in key order");
}

/* No addresses: tostring({}) differs from run to run (a formula drew a
 * random number from its digits). tostring and string.format hide them
 * unless __tostring says otherwise; %p is refused. */
static void test_no_addresses(void) {
  expect_score_ok(
      "addr.lua",
      "return { score = function(c, ctx)\n"
      "  local a = tostring({}) .. ' ' .. tostring(print) .. ' ' ..\n"
      "    string.format('%s|%8s|%%p', {}, setmetatable({}, {__name = 'T'}))\n"
      "  if a:find('0x') or a:find('%x%x%x%x%x%x') then error(a) end\n"
      "  if a ~= 'table: (address hidden) function: (address hidden) '\n"
      "    .. 'table: (address hidden)|T: (address hidden)|%p' then\n"
      "    error(a) end\n"
      "  local mine = setmetatable({}, {__tostring = function() return 'm' "
      "end})\n"
      "  if tostring(mine) ~= 'm' or string.format('%s', mine) ~= 'm' then\n"
      "    error('__tostring') end\n"
      "  if tostring(12) ~= '12' or tostring(nil) ~= 'nil' then error('n') "
      "end\n"
      "  local odd = tostring(setmetatable({}, {__name = 7}))\n"
      "  if odd ~= 'table: (address hidden)' then error(odd) end\n"
      "  local ok, err = pcall(string.format, '%-5p', {})\n"
      "  if ok or not err:find('address') then error(tostring(err)) end\n"
      "  return { x = 1 }\n"
      "end }\n",
      "no addresses");
}

/* ---- broken scripts ------------------------------------------------------ */

static void test_broken(void) {
  expect_load_error("syntax.lua",
                    "local M = {}\nfunction M.score(c\n  return 1\n",
                    RW_ESYNTAX, "syntax.lua:3:", NULL);
  expect_load_error("missing.lua", NULL, RW_EINPUT, "cannot open", NULL);
  expect_load_error("bytecode.lua", "\x1bLua\x54\x00 junk", RW_ESYNTAX,
                    "binary", NULL);
  expect_load_error("no_table.lua", "return 42\n", RW_ERETURN,
                    "returned number", "M.score");
  expect_load_error("nothing.lua", "local x = 1\n", RW_ERETURN, "nothing",
                    NULL);
  expect_load_error("no_score.lua", "return { scor = function() end }\n",
                    RW_ERETURN, "no function 'score'", NULL);
  expect_load_error("top_error.lua", "local M = {}\nerror('at load')\n",
                    RW_ERUN, "top_error.lua:2: at load", NULL);
  CHECK(strstr(rw_load_traceback(), "stack traceback"), "traceback: %s",
        rw_load_traceback());

  expect_score_error("runtime.lua",
                     "local M = {}\nfunction M.score(c)\n  local x\n"
                     "  return { a = x.field }\nend\nreturn M\n",
                     RW_ERUN, "runtime.lua:4:", "index a nil value");
  expect_score_error(
      "error0.lua", "return { score = function()\n  error('plain', 0)\nend }\n",
      RW_ERUN, "error0.lua:2: plain", NULL);
  /* the script's own message reaches a terminal: its control bytes (ESC,
   * BEL, a UTF-8 C1 CSI) are shown as '?', a carriage return as a space */
  expect_score_error("escape.lua",
                     "return { score = function()\n"
                     "  error('\\27[2J\\27[31mred\\r\\a\\194\\155x')\n"
                     "end }\n",
                     RW_ERUN, "escape.lua:2: ?[2J?[31mred ???x", NULL);
  /* a bad name with a NUL and a newline: the message names it whole, on
   * one line */
  expect_score_error("nulname.lua",
                     "return { score = function()\n"
                     "  return { [\"a\\0b\\nc\"] = 1 } end }\n",
                     RW_ERETURN, "component named 'a?b?c'", NULL);
  expect_score_error("errtable.lua",
                     "return { score = function()\n  error({})\nend }\n",
                     RW_ERUN, "errtable.lua:2:", "table value");
  expect_score_error("bad_arg.lua",
                     "return { score = function()\n"
                     "  return { a = string.rep() } end }\n",
                     RW_ERUN, "bad_arg.lua:2:", "bad argument");
  expect_score_error("wrong_return.lua",
                     "local M = {}\n\nfunction M.score(c)\n  return 42\nend\n"
                     "return M\n",
                     RW_ERETURN, "wrong_return.lua:3:", "returned number");
  expect_score_error("nil_return.lua", "return { score = function() end }\n",
                     RW_ERETURN, "returned nil", NULL);
  expect_score_error("nan.lua",
                     "return { score = function()\n"
                     "  return { ok = 1, speed = 0/0 } end }\n",
                     RW_ERETURN, "'speed' is NaN", NULL);
  expect_score_error("inf.lua",
                     "return { score = function()\n"
                     "  return { speed = -math.huge } end }\n",
                     RW_ERETURN, "'speed' is -inf", NULL);
  expect_score_error("sum_inf.lua",
                     "return { score = function()\n"
                     "  return { a = 1.7e308, b = 1.7e308 } end }\n",
                     RW_ERETURN, "sum_inf.lua:1: the components sum to inf",
                     NULL);
  /* finite, but past what GRPO's statistics can hold (RW_MAX_TOTAL): the
   * squares of 1e200 overflow the group's standard deviation */
  expect_score_error("sum_huge.lua",
                     "return { score = function()\n"
                     "  return { a = 1e200, b = -1 } end }\n",
                     RW_ERETURN, "sum_huge.lua:1: the components sum to 1e+200",
                     "within +-1e+150");
  expect_score_error("string_component.lua",
                     "return { score = function()\n"
                     "  return { speed = '1.5' } end }\n",
                     RW_ERETURN, "'speed' is a string", NULL);
  expect_score_error("array.lua",
                     "return { score = function() return { 1, 2 } end }\n",
                     RW_ERETURN, "number key", NULL);
  expect_score_error("reserved.lua",
                     "return { score = function() return { total = 1 } end }\n",
                     RW_ERETURN, "'total'", "reserved");
  expect_score_error("bad_name.lua",
                     "return { score = function()\n"
                     "  return { ['a b'] = 1 } end }\n",
                     RW_ERETURN, "'a b'", NULL);
  expect_score_error("typo.lua",
                     "return { score = function(c)\n"
                     "  return { t = c.time_uss or 0 } end }\n",
                     RW_ERUN, "typo.lua:2: c.time_uss: no such field",
                     "time_us");
  /* deep recursion: Lua's stack limit (or, on a loaded machine, the
   * deadline) stops it */
  rw_limits big = {0, 0, 5000, 0};
  char why[512];
  rw_script *s = load_text("recursion.lua",
                           "local function f(n) return 1 + f(n + 1) end\n"
                           "return { score = function() return { x = f(1) } "
                           "end }\n",
                           &big, why, sizeof why);
  CHECK(s != NULL, "load: %s", why);
  if (s) {
    rw_candidate c;
    rw_candidate_init(&c);
    rw_components out;
    int rc = rw_score(s, &c, NULL, &out, why, sizeof why);
    CHECK(rc == RW_ERUN && strstr(why, "recursion.lua:1: stack overflow"),
          "%d %s", rc, why);
    rw_free(s);
  }
}

/* ---- hostile scripts ----------------------------------------------------- */

static void test_endless(void) {
  expect_score_error(
      "loop.lua", "return { score = function()\n  while true do end\nend }\n",
      RW_EBUDGET, "loop.lua:2:", "instruction budget");
  expect_score_error("loop_pcall.lua",
                     "return { score = function()\n"
                     "  while true do\n"
                     "    pcall(function() while true do end end)\n"
                     "  end\nend }\n",
                     RW_EBUDGET, "loop_pcall.lua:3:", "instruction budget");
  expect_score_error("loop_xpcall.lua",
                     "return { score = function()\n"
                     "  while true do\n"
                     "    xpcall(function() while true do end end,\n"
                     "           function(e) while true do end end)\n"
                     "  end\nend }\n",
                     RW_EBUDGET, "loop_xpcall.lua:", "budget");
  expect_score_error("pcall_tree.lua",
                     "local function f() pcall(f) pcall(f) end\n"
                     "return { score = function() f() return {} end }\n",
                     RW_EBUDGET, "pcall_tree.lua:1:", NULL);
  expect_score_error("recurse_pcall.lua",
                     "local function f() while true do pcall(f) end end\n"
                     "return { score = function() f() end }\n",
                     RW_EBUDGET, "recurse_pcall.lua:1:", NULL);
  expect_load_error("loop_top.lua", "while true do end\nreturn {}\n",
                    RW_EBUDGET, "loop_top.lua:1:", NULL);

  /* the wall deadline: a huge instruction budget, a short deadline */
  rw_limits lim = {0, 1LL << 50, 100, 0};
  char why[512];
  rw_script *s = load_text("slow.lua",
                           "return { score = function()\n"
                           "  local x = 0\n  while true do x = x + 1 end\n"
                           "end }\n",
                           &lim, why, sizeof why);
  CHECK(s != NULL, "load: %s", why);
  if (s) {
    rw_candidate c;
    rw_candidate_init(&c);
    rw_components out;
    double t0 = now_ms();
    int rc = rw_score(s, &c, NULL, &out, why, sizeof why);
    double ms = now_ms() - t0;
    CHECK(rc == RW_EBUDGET && strstr(why, "wall-clock deadline"), "%d %s", rc,
          why);
    CHECK(strstr(why, "slow.lua:3:"), "%s", why);
    CHECK(ms >= 95 && ms < 400, "deadline 100 ms took %.0f ms", ms);
    rw_free(s);
  }

  /* A runaway recursion ends in a stack overflow at some 500,000 levels.
   * luaL_traceback walked them some 40 times to find the last level and
   * say how many it skipped: 0.5 to 1 s after the error, on every failed
   * call of a group. The traceback of so deep a stack shows its first
   * levels only. */
  rw_limits deep = {0, 1LL << 50, 10000, 0};
  s = load_text("recurse.lua",
                "local function f(n) return f(n + 1) + 1 end\n"
                "return { score = function() return { x = f(1) } end }\n",
                &deep, why, sizeof why);
  CHECK(s != NULL, "load: %s", why);
  if (s) {
    rw_candidate c;
    rw_candidate_init(&c);
    rw_components out;
    int rc = rw_score(s, &c, NULL, &out, why, sizeof why);
    CHECK(rc == RW_ERUN && strstr(why, "recurse.lua:1: stack overflow"),
          "%d %s", rc, why);
    const char *tb = rw_traceback(s);
    CHECK(strstr(tb, "recurse.lua:1: in ") &&
              strstr(tb, "more than 200 levels") && !strstr(tb, "skipping"),
          "the first levels only: %s", tb);
    rw_free(s);
  }

  /* C functions that loop without running Lua */
  expect_score_error("rep_empty.lua",
                     "return { score = function()\n"
                     "  local s = string.rep('', 1 << 62)\n"
                     "  while true do end end }\n",
                     RW_EBUDGET, NULL, NULL);
  expect_score_error("pattern.lua",
                     "return { score = function()\n"
                     "  local s = string.rep('a', 3000)\n"
                     "  return { x = s:find('.-.-.-.-.-.-x') and 1 or 0 }\n"
                     "end }\n",
                     RW_ERUN, "pattern.lua:3:", "too expensive");
  expect_score_error("move.lua",
                     "return { score = function()\n"
                     "  table.move({}, 1, 1 << 50, 2)\nend }\n",
                     RW_ERUN, "move.lua:2:", "2^22");
  expect_score_error("gc_loop.lua",
                     "return { score = function()\n"
                     "  setmetatable({}, { __gc = function() while true do "
                     "end end })\nend }\n",
                     RW_ERUN, "gc_loop.lua:2:", "__gc");
  /* the patterns real formulas use still work */
  char ok_why[512];
  rw_script *p = load_text(
      "patterns_ok.lua",
      "return { score = function(c)\n"
      "  local e = 'kernel.cu(12): error: line 7: x' .. string.rep('y', 700)\n"
      "  local a = e:match('line (%d+): (.*)')\n"
      "  local b = c.status:find('^crash') and 1 or 0\n"
      "  local n = 0; for w in e:gmatch('%a+') do n = n + 1 end\n"
      "  local g = e:gsub('y', 'z')\n"
      "  return { a = tonumber(a), b = b, n = n, g = #g,\n"
      "           f = e:find('.-.-.-.-x', 1, true) and 1 or 0 }\n"
      "end }\n",
      NULL, ok_why, sizeof ok_why);
  CHECK(p != NULL, "load: %s", ok_why);
  if (p) {
    rw_candidate c;
    rw_candidate_init(&c);
    c.status = "crashed:SIGSEGV";
    rw_components out;
    int rc = rw_score(p, &c, NULL, &out, ok_why, sizeof ok_why);
    CHECK(rc == RW_OK, "ordinary patterns refused: %s", ok_why);
    CHECK(rc != RW_OK || (out.items[0].value == 7 && out.items[1].value == 1),
          "pattern results");
    rw_components_free(&out);
    rw_free(p);
  }
}

/* For the string-doubling bombs: an 8 MiB cap and a 900 ms deadline.
 * Doubling a string up to the default 64 MiB cap faults in some 128 MiB
 * (~400 ms on this VM at 12 us a page, more under ASan on a loaded
 * machine), and the deadline alarm would stop the loop first. */
static const rw_limits doubling = {8u << 20, 0, 900, 0};

static void test_memory(void) {
  expect_score_error_lim("bomb_string.lua",
                         "return { score = function()\n"
                         "  local s = 'x'\n  while true do s = s .. s end\n"
                         "end }\n",
                         &doubling, RW_EMEM, "memory cap", NULL);
  expect_score_error("bomb_rep.lua",
                     "return { score = function()\n"
                     "  return { n = #string.rep('x', 1 << 28) } end }\n",
                     RW_EMEM, "memory cap", NULL);
  expect_score_error("bomb_pcall.lua",
                     "return { score = function()\n"
                     "  local ok = pcall(string.rep, 'x', 1 << 30)\n"
                     "  return { ok = ok and 1 or 0 } end }\n",
                     RW_EMEM, "memory cap", NULL);
  /* table growth: with the default cap the instruction budget may come
   * first; with an 8 MiB cap memory does (a 5 s wall deadline: under ASan
   * on a loaded machine the default 250 ms could come first) */
  rw_limits lim = {8u << 20, 0, 5000, 0};
  char why[512];
  rw_script *s = load_text("bomb_table.lua",
                           "return { score = function()\n"
                           "  local t = {}\n  local i = 0\n"
                           "  while true do i = i + 1; t[i] = { i } end\n"
                           "end }\n",
                           &lim, why, sizeof why);
  CHECK(s != NULL, "load: %s", why);
  if (s) {
    rw_candidate c;
    rw_candidate_init(&c);
    rw_components out;
    double t0 = now_ms();
    int rc = rw_score(s, &c, NULL, &out, why, sizeof why);
    CHECK(rc == RW_EMEM && strstr(why, "8192 KiB"), "%d %s", rc, why);
    CHECK(now_ms() - t0 < 5000, "took %.0f ms", now_ms() - t0);
    CHECK(rw_memory_used(s) <= (8u << 20), "used %zu", rw_memory_used(s));
    /* the state recovers once the garbage is collected */
    rw_free(s);
  }
  /* top-level memory bomb */
  expect_load_error_lim("bomb_top.lua",
                        "local s = 'x'\nwhile true do s = s .. s end\n",
                        &doubling, RW_EMEM, "memory cap", NULL);
}

static void test_escapes(void) {
  static const struct {
    const char *name, *expr, *want;
  } cases[] = {
      {"io.lua", "io.open('/etc/passwd')", "'io' is not available"},
      {"os.lua", "os.execute('true')", "'os' is not available"},
      {"os_time.lua", "os.time()", "'os' is not available"},
      {"load.lua", "load('return 1')", "'load' is not available"},
      {"loadstring.lua", "loadstring('return 1')",
       "'loadstring' is not available"},
      {"require.lua", "require('io')", "'require' is not available"},
      {"dofile.lua", "dofile('/etc/passwd')", "'dofile' is not available"},
      {"loadfile.lua", "loadfile('/etc/passwd')",
       "'loadfile' is not available"},
      {"dump.lua", "string.dump(print)", "string.dump is disabled"},
      {"dump_method.lua", "('x').dump(print)", "string.dump is disabled"},
      {"debug.lua", "debug.getinfo(1)", "'debug' is not available"},
      {"package.lua", "package.loaded", "'package' is not available"},
      {"gc.lua", "collectgarbage('count')",
       "'collectgarbage' is not available"},
      {"rawset.lua", "rawset(_G, 'x', 1)", "'rawset' is not available"},
      {"coroutine.lua", "coroutine.wrap(print)",
       "'coroutine' is not available"},
      {"random.lua", "math.random()", "math.random is disabled"},
      {"string_write.lua", "(function() string.rep = print end)()",
       "string is read-only"},
      {"math_write.lua", "(function() math.pi = 3 end)()", "math is read-only"},
      {"string_mt.lua", "getmetatable('').__index.rep", "index a nil value"},
      {"string_setmt.lua", "setmetatable(getmetatable(''), {})",
       "bad argument"},
      {"c_mt.lua", "(function(c) setmetatable(c, nil) end)(...)",
       "protected metatable"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char text[512];
    snprintf(text, sizeof text,
             "return { score = function(...)\n"
             "  local x = %s\n"
             "  return { x = 0 }\nend }\n",
             cases[i].expr);
    char want_line[64];
    snprintf(want_line, sizeof want_line, "%s:2:", cases[i].name);
    expect_score_error(cases[i].name, text, RW_ERUN, want_line, cases[i].want);
  }
}

/* print() writes its arguments, tab-separated, after the script's name:
 * nothing else (an earlier version printed its own buffer slot too, as
 * "userdata: 0x..."). */
static void test_print(void) {
  char why[512] = "", out[2048] = "";
  rw_script *s = load_text("printer.lua",
                           "return { score = function(c)\n"
                           "  print('a') print() print(1, nil, 3)\n"
                           "  return { x = 0 }\nend }\n",
                           NULL, why, sizeof why);
  CHECK(s != NULL, "printer.lua loads: %s", why);
  if (!s) return;
  int n;
  const rw_candidate *g = rw_fixture_group(&n);
  rw_context ctx;
  rw_fixture_context(&ctx);
  rw_components comps;
  char cap[300];
  snprintf(cap, sizeof cap, "%s/stderr.txt", tmpdir);
  fflush(stderr);
  int saved = dup(2);
  FILE *f = fopen(cap, "w+");
  if (!f || saved < 0) {
    CHECK(0, "cannot capture stderr in %s", cap);
    rw_free(s);
    return;
  }
  dup2(fileno(f), 2);
  int rc = rw_score(s, &g[0], &ctx, &comps, why, sizeof why);
  fflush(stderr);
  dup2(saved, 2);
  close(saved);
  rewind(f);
  size_t got = fread(out, 1, sizeof out - 1, f);
  out[got] = 0;
  fclose(f);
  CHECK(rc == RW_OK, "printer.lua scores: %s", why);
  char want[1024];
  snprintf(want, sizeof want,
           "[%s/printer.lua] a\n[%s/printer.lua] \n"
           "[%s/printer.lua] 1\tnil\t3\n",
           tmpdir, tmpdir, tmpdir);
  CHECK(!strcmp(out, want), "print writes its arguments only: '%s'", out);
  rw_components_free(&comps);
  rw_free(s);
}

/* A byte-order mark and a "#!" first line are skipped, as Lua's own file
 * loader skips them; line numbers stay the file's. */
static void test_chunk_prefix(void) {
  char why[512] = "";
  rw_script *s =
      load_text("bom.lua",
                "\xEF\xBB\xBF#!/usr/bin/env lua\n"
                "return { score = function(c) return { x = 1 } end }\n",
                NULL, why, sizeof why);
  CHECK(s != NULL, "a BOM and a #! line load: %s", why);
  rw_free(s);
  s = load_text("bom_bad.lua",
                "\xEF\xBB\xBF#!/usr/bin/env lua\nreturn {\n  x = ,\n}\n", NULL,
                why, sizeof why);
  CHECK(!s && strstr(why, "bom_bad.lua:3:"), "the error keeps line 3: %s", why);
  rw_free(s);
}

int main(void) {
  if (!mkdtemp(tmpdir)) {
    perror("mkdtemp");
    return 1;
  }
  test_metrics_in_components_out();
  test_score_group();
  test_no_state_between_calls();
  test_pairs_order();
  test_no_addresses();
  test_broken();
  test_endless();
  test_memory();
  test_escapes();
  test_print();
  test_chunk_prefix();
  char cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
  if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", tmpdir);
  return kl_test_done("test_reward");
}
