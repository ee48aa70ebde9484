/*
 * reward/sandbox.c — the sandboxed lua_State a reward script runs in: the
 * capped allocator, the libraries it may see, the hooks that enforce the
 * instruction budget and the wall deadline, the pcall/xpcall replacements
 * that cannot swallow those, and the message handler that turns an error
 * into one line plus a traceback.
 *
 * Why each piece exists is said where it is built. What a script can do in
 * the end: compute with numbers, strings and tables, define functions, use
 * metatables (without __gc), print a capped number of lines to stderr.
 * What it cannot: touch files, processes, the clock, other scripts, the
 * lab's memory, or keep the lab waiting past its deadline.
 *
 * Not here: loading files (script.c) and the metrics (score.c).
 */
#include "reward/internal.h"

#include <lauxlib.h>
#include <lualib.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* The rw_script that owns L, kept in the state's extra space (a pointer's
 * worth of bytes Lua reserves for the host) so the hook reaches it fast. */
static rw_script *owner(lua_State *L) {
  return *(rw_script **)lua_getextraspace(L);
}

double rw__now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

void rw__one_line(char *dst, size_t len, const char *src) {
  if (!len) return;
  size_t i = 0;
  for (; src && src[i] && i + 1 < len; i++)
    dst[i] =
        (src[i] == '\n' || src[i] == '\r' || src[i] == '\t') ? ' ' : src[i];
  dst[i] = 0;
}

/* ---- memory --------------------------------------------------------------
 * lua_Alloc contract (manual §4.1, lua_Alloc): ptr == NULL means osize
 * encodes a type, not a size; nsize == 0 frees; Lua assumes shrinking never
 * fails. Growth past the cap returns NULL, which Lua turns into LUA_ERRMEM
 * after one emergency collection. */
static void *capped_alloc(void *ud, void *ptr, size_t osize, size_t nsize) {
  rw_script *s = ud;
  size_t old = ptr ? osize : 0;
  if (nsize == 0) {
    free(ptr);
    s->mem_used -= old;
    return NULL;
  }
  if (nsize > old && (!s->cap_in_calls || s->in_call) &&
      (s->mem_used > s->lim.mem_bytes ||
       nsize - old > s->lim.mem_bytes - s->mem_used))
    return NULL; /* over the cap (written so that it cannot overflow) */
  void *p = realloc(ptr, nsize);
  if (!p) return nsize <= old ? ptr : NULL; /* a failed shrink keeps ptr */
  s->mem_used = s->mem_used - old + nsize;
  return p;
}

/* ---- budget and deadline ------------------------------------------------ */

static int message_handler(lua_State *L);

/* Count events charge RW_HOOK_EVERY instructions; call events only look at
 * the clock. Once a limit is hit the hook raises on every later event, so a
 * script that catches the error (even with a hand-made pcall loop) is
 * stopped again at its next call or next thousand instructions. */
static void budget_hook(lua_State *L, lua_Debug *ar) {
  rw_script *s = owner(L);
  if (!s->stop) {
    if (ar->event == LUA_HOOKCOUNT) s->hook_events++;
    if (s->hook_events * RW_HOOK_EVERY > s->lim.instructions)
      s->stop = 1;
    else if (rw__now_ms() > s->deadline_ms)
      s->stop = 2;
    if (s->stop) {
      /* Name the Lua line that was running: for a call event that is the
       * caller (the callee has not started). */
      lua_Debug where;
      int line = -1;
      char src[LUA_IDSIZE] = "?";
      for (int level = 0; lua_getstack(L, level, &where); level++) {
        lua_getinfo(L, "Sl", &where);
        if (where.currentline > 0) {
          line = where.currentline;
          snprintf(src, sizeof src, "%s", where.short_src);
          break;
        }
      }
      if (s->stop == 1)
        snprintf(s->stop_msg, sizeof s->stop_msg,
                 "%s:%d: instruction budget exceeded (%lld instructions; an "
                 "endless loop?)",
                 src, line, s->lim.instructions);
      else
        snprintf(s->stop_msg, sizeof s->stop_msg,
                 "%s:%d: wall-clock deadline exceeded (%.0f ms)", src, line,
                 s->lim.wall_ms);
    }
  }
  if (s->stop) {
    /* Let the message handler itself run, or the traceback is lost. */
    if (ar->event != LUA_HOOKCOUNT) {
      lua_getinfo(L, "f", ar);
      int is_handler = lua_tocfunction(L, -1) == message_handler;
      lua_pop(L, 1);
      if (is_handler) return;
    }
    lua_pushstring(L, s->stop_msg);
    lua_error(L);
  }
}

/* ---- pcall and xpcall that cannot swallow the budget ---------------------
 * Same results as the base library's: true + results, or false + error.
 * A budget stop or a memory error is raised again instead: a formula may
 * catch its own mistakes, not the lab's limits. */
static int finish_pcall(lua_State *L, int status, int extra) {
  rw_script *s = owner(L);
  if (status == LUA_ERRMEM) s->mem_error = 1;
  if (status != LUA_OK && (s->stop || s->mem_error)) return lua_error(L);
  if (status != LUA_OK) {
    lua_pushboolean(L, 0);
    lua_pushvalue(L, -2);
    return 2;
  }
  return lua_gettop(L) - extra; /* true + results */
}

static int safe_pcall(lua_State *L) {
  luaL_checkany(L, 1);
  lua_pushboolean(L, 1);
  lua_insert(L, 1);
  return finish_pcall(L, lua_pcall(L, lua_gettop(L) - 2, LUA_MULTRET, 0), 0);
}

/* The message handler xpcall really installs. The script's handler
 * (upvalue 1) runs only for the script's own errors: when the hook raised
 * (a budget stop), Lua leaves hooks off until the error has unwound to a
 * pcall, so a script handler run then could loop forever unchecked. */
static int xpcall_handler(lua_State *L) {
  rw_script *s = owner(L);
  if (s->stop) return 1; /* the error object, as is */
  lua_pushvalue(L, lua_upvalueindex(1));
  lua_insert(L, 1);
  lua_call(L, lua_gettop(L) - 1, 1);
  return 1;
}

static int safe_xpcall(lua_State *L) {
  int n = lua_gettop(L);
  luaL_checktype(L, 2, LUA_TFUNCTION);
  lua_pushvalue(L, 2);
  lua_pushcclosure(L, xpcall_handler, 1);
  lua_replace(L, 2);
  lua_pushboolean(L, 1);
  lua_pushvalue(L, 1);
  lua_rotate(L, 3, 2); /* f, msgh, true, f, args... */
  return finish_pcall(L, lua_pcall(L, n - 2, LUA_MULTRET, 2), 2);
}

/* ---- the message handler -------------------------------------------------
 * Turns any error object into a string that starts with "file:line:" (a C
 * function's error, such as a bad argument to string.rep, has no position
 * of its own: the first Lua frame's is used), and keeps the traceback in
 * s->traceback. Not called for memory errors (Lua's rule). */
static int message_handler(lua_State *L) {
  rw_script *s = owner(L);
  const char *msg = lua_tostring(L, 1);
  if (!msg) {
    /* __tostring is Lua code: not after a stop, when hooks are off */
    if (!s->stop && luaL_callmeta(L, 1, "__tostring") &&
        lua_type(L, -1) == LUA_TSTRING)
      msg = lua_tostring(L, -1);
    else
      msg = lua_pushfstring(L, "(error object is a %s value)",
                            luaL_typename(L, 1));
  }
  lua_Debug ar;
  for (int level = 1; lua_getstack(L, level, &ar); level++) {
    lua_getinfo(L, "Sl", &ar);
    if (ar.currentline <= 0) continue;
    size_t n = strlen(ar.short_src);
    if (strncmp(msg, ar.short_src, n) != 0 || msg[n] != ':')
      msg = lua_pushfstring(L, "%s:%d: %s", ar.short_src, ar.currentline, msg);
    break;
  }
  luaL_traceback(L, L, NULL, 1);
  snprintf(s->traceback, sizeof s->traceback, "%s", lua_tostring(L, -1));
  lua_pop(L, 1);
  lua_pushstring(L, msg);
  return 1;
}

int rw__pcall(rw_script *s, int nargs, int nresults, char *why, size_t whylen) {
  lua_State *L = s->L;
  int fn = lua_gettop(L) - nargs;
  lua_pushcfunction(L, message_handler);
  lua_insert(L, fn);
  s->hook_events = 0;
  s->stop = 0;
  s->mem_error = 0;
  s->stop_msg[0] = 0;
  s->traceback[0] = 0;
  s->deadline_ms = rw__now_ms() + s->lim.wall_ms;
  s->in_call++;
  int status = lua_pcall(L, nargs, nresults, fn);
  s->in_call--;
  int code = RW_OK;
  if (s->stop) {
    code = RW_EBUDGET; /* even if the script claims success */
    rw__one_line(why, whylen, s->stop_msg);
  } else if (status == LUA_ERRMEM || s->mem_error) {
    code = RW_EMEM;
    snprintf(why, whylen,
             "%s: memory cap exceeded (%zu KiB; not enough memory)",
             s->short_src, s->lim.mem_bytes >> 10);
    snprintf(s->traceback, sizeof s->traceback,
             "(no traceback: Lua runs no message handler for memory errors)");
  } else if (status != LUA_OK) {
    code = RW_ERUN;
    const char *msg = lua_tostring(L, -1);
    if (status == LUA_ERRERR)
      snprintf(why, whylen, "%s: error while handling an error: %s",
               s->short_src, msg ? msg : "?");
    else
      rw__one_line(why, whylen, msg ? msg : "(error object not a string)");
  }
  s->stop = 0;
  if (code != RW_OK) {
    lua_settop(L, fn - 1);
    return code;
  }
  lua_remove(L, fn);
  return RW_OK;
}

/* ---- replacements for unsafe or nondeterministic functions ---------------
 */

/* print writes to stderr, one line each at most 1 KiB, at most 100 lines
 * per script: a formula that prints in a loop cannot flood the lab's log. */
static int capped_print(lua_State *L) {
  rw_script *s = owner(L);
  if (s->print_lines > 100) return 0;
  if (s->print_lines++ == 100) {
    fprintf(stderr, "[%s] (further print output suppressed)\n", s->short_src);
    return 0;
  }
  int n = lua_gettop(L); /* before luaL_buffinit, which may push a slot */
  luaL_Buffer b;
  luaL_buffinit(L, &b);
  for (int i = 1; i <= n; i++) {
    if (i > 1) luaL_addchar(&b, '\t');
    luaL_tolstring(L, i, NULL);
    luaL_addvalue(&b);
  }
  luaL_pushresult(&b);
  fprintf(stderr, "[%s] %.1024s\n", s->short_src, lua_tostring(L, -1));
  return 0;
}

/* Accessing a name the sandbox removed gives a message that says so,
 * rather than "attempt to call a nil value". Other absent globals stay nil,
 * as in plain Lua. */
static const char *const removed_globals[] = {
    "io",      "os",         "debug",  "package",  "require",
    "load",    "loadstring", "dofile", "loadfile", "collectgarbage",
    "rawset",  "coroutine",  "utf8",   "module",   "setfenv",
    "getfenv", "newproxy",   NULL};

static int global_index(lua_State *L) {
  const char *k = lua_tostring(L, 2);
  for (int i = 0; k && removed_globals[i]; i++)
    if (!strcmp(k, removed_globals[i]))
      return luaL_error(L,
                        "'%s' is not available in %s (the sandbox allows "
                        "only base, string, table and math)",
                        k, owner(L)->kind);
  return 0;
}

static int disabled(lua_State *L) {
  return luaL_error(L, "%s is disabled in %s (%s)",
                    lua_tostring(L, lua_upvalueindex(1)), owner(L)->kind,
                    lua_tostring(L, lua_upvalueindex(2)));
}

static void set_disabled(lua_State *L, int table, const char *field,
                         const char *full, const char *reason) {
  lua_pushstring(L, full);
  lua_pushstring(L, reason);
  lua_pushcclosure(L, disabled, 2);
  lua_setfield(L, table, field);
}

/* setmetatable without __gc: finalizers run inside the collector with hooks
 * off, so an endless loop there would escape the budget. */
static int safe_setmetatable(lua_State *L) {
  if (lua_type(L, 2) == LUA_TTABLE) {
    lua_pushliteral(L, "__gc");
    if (lua_rawget(L, 2) != LUA_TNIL)
      return luaL_error(L,
                        "setmetatable: __gc finalizers are not allowed in %s",
                        owner(L)->kind);
    lua_pop(L, 1);
  }
  lua_pushvalue(L, lua_upvalueindex(1)); /* the original */
  lua_insert(L, 1);
  lua_call(L, lua_gettop(L) - 1, 1);
  return 1;
}

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

/* Pattern matching backtracks inside one C call, out of the hooks' reach:
 * ("a"):rep(700):find(".-.-.-.-x") would run for hours. Worst case for a
 * subject of n bytes and q quantifiers that something after them can make
 * fail is about n^(q+1) steps; refuse above the limit's pattern_steps
 * (2e7 by default, ~0.1 s).
 * Plain finds and patterns without quantifiers pass. */
enum { PAT_OTHER, PAT_FIND, PAT_GMATCH };

static int pattern_quantifiers(const char *p, size_t len) {
  int q = 0, pending = 0; /* quantifiers not yet followed by anything */
  for (size_t i = 0; i < len; i++) {
    char ch = p[i];
    if (ch == '%') {
      i++;
      if (i < len && (p[i] == 'b')) i += 2;
      q += pending, pending = 0;
    } else if (ch == '[') {
      i++;
      if (i < len && p[i] == '^') i++;
      if (i < len && p[i] == ']') i++;
      while (i < len && p[i] != ']')
        i += p[i] == '%' ? 2 : 1;
      q += pending, pending = 0;
    } else if (ch == '*' || ch == '+' || ch == '-' || ch == '?') {
      pending++;
    } else if (ch == '(' || ch == ')' || (ch == '$' && i + 1 == len)) {
      /* captures and the end anchor cannot fail after a quantifier */
    } else {
      q += pending, pending = 0;
    }
  }
  return q; /* trailing quantifiers are not counted: they cannot backtrack */
}

static int guarded_pattern(lua_State *L) {
  size_t n, plen;
  luaL_checklstring(L, 1, &n);
  const char *p = luaL_checklstring(L, 2, &plen);
  int kind = (int)lua_tointeger(L, lua_upvalueindex(3));
  int plain = kind == PAT_FIND && lua_toboolean(L, 4);
  if (!plain) {
    int q = pattern_quantifiers(p, plen);
    int anchored = kind != PAT_GMATCH && plen > 0 && p[0] == '^';
    double steps = pow((double)n + 1, q + (anchored ? 0 : 1));
    if (q > 0 && steps > owner(L)->lim.pattern_steps) {
      char msg[200];
      snprintf(msg, sizeof msg,
               "pattern too expensive for %s (%d quantifiers on %zu bytes: "
               "worst case ~%.0e steps); use a plain find or a shorter "
               "subject",
               owner(L)->kind, q, n, steps);
      return luaL_error(L, "%s: %s", lua_tostring(L, lua_upvalueindex(2)), msg);
    }
  }
  lua_pushvalue(L, lua_upvalueindex(1));
  lua_insert(L, 1);
  lua_call(L, lua_gettop(L) - 1, LUA_MULTRET);
  return lua_gettop(L);
}

/* table.move(a, f, e, t) loops e - f times in C even over nils, and
 * table.sort is n log n in one C call: both are capped at 2^22 elements. */
static int guarded_move(lua_State *L) {
  lua_Integer f = luaL_checkinteger(L, 2), e = luaL_checkinteger(L, 3);
  if (e >= f && (lua_Unsigned)e - (lua_Unsigned)f >= (1u << 22))
    return luaL_error(L, "table.move: at most 2^22 elements in %s",
                      owner(L)->kind);
  lua_pushvalue(L, lua_upvalueindex(1));
  lua_insert(L, 1);
  lua_call(L, lua_gettop(L) - 1, 1);
  return 1;
}

static int guarded_sort(lua_State *L) {
  luaL_checktype(L, 1, LUA_TTABLE);
  if (lua_rawlen(L, 1) > (1u << 22))
    return luaL_error(L, "table.sort: at most 2^22 elements in %s",
                      owner(L)->kind);
  lua_pushvalue(L, lua_upvalueindex(1));
  lua_insert(L, 1);
  lua_call(L, lua_gettop(L) - 1, 0);
  return 0;
}

/* Wraps table[field] (at index t) with fn, the original as upvalue 1. */
static void wrap(lua_State *L, int t, const char *field, lua_CFunction fn,
                 const char *full, int kind) {
  lua_getfield(L, t, field);
  lua_pushstring(L, full);
  lua_pushinteger(L, kind);
  lua_pushcclosure(L, fn, 3);
  lua_setfield(L, t, field);
}

static int readonly_newindex(lua_State *L) {
  return luaL_error(L, "%s is read-only in %s",
                    lua_tostring(L, lua_upvalueindex(1)), owner(L)->kind);
}

/* Replaces global `name` (a library table) with an empty proxy whose
 * metatable reads from the real table and refuses writes. */
static void make_readonly(lua_State *L, const char *name) {
  lua_getglobal(L, name); /* real */
  lua_newtable(L);        /* proxy */
  lua_createtable(L, 0, 3);
  lua_pushvalue(L, -3);
  lua_setfield(L, -2, "__index");
  lua_pushstring(L, name);
  lua_pushcclosure(L, readonly_newindex, 1);
  lua_setfield(L, -2, "__newindex");
  lua_pushstring(L, "locked");
  lua_setfield(L, -2, "__metatable");
  lua_setmetatable(L, -2);
  lua_setglobal(L, name);
  lua_pop(L, 1);
}

static void quiet_warnings(void *ud, const char *msg, int tocont) {
  (void)ud, (void)msg, (void)tocont;
}

/* Everything below may raise (memory): run it protected. */
static int build_sandbox(lua_State *L) {
  luaL_requiref(L, LUA_GNAME, luaopen_base, 1);
  luaL_requiref(L, LUA_STRLIBNAME, luaopen_string, 1);
  luaL_requiref(L, LUA_TABLIBNAME, luaopen_table, 1);
  luaL_requiref(L, LUA_MATHLIBNAME, luaopen_math, 1);
  lua_settop(L, 0);

  lua_pushglobaltable(L); /* 1: _G */
  for (int i = 0; removed_globals[i]; i++) {
    lua_pushnil(L);
    lua_setfield(L, 1, removed_globals[i]);
  }
  /* package.loaded (kept by luaL_requiref in the registry) would hand out
   * the real library tables; no script can reach the registry, but drop
   * it anyway. */
  lua_pushnil(L);
  lua_setfield(L, LUA_REGISTRYINDEX, LUA_LOADED_TABLE);

  lua_pushcfunction(L, safe_pcall);
  lua_setfield(L, 1, "pcall");
  lua_pushcfunction(L, safe_xpcall);
  lua_setfield(L, 1, "xpcall");
  lua_pushcfunction(L, capped_print);
  lua_setfield(L, 1, "print");
  lua_getfield(L, 1, "setmetatable");
  lua_pushcclosure(L, safe_setmetatable, 1);
  lua_setfield(L, 1, "setmetatable");

  lua_getglobal(L, "string"); /* 2 */
  set_disabled(L, 2, "dump", "string.dump", "no bytecode");
  lua_getfield(L, 2, "rep");
  lua_pushcclosure(L, safe_rep, 1);
  lua_setfield(L, 2, "rep");
  wrap(L, 2, "find", guarded_pattern, "string.find", PAT_FIND);
  wrap(L, 2, "match", guarded_pattern, "string.match", PAT_OTHER);
  wrap(L, 2, "gmatch", guarded_pattern, "string.gmatch", PAT_GMATCH);
  wrap(L, 2, "gsub", guarded_pattern, "string.gsub", PAT_OTHER);
  /* The string metatable is shared by every string: protect it so that
   * getmetatable("") cannot hand it out. */
  lua_pushliteral(L, "");
  lua_getmetatable(L, -1);
  lua_pushliteral(L, "locked");
  lua_setfield(L, -2, "__metatable");
  lua_pop(L, 3);

  lua_getglobal(L, "table");
  wrap(L, 2, "move", guarded_move, "table.move", 0);
  wrap(L, 2, "sort", guarded_sort, "table.sort", 0);
  lua_pop(L, 1);

  lua_getglobal(L, "math");
  const char *why = "a reward must be a deterministic function of the "
                    "metrics, or rescoring would not reproduce it; a "
                    "configuration, or a run could not be repeated";
  set_disabled(L, 2, "random", "math.random", why);
  set_disabled(L, 2, "randomseed", "math.randomseed", why);
  lua_pop(L, 1);

  make_readonly(L, "string");
  make_readonly(L, "table");
  make_readonly(L, "math");

  /* _G: clear messages for removed names. */
  lua_createtable(L, 0, 1);
  lua_pushcfunction(L, global_index);
  lua_setfield(L, -2, "__index");
  lua_setmetatable(L, 1);
  return 0;
}

int rw__sandbox_open(rw_script *s, char *why, size_t whylen) {
  s->L = lua_newstate(capped_alloc, s);
  if (!s->L) {
    snprintf(why, whylen, "%s: cannot create a Lua state (memory cap %zu)",
             s->path, s->lim.mem_bytes);
    return RW_EENV;
  }
  *(rw_script **)lua_getextraspace(s->L) = s;
  lua_setwarnf(s->L, quiet_warnings, NULL);
  lua_pushcfunction(s->L, build_sandbox);
  if (lua_pcall(s->L, 0, 0, 0) != LUA_OK) {
    snprintf(why, whylen, "%s: cannot build the sandbox: %s", s->path,
             lua_tostring(s->L, -1) ? lua_tostring(s->L, -1) : "?");
    lua_close(s->L);
    s->L = NULL;
    return RW_EENV;
  }
  lua_sethook(s->L, budget_hook, LUA_MASKCOUNT | LUA_MASKCALL, RW_HOOK_EVERY);
  return RW_OK;
}

size_t rw_chunk_skip(const char *text, size_t len) {
  size_t at = 0;
  if (len >= 3 && !memcmp(text, "\xEF\xBB\xBF", 3)) at = 3;
  if (at < len && text[at] == '#') {
    const char *nl = memchr(text + at, '\n', len - at);
    at = nl ? (size_t)(nl - text) : len;
  }
  return at;
}
