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
 * The deadline alarm is a POSIX timer per thread that runs Lua calls,
 * armed for the deadline of each call; its signal (SIGRTMIN + 5) is taken
 * only if nothing else in the process handles it. Without it (the signal
 * taken, no timer) the hooks alone enforce the deadline, as before.
 *
 * Not here: loading files (script.c), the metrics (score.c), and the
 * guards on library functions that loop in C out of the hook's reach
 * (guards.c).
 */
#define _GNU_SOURCE /* gettid, SIGEV_THREAD_ID */
#include "reward/internal.h"

#include <lauxlib.h>
#include <lualib.h>

#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

double rw__now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static size_t utf8_char(const unsigned char *p, size_t len);

/* The message is the script's own text (error('\27[2J...'), a __tostring),
 * and the lab prints it to a terminal as it is: any other control byte
 * becomes '?' as in print (C0 but tab, DEL, C1, bytes that are not UTF-8),
 * so a formula's error cannot clear the screen or fake a lab message in
 * colour (a hostile review printed ESC [2J through kernlab rescore). */
void rw__one_line(char *dst, size_t len, const char *src) {
  if (!len) return;
  size_t o = 0;
  for (size_t i = 0; src && src[i] && o + 1 < len;) {
    const unsigned char *p = (const unsigned char *)src + i;
    size_t n = p[0] < 0x80 ? 1 : utf8_char(p, strnlen(src + i, 4));
    if (p[0] == '\n' || p[0] == '\r' || p[0] == '\t' || p[0] < 0x20 ||
        p[0] == 0x7f || !n) {
      dst[o++] = p[0] == '\n' || p[0] == '\r' || p[0] == '\t' ? ' ' : '?';
      i++;
    } else if (o + n < len) {
      memcpy(dst + o, p, n);
      o += n;
      i += n;
    } else {
      break;
    }
  }
  dst[o] = 0;
}

/* ---- memory --------------------------------------------------------------
 * lua_Alloc contract (manual §4.1, lua_Alloc): ptr == NULL means osize
 * encodes a type, not a size; nsize == 0 frees; Lua assumes shrinking never
 * fails. Growth past the cap returns NULL, which Lua turns into LUA_ERRMEM
 * after one emergency collection.
 *
 * One refusal Lua tolerates: the string table's doubling. Near the cap
 * every new short string then asks for it again, and each refusal costs a
 * full emergency collection out of the hooks' reach: a gsub making 100
 * captures took 2 s (an adversarial review found it). After
 * RW_MAX_REFUSALS refusals in one call, all growth is refused until the
 * call ends, so the next allocation Lua cannot do without ends the call
 * with a memory error. */
#define RW_MAX_REFUSALS 8
static void *capped_alloc(void *ud, void *ptr, size_t osize, size_t nsize) {
  rw_script *s = ud;
  size_t old = ptr ? osize : 0;
  if (nsize == 0) {
    free(ptr);
    s->mem_used -= old;
    return NULL;
  }
  if (nsize > old && (!s->cap_in_calls || s->in_call) &&
      ((s->in_call && s->refusals >= RW_MAX_REFUSALS) ||
       s->mem_used > s->lim.mem_bytes ||
       nsize - old > s->lim.mem_bytes - s->mem_used)) {
    /* over the cap (written so that it cannot overflow) */
    s->refusals++;
    s->mem_refused = 1;
    s->refused_ptr = ptr;
    s->refused_size = nsize;
    return NULL;
  }
  void *p = realloc(ptr, nsize);
  if (!p) return nsize <= old ? ptr : NULL; /* a failed shrink keeps ptr */
  /* Lua asks again, the same, after an emergency collection: granted, no
   * memory error follows */
  if (s->mem_refused && ptr == s->refused_ptr && nsize == s->refused_size)
    s->mem_refused = 0;
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
  rw_script *s = rw__owner(L);
  /* Lua code ran on after a refusal: it was survived (a caller that
   * tolerates it, such as the string table's resize), not unwinding */
  if (ar->event == LUA_HOOKCOUNT) s->mem_refused = 0;
  if (!s->stop) {
    if (ar->event == LUA_HOOKCOUNT) s->hook_events++;
    /* after the alarm, count events come at every instruction: the
     * deadline is what stops the script, not a budget they would inflate */
    if (s->alarm || rw__now_ms() > s->deadline_ms)
      s->stop = 2;
    else if (s->hook_events * RW_HOOK_EVERY > s->lim.instructions)
      s->stop = 1;
    if (s->stop) {
      /* Name the Lua line that was running: for a call event that is the
       * caller (the callee has not started). With no Lua frame (a C
       * function called from C: a __close while an error unwinds, the
       * lab's own C function), the script and "(in a C function)". */
      lua_Debug where;
      char place[LUA_IDSIZE + 32];
      snprintf(place, sizeof place, "%s (in a C function)", s->short_src);
      for (int level = 0; lua_getstack(L, level, &where); level++) {
        lua_getinfo(L, "Sl", &where);
        if (where.currentline > 0) {
          snprintf(place, sizeof place, "%s:%d", where.short_src,
                   where.currentline);
          break;
        }
      }
      if (s->stop == 1)
        snprintf(s->stop_msg, sizeof s->stop_msg,
                 "%s: instruction budget exceeded (%lld instructions; an "
                 "endless loop?)",
                 place, s->lim.instructions);
      else
        snprintf(s->stop_msg, sizeof s->stop_msg,
                 "%s: wall-clock deadline exceeded (%.0f ms)", place,
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

/* ---- the deadline alarm -------------------------------------------------
 * The count hook looks at the clock every RW_HOOK_EVERY instructions, and
 * one instruction can cost milliseconds: `a < b` on two 8 MiB strings of
 * NUL bytes calls strcoll once per NUL (12 ms here), `a == b` compares 8
 * MiB, `a .. b` copies them. A loop of such instructions calls nothing the
 * call hook sees, so a formula ran seconds past its 250 ms deadline before
 * the count hook looked (tests/unit/test_reward_guards.c, "expensive").
 *
 * So each thread that runs Lua calls owns a timer (timer_create with
 * SIGEV_THREAD_ID: the signal goes to that thread, not to any thread of
 * the lab), armed at the deadline of each protected call. Its handler
 * turns the count hook to every instruction, with lua_sethook, which Lua
 * allows in a signal handler (ldebug.c; lua.c's Ctrl-C does the same), and
 * sets s->alarm. Past the deadline at most one instruction runs before the
 * hook stops the script. The timer is deleted when its thread ends.
 *
 * SA_RESTART: the handler interrupts nothing a script can see (Lua calls
 * no blocking system call but print's write). The lab's own threads never
 * get the signal. */
#define ALARM_SIGNAL (SIGRTMIN + 5)
#define HOOK_MASK (LUA_MASKCOUNT | LUA_MASKCALL)

/* Per thread: the script whose call the timer is armed for (read by the
 * handler on this thread), and the timer. initial-exec: reading it in a
 * signal handler must not allocate. */
static __thread struct {
  rw_script *volatile active;
  int state; /* 0 not tried, 1 have a timer, -1 cannot have one */
  timer_t id;
} alarm_tls __attribute__((tls_model("initial-exec")));

static pthread_once_t alarm_once = PTHREAD_ONCE_INIT;
static int alarm_ok;            /* the handler is installed */
static pthread_key_t alarm_key; /* its destructor deletes a thread's timer */

static void on_alarm(int sig, siginfo_t *si, void *uc) {
  (void)sig, (void)si, (void)uc;
  rw_script *s = alarm_tls.active;
  if (!s) return; /* late: the call already returned */
  s->alarm = 1;
  lua_sethook(s->L, budget_hook, HOOK_MASK, 1);
}

static void delete_timer(void *unused) {
  (void)unused;
  if (alarm_tls.state == 1) timer_delete(alarm_tls.id);
  alarm_tls.state = -1;
}

static void install_alarm(void) {
  struct sigaction old;
  if (sigaction(ALARM_SIGNAL, NULL, &old) != 0 || old.sa_handler != SIG_DFL ||
      (old.sa_flags & SA_SIGINFO))
    return; /* someone else's signal: keep to the hooks */
  if (pthread_key_create(&alarm_key, delete_timer) != 0) return;
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = on_alarm;
  sa.sa_flags = SA_SIGINFO | SA_RESTART;
  sigemptyset(&sa.sa_mask);
  alarm_ok = sigaction(ALARM_SIGNAL, &sa, NULL) == 0;
}

/* Arms this thread's timer to fire at deadline_ms (CLOCK_MONOTONIC, as
 * rw__now_ms), or disarms it for deadline_ms 0. */
static void set_alarm(double deadline_ms) {
  if (alarm_tls.state == 0) {
    pthread_once(&alarm_once, install_alarm);
    struct sigevent ev;
    memset(&ev, 0, sizeof ev);
    ev.sigev_notify = SIGEV_THREAD_ID;
    ev.sigev_signo = ALARM_SIGNAL;
    ev._sigev_un._tid = gettid(); /* sigev_notify_thread_id */
    alarm_tls.state = -1;
    if (alarm_ok && timer_create(CLOCK_MONOTONIC, &ev, &alarm_tls.id) == 0) {
      alarm_tls.state = 1;
      pthread_setspecific(alarm_key, &alarm_tls);
    }
  }
  if (alarm_tls.state != 1) return;
  struct itimerspec when;
  memset(&when, 0, sizeof when);
  if (deadline_ms > 0) {
    long long ns = (long long)(deadline_ms * 1e6);
    when.it_value.tv_sec = ns / 1000000000LL;
    when.it_value.tv_nsec = ns % 1000000000LL;
    if (!when.it_value.tv_sec && !when.it_value.tv_nsec)
      when.it_value.tv_nsec = 1; /* zero would disarm */
  }
  timer_settime(alarm_tls.id, TIMER_ABSTIME, &when, NULL);
}

/* ---- pcall and xpcall that cannot swallow the budget ---------------------
 * Same results as the base library's: true + results, or false + error.
 * A budget stop or a memory error is raised again instead: a formula may
 * catch its own mistakes, not the lab's limits. */
static int finish_pcall(lua_State *L, int status, int extra) {
  rw_script *s = rw__owner(L);
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
  rw_script *s = rw__owner(L);
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
 * s->traceback. Not called for memory errors (Lua's rule).
 *
 * luaL_traceback finds the last level of the stack by a binary search of
 * lua_getstack calls, and each walks the frames from the top: on the
 * 500,000 frames of a runaway recursion (f(n) return f(n + 1) + 1 end),
 * some 40 walks of half a million frames, 0.5 to 1 s after the deadline
 * or the stack overflow, once for every failed call of a group (a hostile
 * review). A stack deeper than TRACEBACK_DEEP levels gets its first
 * levels only. */
#define TRACEBACK_DEEP 200
#define TRACEBACK_SHOWN 10

static void deep_traceback(lua_State *L, char *out, size_t cap) {
  size_t o = (size_t)snprintf(out, cap, "stack traceback:");
  lua_Debug ar;
  for (int level = 1; level <= TRACEBACK_SHOWN && lua_getstack(L, level, &ar);
       level++) {
    lua_getinfo(L, "Sln", &ar);
    char where[LUA_IDSIZE + 16], what[LUA_IDSIZE + 64];
    if (ar.currentline > 0)
      snprintf(where, sizeof where, "%s:%d", ar.short_src, ar.currentline);
    else
      snprintf(where, sizeof where, "%s", ar.short_src);
    if (ar.namewhat[0])
      snprintf(what, sizeof what, "%s '%s'", ar.namewhat, ar.name);
    else if (*ar.what == 'm')
      snprintf(what, sizeof what, "main chunk");
    else if (*ar.what == 'C')
      snprintf(what, sizeof what, "?");
    else
      snprintf(what, sizeof what, "function <%s:%d>", ar.short_src,
               ar.linedefined);
    if (o < cap)
      o += (size_t)snprintf(out + o, cap - o, "\n\t%s: in %s", where, what);
  }
  if (o < cap)
    snprintf(out + o, cap - o,
             "\n\t...\t(more than %d levels, not shown: a runaway "
             "recursion?)",
             TRACEBACK_DEEP);
}

static int message_handler(lua_State *L) {
  rw_script *s = rw__owner(L);
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
  if (lua_getstack(L, TRACEBACK_DEEP, &ar)) {
    deep_traceback(L, s->traceback, sizeof s->traceback);
  } else {
    luaL_traceback(L, L, NULL, 1);
    snprintf(s->traceback, sizeof s->traceback, "%s", lua_tostring(L, -1));
    lua_pop(L, 1);
  }
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
  s->mem_refused = 0;
  s->refusals = 0;
  s->stop_msg[0] = 0;
  s->traceback[0] = 0;
  s->deadline_ms = rw__now_ms() + s->lim.wall_ms;
  /* a fresh count for each call: its first count event comes after
   * RW_HOOK_EVERY instructions of its own, not of the calls before it */
  s->alarm = 0;
  lua_sethook(L, budget_hook, HOOK_MASK, RW_HOOK_EVERY);
  rw_script *outer = alarm_tls.active; /* a call from inside a call */
  alarm_tls.active = s;
  set_alarm(s->deadline_ms);
  s->in_call++;
  int status = lua_pcall(L, nargs, nresults, fn);
  s->in_call--;
  /* unhooked from the handler first, so a late signal changes nothing */
  alarm_tls.active = outer;
  set_alarm(outer ? outer->deadline_ms : 0);
  if (s->alarm) {
    s->alarm = 0;
    lua_sethook(L, budget_hook, HOOK_MASK, RW_HOOK_EVERY);
  }
  int code = RW_OK;
  /* A memory error first: when the allocator refused and nothing ran on
   * since, a stop is what the hook met while that error unwound (a
   * __close call: ('a'):rep(33 * 2^20) past the deadline), not the cause. */
  int mem = status == LUA_ERRMEM || s->mem_error ||
            (status != LUA_OK && s->mem_refused);
  if (s->stop && !mem) {
    code = RW_EBUDGET; /* even if the script claims success */
    rw__one_line(why, whylen, s->stop_msg);
  } else if (mem) {
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

/* print writes to stderr what a terminal shows as text: each line of the
 * output after "[script] ", at most 1 KiB per print and 100 lines per
 * script, newlines inside one print counted, so a formula that prints in a
 * loop (or one print of many lines) cannot flood the lab's log; and with
 * what a terminal would act on escaped as \xNN (C0 controls but tab, DEL,
 * C1 controls, bytes that are not UTF-8), so no ESC sequence clears the
 * screen or fakes a lab message in colour. */
#define PRINT_MAX_LINES 100
#define PRINT_MAX_BYTES 1024

/* The bytes of the UTF-8 character at p (len available) that is no C1
 * control, or 0. */
static size_t utf8_char(const unsigned char *p, size_t len) {
  size_t n = p[0] > 0xF4    ? 0
             : p[0] >= 0xF0 ? 4
             : p[0] >= 0xE0 ? 3
             : p[0] >= 0xC2 ? 2
                            : 0;
  if (!n || n > len) return 0;
  for (size_t k = 1; k < n; k++)
    if ((p[k] & 0xC0) != 0x80) return 0;
  if (n == 2 && p[0] == 0xC2 && p[1] < 0xA0) return 0; /* U+0080..U+009F */
  return n;
}

static void put_escaped(const unsigned char *p, size_t len, FILE *f) {
  for (size_t i = 0; i < len;) {
    size_t n = p[i] < 0x80 ? 1 : utf8_char(p + i, len - i);
    if ((p[i] < 0x20 && p[i] != '\t') || p[i] == 0x7f || !n) {
      fprintf(f, "\\x%02x", p[i]);
      i++;
    } else {
      fwrite(p + i, 1, n, f);
      i += n;
    }
  }
}

static int capped_print(lua_State *L) {
  rw_script *s = rw__owner(L);
  if (s->print_lines > PRINT_MAX_LINES) return 0;
  int n = lua_gettop(L); /* before luaL_buffinit, which may push a slot */
  luaL_Buffer b;
  luaL_buffinit(L, &b);
  for (int i = 1; i <= n; i++) {
    if (i > 1) luaL_addchar(&b, '\t');
    luaL_tolstring(L, i, NULL);
    luaL_addvalue(&b);
  }
  luaL_pushresult(&b);
  size_t len;
  const char *text = lua_tolstring(L, -1, &len);
  if (len > PRINT_MAX_BYTES) len = PRINT_MAX_BYTES;
  /* one line per line of the text (a final newline starts none) */
  size_t at = 0;
  do {
    if (s->print_lines++ == PRINT_MAX_LINES) {
      fprintf(stderr, "[%s] (further print output suppressed)\n", s->short_src);
      return 0;
    }
    const char *nl = memchr(text + at, '\n', len - at);
    size_t end = nl ? (size_t)(nl - text) : len;
    fprintf(stderr, "[%s] ", s->short_src);
    put_escaped((const unsigned char *)text + at, end - at, stderr);
    fputc('\n', stderr);
    at = end + 1;
  } while (at < len);
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
                        k, rw__owner(L)->kind);
  return 0;
}

static int disabled(lua_State *L) {
  return luaL_error(L, "%s is disabled in %s (%s)",
                    lua_tostring(L, lua_upvalueindex(1)), rw__owner(L)->kind,
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
 * off, so an endless loop there would escape the budget. And without
 * __mode: the collector's atomic phase walks weak-keyed tables until
 * nothing changes, in one step no hook sees, and a shuffled chain of
 * 60,000 weak keys kept it there 15 s past a 250 ms deadline (found by an
 * adversarial review). Lua reads __mode again at every collection, so a
 * metatable gets a metatable of its own (upvalue 2) whose __newindex
 * refuses a __mode added later; a table that has another metatable cannot
 * be one. Neither matters to a formula; both say so by name. */
static int metatable_newindex(lua_State *L) {
  const char *k = lua_type(L, 2) == LUA_TSTRING ? lua_tostring(L, 2) : "";
  if (!strcmp(k, "__mode") || !strcmp(k, "__gc"))
    return luaL_error(L, "%s cannot be added to a metatable in %s", k,
                      rw__owner(L)->kind);
  lua_settop(L, 3);
  lua_rawset(L, 1);
  return 0;
}

static int safe_setmetatable(lua_State *L) {
  const char *kind = rw__owner(L)->kind;
  if (lua_getmetatable(L, 1)) {
    if (lua_rawequal(L, -1, lua_upvalueindex(2)))
      return luaL_error(L,
                        "setmetatable: this table is a metatable; it cannot "
                        "get one of its own in %s",
                        kind);
    lua_pop(L, 1);
  }
  if (lua_type(L, 2) == LUA_TTABLE) {
    static const char *const refused[] = {"__gc", "__mode"};
    static const char *const why[] = {"finalizers", "weak tables"};
    for (int i = 0; i < 2; i++) {
      lua_pushstring(L, refused[i]);
      if (lua_rawget(L, 2) != LUA_TNIL)
        return luaL_error(L, "setmetatable: %s %s are not allowed in %s",
                          refused[i], why[i], kind);
      lua_pop(L, 1);
    }
    if (lua_getmetatable(L, 2)) {
      if (!lua_rawequal(L, -1, lua_upvalueindex(2)))
        return luaL_error(L,
                          "setmetatable: a metatable with a metatable of its "
                          "own is not allowed in %s",
                          kind);
      lua_pop(L, 1);
    } else {
      lua_pushvalue(L, lua_upvalueindex(2));
      lua_setmetatable(L, 2);
    }
  }
  lua_pushvalue(L, lua_upvalueindex(1)); /* the original */
  lua_insert(L, 1);
  lua_call(L, lua_gettop(L) - 1, 1);
  return 1;
}

static int readonly_newindex(lua_State *L) {
  return luaL_error(L, "%s is read-only in %s",
                    lua_tostring(L, lua_upvalueindex(1)), rw__owner(L)->kind);
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
  lua_createtable(L, 0, 2); /* every metatable's metatable */
  lua_pushcfunction(L, metatable_newindex);
  lua_setfield(L, -2, "__newindex");
  lua_pushliteral(L, "locked");
  lua_setfield(L, -2, "__metatable");
  lua_pushcclosure(L, safe_setmetatable, 2);
  lua_setfield(L, 1, "setmetatable");

  lua_getglobal(L, "string"); /* 2 */
  set_disabled(L, 2, "dump", "string.dump", "no bytecode");
  /* The string metatable is shared by every string: protect it so that
   * getmetatable("") cannot hand it out. */
  lua_pushliteral(L, "");
  lua_getmetatable(L, -1);
  lua_pushliteral(L, "locked");
  lua_setfield(L, -2, "__metatable");
  lua_pop(L, 2);

  /* C library loops the hook cannot reach: guards.c */
  lua_getglobal(L, "table"); /* 3 */
  lua_getglobal(L, "math");  /* 4 */
  rw__install_guards(L, 1, 2, 3, 4);
  lua_pop(L, 3);

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
  lua_sethook(s->L, budget_hook, HOOK_MASK, RW_HOOK_EVERY);
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
