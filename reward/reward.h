/*
 * reward/reward.h — the one public header of the reward module: the embedded
 * Lua 5.4 engine that turns a candidate's metrics into named reward
 * components.
 *
 * A reward script (lua/reward/ scripts) returns a table with a function
 * `score(c, ctx)`. `c` holds one candidate's metrics (fields of
 * rw_candidate; values that were not measured are nil), `ctx` the task and
 * the whole group for relative scoring. `score` returns a table of named
 * numbers; the total is their sum, computed here in C, and every score
 * carries the sha256 of the script file it came from.
 *
 * Each script gets its own lua_State, sandboxed:
 *   - only the base, string, table and math libraries; load, loadstring,
 *     dofile, loadfile, require, collectgarbage, rawset, string.dump and
 *     math.random/randomseed are gone (a reward must be a deterministic
 *     function of the metrics so that rescoring reproduces it); reading a
 *     removed name (io, os, debug, package, load, ...) raises an error
 *     that says it is not available;
 *   - pairs visits a table's keys by value (numbers ascending, strings by
 *     their bytes, false, true, then keys with no value to order by), not
 *     in next's hash order, which Lua seeds per state, so a formula that
 *     depends on the order still rescores the same (next keeps Lua's
 *     order; the sort costs some microseconds a key on big tables);
 *   - tostring and string.format show no addresses ("table: (address
 *     hidden)"; %p is refused), which differ from run to run;
 *   - the library tables are read-only and the string metatable is
 *     protected; setmetatable refuses __gc finalizers (they run with hooks
 *     off, so they would escape the instruction budget);
 *   - chunks are text only (no bytecode);
 *   - a memory cap enforced by the allocator (LUA_ERRMEM when refused);
 *   - an instruction budget and a wall-clock deadline per call, checked by
 *     a count hook (every 1000 instructions, and at every instruction once
 *     a per-thread timer signal says the deadline passed: one instruction,
 *     comparing two long strings, can take milliseconds) and a call hook;
 *     once exceeded the hook keeps raising, and pcall/xpcall
 *     are replaced by versions that re-raise budget and memory errors, so a
 *     script cannot swallow them;
 *   - C functions that loop without running Lua code are bounded too
 *     (reward/guards.c): string.rep of an empty string returns at once;
 *     the pattern functions (find, match, gmatch, gsub) refuse
 *     subject/pattern pairs (and gsub replacements) whose worst-case work
 *     on that subject is too large; table.move, insert, remove, unpack
 *     and concat make at most 2^22 element accesses (#t as __len says,
 *     each access counted through its chain of table-valued __index or
 *     __newindex); math.max/min and string.char/format/pack take at most
 *     64 MiB of string arguments, and string.pack/packsize/unpack a
 *     format of at most 64 KiB; table.sort takes at most 2^22 and
 *     compares through a call, so the deadline is checked between
 *     comparisons;
 *   - no weak tables (__mode), since the collector's work on them is out
 *     of the hooks' reach;
 *   - a stop is reported at the script's line, or "(in a C function)";
 *     a memory error wins over a stop met while it unwinds;
 *   - print writes at most 100 lines per script (1 KiB per call), control
 *     bytes escaped.
 *
 * Errors are values: every call returns an RW_* code and writes one line to
 * `why` naming the script file and line ("lua/reward/x.lua:12: ...").
 * The Lua traceback of the last failure is kept apart (rw_traceback,
 * rw_load_traceback). A hostile or broken script never crashes the caller
 * and is stopped at its wall deadline (250 ms by default; the one C call or
 * VM instruction in flight, such as a 60 MiB string.upper, may overrun it
 * by some ms). The deadline's timer costs two timer_settime calls per
 * protected call (~3 us here, tests/bench/bench_reward.c).
 *
 * Not here: reading candidates from the results store (rescoring lives in
 * lab/ on top of this API), CUDA, flags (names come from kernels/flags.c;
 * the engine passes them through as strings).
 *
 * Prefix: rw_. Not thread-safe per script: one rw_script is used by one
 * thread at a time; different scripts are independent.
 */
#ifndef REWARD_REWARD_H
#define REWARD_REWARD_H

#include <stddef.h>
#include <stdio.h>

/* Return codes. */
enum {
  RW_OK = 0,
  RW_EINPUT = 2,   /* the script file is missing, unreadable or too large */
  RW_ESYNTAX = 10, /* the chunk does not compile (or is bytecode) */
  RW_ERUN = 11,    /* a runtime error in the script */
  RW_EBUDGET = 12, /* instruction budget or wall deadline exceeded */
  RW_EMEM = 13,    /* the memory cap was exceeded */
  RW_ERETURN = 14, /* wrong shape of result: no score(), non-table return,
                      non-numeric / non-finite / badly named component */
  RW_EENV = 15,    /* the engine itself could not start (malloc failed) */
};

/* rw_reload outcomes. */
enum {
  RW_UNCHANGED = 0, /* same sha256 as the current script: nothing done */
  RW_RELOADED = 1,  /* a new script replaced *current */
  RW_KEPT_OLD = 2,  /* the new file failed to load or validate; *current
                       untouched (possibly NULL), why says what failed */
};

#define RW_DEFAULT_MEM_BYTES (64u << 20)
#define RW_DEFAULT_INSTRUCTIONS 10000000LL
#define RW_DEFAULT_WALL_MS 250.0
#define RW_DEFAULT_PATTERN_STEPS 2e7
#define RW_MAX_SCRIPT_BYTES (1u << 20)
#define RW_MAX_COMPONENTS 64
#define RW_MAX_COMPONENT_NAME 63
/* A total's magnitude must stay within this. GRPO's group standard
 * deviation squares the differences of totals: from about 1e154 those are
 * infinite (every advantage 0, the step read as one of equal rewards).
 * Up to 1e150 a batch's squares stay finite; an unscaled advantage past
 * 3.4e38 still overflows float, which the update reports as diverged. No
 * sensible formula comes near; one that does has a bug (an exp of a time,
 * a division by a tiny number). */
#define RW_MAX_TOTAL 1e150

/* Limits of one script's state. Zero fields mean the default. The
 * instruction budget and the wall deadline apply to each call separately:
 * the top-level chunk at load, and every score call. */
typedef struct rw_limits {
  size_t mem_bytes;       /* heap cap of the lua_State (default 64 MiB) */
  long long instructions; /* VM instructions per call (default 10 M) */
  double wall_ms;         /* wall-clock deadline per call (default 250) */
  /* worst-case backtracking steps one pattern call (string.find, match,
   * gmatch, gsub) may take, estimated before it runs (default 2e7, about
   * 0.1 s): a pattern backtracks inside one C call, out of the hooks'
   * reach */
  double pattern_steps;
} rw_limits;

/* Fills l with the defaults above. */
void rw_limits_default(rw_limits *l);

/* One candidate's metrics, as the lab measured them. Plain data borrowed
 * for the duration of a call; nothing is kept. Conventions: numbers < 0
 * (or NaN) mean "not measured" and become nil in Lua; NULL strings become
 * nil. Call rw_candidate_init first so unset fields read as unmeasured. */
typedef struct rw_candidate {
  int compiled;       /* bool: it compiled (NVRTC and, for cpu-emu, the host) */
  int correct;        /* bool: it passed every checked shape */
  const char *status; /* "ok", "wrong", "compile_error", "timeout", ... */
  const char *errors; /* the error line ("" or NULL when none) */
  const char *backend; /* "gpu" or "cpu-emu": what time_us means */
  double max_rel_err, max_abs_err;
  double time_us;     /* median time at the target shape */
  double baseline_us; /* the baseline (naive seed) at the same shape */
  double gflops;
  /* 100 * baseline_us / time_us; derived from those two when left < 0 */
  double percent_of_baseline;
  int regs, smem_bytes, spill_bytes; /* ptxas; < 0 unknown */
  const char *const *flags;          /* anti-cheat flag names */
  int n_flags;
  long source_len, completion_len; /* bytes; < 0 unknown */
} rw_candidate;

/* Sets every number to "unmeasured" (-1), bools to 0, pointers to NULL. */
void rw_candidate_init(rw_candidate *c);

/* The task and the group a candidate belongs to. */
typedef struct rw_context {
  const char *task;          /* task name, e.g. "matmul_fp32" */
  const char *dtype;         /* "fp32" */
  int M, N, K;               /* the target shape */
  const rw_candidate *group; /* the group (GRPO generations of one prompt); */
  int n_group;               /* may be empty */
} rw_context;

/* Named components returned by score(), sorted by name, and their sum. */
typedef struct rw_component {
  char name[RW_MAX_COMPONENT_NAME + 1];
  double value;
} rw_component;

typedef struct rw_components {
  rw_component *items; /* owned (malloc'd); free with rw_components_free */
  int n;
  double total;           /* sum of the values, in name order */
  char script_sha256[65]; /* the script that produced them */
} rw_components;

typedef struct rw_script rw_script;

/* Loads a reward script: reads the file (at most RW_MAX_SCRIPT_BYTES),
 * hashes it, builds a sandboxed state with limits (NULL: defaults), runs
 * the chunk under the budget, and checks it returned a table with a
 * function `score`. Does not call score (see rw_validate). Returns the
 * script, owned by the caller (free with rw_free), or NULL with why filled
 * (the code in rw_load_error(), the traceback if any in
 * rw_load_traceback()). */
rw_script *rw_load(const char *path, const rw_limits *limits, char *why,
                   size_t whylen);

/* Closes the state and frees the script (or an rw_sandbox_open state).
 * NULL is fine. */
void rw_free(rw_script *s);

/* ---- the lab's configuration scripts, in the same sandbox ----
 * Campaign files and seed scripts (lab/lua_script.c) are the user's own
 * configuration, but a broken one must still end in a message, never a
 * hang or an abort: they run in a state built as a reward script's (the
 * list at the top of this header: pcall loops, finalizers, string.rep and
 * pattern bombs are all stopped), under the caller's limits, with kind
 * naming them in messages ("campaign files"). The memory cap holds during
 * rw_sandbox_call only, so that the caller's own reads afterwards (raw
 * Lua API access, unprotected) cannot meet it. The caller loads chunks
 * ("t" mode) and reads results with the Lua API, and closes the state with
 * rw_free. NULL, with why, when the state cannot be built. */
struct lua_State;
rw_script *rw_sandbox_open(const char *path, const char *kind,
                           const rw_limits *limits, char *why, size_t whylen);
struct lua_State *rw_sandbox_state(rw_script *s);
/* Bytes of text (len) to skip before luaL_loadbufferx, as Lua's own file
 * loader skips them: a UTF-8 byte-order mark, and a first line starting
 * with '#' (a "#!" line) up to, not including, its newline, so line
 * numbers stay those of the file. */
size_t rw_chunk_skip(const char *text, size_t len);

/* Calls the function below the nargs arguments on top of the state's stack
 * under the limits. RW_OK with nresults results pushed; else RW_ERUN,
 * RW_EBUDGET or RW_EMEM with one line in why ("path:line: ..."), and the
 * stack as it was below the function. */
int rw_sandbox_call(rw_script *s, int nargs, int nresults, char *why,
                    size_t whylen);

/* Scores candidate c in context ctx (ctx may be NULL: no task, empty
 * group). On RW_OK, out holds the components (sorted by name), their total
 * and the script's sha256; the caller frees it with rw_components_free. On
 * any other code out is empty (n = 0, items NULL; freeing it is harmless),
 * why holds one line naming the script and line, and rw_traceback(s) the
 * traceback. The script stays usable after an error. */
int rw_score(rw_script *s, const rw_candidate *c, const rw_context *ctx,
             rw_components *out, char *why, size_t whylen);

/* Scores every member of ctx->group (out must hold ctx->n_group entries):
 * the group table is built once, so this is cheaper per candidate than
 * n_group rw_score calls. ctx.index in Lua says which member is scored.
 * A member whose call fails stays empty (unscored) and the others are
 * still scored, except after an instruction-budget, deadline or memory
 * failure, which stops the group. Returns the first failure's code, with
 * why naming the member ("group[3]: ..."); the filled entries are owned by
 * the caller. */
int rw_score_group(rw_script *s, const rw_context *ctx, rw_components *out,
                   char *why, size_t whylen);

/* Scores the built-in fixture group (a correct fast kernel, a correct slow
 * one, a wrong one, one that timed out, a compile error, a flagged one):
 * every member must give finite components. Returns RW_OK or the first
 * failure's code with why. Used by rw_reload; call it after rw_load to
 * fail early on a script that breaks on, say, nil times. */
int rw_validate(rw_script *s, char *why, size_t whylen);

/* The fixture rw_validate uses, for tests and benchmarks: *n receives the
 * group size. Static data; do not free. */
const rw_candidate *rw_fixture_group(int *n);
void rw_fixture_context(rw_context *ctx);

/* Hot reload: reads path and, only if its sha256 differs from *current's
 * (or *current is NULL), loads it into a fresh state with *current's limits
 * (defaults if NULL) and runs rw_validate. On success frees the old script,
 * stores the new one in *current and returns RW_RELOADED. On failure
 * returns RW_KEPT_OLD with why naming the problem and leaves *current as
 * it was; why names the kept and the rejected version by sha256 prefix
 * ("kept the previous formula (OLD), not this version (NEW): ..."), and
 * is the same text while the file stays as it is, so a caller polling
 * every step says a failing edit once by saying only a new why.
 * RW_UNCHANGED when the bytes are the same. A file caught half written
 * fails to load and is retried on the next call. */
int rw_reload(rw_script **current, const char *path, char *why, size_t whylen);

/* Hex sha256 of the script file's bytes (64 characters). */
const char *rw_sha256(const rw_script *s);
/* The path the script was loaded from. */
const char *rw_path(const rw_script *s);
/* Traceback of the last failed call on s ("" if none or not available:
 * Lua runs no message handler for memory errors). */
const char *rw_traceback(const rw_script *s);
/* Traceback and RW_* code of the last failed rw_load in this thread ("" and
 * RW_OK if none). */
const char *rw_load_traceback(void);
int rw_load_error(void);
/* Bytes the state currently holds (for reports and tests). */
size_t rw_memory_used(const rw_script *s);

/* Frees the components' items and empties out. NULL-safe, idempotent. */
void rw_components_free(rw_components *out);

/* Prints {"name":value,...,"total":x,"script_sha256":"..."} (no newline).
 * Names are limited to [A-Za-z0-9_.-], so they need no escaping. */
void rw_components_json(FILE *f, const rw_components *c);

#endif
