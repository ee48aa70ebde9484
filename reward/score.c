/*
 * reward/score.c — metrics in, components out: builds the `c` and `ctx`
 * tables a script's score(c, ctx) receives, calls it under the sandbox's
 * limits, and checks what came back (a table of finitely-valued, sensibly
 * named numbers), summing them in C.
 *
 * Unmeasured values are absent from `c` (nil). Reading a field that no
 * version of the lab provides (a typo: c.time_uss) raises an error naming
 * it instead of silently giving nil. Flags arrive as a set:
 * c.flags.input_mutated == true.
 *
 * A component that is no finite number is reported at its own line: Lua
 * keeps lines for code but not for a table's fields, so the line is found
 * in the script's text (the first line inside score() assigning the name,
 * else the only one in the file; component_line), and the message says
 * what the value was (a string's text, a function's line, which Lua
 * gives). Where no line names it (t[k] = ...), score()'s line, said to be
 * that.
 *
 * Not here: the sandbox (sandbox.c) and loading files (script.c).
 */
#include "reward/internal.h"

#include <lauxlib.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

static const char *const candidate_fields[] = {"compiled",
                                               "correct",
                                               "status",
                                               "errors",
                                               "backend",
                                               "max_rel_err",
                                               "max_abs_err",
                                               "time_us",
                                               "baseline_us",
                                               "gflops",
                                               "percent_of_baseline",
                                               "regs",
                                               "smem_bytes",
                                               "spill_bytes",
                                               "flags",
                                               "source_len",
                                               "completion_len",
                                               NULL};

static const char *const context_fields[] = {"task", "dtype", "M",     "N",
                                             "K",    "group", "index", NULL};

void rw_candidate_init(rw_candidate *c) {
  memset(c, 0, sizeof *c);
  c->max_rel_err = c->max_abs_err = -1;
  c->time_us = c->baseline_us = c->gflops = c->percent_of_baseline = -1;
  c->regs = c->smem_bytes = c->spill_bytes = -1;
  c->source_len = c->completion_len = -1;
}

/* __index of c and ctx: a known field that is absent is nil (unmeasured);
 * anything else is a mistake in the script. Upvalue 1: the set of known
 * names; upvalue 2: "c" or "ctx"; upvalue 3: the list for the message. */
static int strict_index(lua_State *L) {
  lua_pushvalue(L, 2);
  if (lua_rawget(L, lua_upvalueindex(1)) != LUA_TNIL) return 0;
  if (lua_type(L, 2) == LUA_TSTRING)
    return luaL_error(L, "%s.%s: no such field (fields: %s)",
                      lua_tostring(L, lua_upvalueindex(2)), lua_tostring(L, 2),
                      lua_tostring(L, lua_upvalueindex(3)));
  return luaL_error(L, "%s[%s]: no such field",
                    lua_tostring(L, lua_upvalueindex(2)), luaL_typename(L, 2));
}

/* Builds the two metatables and keeps them in the registry. Runs
 * protected (allocation may fail). */
static int setup_metatables(lua_State *L) {
  rw_script *s = lua_touserdata(L, 1);
  for (int which = 0; which < 2; which++) {
    const char *const *fields = which ? context_fields : candidate_fields;
    lua_createtable(L, 0, 2); /* metatable */
    lua_newtable(L);          /* known names */
    char list[512];
    size_t n = 0;
    list[0] = 0;
    for (int i = 0; fields[i]; i++) {
      lua_pushboolean(L, 1);
      lua_setfield(L, -2, fields[i]);
      n += (size_t)snprintf(list + n, sizeof list - n, "%s%s", i ? ", " : "",
                            fields[i]);
      if (n >= sizeof list) n = sizeof list - 1;
    }
    lua_pushstring(L, which ? "ctx" : "c");
    lua_pushstring(L, list);
    lua_pushcclosure(L, strict_index, 3);
    lua_setfield(L, -2, "__index");
    lua_pushliteral(L, "locked");
    lua_setfield(L, -2, "__metatable");
    int ref = luaL_ref(L, LUA_REGISTRYINDEX);
    if (which)
      s->ctx_mt_ref = ref;
    else
      s->cand_mt_ref = ref;
  }
  return 0;
}

int rw__metrics_setup(rw_script *s, char *why, size_t whylen) {
  lua_pushcfunction(s->L, setup_metatables);
  lua_pushlightuserdata(s->L, s);
  return rw__pcall(s, 1, 0, why, whylen);
}

/* ---- building c and ctx (inside a protected call) ------------------------
 */

static void set_number(lua_State *L, const char *k, double v) {
  if (v >= 0 && !isnan(v)) { /* negative or NaN: unmeasured, stays nil */
    lua_pushnumber(L, v);
    lua_setfield(L, -2, k);
  }
}

static void set_integer(lua_State *L, const char *k, long v) {
  if (v >= 0) {
    lua_pushinteger(L, v);
    lua_setfield(L, -2, k);
  }
}

static void set_string(lua_State *L, const char *k, const char *v) {
  if (v) {
    lua_pushstring(L, v);
    lua_setfield(L, -2, k);
  }
}

static void push_candidate(lua_State *L, rw_script *s, const rw_candidate *c) {
  lua_createtable(L, 0, 18);
  lua_pushboolean(L, c->compiled);
  lua_setfield(L, -2, "compiled");
  lua_pushboolean(L, c->correct);
  lua_setfield(L, -2, "correct");
  set_string(L, "status", c->status);
  set_string(L, "errors", c->errors);
  set_string(L, "backend", c->backend);
  set_number(L, "max_rel_err", c->max_rel_err);
  set_number(L, "max_abs_err", c->max_abs_err);
  set_number(L, "time_us", c->time_us > 0 ? c->time_us : -1);
  set_number(L, "baseline_us", c->baseline_us > 0 ? c->baseline_us : -1);
  set_number(L, "gflops", c->gflops);
  double pct = c->percent_of_baseline;
  if (!(pct >= 0) && c->time_us > 0 && c->baseline_us > 0)
    pct = 100.0 * c->baseline_us / c->time_us;
  set_number(L, "percent_of_baseline", pct);
  set_integer(L, "regs", c->regs);
  set_integer(L, "smem_bytes", c->smem_bytes);
  set_integer(L, "spill_bytes", c->spill_bytes);
  set_integer(L, "source_len", c->source_len);
  set_integer(L, "completion_len", c->completion_len);
  lua_createtable(L, 0, c->n_flags);
  for (int i = 0; i < c->n_flags; i++) {
    if (!c->flags[i]) continue;
    lua_pushboolean(L, 1);
    lua_setfield(L, -2, c->flags[i]);
  }
  lua_setfield(L, -2, "flags");
  lua_rawgeti(L, LUA_REGISTRYINDEX, s->cand_mt_ref);
  lua_setmetatable(L, -2);
}

static void push_context(lua_State *L, rw_script *s, const rw_context *ctx) {
  lua_createtable(L, 0, 7);
  if (ctx) {
    set_string(L, "task", ctx->task);
    set_string(L, "dtype", ctx->dtype);
    set_integer(L, "M", ctx->M > 0 ? ctx->M : -1);
    set_integer(L, "N", ctx->N > 0 ? ctx->N : -1);
    set_integer(L, "K", ctx->K > 0 ? ctx->K : -1);
  }
  int n = ctx && ctx->group ? ctx->n_group : 0;
  lua_createtable(L, n, 0);
  for (int i = 0; i < n; i++) {
    push_candidate(L, s, &ctx->group[i]);
    lua_rawseti(L, -2, i + 1);
  }
  lua_setfield(L, -2, "group");
  lua_rawgeti(L, LUA_REGISTRYINDEX, s->ctx_mt_ref);
  lua_setmetatable(L, -2);
}

/* score(c, ctx) for one candidate. Arg 1: light userdata of struct
 * one_call. */
struct one_call {
  rw_script *s;
  const rw_candidate *c;
  const rw_context *ctx;
};

static int call_one(lua_State *L) {
  struct one_call *oc = lua_touserdata(L, 1);
  lua_rawgeti(L, LUA_REGISTRYINDEX, oc->s->score_ref);
  push_candidate(L, oc->s, oc->c);
  push_context(L, oc->s, oc->ctx);
  /* c is a member of ctx.group (eval scores each candidate as a group of
   * one): ctx.index says which, as in rw_score_group */
  for (int i = 0; oc->ctx && oc->ctx->group && i < oc->ctx->n_group; i++)
    if (&oc->ctx->group[i] == oc->c) {
      lua_pushinteger(L, i + 1);
      lua_setfield(L, -2, "index");
    }
  lua_call(L, 2, 1);
  return 1;
}

/* Builds ctx for rw_score_group. Arg 1: light userdata of struct one_call
 * (c unused). Returns ctx. */
static int build_group_context(lua_State *L) {
  struct one_call *oc = lua_touserdata(L, 1);
  push_context(L, oc->s, oc->ctx);
  return 1;
}

/* score(ctx.group[i], ctx) with ctx.index = i. Args: score, ctx, i. */
static int call_member(lua_State *L) {
  lua_Integer i = lua_tointeger(L, 3);
  lua_pushinteger(L, i);
  lua_setfield(L, 2, "index");
  lua_pushvalue(L, 1);
  lua_pushliteral(L, "group");
  lua_rawget(L, 2);
  if (lua_type(L, -1) != LUA_TTABLE)
    return luaL_error(L, "ctx.group was replaced by the script");
  lua_rawgeti(L, -1, i);
  lua_remove(L, -2);
  lua_pushvalue(L, 2);
  lua_call(L, 2, 1);
  return 1;
}

/* ---- reading the components ---------------------------------------------
 */

static int valid_name(const char *k, size_t len) {
  if (len == 0 || len > RW_MAX_COMPONENT_NAME) return 0;
  for (size_t i = 0; i < len; i++) {
    char ch = k[i];
    if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
          (ch >= '0' && ch <= '9') || ch == '_' || ch == '.' || ch == '-'))
      return 0;
  }
  return 1;
}

static int by_name(const void *a, const void *b) {
  return strcmp(((const rw_component *)a)->name,
                ((const rw_component *)b)->name);
}

static int ident_char(char ch) {
  return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
         (ch >= '0' && ch <= '9') || ch == '_';
}

/* 1 when the line [p, end) assigns name: `name =`, `.name =` or
 * `["name"] =` (not `==`), before any `--` comment. A text match: strings
 * are not told from code. */
static int assigns(const char *p, const char *end, const char *name) {
  size_t nl = strlen(name);
  for (const char *q = p; q + 1 < end; q++)
    if (q[0] == '-' && q[1] == '-') {
      end = q;
      break;
    }
  for (const char *q = p; q + nl <= end; q++) {
    if (memcmp(q, name, nl) || (q > p && ident_char(q[-1]))) continue;
    const char *r = q + nl;
    if (r < end && ident_char(*r)) continue;
    if (q > p && (q[-1] == '"' || q[-1] == '\'')) { /* ["name"] */
      if (r + 1 >= end || *r != q[-1] || r[1] != ']') continue;
      r += 2;
    }
    while (r < end && (*r == ' ' || *r == '\t'))
      r++;
    if (r < end && *r == '=' && (r + 1 >= end || r[1] != '=')) return 1;
  }
  return 0;
}

/* The line that most likely gives component name its value, from the
 * script's text (Lua keeps lines for code, not for a table's fields, so a
 * wrong component used to be reported at the line score() begins): the
 * first line within score() that assigns the name, else the only such
 * line of the whole script (a helper building the table); 0 when there is
 * none, or several outside score(). */
static int component_line(const rw_script *s, const char *name) {
  if (!s->source) return 0;
  int line = 1, inside = 0, outside = 0, n_outside = 0;
  const char *p = s->source, *end = s->source + s->source_len;
  while (p < end && !inside) {
    const char *eol = memchr(p, '\n', (size_t)(end - p));
    if (!eol) eol = end;
    if (assigns(p, eol, name)) {
      if (line >= s->score_line && line <= s->score_last)
        inside = line;
      else if (!n_outside++)
        outside = line;
    }
    p = eol + 1;
    line++;
  }
  return inside ? inside : n_outside == 1 ? outside : 0;
}

/* Says what the component value at the top of L's stack is, for a
 * message: a string with its first characters, a function with the line
 * Lua gives for it, else the type. */
static void describe_value(lua_State *L, char *out, size_t cap) {
  int t = lua_type(L, -1);
  if (t == LUA_TSTRING) {
    size_t len;
    const char *v = lua_tolstring(L, -1, &len);
    char shown[44];
    size_t m = len < 40 ? len : 40;
    for (size_t i = 0; i < m; i++) /* one line, no escapes reach a terminal */
      shown[i] = (unsigned char)v[i] < 0x20 || v[i] == 0x7f ? '?' : v[i];
    shown[m] = 0;
    snprintf(out, cap, "a string (\"%s\"%s)", shown, len > m ? "..." : "");
  } else if (t == LUA_TFUNCTION) {
    lua_Debug ar;
    lua_pushvalue(L, -1);
    lua_getinfo(L, ">S", &ar);
    if (ar.linedefined > 0)
      snprintf(out, cap,
               "a function (defined at line %d; was it meant to be called?)",
               ar.linedefined);
    else
      snprintf(out, cap, "a function (was it meant to be called?)");
  } else if (t == LUA_TBOOLEAN) {
    snprintf(out, cap, "a boolean (%s)",
             lua_toboolean(L, -1) ? "true" : "false");
  } else {
    snprintf(out, cap, "a %s", luaL_typename(L, -1));
  }
}

/* Writes "path:L: score() component 'k' is WHAT", L the component's line
 * where the script's text shows one, else score()'s, said to be that. */
static void component_error(const rw_script *s, const char *k, const char *what,
                            const char *expected, char *why, size_t whylen) {
  int line = component_line(s, k);
  if (line)
    snprintf(why, whylen, "%s:%d: score() component '%s' is %s; %s",
             s->short_src, line, k, what, expected);
  else
    snprintf(why, whylen,
             "%s:%d: score() (defined here) returned component '%s' as %s; "
             "%s",
             s->short_src, s->score_line, k, what, expected);
}

/* Reads the table at the top of the stack (raw: no metamethod runs here,
 * outside the sandbox's protection) into out. */
static int read_components(rw_script *s, rw_components *out, char *why,
                           size_t whylen) {
  lua_State *L = s->L;
  if (!lua_istable(L, -1)) {
    snprintf(why, whylen,
             "%s:%d: score() returned %s, expected a table of named numbers "
             "such as {correct = 1, speed = 0.5}",
             s->short_src, s->score_line,
             lua_isnil(L, -1) ? "nil" : luaL_typename(L, -1));
    return RW_ERETURN;
  }
  rw_component items[RW_MAX_COMPONENTS];
  int n = 0;
  lua_pushnil(L);
  while (lua_next(L, -2)) {
    if (lua_type(L, -2) != LUA_TSTRING) { /* never tostring a key: next */
      snprintf(why, whylen,
               "%s:%d: score() returned a component with a %s key; "
               "components are named: {speed = 0.5}",
               s->short_src, s->score_line, luaL_typename(L, -2));
      lua_pop(L, 2);
      return RW_ERETURN;
    }
    size_t klen;
    const char *k = lua_tolstring(L, -2, &klen);
    if (!valid_name(k, klen) || !strcmp(k, "total") ||
        !strcmp(k, "script_sha256")) {
      /* the name as it was, its NUL, newline or other control bytes shown
       * as '?' so the message stays one line and whole */
      char shown[81];
      size_t m = klen < 80 ? klen : 80;
      for (size_t i = 0; i < m; i++)
        shown[i] = (unsigned char)k[i] < 0x20 || k[i] == 0x7f ? '?' : k[i];
      shown[m] = 0;
      snprintf(why, whylen,
               "%s:%d: score() returned a component named '%s': names are "
               "1-%d characters of [A-Za-z0-9_.-], and 'total' and "
               "'script_sha256' are reserved",
               s->short_src, s->score_line, shown, RW_MAX_COMPONENT_NAME);
      lua_pop(L, 2);
      return RW_ERETURN;
    }
    int isnum = lua_type(L, -1) == LUA_TNUMBER;
    double v = isnum ? lua_tonumber(L, -1) : 0;
    if (!isnum || !isfinite(v)) {
      char what[128];
      if (isnum)
        snprintf(what, sizeof what, "%s",
                 isnan(v) ? "NaN" : (v > 0 ? "+inf" : "-inf"));
      else
        describe_value(L, what, sizeof what);
      component_error(s, k, what,
                      isnum ? "components must be finite numbers"
                            : "expected a number",
                      why, whylen);
      lua_pop(L, 2);
      return RW_ERETURN;
    }
    if (n == RW_MAX_COMPONENTS) {
      snprintf(why, whylen, "%s:%d: score() returned more than %d components",
               s->short_src, s->score_line, RW_MAX_COMPONENTS);
      lua_pop(L, 2);
      return RW_ERETURN;
    }
    memcpy(items[n].name, k, klen + 1);
    items[n].value = v;
    n++;
    lua_pop(L, 1);
  }
  qsort(items, (size_t)n, sizeof items[0], by_name);
  out->items = n ? malloc((size_t)n * sizeof items[0]) : NULL;
  if (n && !out->items) {
    snprintf(why, whylen, "%s: out of host memory", s->short_src);
    return RW_EENV;
  }
  if (n) memcpy(out->items, items, (size_t)n * sizeof items[0]);
  out->n = n;
  out->total = 0;
  for (int i = 0; i < n; i++)
    out->total += items[i].value;
  /* finite components, an infinite or unusably large sum (RW_MAX_TOTAL) */
  if (!(fabs(out->total) <= RW_MAX_TOTAL)) {
    snprintf(why, whylen,
             "%s:%d: the components sum to %g; a total must be finite and "
             "within +-%g (GRPO's advantages are computed from the totals)",
             s->short_src, s->score_line, out->total, RW_MAX_TOTAL);
    free(out->items);
    out->items = NULL;
    out->n = 0;
    out->total = 0;
    return RW_ERETURN;
  }
  memcpy(out->script_sha256, s->sha256, sizeof out->script_sha256);
  return RW_OK;
}

static void components_empty(rw_components *out) {
  out->items = NULL;
  out->n = 0;
  out->total = 0;
  out->script_sha256[0] = 0;
}

int rw_score(rw_script *s, const rw_candidate *c, const rw_context *ctx,
             rw_components *out, char *why, size_t whylen) {
  components_empty(out);
  if (whylen) why[0] = 0;
  lua_State *L = s->L;
  int top = lua_gettop(L);
  struct one_call oc = {s, c, ctx};
  lua_pushcfunction(L, rw__fresh_score);
  int code = rw__pcall(s, 0, 0, why, whylen);
  lua_pushcfunction(L, call_one);
  lua_pushlightuserdata(L, &oc);
  if (code == RW_OK) code = rw__pcall(s, 1, 1, why, whylen);
  if (code == RW_OK) code = read_components(s, out, why, whylen);
  lua_settop(L, top);
  return code;
}

int rw_score_group(rw_script *s, const rw_context *ctx, rw_components *out,
                   char *why, size_t whylen) {
  for (int i = 0; i < ctx->n_group; i++)
    components_empty(&out[i]);
  if (whylen) why[0] = 0;
  lua_State *L = s->L;
  int top = lua_gettop(L);
  struct one_call oc = {s, NULL, ctx};
  int code = RW_OK;
  int ctx_idx = top + 1;
  char inner[512];
  /* One member's failure leaves that member unscored, not the rest of its
   * group: a formula that errors on one odd candidate still scores the
   * others. A budget or deadline overrun stops the group (the next member
   * would most likely spend as long again). */
  int first = RW_OK;
  for (int i = 0; code == RW_OK && i < ctx->n_group; i++) {
    /* ctx built again for each member: a field one call sets on it must
     * not reach the next (nor may anything else: rw__fresh_score) */
    lua_settop(L, top);
    lua_pushcfunction(L, build_group_context);
    lua_pushlightuserdata(L, &oc);
    int c = rw__pcall(s, 1, 1, inner, sizeof inner);
    if (c != RW_OK) { /* the engine itself: nothing else will work */
      snprintf(why, whylen, "%s", inner);
      code = c;
      break;
    }
    lua_pushcfunction(L, rw__fresh_score);
    c = rw__pcall(s, 0, 0, inner, sizeof inner);
    lua_pushcfunction(L, call_member);
    lua_rawgeti(L, LUA_REGISTRYINDEX, s->score_ref);
    lua_pushvalue(L, ctx_idx);
    lua_pushinteger(L, i + 1);
    if (c == RW_OK) c = rw__pcall(s, 3, 1, inner, sizeof inner);
    if (c == RW_OK) c = read_components(s, &out[i], inner, sizeof inner);
    if (c != RW_OK && first == RW_OK) {
      first = c;
      snprintf(why, whylen, "group[%d]: %s", i + 1, inner);
    }
    if (c == RW_EBUDGET || c == RW_EMEM || c == RW_EENV) {
      code = c; /* the code returned and its message name one member */
      snprintf(why, whylen, "group[%d]: %s", i + 1, inner);
    }
    lua_settop(L, ctx_idx);
  }
  lua_settop(L, top);
  return code != RW_OK ? code : first;
}

void rw_components_free(rw_components *out) {
  if (!out) return;
  free(out->items);
  components_empty(out);
}

void rw_components_json(FILE *f, const rw_components *c) {
  fputc('{', f);
  for (int i = 0; i < c->n; i++)
    fprintf(f, "\"%s\":%.17g,", c->items[i].name, c->items[i].value);
  fprintf(f, "\"total\":%.17g,\"script_sha256\":\"%s\"}", c->total,
          c->script_sha256);
}
