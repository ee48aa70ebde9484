/*
 * reward/internal.h — what the reward module's files share and nobody else
 * sees: the rw_script struct and the protected-call helper. Include only
 * from reward/ files.
 */
#ifndef REWARD_INTERNAL_H
#define REWARD_INTERNAL_H

#include "reward/reward.h"

#include <lua.h>

#include <signal.h>

/* The count hook runs every RW_HOOK_EVERY VM instructions; a call hook
 * runs before every function call (Lua or C) and checks the clock; and the
 * deadline alarm (sandbox.c) makes the hook run at the next instruction once
 * the deadline has passed. So one expensive C call (a 60 MiB string.upper)
 * or one expensive instruction (comparing two long strings) is the most
 * that can run past the deadline. */
#define RW_HOOK_EVERY 1000

struct rw_script {
  lua_State *L;
  rw_limits lim;
  size_t mem_used; /* bytes held by L, kept by the allocator */
  /* mem_used after the last full collection (rw__fresh_score) */
  size_t mem_collected;
  char path[1024];
  char short_src[LUA_IDSIZE]; /* as Lua names the chunk in messages */
  char sha256[65];
  int score_ref;   /* registry: the score function */
  int chunk_ref;   /* registry: the compiled script, run afresh per call */
  int cand_mt_ref; /* registry: metatable of candidate tables */
  int ctx_mt_ref;  /* registry: metatable of ctx tables */
  int score_line;  /* line where score was defined */
  int score_last;  /* and its last line */
  /* the text Lua compiled (a leading #! line blanked, its newline kept, so
   * lines are the file's), owned: a component's line is looked up in it
   * (score.c), Lua keeping no line for a table's fields; NULL for the
   * lab's configuration scripts */
  char *source;
  size_t source_len;
  int print_lines; /* lines printed so far (print is capped) */
  /* what the scripts are, for messages: "reward scripts", or the lab's
   * configuration scripts (rw_sandbox_open) */
  char kind[48];
  /* rw_sandbox_open's states: the memory cap holds during rw_sandbox_call
   * only, so the lab's own reads afterwards (outside any protected call,
   * where a memory error would abort) never meet it */
  int cap_in_calls;
  int in_call; /* rw__pcall depth */
  /* per call, reset by rw__pcall */
  long long hook_events; /* count-hook events in this call */
  double deadline_ms;    /* monotonic clock */
  int stop;              /* 0 running, 1 instruction budget, 2 deadline */
  int mem_error;         /* a memory error was caught by pcall/xpcall */
  /* set by the deadline alarm's signal handler (sandbox.c): the deadline
   * passed and the hook now runs at every instruction */
  volatile sig_atomic_t alarm;
  /* the allocator refused a request at the cap (the request, so that Lua's
   * retry after its emergency collection can be recognised) and nothing
   * since showed the script survived it: a stop raised while that memory
   * error unwinds (by a __close call) is reported as the memory error */
  int mem_refused;
  int refusals; /* growth requests refused in this call */
  const void *refused_ptr;
  size_t refused_size;
  char stop_msg[256];
  char traceback[4096];
};

/* Runs the function below the nargs arguments on top of L's stack under the
 * budget, deadline and message handler. On RW_OK leaves nresults results on
 * the stack (the caller restores the top); otherwise the stack is as it was
 * below the function, why holds one line and s->traceback the traceback. */
int rw__pcall(rw_script *s, int nargs, int nresults, char *why, size_t whylen);
/* A lua_CFunction (no arguments, no results; run it with rw__pcall): runs
 * the script's chunk again in an environment of its own (globals read
 * through to the sandbox's) and makes its score function the one scored
 * with, after a full collection when the heap grew by more than 256 KiB
 * since the last. Before every score call, so nothing a call leaves
 * behind (a global, an upvalue, garbage that still counts against the
 * memory cap) reaches the next: a reward is a function of its candidate
 * and context only, and rescoring reproduces it. */
int rw__fresh_score(lua_State *L);

/* The rw_script that owns L, kept in the state's extra space (a pointer's
 * worth of bytes Lua reserves for the host) so the hook reaches it fast. */
static inline rw_script *rw__owner(lua_State *L) {
  return *(rw_script **)lua_getextraspace(L);
}

/* Installs the guarded string.rep, find, match, gmatch, gsub, char,
 * format, pack, table.move, insert, remove, sort and math.max, min
 * (guards.c) into the library tables at string_t, table_t and math_t, and
 * pairs in key order into the globals at global_t. May raise (memory):
 * from a protected call. */
void rw__install_guards(lua_State *L, int global_t, int string_t, int table_t,
                        int math_t);

/* Clock in milliseconds (CLOCK_MONOTONIC). */
double rw__now_ms(void);

/* Builds the sandboxed state, the metatables and reads nothing from disk.
 * Returns RW_OK or RW_EENV. Defined in sandbox.c. */
int rw__sandbox_open(rw_script *s, char *why, size_t whylen);

/* Builds the metatables of c and ctx (score.c). RW_OK or an error. */
int rw__metrics_setup(rw_script *s, char *why, size_t whylen);

/* Copies src into dst as one line (newlines and tabs become spaces). */
void rw__one_line(char *dst, size_t len, const char *src);

#endif
