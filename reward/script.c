/*
 * reward/script.c — a reward script's life: loading a file into a fresh
 * sandboxed state, validating it on the built-in fixture group, hot reload
 * by content hash, and freeing it.
 *
 * Reload compares sha256 of the file's bytes, not mtimes: a save that does
 * not change the text is not a reload, a change that keeps the mtime is,
 * and the hash is the same one every score records. A file caught half
 * written fails to compile, the old formula stays, and the next call sees
 * the finished file. A rejected version is remembered by hash so that a
 * campaign calling rw_reload every step does not rebuild it every step.
 * The reason names the rejected version's hash as well as the kept one's,
 * so a caller can say each failing edit once by comparing reasons
 * (lab/run_cmd.c does), two edits that fail alike included.
 *
 * Not here: the sandbox itself (sandbox.c), metrics (score.c).
 */
#include "reward/internal.h"

#include "kernels/kernels.h"

#include <lauxlib.h>

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static _Thread_local char load_traceback[4096];
static _Thread_local int load_error;

void rw_limits_default(rw_limits *l) {
  l->mem_bytes = RW_DEFAULT_MEM_BYTES;
  l->instructions = RW_DEFAULT_INSTRUCTIONS;
  l->wall_ms = RW_DEFAULT_WALL_MS;
  l->pattern_steps = RW_DEFAULT_PATTERN_STEPS;
}

/* s->lim: the defaults, then each field limits sets. */
static void set_limits(rw_script *s, const rw_limits *limits) {
  rw_limits_default(&s->lim);
  if (limits && limits->mem_bytes) s->lim.mem_bytes = limits->mem_bytes;
  if (limits && limits->instructions > 0)
    s->lim.instructions = limits->instructions;
  if (limits && limits->wall_ms > 0) s->lim.wall_ms = limits->wall_ms;
  if (limits && limits->pattern_steps > 0)
    s->lim.pattern_steps = limits->pattern_steps;
}

/* Reads the whole file (at most RW_MAX_SCRIPT_BYTES). On RW_OK *buf is
 * malloc'd, owned by the caller. */
static int read_file(const char *path, char **buf, size_t *len, char *why,
                     size_t whylen) {
  /* never a wait: a FIFO swapped in for the script (as an edit may
   * rename files) would block a plain open for ever */
  struct stat st;
  FILE *f = kl_fopen_regular(path, &st);
  if (!f) {
    snprintf(why, whylen, "%s: cannot open reward script: %s", path,
             kl_fopen_error(errno));
    return RW_EINPUT;
  }
  if (st.st_size > (off_t)RW_MAX_SCRIPT_BYTES) {
    snprintf(why, whylen, "%s: reward script over %u bytes", path,
             RW_MAX_SCRIPT_BYTES);
    fclose(f);
    return RW_EINPUT;
  }
  /* Read up to the limit + 1 whatever stat said: the file may be growing. */
  char *b = malloc(RW_MAX_SCRIPT_BYTES + 1);
  if (!b) {
    fclose(f);
    snprintf(why, whylen, "%s: out of memory", path);
    return RW_EENV;
  }
  size_t n = fread(b, 1, RW_MAX_SCRIPT_BYTES + 1, f);
  int err = ferror(f);
  fclose(f);
  if (err || n > RW_MAX_SCRIPT_BYTES) {
    free(b);
    snprintf(why, whylen, "%s: %s", path,
             err ? "read error" : "reward script too large");
    return RW_EINPUT;
  }
  *buf = b;
  *len = n;
  return RW_OK;
}

/* A script with its sandboxed state and no chunk yet: kind names such
 * scripts in messages. NULL, with why, when out of memory. */
static rw_script *new_script(const char *path, const char *kind,
                             const rw_limits *limits, char *why,
                             size_t whylen) {
  rw_script *s = calloc(1, sizeof *s);
  if (!s) {
    snprintf(why, whylen, "%s: out of memory for a Lua state", path);
    return NULL;
  }
  set_limits(s, limits);
  snprintf(s->path, sizeof s->path, "%s", path);
  snprintf(s->short_src, sizeof s->short_src, "%s", path);
  snprintf(s->kind, sizeof s->kind, "%s", kind);
  s->score_ref = s->cand_mt_ref = s->ctx_mt_ref = s->chunk_ref = LUA_NOREF;
  if (rw__sandbox_open(s, why, whylen) != RW_OK) {
    free(s);
    return NULL;
  }
  return s;
}

/* Builds a script from bytes already read. */
static void fresh_env(lua_State *L, int idx);

static rw_script *load_bytes(const char *path, const char *buf, size_t len,
                             const char *sha, const rw_limits *limits,
                             char *why, size_t whylen) {
  load_traceback[0] = 0;
  rw_script *s = new_script(path, "reward scripts", limits, why, whylen);
  if (!s) {
    load_error = RW_EENV;
    return NULL;
  }
  memcpy(s->sha256, sha, 65);
  lua_State *L = s->L;

  /* "@path" makes Lua name the file in every message; "t": never
   * bytecode, which Lua does not verify. */
  char chunkname[1100];
  snprintf(chunkname, sizeof chunkname, "@%s", path);
  size_t skip = rw_chunk_skip(buf, len);
  int st = luaL_loadbufferx(L, buf + skip, len - skip, chunkname, "t");
  if (st != LUA_OK) {
    const char *msg = lua_tostring(L, -1);
    if (st == LUA_ERRMEM)
      snprintf(why, whylen, "%s: memory cap exceeded while compiling", path);
    else if (msg && !strncmp(msg, path, strlen(path)))
      rw__one_line(why, whylen, msg); /* already "path:line: ..." */
    else
      snprintf(why, whylen, "%s: %s", path, msg ? msg : "cannot load");
    load_error = st == LUA_ERRMEM ? RW_EMEM : RW_ESYNTAX;
    rw_free(s);
    return NULL;
  }
  lua_Debug ar;
  lua_pushvalue(L, -1);
  lua_getinfo(L, ">S", &ar);
  snprintf(s->short_src, sizeof s->short_src, "%s", ar.short_src);
  /* kept to run afresh before each call (rw__fresh_score); this first run
   * too gets an environment of its own, so _G stays as the sandbox made it */
  lua_pushvalue(L, -1);
  s->chunk_ref = luaL_ref(L, LUA_REGISTRYINDEX);
  fresh_env(L, -1);

  if ((load_error = rw__pcall(s, 0, 1, why, whylen)) != RW_OK) {
    snprintf(load_traceback, sizeof load_traceback, "%s", s->traceback);
    rw_free(s);
    return NULL;
  }
  if (!lua_istable(L, -1)) {
    snprintf(why, whylen,
             "%s: the script returned %s; it must end with `return M` where "
             "M is a table with a function M.score(c, ctx)",
             s->short_src, lua_isnil(L, -1) ? "nothing" : luaL_typename(L, -1));
    load_error = RW_ERETURN;
    rw_free(s);
    return NULL;
  }
  lua_pushliteral(L, "score");
  lua_rawget(L, -2); /* raw: no metamethod runs outside protection */
  if (!lua_isfunction(L, -1)) {
    snprintf(why, whylen,
             "%s: the returned table has no function 'score' (found %s); "
             "define function M.score(c, ctx)",
             s->short_src, luaL_typename(L, -1));
    load_error = RW_ERETURN;
    rw_free(s);
    return NULL;
  }
  lua_pushvalue(L, -1);
  lua_getinfo(L, ">S", &ar);
  s->score_line = ar.linedefined;
  s->score_last = ar.lastlinedefined;
  s->score_ref = luaL_ref(L, LUA_REGISTRYINDEX); /* pops score */
  lua_settop(L, 0);
  if (s->score_ref == LUA_REFNIL || s->score_ref == LUA_NOREF ||
      rw__metrics_setup(s, why, whylen) != RW_OK) {
    if (!why[0]) snprintf(why, whylen, "%s: out of memory", path);
    load_error = RW_EMEM;
    rw_free(s);
    return NULL;
  }
  if (!(s->source = malloc(len - skip + 1))) {
    snprintf(why, whylen, "%s: out of host memory", path);
    load_error = RW_EENV;
    rw_free(s);
    return NULL;
  }
  memcpy(s->source, buf + skip, len - skip);
  s->source[len - skip] = 0;
  s->source_len = len - skip;
  return s;
}

rw_script *rw_load(const char *path, const rw_limits *limits, char *why,
                   size_t whylen) {
  if (whylen) why[0] = 0;
  char *buf;
  size_t len;
  if ((load_error = read_file(path, &buf, &len, why, whylen)) != RW_OK)
    return NULL;
  char sha[65];
  kl_sha256_hex(buf, len, sha);
  load_error = RW_OK;
  rw_script *s = load_bytes(path, buf, len, sha, limits, why, whylen);
  free(buf);
  return s;
}

rw_script *rw_sandbox_open(const char *path, const char *kind,
                           const rw_limits *limits, char *why, size_t whylen) {
  rw_script *s = new_script(path, kind, limits, why, whylen);
  if (s) s->cap_in_calls = 1;
  return s;
}

struct lua_State *rw_sandbox_state(rw_script *s) {
  return s->L;
}

int rw_sandbox_call(rw_script *s, int nargs, int nresults, char *why,
                    size_t whylen) {
  return rw__pcall(s, nargs, nresults, why, whylen);
}

/* Sets the chunk at idx's _ENV (its first upvalue) to a new table that
 * reads missing names from the globals. Its _G is itself, and its
 * metatable is hidden (getmetatable gives false), so no name leads a
 * script to the shared global table to write there. */
static void fresh_env(lua_State *L, int idx) {
  idx = lua_absindex(L, idx);
  lua_newtable(L); /* env */
  lua_pushvalue(L, -1);
  lua_setfield(L, -2, "_G");
  lua_createtable(L, 0, 2); /* its metatable */
  lua_pushglobaltable(L);
  lua_setfield(L, -2, "__index");
  lua_pushboolean(L, 0);
  lua_setfield(L, -2, "__metatable");
  lua_setmetatable(L, -2);
  lua_setupvalue(L, idx, 1); /* pops env */
}

/* Bytes of garbage a score call may find from the calls before it. */
#define RW_GC_SLACK ((size_t)256 << 10)

int rw__fresh_score(lua_State *L) {
  rw_script *s = *(rw_script **)lua_getextraspace(L);
  /* The heap too: the garbage of the calls before is counted against the
   * cap until collected, and a luaL_Buffer (string.rep, gsub, concat,
   * upper...) allocates past Lua's emergency collection, so a big result
   * was refused or not depending on what had been scored before (40 MiB
   * of one call's garbage made the next call's 25 MiB rep a memory
   * error). And a buffer a stop cut off (a deadline met as it closes) is
   * freed only by its finalizer, which an emergency collection never
   * runs: it held its memory for the calls after. A full collection runs
   * it, once the heap has grown by RW_GC_SLACK since the last one: each
   * call costs tens of microseconds more (bench_reward), and a call can
   * then meet at most that much of the earlier calls' garbage, 1/256 of
   * the default cap. */
  if (s->mem_used > s->mem_collected + RW_GC_SLACK) {
    lua_gc(L, LUA_GCCOLLECT);
    s->mem_collected = s->mem_used;
  }
  lua_rawgeti(L, LUA_REGISTRYINDEX, s->chunk_ref);
  fresh_env(L, -1);
  lua_call(L, 0, 1);
  if (!lua_istable(L, -1))
    return luaL_error(L, "the script returned %s on a later run",
                      luaL_typename(L, -1));
  lua_pushliteral(L, "score");
  lua_rawget(L, -2);
  if (!lua_isfunction(L, -1))
    return luaL_error(L, "the returned table has no function 'score' on a "
                         "later run");
  lua_rawseti(L, LUA_REGISTRYINDEX, s->score_ref); /* replaces the old */
  return 0;
}

void rw_free(rw_script *s) {
  if (!s) return;
  if (s->L) lua_close(s->L);
  free(s->source);
  free(s);
}

const char *rw_sha256(const rw_script *s) {
  return s->sha256;
}
const char *rw_path(const rw_script *s) {
  return s->path;
}
const char *rw_traceback(const rw_script *s) {
  return s->traceback;
}
const char *rw_load_traceback(void) {
  return load_traceback;
}
int rw_load_error(void) {
  return load_error;
}
size_t rw_memory_used(const rw_script *s) {
  return s->mem_used;
}

/* ---- the fixture ---------------------------------------------------------
 * One of each kind of candidate a formula must handle: most bugs in a new
 * formula are arithmetic on a field that is nil for some kinds (no time for
 * a compile error), and this group has them all. */
static const char *const flags_cheat[] = {"input_mutated", "implausible_speed"};
static const char *const flags_unknown[] = {"a_flag_from_the_future"};

#define UNTIMED -1, -1, -1, -1
static const rw_candidate fixture[] = {
    /* correct and fast */
    {1, 1, "ok", "", "gpu", 2e-7, 1e-5, 80, 1000, 419.4, -1, 64, 8192, 0, NULL,
     0, 2100, 2600},
    /* correct and slow */
    {1, 1, "ok", "", "gpu", 1e-7, 1e-5, 1500, 1000, 22.4, -1, 32, 0, 0, NULL, 0,
     900, 1300},
    /* wrong, but timed (and fast): speed must not pay */
    {1, 0, "wrong", "max rel err 0.31 at 256x256x256", "gpu", 0.31, 4.2, 40,
     1000, 838.9, -1, 40, 4096, 0, NULL, 0, 1500, 1900},
    /* ran past its deadline */
    {1, 0, "timeout", "run exceeded 10 s", "gpu", UNTIMED, -1, -1, 48, 0, 0,
     NULL, 0, 1200, 1500},
    /* did not compile: almost nothing measured */
    {0, 0, "compile_error",
     "kernel.cu(12): error: identifier \"tid\" is "
     "undefined",
     "gpu", UNTIMED, -1, -1, -1, -1, -1, NULL, 0, 700, 1000},
    /* correct and fast, but flagged */
    {1, 1, "ok", "", "gpu", 1e-7, 1e-5, 20, 1000, 1677.7, -1, 32, 0, 0,
     flags_cheat, 2, 1000, 1300},
    /* correct, flagged with a name no formula knows yet */
    {1, 1, "ok", "", "gpu", 1e-7, 1e-5, 500, 1000, 67.1, -1, 32, 0, 0,
     flags_unknown, 1, 1000, 1300},
};

static const char *const fixture_kinds[] = {
    "correct fast", "correct slow",  "wrong",
    "timeout",      "compile error", "flagged (input_mutated)",
    "unknown-flag"};

const rw_candidate *rw_fixture_group(int *n) {
  *n = (int)(sizeof fixture / sizeof fixture[0]);
  return fixture;
}

void rw_fixture_context(rw_context *ctx) {
  ctx->task = "matmul_fp32";
  ctx->dtype = "fp32";
  ctx->M = ctx->N = ctx->K = 256;
  ctx->group = rw_fixture_group(&ctx->n_group);
}

int rw_validate(rw_script *s, char *why, size_t whylen) {
  rw_context ctx;
  rw_fixture_context(&ctx);
  rw_components out[sizeof fixture / sizeof fixture[0]];
  char inner[512];
  int code = rw_score_group(s, &ctx, out, inner, sizeof inner);
  for (int i = 0; i < ctx.n_group; i++)
    rw_components_free(&out[i]);
  if (code != RW_OK) {
    int i = 0;
    if (sscanf(inner, "group[%d]", &i) != 1 || i < 1 || i > ctx.n_group) i = 0;
    snprintf(why, whylen, "on the fixture's %s candidate: %s",
             i ? fixture_kinds[i - 1] : "first", inner);
  }
  return code;
}

/* ---- hot reload ----------------------------------------------------------
 */

/* The last rejected version, per thread: enough for a campaign that polls
 * one script. */
static _Thread_local struct {
  char path[1024];
  char sha[65];
  char why[512];
} rejected;

int rw_reload(rw_script **current, const char *path, char *why, size_t whylen) {
  if (whylen) why[0] = 0;
  char *buf;
  size_t len;
  char inner[512] = "";
  if (read_file(path, &buf, &len, inner, sizeof inner) != RW_OK) {
    snprintf(why, whylen, "kept the previous formula: %s", inner);
    return RW_KEPT_OLD;
  }
  char sha[65];
  kl_sha256_hex(buf, len, sha);
  if (*current && !strcmp(sha, (*current)->sha256)) {
    free(buf);
    return RW_UNCHANGED;
  }
  if (!strcmp(rejected.sha, sha) && !strcmp(rejected.path, path)) {
    free(buf);
    snprintf(why, whylen, "%s", rejected.why);
    return RW_KEPT_OLD;
  }
  const rw_limits *lim = *current ? &(*current)->lim : NULL;
  rw_script *s = load_bytes(path, buf, len, sha, lim, inner, sizeof inner);
  free(buf);
  int code = s ? rw_validate(s, inner, sizeof inner) : load_error;
  if (code != RW_OK) {
    rw_free(s);
    /* the rejected version's hash in the text: a caller saying each
     * failure once tells two edits failing alike apart by it */
    snprintf(why, whylen,
             "kept the previous formula (%.12s), not this "
             "version (%.12s): %s",
             *current ? (*current)->sha256 : "none", sha, inner);
    /* Remembered, so the same text is not tried again every step: unless
     * the failure may pass next time (a wall-clock deadline on a busy
     * machine, the engine out of memory). */
    if (!strstr(inner, "wall-clock deadline") && code != RW_EENV) {
      snprintf(rejected.path, sizeof rejected.path, "%s", path);
      memcpy(rejected.sha, sha, sizeof rejected.sha);
      snprintf(rejected.why, sizeof rejected.why, "%s", why);
    }
    return RW_KEPT_OLD;
  }
  rw_free(*current);
  *current = s;
  return RW_RELOADED;
}
