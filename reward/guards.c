/*
 * reward/guards.c — the library functions the sandbox wraps or replaces
 * because they can loop inside one C call: string.rep, the pattern
 * functions (find, match, gmatch, gsub), the functions that read many
 * arguments as numbers (math.max, min, string.char, format, pack),
 * the pack formats (string.pack, packsize, unpack), table.move, table.insert,
 * table.remove and table.sort; and, for a reward that rescoring
 * reproduces, pairs (keys in order) and tostring and string.format (no
 * addresses).
 *
 * The budget hook (sandbox.c) runs on calls and every RW_HOOK_EVERY VM
 * instructions, so a C loop that calls nothing is out of its reach: ten
 * seconds inside one strcoll or one backtracking match keep the lab waiting
 * ten seconds past the deadline. Each guard here either bounds the work
 * before the call (an estimate it can refuse, with a message naming the
 * function and the limit), or turns the loop's steps into calls the hook
 * sees (sort's comparisons).
 *
 * Not here: the hook itself, pcall/xpcall, print (sandbox.c).
 */
#include "reward/internal.h"

#include <lauxlib.h>

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

/* string.rep("", huge) loops huge times in C without allocating. */
static int safe_rep(lua_State *L) {
  size_t l, lsep;
  luaL_checklstring(L, 1, &l);
  lua_Integer n = luaL_checkinteger(L, 2);
  luaL_optlstring(L, 3, "", &lsep);
  if (n <= 0 || l + lsep == 0) {
    lua_pushliteral(L, "");
    return 1;
  }
  lua_pushvalue(L, lua_upvalueindex(1));
  lua_insert(L, 1);
  lua_call(L, lua_gettop(L) - 1, 1);
  return 1;
}

/* ---- patterns ------------------------------------------------------------
 * Pattern matching backtracks inside one C call: ("a"):rep(700):find(
 * ".-.-.-.-x") would run for hours. Before each call the guard computes an
 * upper bound on the steps (single-item tests) of the call and refuses it
 * above lim.pattern_steps (2e7 by default, ~0.1 s).
 *
 * The bound follows lstrlib.c's matcher. For a subject of n bytes, one
 * attempt at one start position costs, item by item from the left:
 *   - a single item ('a', '.', '%d', a set [...], '%f[set]'): its length
 *     in the pattern (a set is scanned byte by byte), then the rest once;
 *   - a '*', '+' or '-' quantifier: up to n + 1 expansions, each item test
 *     its length, and the rest tried after each, so n + 1 times;
 *   - '?': the rest tried twice;
 *   - '%bxy' and a backreference '%1'..'%9': one scan or compare of up to
 *     n bytes (no backtracking: the rest once);
 *   - '$' at the end is a single item: it can fail, and make everything
 *     before it backtrack (find("a*$") on "aaa...b" is n^2);
 *   - '(' one step (a nested match call), ')' a step for each capture
 *     opened so far (closing one looks back over them); ("()"):rep(32)
 *     .. "x" on 19 MB ran 3 s when captures cost nothing.
 * Unanchored calls try every one of the n + 1 start positions, so a
 * literal pattern of m bytes costs n * m ((aaa...ab) on aaa...a), and each
 * quantifier before something that can fail multiplies that by n + 1.
 * One exception keeps gsub("%s+", " ") cheap:
 * the last item's quantifier, when only captures follow it, cannot
 * backtrack (the rest cannot fail), and its expansion ends in a match, which
 * the next search starts after: n in all, not per start.
 *
 * A find with plain = true, or a find pattern without special characters
 * (which Lua searches the same way), is memchr then memcmp of up to m bytes
 * at each of n - m + 1 starts: a step each, or m / 16 when longer
 * (memcmp compares 16 bytes or more a step).
 *
 * gsub's replacement adds its own work per match (replace_steps).
 *
 * Two facts about the subject itself make the bound much closer for the
 * patterns formulas use on kernel sources (gsub("#define ([%w_]+) [^\n]*",
 * ...) on 5 KB: ~3e8 by length alone, refused; ~4e4 with them):
 *   - a quantified single-character item ('x*', '[%w_]+', '.-') expands
 *     at most as far as the longest run of subject bytes it matches, plus
 *     one: that run, not n, multiplies the rest;
 *   - an unanchored attempt whose first item is a single character (alone
 *     or with '+') gets past that item only at the subject bytes it
 *     matches; at every other start it costs the item's test.
 * Both look at each byte of the subject once per item (the bytes an item
 * matches are found with a 256-entry table built from its class, as
 * lstrlib's singlematch decides), up to pattern_steps bytes in all per
 * call. Items the tables do not model (%b, %f, backreferences) keep the
 * bound by length. A table that got a class wrong would make the bound
 * unsound: %Z read as a literal 'Z' let find("%Z+x") run 4.8 s on 30 KB
 * (tests/unit/test_reward_guards.c has it, and a fuzz of random patterns
 * whose accepted calls must end quickly). */
enum { PAT_OTHER, PAT_FIND, PAT_GMATCH, PAT_GSUB };

/* The index just past the set that starts at p[i] == '[' (as lstrlib's
 * classEnd: the first byte after '[' or '[^' belongs to the set even when
 * it is ']'; '%' escapes the next byte). m when the set is not closed (Lua
 * raises "malformed pattern" itself). */
static size_t set_end(const char *p, size_t m, size_t i) {
  i++;
  if (i < m && p[i] == '^') i++;
  do {
    if (i >= m) return m;
    if (p[i++] == '%' && i < m) i++;
  } while (i < m && p[i] != ']');
  return i < m ? i + 1 : m;
}

/* Whether byte c is in class %cl (lstrlib's match_class: the C library's
 * character classes; an upper-case letter is the complement; any other
 * byte after '%' stands for itself). */
static int in_class(int c, int cl) {
  int r;
  switch (tolower(cl)) {
  case 'a':
    r = isalpha(c);
    break;
  case 'c':
    r = iscntrl(c);
    break;
  case 'd':
    r = isdigit(c);
    break;
  case 'g':
    r = isgraph(c);
    break;
  case 'l':
    r = islower(c);
    break;
  case 'p':
    r = ispunct(c);
    break;
  case 's':
    r = isspace(c);
    break;
  case 'u':
    r = isupper(c);
    break;
  case 'w':
    r = isalnum(c);
    break;
  case 'x':
    r = isxdigit(c);
    break;
  case 'z': /* deprecated in 5.2, still in 5.4's lstrlib */
    r = c == 0;
    break;
  default:
    return cl == c;
  }
  if (isupper(cl)) r = !r;
  return r != 0;
}

/* Fills in[256] with the bytes the single-character item p[at, end)
 * matches: '.', '%x', a set '[...]' or a plain byte (lstrlib's
 * singlematch and matchbracketclass). end is what set_end or the item's
 * length gave; a set that is not closed matches everything here (Lua
 * raises "malformed pattern" anyway). */
static void item_bytes(const char *p, size_t at, size_t end, char in[256]) {
  int c;
  if (p[at] == '.' || (p[at] == '[' && (end < at + 2 || p[end - 1] != ']'))) {
    memset(in, 1, 256);
    return;
  }
  if (p[at] == '%') {
    if (at + 1 >= end) { /* a pattern that ends in '%': Lua raises */
      memset(in, 1, 256);
      return;
    }
    for (c = 0; c < 256; c++)
      in[c] = (char)in_class(c, (unsigned char)p[at + 1]);
    return;
  }
  if (p[at] != '[') {
    memset(in, 0, 256);
    in[(unsigned char)p[at]] = 1;
    return;
  }
  size_t i = at + 1, ec = end - 1; /* ec: the closing ']' */
  int neg = p[i] == '^';
  if (neg) i++;
  memset(in, 0, 256);
  for (; i < ec; i++) {
    unsigned char x = (unsigned char)p[i];
    if (x == '%' && i + 1 < ec) {
      i++;
      for (c = 0; c < 256; c++)
        in[c] |= (char)in_class(c, (unsigned char)p[i]);
    } else if (i + 2 < ec && p[i + 1] == '-') {
      for (c = x; c <= (unsigned char)p[i + 2]; c++)
        in[c] = 1;
      i += 2;
    } else {
      in[x] = 1;
    }
  }
  if (neg)
    for (c = 0; c < 256; c++)
      in[c] = !in[c];
}

/* The longest run of subject bytes in `in`, and how many there are. */
static void subject_runs(const unsigned char *s, size_t n, const char in[256],
                         size_t *longest, size_t *count) {
  size_t run = 0, best = 0, all = 0;
  for (size_t k = 0; k < n; k++) {
    if (in[s[k]]) {
      all++;
      if (++run > best) best = run;
    } else {
      run = 0;
    }
  }
  *longest = best;
  *count = all;
}

/* lstrlib's nospecials: a find with such a pattern is a plain find. */
static int no_specials(const char *p, size_t m) {
  for (size_t i = 0; i < m; i++)
    if (p[i] && strchr("^$*+?.([%-", p[i])) return 0;
  return 1;
}

/* Upper bound on the steps of one call with pattern p (m bytes) on subject
 * subj (n bytes; the comment above says how). */
static double pattern_steps(const char *p, size_t m, const char *subj, size_t n,
                            int kind, int plain, double scan_budget) {
  const unsigned char *su = (const unsigned char *)subj;
  double n1 = (double)n + 1;
  char in[256];
  size_t longest, count;
  /* starts that get past a single first item; -1: every start does */
  double first_len = 0, first_count = -1;
  int first = 1;
  if (kind == PAT_FIND && (plain || no_specials(p, m)))
    return n < m ? 0 : ((double)(n - m) + 1) * fmax(1, (double)m / 16);
  size_t i = 0;
  int anchored = kind != PAT_GMATCH && m > 0 && p[0] == '^';
  if (anchored) i = 1;
  /* items at or past tail are captures only: nothing there can fail */
  size_t tail = m;
  while (tail > i && (p[tail - 1] == '(' || p[tail - 1] == ')'))
    tail--;
  /* one attempt costs a + b * (cost of the rest of the pattern) */
  double a = 0, b = 1, once = 0;
  int caps = 0; /* captures opened so far */
  while (i < m) {
    size_t at = i;
    if (p[i] == '(' || p[i] == ')') {
      /* opening a capture is a nested match call; closing one looks back
       * over up to every capture opened so far */
      a += b * (p[i] == '(' ? 1 : (double)caps);
      caps += p[i] == '(';
      i++;
      continue;
    }
    if (p[i] == '%' && i + 1 < m &&
        (p[i + 1] == 'b' || (p[i + 1] >= '0' && p[i + 1] <= '9'))) {
      i += p[i + 1] == 'b' ? 4 : 2; /* %bxy, %1 */
      a += b * n1;
      first = 0;
      continue;
    }
    if (p[i] == '%' && i + 1 < m && p[i + 1] == 'f') { /* %f[set] */
      i += 2;
      if (i < m && p[i] == '[') i = set_end(p, m, i);
      a += b * (double)(i - at);
      first = 0;
      continue;
    }
    if (p[i] == '[')
      i = set_end(p, m, i);
    else
      i += p[i] == '%' ? 2 : 1;
    if (i > m) i = m;
    double len = (double)(i - at);
    char q = i < m ? p[i] : 0;
    int quantified = q == '*' || q == '+' || q == '-';
    /* The guard is a C loop too: its scans of one call share scan_budget
     * (a pattern of 10,000 items on 32 MiB would scan for minutes, a set
     * of a million '%a' build its table for long). Past it an item is
     * taken to match every byte, which only loosens the bound. */
    int modelled = quantified || (first && q != '?');
    double cost = (double)n + 256 * len;
    longest = count = n;
    if (modelled && cost <= scan_budget) {
      scan_budget -= cost;
      item_bytes(p, at, i, in);
      subject_runs(su, n, in, &longest, &count);
    }
    if (modelled && first && q != '*' && q != '-') {
      first_len = a + len; /* the captures before it, and its test */
      first_count = (double)count;
    }
    first = 0;
    if (quantified) {
      double expansions = (double)longest + 1;
      i++;
      if (i >= tail) { /* the last item: see above */
        a += b * len;
        once += n1 * len;
      } else {
        a += b * expansions * len;
        b *= expansions;
      }
    } else if (q == '?') {
      i++;
      a += b * len;
      b *= 2;
    } else {
      a += b * len;
    }
  }
  if (anchored) return a + b + once;
  double starts = n1 * (a + b);
  if (first_count >= 0 && n1 * first_len + first_count * (a + b) < starts)
    starts = n1 * first_len + first_count * (a + b);
  return starts + once;
}

/* gsub's replacement (argument 3) runs once per match, and there are at
 * most n + 1 matches (or max_n, argument 4). A string is walked whole each
 * time (lstrlib's add_s; "%0" on an empty match copies nothing, so the
 * memory cap never stops a long one); a table lookup may walk a chain of
 * table-valued __index (chain_depth, below), with no call the hook sees; a
 * function is a call, which it sees. Anything else Lua refuses itself. */
static double chain_depth(lua_State *L, int idx);

static double replace_steps(lua_State *L, size_t n, double *matches_out) {
  double matches = (double)n + 1;
  int isnum;
  lua_Integer max_n = lua_tointegerx(L, 4, &isnum);
  if (isnum && max_n >= 0 && (double)max_n < matches) matches = (double)max_n;
  double each = 1;
  if (lua_type(L, 3) == LUA_TSTRING)
    each += (double)lua_rawlen(L, 3);
  else if (lua_type(L, 3) == LUA_TTABLE)
    each += chain_depth(L, 3);
  *matches_out = matches;
  return matches * each;
}

static int guarded_pattern(lua_State *L) {
  size_t n, m;
  const char *subj = luaL_checklstring(L, 1, &n);
  const char *p = luaL_checklstring(L, 2, &m);
  int kind = (int)lua_tointeger(L, lua_upvalueindex(3));
  int plain = kind == PAT_FIND && lua_toboolean(L, 4);
  rw_script *s = rw__owner(L);
  double steps =
      pattern_steps(p, m, subj, n, kind, plain, s->lim.pattern_steps);
  double matches = 0;
  double repl = kind == PAT_GSUB ? replace_steps(L, n, &matches) : 0;
  char msg[300];
  if (repl > s->lim.pattern_steps ||
      (steps <= s->lim.pattern_steps && steps + repl > s->lim.pattern_steps)) {
    snprintf(msg, sizeof msg,
             "replacement too expensive for %s (worst case ~%.0e steps: it "
             "runs at each of up to %.0f matches on %zu bytes; the limit is "
             "%.0e); use a shorter replacement or subject, or a function",
             s->kind, repl, matches, n, s->lim.pattern_steps);
    return luaL_error(L, "string.gsub: %s", msg);
  }
  if (steps > s->lim.pattern_steps) {
    snprintf(msg, sizeof msg,
             "%s too expensive for %s (worst case ~%.0e steps for a %zu-byte "
             "%s on %zu bytes; the limit is %.0e); use %s",
             plain ? "plain find" : "pattern", s->kind, steps, m,
             plain ? "string" : "pattern", n, s->lim.pattern_steps,
             plain ? "a shorter subject"
                   : "a plain find, a simpler pattern or a shorter subject");
    return luaL_error(L, "%s: %s", lua_tostring(L, lua_upvalueindex(2)), msg);
  }
  lua_pushvalue(L, lua_upvalueindex(1));
  lua_insert(L, 1);
  lua_call(L, lua_gettop(L) - 1, LUA_MULTRET);
  return lua_gettop(L);
}

/* ---- pack formats --------------------------------------------------------
 * string.pack, packsize and unpack read their format option by option in
 * one C call, and a space is an option that does nothing: packsize of 30
 * MB of spaces ran 0.25 s past the deadline, and the memory cap allows
 * twice that. An honest format is a few dozen options; 64 KiB parse in
 * well under a millisecond. */
#define FORMAT_MAX_BYTES ((size_t)64 << 10)

static void check_format(lua_State *L) {
  size_t m = 0;
  if (lua_type(L, 1) == LUA_TSTRING) lua_tolstring(L, 1, &m);
  if (m > FORMAT_MAX_BYTES)
    luaL_error(L,
               "%s: a format of %I bytes is too long for %s (at most 64 "
               "KiB)",
               lua_tostring(L, lua_upvalueindex(2)), (lua_Integer)m,
               rw__owner(L)->kind);
}

static int guarded_format(lua_State *L) {
  check_format(L);
  lua_pushvalue(L, lua_upvalueindex(1));
  lua_insert(L, 1);
  lua_call(L, lua_gettop(L) - 1, LUA_MULTRET);
  return lua_gettop(L);
}

/* ---- many arguments ------------------------------------------------------
 * math.max and min, string.char, format and pack turn each argument into a
 * number inside one C call, and a string argument is read whole to do it:
 * "1" followed by 16 MB of spaces is a valid number. table.unpack hands a
 * call up to a million arguments, all references to one such string, so
 * math.max(table.unpack(t)) ran a minute past the deadline (an adversarial
 * review found it). The string arguments of one call may hold at most 64
 * MiB in all, the memory cap's worth: no single string is refused, and
 * reading them takes some tens of ms. */
#define ARGS_MAX_BYTES ((double)(64u << 20))

/* guarded_args' kind (upvalue 3) for string.pack: its format is checked
 * too. */
enum { ARGS_PLAIN, ARGS_FORMAT };

static int guarded_args(lua_State *L) {
  if (lua_tointeger(L, lua_upvalueindex(3)) == ARGS_FORMAT) check_format(L);
  double bytes = 0;
  int n = lua_gettop(L);
  for (int i = 1; i <= n; i++)
    if (lua_type(L, i) == LUA_TSTRING) bytes += (double)lua_rawlen(L, i);
  if (bytes > ARGS_MAX_BYTES)
    return luaL_error(L,
                      "%s: %d arguments holding %d MiB of strings are too "
                      "many for %s (at most 64 MiB in one call)",
                      lua_tostring(L, lua_upvalueindex(2)), n,
                      (int)(bytes / (1 << 20)), rw__owner(L)->kind);
  lua_pushvalue(L, lua_upvalueindex(1));
  lua_insert(L, 1);
  lua_call(L, n, LUA_MULTRET);
  return lua_gettop(L);
}

/* ---- tables --------------------------------------------------------------
 * table.move, insert, remove, unpack and concat reach elements one by one
 * in C (lua_geti, lua_seti); #t is whatever __len says, 2^62 included. A
 * metamethod that is a function is a call, which the hook sees; one that is
 * a table is followed without a call, through up to 2000 tables (the VM's
 * MAXTAGLOOP): behind a chain of 1990, table.unpack of 900,000 elements ran
 * 17.5 s and table.move of 100,000 3.6 s (an adversarial review found
 * them). So each call may make at most 2^22 element accesses, each counted
 * as 1 + the longest chain of table-valued __index or __newindex behind
 * the tables it reads and writes. */
#define TABLE_STEPS_MAX ((double)(1 << 22))

/* The longest chain of table-valued __index or __newindex metamethods
 * behind the value at idx (at most 2000, where Lua stops following). */
static double chain_depth(lua_State *L, int idx) {
  static const char *const keys[] = {"__index", "__newindex"};
  int deepest = 0, top = lua_gettop(L);
  idx = lua_absindex(L, idx);
  for (int k = 0; k < 2; k++) {
    int depth = 0;
    lua_pushvalue(L, idx);
    while (depth < 2000 && lua_getmetatable(L, -1)) { /* v, mt */
      lua_pushstring(L, keys[k]);
      if (lua_rawget(L, -2) != LUA_TTABLE) break; /* v, mt, next */
      depth++;
      lua_copy(L, -1, -3);
      lua_pop(L, 2); /* next */
    }
    lua_settop(L, top);
    if (depth > deepest) deepest = depth;
  }
  return deepest;
}

/* Refuses `count` element accesses (fn's) to the values at i1 and i2 (0:
 * none). */
static void check_accesses(lua_State *L, const char *fn, double count, int i1,
                           int i2) {
  double depth = (i1 ? chain_depth(L, i1) : 0) + (i2 ? chain_depth(L, i2) : 0);
  if (count * (1 + depth) < TABLE_STEPS_MAX) return;
  const char *kind = rw__owner(L)->kind;
  if (depth > 0)
    luaL_error(L,
               "%s: at most 2^22 element accesses in %s (%I elements, each "
               "through up to %d __index/__newindex tables)",
               fn, kind, (lua_Integer)count, (int)depth);
  luaL_error(L,
             "%s: at most 2^22 elements in %s (the length, __len included, "
             "is too large)",
             fn, kind);
}

/* Elements from i to j, as a double (j < i: none). */
static double span(lua_Integer i, lua_Integer j) {
  return j < i ? 0 : (double)((lua_Unsigned)j - (lua_Unsigned)i) + 1;
}

static int guarded_move(lua_State *L) {
  lua_Integer f = luaL_checkinteger(L, 2), e = luaL_checkinteger(L, 3);
  check_accesses(L, "table.move", span(f, e), 1, lua_isnoneornil(L, 5) ? 1 : 5);
  lua_pushvalue(L, lua_upvalueindex(1));
  lua_insert(L, 1);
  lua_call(L, lua_gettop(L) - 1, 1);
  return 1;
}

/* table.unpack(t, i, j) and table.concat(t, sep, i, j): i and j are the
 * arguments at `at` and at + 1. The length is taken here, once, and passed
 * on, so that a __len answering 1 and then 2^62 cannot slip past. */
static int guarded_range(lua_State *L, int at, int nresults) {
  if (at > 2) luaL_optlstring(L, 2, "", NULL); /* concat's separator */
  lua_Integer i = luaL_optinteger(L, at, 1);
  lua_Integer j = lua_isnoneornil(L, at + 1) ? luaL_len(L, 1)
                                             : luaL_checkinteger(L, at + 1);
  check_accesses(L, lua_tostring(L, lua_upvalueindex(2)), span(i, j), 1, 0);
  lua_settop(L, at - 1);
  lua_pushvalue(L, lua_upvalueindex(1));
  lua_insert(L, 1);
  lua_pushinteger(L, i);
  lua_pushinteger(L, j);
  lua_call(L, at + 1, nresults);
  return lua_gettop(L);
}

static int guarded_unpack(lua_State *L) {
  return guarded_range(L, 2, LUA_MULTRET);
}

static int guarded_concat(lua_State *L) {
  return guarded_range(L, 3, 1);
}

/* table.insert and table.remove are Lua 5.4's tinsert and tremove (ltablib.c)
 * with the guard in between, not wrappers: a wrapper would take the length
 * once and the original again, and a __len that answers 1 and then 2^62
 * would slip past. The length is taken once, as Lua takes it (luaL_len:
 * __len, then an integer check), and only tables are accepted (the
 * sandbox has no userdata). */
static int guarded_insert(lua_State *L) {
  luaL_checktype(L, 1, LUA_TTABLE);
  lua_Integer e = luaL_len(L, 1);
  e = (lua_Integer)((lua_Unsigned)e + 1u); /* first empty element */
  lua_Integer pos;
  switch (lua_gettop(L)) {
  case 2:
    pos = e;
    break;
  case 3:
    pos = luaL_checkinteger(L, 2);
    /* check 1 <= pos <= e, as Lua does */
    luaL_argcheck(L, (lua_Unsigned)pos - 1u < (lua_Unsigned)e, 2,
                  "position out of bounds");
    /* e - pos shifts, each a read and a write of t */
    check_accesses(L, "table.insert", span(pos, e) - 1, 1, 1);
    for (lua_Integer i = e; i > pos; i--) { /* t[i] = t[i - 1] */
      lua_geti(L, 1, i - 1);
      lua_seti(L, 1, i);
    }
    break;
  default:
    return luaL_error(L, "wrong number of arguments to 'insert'");
  }
  lua_seti(L, 1, pos); /* t[pos] = v */
  return 0;
}

static int guarded_remove(lua_State *L) {
  luaL_checktype(L, 1, LUA_TTABLE);
  lua_Integer size = luaL_len(L, 1);
  lua_Integer pos = luaL_optinteger(L, 2, size);
  if (pos != size) /* check 1 <= pos <= size + 1, as Lua does */
    luaL_argcheck(L, (lua_Unsigned)pos - 1u <= (lua_Unsigned)size, 2,
                  "position out of bounds");
  check_accesses(L, "table.remove", pos < size ? span(pos, size) - 1 : 0, 1, 1);
  lua_geti(L, 1, pos); /* the result */
  for (; pos < size; pos++) {
    lua_geti(L, 1, pos + 1);
    lua_seti(L, 1, pos); /* t[pos] = t[pos + 1] */
  }
  lua_pushnil(L);
  lua_seti(L, 1, pos); /* t[pos] = nil */
  return 1;
}

/* The comparator table.sort gets when the script passes none: the same
 * order (lua_compare, __lt included), but each comparison is now a call,
 * so the call hook checks the deadline before each one. Without it a sort
 * compares inside one C call: 4096 references to one 16 MiB string make
 * 50,000 strcoll()s of 16 MiB, a minute with no hook. Bounding the bytes
 * compared instead would need a second pass over the table's strings; a
 * call per comparison costs some 30 ns. */
static int sort_less(lua_State *L) {
  lua_pushboolean(L, lua_compare(L, 1, 2, LUA_OPLT));
  return 1;
}

/* table.sort is n log n comparisons: at most 2^22 elements. */
static int guarded_sort(lua_State *L) {
  luaL_checktype(L, 1, LUA_TTABLE);
  if (lua_rawlen(L, 1) > (1u << 22))
    return luaL_error(L, "table.sort: at most 2^22 elements in %s",
                      rw__owner(L)->kind);
  if (lua_isnoneornil(L, 2)) {
    lua_settop(L, 1);
    lua_pushcfunction(L, sort_less);
  }
  lua_pushvalue(L, lua_upvalueindex(1));
  lua_insert(L, 1);
  lua_call(L, lua_gettop(L) - 1, 0);
  return 0;
}

/* ---- pairs ----------------------------------------------------------------
 * Lua hashes strings with a seed it draws for each state (from the time
 * and addresses), so the order in which next visits a table's string keys
 * changes from one run to the next: a formula that stops at the first key,
 * or sums fractional penalties over pairs(c.flags), gave rescore another
 * total than the run (a hostile review: the first key of an eight-key
 * table was 5 different values in 8 runs of one rescore). pairs visits a
 * table's keys by value instead: numbers ascending, strings by their
 * bytes, false, true, then the keys that have no value to order by
 * (tables, functions) as next finds them. The keys are taken when the loop
 * starts and sorted by table.sort with a comparator that is a call each,
 * so the deadline is checked between comparisons; a key whose value became
 * nil since is skipped, as next skips it. A table with __pairs, and
 * anything that is no table, go to Lua's own pairs. next itself is Lua's:
 * next(t) == nil says the same everywhere, a loop over next does not. */
static int key_rank(lua_State *L, int i) {
  switch (lua_type(L, i)) {
  case LUA_TNUMBER:
    return 0;
  case LUA_TSTRING:
    return 1;
  case LUA_TBOOLEAN:
    return 2;
  default:
    return 3;
  }
}

static int key_less(lua_State *L) {
  int ra = key_rank(L, 1), rb = key_rank(L, 2), less = 0;
  if (ra != rb) {
    less = ra < rb;
  } else if (ra == 0) {
    less = lua_compare(L, 1, 2, LUA_OPLT); /* numbers: no metamethod */
  } else if (ra == 1) {
    size_t la, lb;
    const char *a = lua_tolstring(L, 1, &la), *b = lua_tolstring(L, 2, &lb);
    int c = memcmp(a, b, la < lb ? la : lb);
    less = c < 0 || (c == 0 && la < lb);
  } else if (ra == 2) {
    less = !lua_toboolean(L, 1) && lua_toboolean(L, 2);
  }
  lua_pushboolean(L, less);
  return 1;
}

/* The iterator: upvalue 1 the table, 2 its sorted keys, 3 the position. */
static int sorted_next(lua_State *L) {
  lua_Integer i = lua_tointeger(L, lua_upvalueindex(3));
  for (;;) {
    if (lua_rawgeti(L, lua_upvalueindex(2), ++i) == LUA_TNIL) break;
    lua_pushvalue(L, -1);
    if (lua_rawget(L, lua_upvalueindex(1)) != LUA_TNIL) break; /* k, v */
    lua_pop(L, 2);
  }
  lua_pushinteger(L, i);
  lua_replace(L, lua_upvalueindex(3));
  return lua_isnil(L, -1) ? 1 : 2;
}

/* Upvalue 1: Lua's pairs; 2: Lua's table.sort. */
static int sorted_pairs(lua_State *L) {
  luaL_checkany(L, 1);
  int meta = luaL_getmetafield(L, 1, "__pairs") != LUA_TNIL;
  if (meta || lua_type(L, 1) != LUA_TTABLE) {
    if (meta) lua_pop(L, 1);
    lua_pushvalue(L, lua_upvalueindex(1));
    lua_insert(L, 1);
    lua_call(L, lua_gettop(L) - 1, 3);
    return 3;
  }
  lua_settop(L, 1);
  lua_newtable(L); /* 2: the keys */
  lua_Integer n = 0;
  lua_pushnil(L);
  while (lua_next(L, 1)) {
    lua_pop(L, 1);
    lua_pushvalue(L, -1);
    lua_rawseti(L, 2, ++n);
  }
  if (n > 1) {
    lua_pushvalue(L, lua_upvalueindex(2));
    lua_pushvalue(L, 2);
    lua_pushcfunction(L, key_less);
    lua_call(L, 2, 0);
  }
  lua_pushinteger(L, 0);
  lua_pushcclosure(L, sorted_next, 3); /* the table, the keys, 0 */
  lua_pushvalue(L, 1);
  lua_pushnil(L);
  return 3;
}

/* ---- addresses ------------------------------------------------------------
 * tostring({}) is "table: 0x5581...", an address that differs from run to
 * run, so a formula could draw a random number from it (tonumber of its
 * digits) and rescoring would not reproduce its reward (a hostile review).
 * A table, function, thread or userdata without __tostring reads as its
 * type (or __name) and "(address hidden)", in tostring and in
 * string.format's arguments; %p is refused. print still shows addresses:
 * its output is no score. */

/* Replaces the value at idx (absolute) with its hidden form when it would
 * show an address. */
static void hide_address(lua_State *L, int idx) {
  int t = lua_type(L, idx);
  if (t != LUA_TTABLE && t != LUA_TFUNCTION && t != LUA_TTHREAD &&
      t != LUA_TUSERDATA && t != LUA_TLIGHTUSERDATA)
    return;
  if (luaL_getmetafield(L, idx, "__tostring") != LUA_TNIL) {
    lua_pop(L, 1);
    return;
  }
  const char *name = lua_typename(L, t);
  /* pushed whatever its type: a __name that is no string is left out */
  int named = luaL_getmetafield(L, idx, "__name") != LUA_TNIL;
  if (named && lua_type(L, -1) == LUA_TSTRING) name = lua_tostring(L, -1);
  lua_pushfstring(L, "%s: (address hidden)", name);
  if (named) lua_remove(L, -2);
  lua_replace(L, idx);
}

/* Upvalue 1: Lua's tostring. */
static int hidden_tostring(lua_State *L) {
  luaL_checkany(L, 1);
  lua_settop(L, 1);
  hide_address(L, 1);
  lua_pushvalue(L, lua_upvalueindex(1));
  lua_insert(L, 1);
  lua_call(L, 1, 1);
  return 1;
}

/* Upvalue 1: the format function it wraps (guarded_args's closure). */
static int hidden_format(lua_State *L) {
  size_t n;
  const char *fmt = luaL_checklstring(L, 1, &n);
  for (size_t i = 0; i + 1 < n; i++) {
    if (fmt[i] != '%') continue;
    size_t j = i + 1;
    while (j < n && strchr("-+ #0123456789.", fmt[j]))
      j++;
    if (j < n && fmt[j] == 'p')
      return luaL_error(L,
                        "string.format: %%p gives an address, which differs "
                        "from run to run: not in %s",
                        rw__owner(L)->kind);
    i = j; /* past the conversion ('%%' included) */
  }
  for (int i = 2; i <= lua_gettop(L); i++)
    hide_address(L, i);
  lua_pushvalue(L, lua_upvalueindex(1));
  lua_insert(L, 1);
  lua_call(L, lua_gettop(L) - 1, LUA_MULTRET);
  return lua_gettop(L);
}

/* Wraps table[field] (at index t) with fn, the original as upvalue 1, the
 * full name upvalue 2, kind upvalue 3. */
static void wrap(lua_State *L, int t, const char *field, lua_CFunction fn,
                 const char *full, int kind) {
  lua_getfield(L, t, field);
  lua_pushstring(L, full);
  lua_pushinteger(L, kind);
  lua_pushcclosure(L, fn, 3);
  lua_setfield(L, t, field);
}

void rw__install_guards(lua_State *L, int global_t, int string_t, int table_t,
                        int math_t) {
  lua_getfield(L, global_t, "pairs");
  lua_getfield(L, table_t, "sort"); /* Lua's: before it is wrapped */
  lua_pushcclosure(L, sorted_pairs, 2);
  lua_setfield(L, global_t, "pairs");
  wrap(L, string_t, "rep", safe_rep, "string.rep", 0);
  wrap(L, string_t, "find", guarded_pattern, "string.find", PAT_FIND);
  wrap(L, string_t, "match", guarded_pattern, "string.match", PAT_OTHER);
  wrap(L, string_t, "gmatch", guarded_pattern, "string.gmatch", PAT_GMATCH);
  wrap(L, string_t, "gsub", guarded_pattern, "string.gsub", PAT_GSUB);
  wrap(L, string_t, "char", guarded_args, "string.char", 0);
  wrap(L, string_t, "format", guarded_args, "string.format", 0);
  lua_getfield(L, string_t, "format");
  lua_pushcclosure(L, hidden_format, 1);
  lua_setfield(L, string_t, "format");
  lua_getfield(L, global_t, "tostring");
  lua_pushcclosure(L, hidden_tostring, 1);
  lua_setfield(L, global_t, "tostring");
  wrap(L, string_t, "pack", guarded_args, "string.pack", ARGS_FORMAT);
  wrap(L, string_t, "packsize", guarded_format, "string.packsize", 0);
  wrap(L, string_t, "unpack", guarded_format, "string.unpack", 0);
  wrap(L, math_t, "max", guarded_args, "math.max", 0);
  wrap(L, math_t, "min", guarded_args, "math.min", 0);
  wrap(L, table_t, "move", guarded_move, "table.move", 0);
  wrap(L, table_t, "unpack", guarded_unpack, "table.unpack", 0);
  wrap(L, table_t, "concat", guarded_concat, "table.concat", 0);
  wrap(L, table_t, "sort", guarded_sort, "table.sort", 0);
  lua_pushcfunction(L, guarded_insert);
  lua_setfield(L, table_t, "insert");
  lua_pushcfunction(L, guarded_remove);
  lua_setfield(L, table_t, "remove");
}
