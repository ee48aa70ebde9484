/*
 * tests/unit/test_reward_guards.c — the sandbox against C library loops
 * that call nothing, out of the budget hook's reach (reward/guards.c), and
 * how a stop is reported (reward/sandbox.c): table.insert/remove past a
 * huge __len, a sort of huge equal strings, patterns whose work the guard
 * used to miss (a quantifier before '$', %b, a long literal, a
 * backreference), a memory error unwinding past the deadline, a deadline
 * met in C, one VM instruction made expensive (comparing long strings), and
 * print's line cap. Each hostile case hung for minutes or said the wrong
 * thing before its fix; each must now end in its error at once. No time is
 * asserted but one bound 40 times the deadline (the long strings: their
 * loop ran 48 s before its fix, short of ctest's timeout); a hang shows as
 * ctest's timeout.
 *
 * Usage: test_reward_guards [CASE]: one case by name (to run one under a
 * timeout by hand), or all.
 */
#include "reward/reward.h"

#include "kltest.h"

#include <lauxlib.h>
#include <lua.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static char tmpdir[] = "/tmp/kl-test-reward-guards-XXXXXX";

/* For the cases where the deadline is not what is tested: building a
 * 10 MB subject under ASan on a loaded machine must not meet it first (a
 * guard that let the work through would hang past any deadline anyway). */
static const rw_limits slow = {0, 0, 10000, 0};

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static const char *write_script(const char *name, const char *text) {
  static char path[256];
  snprintf(path, sizeof path, "%s/%s", tmpdir, name);
  FILE *f = fopen(path, "wb");
  if (!f) return path;
  fputs(text, f);
  fclose(f);
  return path;
}

/* A configuration-script state (rw_sandbox_open) over script `name`. */
static rw_script *open_state(const char *name, const char *text,
                             const rw_limits *lim) {
  char why[512] = "";
  rw_script *s = rw_sandbox_open(write_script(name, text), "campaign files",
                                 lim, why, sizeof why);
  CHECK(s != NULL, "rw_sandbox_open %s: %s", name, why);
  return s;
}

/* Loads text as script `name` (limits NULL: the defaults), scores one
 * candidate, and checks the code and that why names the script and holds
 * want1 and want2 (NULL to skip). */
static void expect_score(const char *name, const char *text,
                         const rw_limits *lim, int code, const char *want1,
                         const char *want2) {
  char why[512] = "";
  rw_script *s = rw_load(write_script(name, text), lim, why, sizeof why);
  CHECK(s != NULL, "%s: load failed: %s", name, why);
  if (!s) return;
  rw_candidate c;
  rw_candidate_init(&c);
  rw_components out;
  int rc = rw_score(s, &c, NULL, &out, why, sizeof why);
  CHECK(rc == code, "%s: code %d, expected %d (%s)", name, rc, code, why);
  CHECK(strstr(why, name) != NULL || code == RW_OK,
        "%s: why does not name the script: %s", name, why);
  if (want1)
    CHECK(strstr(why, want1), "%s: want '%s' in: %s", name, want1, why);
  if (want2)
    CHECK(strstr(why, want2), "%s: want '%s' in: %s", name, want2, why);
  CHECK(!strstr(why, "?:-1"), "%s: a stop without a place: %s", name, why);
  rw_components_free(&out);
  rw_free(s);
}

/* 1. insert/remove shift #t elements in C; __len makes #t 2^62. */
static void test_insert_remove(void) {
  expect_score("insert_len.lua",
               "return { score = function()\n"
               "  local t = setmetatable({}, {__len = function() return 1 << "
               "62 end})\n"
               "  table.insert(t, 1, 0)\n  return {}\nend }\n",
               &slow, RW_ERUN, "insert_len.lua:3: table.insert", "2^22");
  expect_score("remove_len.lua",
               "return { score = function()\n"
               "  local t = setmetatable({}, {__len = function() return "
               "math.maxinteger end})\n"
               "  table.remove(t, 1)\n  return {}\nend }\n",
               &slow, RW_ERUN, "remove_len.lua:3: table.remove", "2^22");
  /* the length is taken once: a __len that grows between two reads (the
   * guard's and the library's) shifts what it said first */
  expect_score("insert_len_twice.lua",
               "return { score = function()\n"
               "  local n = 0\n"
               "  local t = setmetatable({}, {__len = function()\n"
               "    n = n + 1; return n == 1 and 1 or 1 << 62 end})\n"
               "  table.insert(t, 1, 0)\n  return { n = n }\nend }\n",
               &slow, RW_OK, NULL, NULL);
  /* what formulas do with them still works, Lua's way */
  expect_score("insert_ok.lua",
               "return { score = function()\n"
               "  local t = {}\n"
               "  table.insert(t, 'b') table.insert(t, 1, 'a')\n"
               "  table.insert(t, 3, 'c') table.insert(t, 2, 'x')\n"
               "  local r = table.remove(t, 2)\n"
               "  local last = table.remove(t)\n"
               "  local none = table.remove({})\n"
               "  assert(table.concat(t) == 'ab' and r == 'x' and last == 'c'\n"
               "         and none == nil, table.concat(t))\n"
               "  assert(not pcall(table.insert, t, 5, 'y'))\n"
               "  assert(not pcall(table.insert, t, 1, 2, 3))\n"
               "  assert(not pcall(table.remove, t, 7))\n"
               "  return { n = #t }\nend }\n",
               &slow, RW_OK, NULL, NULL);
}

/* 2. 4096 references to one 16 MiB string: each comparison a strcoll of
 * 16 MiB inside one C call. Now each comparison is a call: the deadline
 * (1 s, so that building the table never meets it first). */
static void test_sort(void) {
  const rw_limits second = {0, 0, 1000, 0};
  expect_score("sort_strings.lua",
               "return { score = function()\n"
               "  local s = ('a'):rep(1 << 20):rep(16)\n"
               "  local t = {}\n  for i = 1, 4096 do t[i] = s end\n"
               "  table.sort(t)\n  return {}\nend }\n",
               &second, RW_EBUDGET, "sort_strings.lua:5:", "deadline");
  expect_score("sort_ok.lua",
               "return { score = function()\n"
               "  local t = {5, 3, 9, 1}\n  table.sort(t)\n"
               "  local u = {'b', 'c', 'a'}\n"
               "  table.sort(u, function(x, y) return x > y end)\n"
               "  assert(table.concat(t, ',') == '1,3,5,9')\n"
               "  assert(table.concat(u) == 'cba')\n"
               "  assert(not pcall(table.sort, {1, 'a'}))\n"
               "  return {}\nend }\n",
               &slow, RW_OK, NULL, NULL);
}

/* 3. Patterns whose work the guard did not count. */
static void test_patterns(void) {
  static const struct {
    const char *name, *body;
  } cases[] = {
      /* a quantifier before a final '$', which can fail: n^2 */
      {"pat_dollar.lua", "local s = ('a'):rep(100000):rep(10) .. 'b'\n"
                         "  return { x = s:find('a*$') or 0 }\n"},
      /* %b: O(n) at each start */
      {"pat_balance.lua", "local s = ('('):rep(100000):rep(10)\n"
                          "  return { x = s:find('%b()') or 0 }\n"},
      /* no quantifier, a long literal: n * m */
      {"pat_literal.lua",
       "local s = ('a'):rep(100000):rep(100)\n"
       "  return { x = s:match(('a'):rep(100000) .. '.b') and 1 or 0 }\n"},
      /* a backreference to a long capture */
      {"pat_backref.lua",
       "local s = ('a'):rep(100000):rep(40)\n"
       "  return { x = s:match('(' .. ('a'):rep(100000) .. ')%1b') and 1 "
       "or 0 }\n"},
      /* a plain find is memcmp at each start: n * m too */
      {"pat_plain.lua",
       "local s = ('a'):rep(100000):rep(100)\n"
       "  return { x = s:find(('a'):rep(100000) .. 'b', 1, true) or 0 }\n"},
      /* the subject-aware bounds do not let these through: every byte is
       * a '#' (each start gets past the first item), and '.-' runs over
       * the whole subject */
      {"pat_first_all.lua", "local s = ('#'):rep(100000)\n"
                            "  return { x = s:find('#.-.-.-x') or 0 }\n"},
      /* the guard's own scans are bounded: 20,000 items on 16 MiB would
       * scan for an hour before refusing */
      {"pat_many_items.lua",
       "local s = ('a'):rep(2^24)\n"
       "  return { x = s:find(('a*'):rep(20000) .. 'x') or 0 }\n"},
      /* found by an adversarial review: %Z is every byte but NUL (read as
       * a literal 'Z' it gave a tiny bound: 4.8 s); %z is NUL */
      {"pat_class_z.lua", "local s = ('a'):rep(30000)\n"
                          "  return { x = s:find('%Z+x') or 0 }\n"},
      {"pat_class_nul.lua", "local s = ('\\0'):rep(30000)\n"
                            "  return { x = s:find('%z+x') or 0 }\n"},
      /* captures are nested calls at every start, and closing one looks
       * back over the open ones (a bound of 2e6 let this through) */
      {"pat_captures.lua",
       "local s = ('a'):rep(2^20)\n"
       "  return { x = s:find(('()'):rep(32) .. 'x') or 0 }\n"},
      /* a plain find is a memchr and a memcmp call at each start, however
       * short the string */
      {"pat_plain_short.lua", "local s = ('a'):rep(25000000)\n"
                              "  return { x = s:find('ab', 1, true) or 0 }\n"},
      /* gsub walks its replacement at each match: '%0' on 10^4 empty
       * matches copies nothing and ran 8 s */
      {"pat_replacement.lua",
       "local s = ('a'):rep(10000)\n"
       "  return { x = #s:gsub('', ('%0'):rep(100000)) }\n"},
      /* and each lookup in a table replacement can walk a chain of 2000
       * __index tables without a call */
      {"pat_replace_table.lua",
       "local T = {} for i = 1, 1990 do T = setmetatable({}, {__index = T}) "
       "end local s = ('a'):rep(100000)\n"
       "  return { x = #s:gsub('a', T) }\n"},
      /* one long word: '[%w_]+' expands over all of it at each start */
      {"pat_long_run.lua",
       "local s = ('a'):rep(100000) .. '\\n'\n"
       "  return { x = #s:gsub('([%w_]+) [^\\n]*', '') }\n"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char text[640], want[64];
    snprintf(text, sizeof text, "return { score = function()\n  %send }\n",
             cases[i].body);
    snprintf(want, sizeof want, "%s:3:", cases[i].name);
    expect_score(cases[i].name, text, &slow, RW_ERUN, want, "too expensive");
  }
  /* what formulas and seed scripts do still passes */
  expect_score(
      "pat_ok.lua",
      "return { score = function()\n"
      "  local big = ('word  '):rep(20000)\n"
      "  local squeezed = big:gsub('%s+', ' ')\n"
      "  local n = 0 for w in big:gmatch('%a+') do n = n + 1 end\n"
      "  local e = 'kernel.cu(12): error: line 7: x' .. ('y'):rep(700)\n"
      "  local line = e:match('line (%d+): (.*)')\n"
      "  local trimmed = ('  x  '):match('^%s*(.-)%s*$')\n"
      "  local name = ('05_blocktile_2d.cu'):gsub('%.cu$', '')\n"
      "  local src = ('#define BM 64\\nint x;\\n'):rep(20)\n"
      "  local d = src:gsub('#define ([%w_]+) [^\\n]*', '#define %1 128')\n"
      "  assert(#squeezed == 100000 and n == 20000 and line == '7')\n"
      "  assert(trimmed == 'x' and name == '05_blocktile_2d')\n"
      "  assert(big:find('word', 1, true) == 1 and big:find('d  w') == 4)\n"
      "  return { d = #d }\nend }\n",
      &slow, RW_OK, NULL, NULL);
  /* What a formula does with a kernel's source, on a source of 10 KB: by
   * the subject's length alone these were refused above ~1.3 KB (worst
   * case ~3e8 steps at 5 KB); the longest runs of the bytes each item
   * matches, and the few starts that get past a '#' or a '_', bound them
   * at some 1e5. */
  expect_score(
      "pat_source.lua",
      "return { score = function()\n"
      "  local src = ('#define BM 64\\n#define TILE_K 8\\n'\n"
      "    .. '__global__ void k(float *a) { a[threadIdx.x] = 0.0f; }\\n'\n"
      "    .. '  __syncthreads(); // one line of a kernel\\n'):rep(80)\n"
      "  local names = {}\n"
      "  for name, v in src:gmatch('#define ([%w_]+) ([^\\n]*)') do\n"
      "    names[name] = v\n"
      "  end\n"
      "  local d, nd = src:gsub('#define ([%w_]+) [^\\n]*', '#define %1 1')\n"
      "  local syncs = select(2, src:gsub('__syncthreads%s*%(%s*%)', ''))\n"
      "  local globals = select(2, src:gsub('__global__%s+void%s+([%w_]+)', "
      "''))\n"
      "  assert(#src > 10000 and names.BM == '64' and names.TILE_K == '8')\n"
      "  assert(nd == 160 and syncs == 80 and globals == 80)\n"
      "  assert(src:match('//[^\\n]*') == '// one line of a kernel')\n"
      "  local renamed = src:gsub('[%w_]+', {BM = 'BLOCK_M'})\n"
      "  assert(select(2, renamed:gsub('BLOCK_M', '')) == 80)\n"
      "  return { d = #d }\nend }\n",
      &slow, RW_OK, NULL, NULL);
}

/* 3b. The bound must stay an upper bound: random patterns over a small
 * alphabet (quantified 'a', '.', classes, sets, captures, anchors, a final
 * 'x' or '$' that makes everything before it backtrack) on subjects made
 * of long runs, through find, match, gmatch (drained) and gsub. Every call
 * the guard lets through must end quickly: its worst case is at most 2e7
 * steps, well under 0.1 s here (the slowest of 30,000 such calls took 68
 * ms); 2 s is what an unsound bound (a factor of n) would blow through.
 * The refused share is printed with KL_TEST_VERBOSE. */
static unsigned long long fuzz_state = 88172645463325252ULL;
static unsigned fuzz(unsigned n) { /* xorshift64: the same cases each run */
  fuzz_state ^= fuzz_state << 13;
  fuzz_state ^= fuzz_state >> 7;
  fuzz_state ^= fuzz_state << 17;
  return (unsigned)(fuzz_state % n);
}

static void test_pattern_fuzz(void) {
  static const char *const items[] = {"a",    "a",     "b",  ".", "%a",
                                      "[ab]", "[^b]",  "%w", "x", "#",
                                      "(a)",  "[%w_]", "%Z", "()"};
  static const char *const quants[] = {"", "", "*", "+", "-", "?"};
  static const char *const fns[] = {"find", "match", "gmatch", "gsub"};
  static char subj[100000];
  rw_script *s = open_state("fuzz.lua", "\n", &slow);
  if (!s) return;
  lua_State *L = rw_sandbox_state(s);
  int accepted = 0, refused = 0;
  double worst = 0;
  char worst_case[200] = "";
  for (int c = 0; c < 3000; c++) {
    char pat[128] = "";
    if (!fuzz(4)) strcat(pat, "^");
    for (unsigned i = 0, k = 1 + fuzz(6); i < k; i++) {
      strcat(pat, items[fuzz(sizeof items / sizeof items[0])]);
      strcat(pat, quants[fuzz(6)]);
    }
    if (!fuzz(3)) strcat(pat, fuzz(2) ? "$" : "x");
    size_t n = fuzz(4) ? fuzz(5000) : fuzz(sizeof subj);
    unsigned mode = fuzz(4);
    for (size_t i = 0; i < n; i++)
      subj[i] = mode == 0   ? 'a'
                : mode == 1 ? (fuzz(20) ? 'a' : 'b')
                : mode == 2 ? "ab#_ \n"[fuzz(6)]
                            : (i % 50 == 49 ? 'b' : 'a');
    const char *fn = fns[fuzz(4)];
    int drain = !strcmp(fn, "gmatch"), gsub = !strcmp(fn, "gsub");
    if (drain)
      luaL_loadstring(L, "local f, s, p = ...\n"
                         "for _ in f(s, p) do end\n");
    lua_getglobal(L, "string");
    lua_getfield(L, -1, fn);
    lua_remove(L, -2);
    lua_pushlstring(L, subj, n);
    lua_pushstring(L, pat);
    if (gsub) lua_pushliteral(L, "");
    char why[512];
    double t0 = now_ms();
    int rc = rw_sandbox_call(s, drain || gsub ? 3 : 2, 0, why, sizeof why);
    double ms = now_ms() - t0;
    if (rc == RW_OK) {
      accepted++;
      if (ms > worst) {
        worst = ms;
        snprintf(worst_case, sizeof worst_case,
                 "string.%s, pattern '%s', %zu-byte subject (kind %u)", fn, pat,
                 n, mode);
      }
    } else {
      refused++;
      CHECK(strstr(why, "too expensive") || strstr(why, "malformed"),
            "%s '%s': %s", fn, pat, why);
    }
  }
  CHECK(worst < 2000, "a call the guard let through took %.0f ms: %s", worst,
        worst_case);
  CHECK(accepted > 1000 && refused > 300,
        "the fuzz exercises both sides: %d accepted, %d refused", accepted,
        refused);
  if (getenv("KL_TEST_VERBOSE"))
    fprintf(stderr, "fuzz: %d accepted, %d refused, slowest %.1f ms (%s)\n",
            accepted, refused, worst, worst_case);
  rw_free(s);
}

/* Each of calls[0..n), after the line setup, in a score function of its
 * own (STEM_i.lua): refused at its line (3) with want in the message. */
static void each_call_refused(const char *stem, const char *setup,
                              const char *const *calls, int n,
                              const char *want) {
  for (int i = 0; i < n; i++) {
    char name[64], text[600], where[80];
    snprintf(name, sizeof name, "%s_%d.lua", stem, i);
    snprintf(text, sizeof text,
             "return { score = function()\n  %s\n"
             "  return { x = #tostring(%s) }\nend }\n",
             setup, calls[i]);
    snprintf(where, sizeof where, "%s:3:", name);
    expect_score(name, text, &slow, RW_ERUN, where, want);
  }
}

/* 3b'. Many arguments read as numbers in one C call: "1" and a MiB of
 * spaces is a number, read whole, and table.unpack passes a call 200
 * references to it (a million fit: math.max ran a minute). */
static void test_many_args(void) {
  static const char *const calls[] = {
      "math.max(table.unpack(t))", "math.min(table.unpack(t))",
      "string.char(table.unpack(t))",
      "string.format(('%d'):rep(200), table.unpack(t))",
      "string.pack(('i'):rep(200), table.unpack(t))"};
  each_call_refused("many_args",
                    "local s = '1' .. (' '):rep(2^20) local t = {} "
                    "for i = 1, 200 do t[i] = s end",
                    calls, 5, "200 MiB of strings");
  expect_score("few_args_ok.lua",
               "return { score = function()\n"
               "  local big = ('x'):rep(2^20)\n"
               "  assert(math.max(1, 2, 3) == 3 and math.min(4, 5) == 4)\n"
               "  assert(#('%s'):format(big) == 2^20 and string.char(65) == "
               "'A')\n"
               "  return { x = #string.pack('i4', 7) }\nend }\n",
               &slow, RW_OK, NULL, NULL);
}

/* 3b'''. The pack functions read their format in one C call, and a space
 * is an option that does nothing: packsize of 30 MB of spaces ran 0.25 s
 * past the deadline. */
static void test_pack_formats(void) {
  static const char *const calls[] = {"string.packsize(f)",
                                      "string.unpack(f, '')", "string.pack(f)",
                                      "f:pack()"};
  each_call_refused("format", "local f = (' '):rep(65 * 1024)", calls, 4,
                    "66560 bytes");
  expect_score("format_ok.lua",
               "return { score = function()\n"
               "  local f = (' '):rep(64 * 1024) .. 'i4'\n"
               "  assert(string.packsize('i4d') == 12)\n"
               "  assert(string.unpack('<i4', string.pack('<i4', 7)) == 7)\n"
               "  return { x = string.packsize(f:sub(3)) }\nend }\n",
               &slow, RW_OK, NULL, NULL);
}

/* 3b''. A table-valued __index or __newindex is followed without a call,
 * through up to 2000 tables: behind a chain of 1990, table.unpack of
 * 900,000 elements ran 17.5 s. Each table function counts its element
 * accesses times the chain. */
static void test_table_chains(void) {
  static const char *const calls[] = {
      "select('#', table.unpack(top, 1, 100000))",
      "#table.concat(top, '', 1, 100000)",
      "#table.move(top, 1, 100000, 1, {})",
      "#table.insert(setmetatable({}, {__index = top, __len = function() "
      "return 100000 end}), 1, 0)",
  };
  for (int i = 0; i < 4; i++) {
    char name[64], text[700], where[80];
    snprintf(name, sizeof name, "chain_%d.lua", i);
    snprintf(text, sizeof text,
             "return { score = function()\n"
             "  local t = {} local top = t for i = 1, 1990 do local n = {} "
             "setmetatable(t, {__index = n, __newindex = n}) t = n end\n"
             "  return { x = %s }\nend }\n",
             calls[i]);
    snprintf(where, sizeof where, "%s:3:", name);
    expect_score(name, text, &slow, RW_ERUN, where,
                 "__index/__newindex tables");
  }
  expect_score("unpack_ok.lua",
               "return { score = function()\n"
               "  local a, b, c = table.unpack({1, 2, 3})\n"
               "  local l = setmetatable({}, {__len = function() return 2 "
               "end, __index = function(_, k) return k * 10 end})\n"
               "  local x, y, z = table.unpack(l)\n"
               "  assert(a + b + c == 6 and x == 10 and y == 20 and z == nil)\n"
               "  assert(table.concat({'a', 'b', 'c'}, ',', 2) == 'b,c')\n"
               "  assert(table.concat({1, 2}) == '12')\n"
               "  return { x = select('#', table.unpack({}, 1, 1000)) }\n"
               "end }\n",
               &slow, RW_OK, NULL, NULL);
}

/* 3c. Weak tables: the collector's atomic phase walks weak-keyed tables
 * until nothing changes, in one step no hook sees (a shuffled chain of
 * 60,000 weak keys: 15 s past a 250 ms deadline). __mode is refused in
 * setmetatable and when added to a metatable later; ordinary metatables
 * (a class whose __index is set after its first object) still work. */
static void test_weak_tables(void) {
  expect_score("weak_direct.lua",
               "return { score = function()\n"
               "  return { x = #setmetatable({}, {__mode = 'k'}) }\nend }\n",
               &slow, RW_ERUN, "weak_direct.lua:2:", "__mode");
  expect_score("weak_late.lua",
               "return { score = function()\n"
               "  local mt = {} local t = setmetatable({}, mt)\n"
               "  mt.__mode = 'k'\n  return {}\nend }\n",
               &slow, RW_ERUN,
               "weak_late.lua:3:", "__mode cannot be added to a metatable");
  expect_score("weak_meta_meta.lua",
               "return { score = function()\n"
               "  local mt = {} local t = setmetatable({}, mt)\n"
               "  setmetatable(mt, {})\n  return {}\nend }\n",
               &slow, RW_ERUN, "weak_meta_meta.lua:3:", "is a metatable");
  expect_score(
      "class_ok.lua",
      "return { score = function()\n"
      "  local C = {} local o = setmetatable({}, C)\n"
      "  C.__index = C C.v = 3\n"
      "  function C.twice(self) return 2 * self.v end\n"
      "  assert(o.v == 3 and o:twice() == 6 and getmetatable(o) == C)\n"
      "  local D = setmetatable({}, {__index = C})\n"
      "  return { x = D.v }\nend }\n",
      &slow, RW_OK, NULL, NULL);
}

/* 4. How a stop is reported. The C functions below run through
 * rw_sandbox_call; usleep makes sure the deadline has passed without any
 * hook event. */
static int noop(lua_State *L) {
  (void)L;
  return 0;
}

/* Past the deadline in C, then a call: the hook stops it there. */
static int late_call(lua_State *L) {
  usleep(60 * 1000);
  lua_pushcfunction(L, noop);
  lua_call(L, 0, 0);
  return 0;
}

/* Past the deadline in C, then over the memory cap with a luaL_Buffer's
 * box open: unwinding the memory error calls the box's __close, and the
 * hook sees the deadline there (what ('a'):rep(33 * 2^20) does when the
 * copy takes longer than the deadline). */
static int late_bomb(lua_State *L) {
  luaL_Buffer b;
  luaL_buffinitsize(L, &b, 1 << 20);
  usleep(60 * 1000);
  lua_newuserdatauv(L, (size_t)1 << 30, 0);
  return 0;
}

/* A refusal Lua recovers from (its emergency collection makes room: the
 * collector was stopped over 40 MiB of garbage), then past the deadline:
 * no memory error is in flight, so the stop is the deadline's. */
static int recovered_then_late(lua_State *L) {
  lua_gc(L, LUA_GCSTOP);
  for (int i = 0; i < 40; i++) {
    lua_newuserdatauv(L, (size_t)1 << 20, 0);
    lua_pop(L, 1);
  }
  lua_newuserdatauv(L, (size_t)30 << 20, 0);
  lua_gc(L, LUA_GCRESTART);
  return late_call(L);
}

/* Near the cap with the string table due to double: its doubling is
 * refused and tolerated, and every new short string asks again, each time
 * after a full emergency collection (out of the hooks' reach). The call
 * fills the memory to 2.75 MiB under the cap, then makes strings; the
 * table doubles at 65,536 strings (1 MiB more) with less than that left. */
static rw_script *strtab_owner;
static int strtab_made;

static int strtab_near_cap(lua_State *L) {
  lua_createtable(L, 200000, 0);
  size_t cap = (size_t)64 << 20, used = rw_memory_used(strtab_owner);
  lua_newuserdatauv(L, cap - used - ((size_t)11 << 20) / 4, 0);
  lua_setglobal(L, "filler");
  for (strtab_made = 0; strtab_made < 200000; strtab_made++) {
    lua_pushfstring(L, "m%d", strtab_made);
    lua_rawseti(L, -2, strtab_made + 1);
  }
  return 0;
}

static void test_stop_reports(void) {
  rw_limits lim = {0, 0, 20, 0};
  char why[512] = "";
  rw_script *s = open_state("stops.lua", "return {}\n", &lim);
  if (!s) return;
  lua_State *L = rw_sandbox_state(s);
  lua_pushcfunction(L, late_call);
  int rc = rw_sandbox_call(s, 0, 0, why, sizeof why);
  CHECK(rc == RW_EBUDGET && strstr(why, "deadline"), "late call: %d %s", rc,
        why);
  CHECK(strstr(why, "(in a C function)") && !strstr(why, "?:-1") &&
            strstr(why, "stops.lua"),
        "a stop in C says so, naming the script: %s", why);
  lua_pushcfunction(L, late_bomb);
  rc = rw_sandbox_call(s, 0, 0, why, sizeof why);
  CHECK(rc == RW_EMEM && strstr(why, "memory cap"),
        "the memory error, not the deadline met unwinding it: %d %s", rc, why);
  lua_pushcfunction(L, recovered_then_late);
  rc = rw_sandbox_call(s, 0, 0, why, sizeof why);
  CHECK(rc == RW_EBUDGET && strstr(why, "deadline"),
        "a refusal Lua recovered from is no memory error: %d %s", rc, why);
  rw_free(s);

  /* The string table's refused doubling (found by an adversarial review):
   * after 8 refusals in one call all growth is refused, so the call ends
   * a few strings after the first, not when the last byte is used (some
   * 11,000 strings and full collections later: 6 s here). */
  rw_limits roomy = {0, 0, 60000, 0};
  s = open_state("strtab.lua", "return {}\n", &roomy);
  if (!s) return;
  strtab_owner = s;
  L = rw_sandbox_state(s);
  lua_pushcfunction(L, strtab_near_cap);
  rc = rw_sandbox_call(s, 0, 0, why, sizeof why);
  CHECK(rc == RW_EMEM, "strings near the cap: a memory error: %d %s", rc, why);
  CHECK(strtab_made > 60000 && strtab_made < 67000,
        "the call ended after %d strings; expected a few past the string "
        "table's refused doubling at ~65,000 (76,528 when each refusal "
        "is tolerated)",
        strtab_made);
  rw_free(s);

  /* the case found: a 33 MiB string.rep under a 64 MiB cap, whose copy
   * took longer than the deadline */
  expect_score("rep33.lua",
               "return { score = function()\n"
               "  local s = ('a'):rep(33 * 2^20)\n  return { x = #s }\nend }\n",
               NULL, RW_EMEM, "memory cap", NULL);
}

/* 5. One VM instruction can cost milliseconds: `a < b` on two 8 MiB
 * strings of NUL bytes calls strcoll once per NUL (about 50 ms here). The
 * count hook looks at the clock only every RW_HOOK_EVERY (1000)
 * instructions, and the loop below takes 3 per comparison, so 331
 * comparisons (16 s) ran before the hook saw a 250 ms deadline. With the
 * deadline alarm (sandbox.c) the loop stops at the first instruction past
 * it: 5 comparisons here, under 100 on a machine 20 times as fast. The
 * count is read from the state, so the check asserts no time. */
/* Runs the loop in a fresh state on the calling thread; where names it. */
static void compare_loop(const char *where) {
  const rw_limits lim = {0, 0, 250, 0};
  char why[512] = "";
  rw_script *s = open_state("long_compare.lua", "\n", &lim);
  if (!s) return;
  lua_State *L = rw_sandbox_state(s);
  /* the strings are made here, outside any call and its deadline: under
   * ASan on a loaded machine, ('\0'):rep(8 * 2^20) took longer than 250 ms
   * (faulting in a string and its buffer takes ~60 ms on this VM alone) */
  size_t len = (size_t)8 << 20;
  char *zeros = calloc(len, 1);
  CHECK(zeros != NULL, "8 MiB for the strings");
  if (!zeros) {
    rw_free(s);
    return;
  }
  lua_pushlstring(L, zeros, len);
  lua_setglobal(L, "a");
  lua_pushlstring(L, zeros, len);
  lua_setglobal(L, "b");
  free(zeros);
  lua_pushinteger(L, 0);
  lua_setglobal(L, "n");
  CHECK(luaL_loadstring(L, "local a, b = a, b\n"
                           "for i = 1, 100000 do\n"
                           "  if a < b then break end\n"
                           "  n = i\n"
                           "end\n") == LUA_OK,
        "loop chunk loads");
  double t0 = now_ms();
  int rc = rw_sandbox_call(s, 0, 0, why, sizeof why);
  double ms = now_ms() - t0;
  CHECK(rc == RW_EBUDGET && strstr(why, "wall-clock deadline"),
        "the compare loop meets its deadline: %d %s", rc, why);
  lua_getglobal(L, "n");
  long long n = (long long)lua_tointeger(L, -1);
  lua_pop(L, 1);
  CHECK(n < 100,
        "%s: %lld comparisons of 8 MiB strings ran (%.0f ms) under a 250 ms "
        "deadline; the deadline alarm stops the loop at the next instruction",
        where, n, ms);
  if (getenv("KL_TEST_VERBOSE"))
    fprintf(stderr, "%s: %lld comparisons, %.0f ms\n", where, n, ms);
  rw_free(s);
}

static void *compare_thread(void *arg) {
  compare_loop(arg);
  return NULL;
}

/* POSIX timers of this process (/proc/self/timers: one "ID:" line each),
 * or -1 when the kernel does not list them. */
static int count_timers(void) {
  FILE *f = fopen("/proc/self/timers", "r");
  if (!f) return -1;
  char line[256];
  int n = 0;
  while (fgets(line, sizeof line, f))
    n += !strncmp(line, "ID:", 3);
  fclose(f);
  return n;
}

/* On the main thread and on a thread of its own: the alarm's signal goes to
 * the thread whose call ran late, and a thread's timer goes with it. */
static void test_expensive_instructions(void) {
  compare_loop("main thread");
  int before = count_timers();
  pthread_t th;
  CHECK(pthread_create(&th, NULL, compare_thread, "second thread") == 0,
        "pthread_create");
  pthread_join(th, NULL);
  int after = count_timers();
  CHECK(after == before,
        "timers: %d before a scoring thread, %d after it ended", before, after);
}

/* 6. print: at most 100 lines, newlines inside one print counted, control
 * bytes escaped. */
static void test_print_lines(void) {
  char why[512] = "";
  rw_script *s =
      rw_load(write_script("flood.lua",
                           "return { score = function()\n"
                           "  for i = 1, 300 do\n"
                           "    print(('\\27[2J\\27[31mfake: ok\\n'):rep(40))\n"
                           "  end\n  return {}\nend }\n"),
              &slow, why, sizeof why);
  CHECK(s != NULL, "flood.lua loads: %s", why);
  if (!s) return;
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
  rw_candidate c;
  rw_candidate_init(&c);
  rw_components out;
  int rc = rw_score(s, &c, NULL, &out, why, sizeof why);
  fflush(stderr);
  dup2(saved, 2);
  close(saved);
  rewind(f);
  static char text[1 << 20];
  size_t got = fread(text, 1, sizeof text - 1, f);
  text[got] = 0;
  fclose(f);
  CHECK(rc == RW_OK, "flood.lua scores: %s", why);
  int lines = 0;
  for (size_t i = 0; i < got; i++)
    lines += text[i] == '\n';
  CHECK(lines <= 101,
        "print wrote %d lines; expected at most 100 and one "
        "saying the rest is suppressed",
        lines);
  CHECK(strstr(text, "suppressed") != NULL, "the cap is said: %.200s", text);
  CHECK(memchr(text, 27, got) == NULL, "an ESC byte reached stderr");
  CHECK(strstr(text, "fake: ok") != NULL, "the text itself is kept: %.200s",
        text);
  rw_components_free(&out);
  rw_free(s);
}

int main(int argc, char **argv) {
  if (!mkdtemp(tmpdir)) {
    perror("mkdtemp");
    return 1;
  }
  static const struct {
    const char *name;
    void (*fn)(void);
  } tests[] = {{"insert_remove", test_insert_remove},
               {"sort", test_sort},
               {"patterns", test_patterns},
               {"fuzz", test_pattern_fuzz},
               {"weak", test_weak_tables},
               {"args", test_many_args},
               {"formats", test_pack_formats},
               {"chains", test_table_chains},
               {"stops", test_stop_reports},
               {"expensive", test_expensive_instructions},
               {"print", test_print_lines}};
  for (size_t i = 0; i < sizeof tests / sizeof tests[0]; i++)
    if (argc < 2 || !strcmp(argv[1], tests[i].name)) tests[i].fn();
  char cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
  if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", tmpdir);
  return kl_test_done("test_reward_guards");
}
