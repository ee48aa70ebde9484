/*
 * kernels/emu/emu_build.c — turns a candidate's CUDA source into a shared
 * object the CPU emulator can run.
 *
 * Steps: rewrite the few constructs a header cannot express (`extern
 * __shared__` arrays become pointers into the block's dynamic shared
 * memory), append the contract check, compile with the host C++ compiler
 * (C++17, -O2 -march=native, the shim and abi.h pre-included, a private
 * include folder holding only the allowlisted CUDA headers), cache the .so by
 * sha256 of everything that went into it, dlopen it, and read kl_launch.
 *
 * The compiler runs in a private temporary folder with a deadline. Stronger
 * confinement (seccomp, rlimits, namespaces) is the sandbox module's job.
 */
#define _GNU_SOURCE
#include "kernels/emu/emu_internal.h"

#include <dirent.h>
#include <dlfcn.h>
#include <link.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifndef KL_HOST_CXX
#define KL_HOST_CXX "c++"
#endif

extern char **environ;

/* -fstack-clash-protection: a frame past a fiber's 128 KiB stack is probed
 * page by page, so it meets the guard page (a clean SIGSEGV) instead of
 * jumping over it into another emulated thread's stack. -nostartfiles: no
 * crt init code, so that any code run at load is the candidate's
 * (check_module); -z noexecstack: loading the module never makes
 * the threads' stacks executable. */
static const char *const cxx_flags[] = {
    "-std=c++17", "-O2", "-march=native", "-fPIC", "-fstack-clash-protection",
    "-shared", "-nostartfiles", "-Wl,-z,noexecstack", "-w",
    "-fno-strict-aliasing", "-fvisibility=default",
    /* timer instructions, whatever
     * spelling reaches the compiler
     * (a paste, a type-chosen template
     * the scanner cannot follow): an
     * undeclared name, a compile error */
    "-D__builtin_ia32_rdtsc=kl_emu_"
    "timer_reads_are_not_allowed",
    "-D__builtin_ia32_rdtscp=kl_emu_"
    "timer_reads_are_not_allowed",
    "-D__builtin_ia32_rdpmc=kl_emu_"
    "timer_reads_are_not_allowed",
    "-D__builtin_readcyclecounter=kl_emu_"
    "timer_reads_are_not_allowed",
    "-D__builtin_readsteadycounter=kl_"
    "emu_timer_reads_are_not_allowed",
    "-include", "cuda_shim.h", "-include", "kl_abi.h", "-I", ".", "-o",
    "candidate.so", "candidate.cpp"};
#define N_CXX_FLAGS (sizeof cxx_flags / sizeof cxx_flags[0])

#define KL_HOST_COMPILE_DEADLINE_S 60

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* ---- source rewriting ---- */

typedef struct buf {
  char *p;
  size_t len, cap;
} buf;

static void buf_put(buf *b, const char *s, size_t n) {
  if (b->len + n + 1 > b->cap) {
    size_t cap = b->cap ? b->cap : 4096;
    while (cap < b->len + n + 1)
      cap *= 2;
    char *p = realloc(b->p, cap);
    if (!p) abort(); /* out of memory while copying at most 256 KiB */
    b->p = p;
    b->cap = cap;
  }
  memcpy(b->p + b->len, s, n);
  b->len += n;
  b->p[b->len] = 0;
}
static void buf_puts(buf *b, const char *s) {
  buf_put(b, s, strlen(s));
}

static int is_ident(char c) {
  return c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
         (c >= '0' && c <= '9');
}

/* Rewrites one `extern __shared__ TYPE NAME[];` starting at s (pointing at
 * `extern`). Returns the number of bytes consumed, or 0 if the declaration
 * is not of that shape (it is then left for the compiler to reject). */
static size_t rewrite_extern_shared(buf *out, const char *s, int depth,
                                    int line) {
  const char *semi = strchr(s, ';');
  if (!semi) return 0;
  const char *lb = memchr(s, '[', (size_t)(semi - s));
  if (!lb) return 0;
  const char *name_end = lb;
  while (name_end > s && (name_end[-1] == ' ' || name_end[-1] == '\t'))
    name_end--;
  const char *name = name_end;
  while (name > s && is_ident(name[-1]))
    name--;
  if (name == name_end) return 0;
  const char *type = strstr(s, "__shared__") + strlen("__shared__");
  if (type > name) return 0;
  /* The type without alignment attributes, which cannot appear in a cast. */
  buf t = {0};
  for (const char *p = type; p < name;) {
    if (strncmp(p, "__align__", 9) == 0 || strncmp(p, "alignas", 7) == 0) {
      const char *q = strchr(p, '(');
      int nest = 0;
      while (q && q < name) {
        if (*q == '(') nest++;
        if (*q == ')' && --nest == 0) break;
        q++;
      }
      if (!q || q >= name) break;
      p = q + 1;
      continue;
    }
    buf_put(&t, p, 1);
    p++;
  }
  /* Only a type's own spelling (float4, unsigned char, ns::T<2>*) may go
   * into the cast: anything else would be code that g++ sees in a macro
   * and NVRTC never does. */
  int type_only = t.p != NULL;
  for (const char *c = t.p; c && *c; c++)
    if (!is_ident(*c) && !strchr(" \t:<>,*", *c)) type_only = 0;
  char nm[128];
  size_t nlen = (size_t)(name_end - name);
  if (nlen >= sizeof nm || !type_only) {
    free(t.p);
    return 0;
  }
  memcpy(nm, name, nlen);
  nm[nlen] = 0;
  char line_buf[1024];
  if (depth > 0) {
    snprintf(line_buf, sizeof line_buf,
             "%s *const %s = (%s *)kl_emu_dyn_smem();", t.p, nm, t.p);
  } else {
    /* At file scope a pointer would be initialised once, on the loading
     * thread; a macro reads the current block's memory at each use. */
    snprintf(line_buf, sizeof line_buf,
             "\n#define %s ((%s *)kl_emu_dyn_smem())\n#line %d "
             "\"candidate.cu\"\n",
             nm, t.p, line);
  }
  free(t.p);
  buf_puts(out, line_buf);
  return (size_t)(semi + 1 - s);
}

/* The end of the raw string literal R"delim( ... )delim" at p (pointing
 * at the quote), or NULL when p does not open one. */
static const char *raw_string_end(const char *p) {
  const char *open = strchr(p + 1, '(');
  if (!open || open - p - 1 > 16) return NULL;
  for (const char *d = p + 1; d < open; d++)
    if (strchr(" ()\\\t\v\f\n\"", *d)) return NULL;
  size_t dlen = (size_t)(open - p - 1);
  for (const char *e = open + 1; (e = strchr(e, ')')); e++)
    if (strncmp(e + 1, p + 1, dlen) == 0 && e[1 + dlen] == '"')
      return e + 2 + dlen;
  return p + strlen(p); /* unterminated: the compilers reject it */
}

/* Copies src, rewriting `extern __shared__` declarations outside comments
 * and literals. Returns a malloc'd string.
 * It reads the text with its line splices joined, as both compilers do:
 * a `// comment \` ending in a splice must hide its next line here too,
 * or a declaration there would become code for g++ alone. */
static char *rewrite_source(const char *raw) {
  size_t jlen;
  char *src = kl_source_join_splices(raw, strlen(raw), &jlen);
  if (!src) abort(); /* as buf_put: at most 256 KiB */
  buf out = {0};
  buf_puts(&out, "#line 1 \"candidate.cu\"\n");
  int depth = 0, line = 1;
  const char *p = src;
  while (*p) {
    /* R"d(...)d", also after u8, u, U and L; a string for both compilers */
    if (*p == '"' && p > src && p[-1] == 'R' &&
        (p - 1 == src || !is_ident(p[-2]) ||
         (p - 2 >= src && strchr("uUL8", p[-2])))) {
      const char *e = raw_string_end(p);
      if (e) {
        for (const char *c = p; c < e; c++)
          line += *c == '\n';
        buf_put(&out, p, (size_t)(e - p));
        p = e;
        continue;
      }
    }
    if (p[0] == '/' && p[1] == '/') {
      const char *e = strchr(p, '\n');
      size_t n = e ? (size_t)(e - p) : strlen(p);
      buf_put(&out, p, n);
      p += n;
      continue;
    }
    if (p[0] == '/' && p[1] == '*') {
      const char *e = strstr(p + 2, "*/");
      size_t n = e ? (size_t)(e + 2 - p) : strlen(p);
      for (size_t i = 0; i < n; i++)
        line += p[i] == '\n';
      buf_put(&out, p, n);
      p += n;
      continue;
    }
    if (*p == '"' || *p == '\'') {
      char q = *p;
      const char *e = p + 1;
      while (*e && *e != q && *e != '\n')
        e += (*e == '\\' && e[1]) ? 2 : 1;
      if (*e == q) e++;
      buf_put(&out, p, (size_t)(e - p));
      p = e;
      continue;
    }
    if (*p == '{') depth++;
    if (*p == '}' && depth > 0) depth--;
    if (*p == '\n') line++;
    if (strncmp(p, "extern", 6) == 0 && (p == src || !is_ident(p[-1])) &&
        !is_ident(p[6])) {
      const char *q = p + 6;
      while (*q == ' ' || *q == '\t')
        q++;
      if (strncmp(q, "__shared__", 10) == 0 && !is_ident(q[10])) {
        size_t used = rewrite_extern_shared(&out, p, depth, line + 1);
        if (used) {
          for (size_t i = 0; i < used; i++)
            line += p[i] == '\n';
          p += used;
          continue;
        }
      }
    }
    buf_put(&out, p, 1);
    p++;
  }
  buf_puts(&out, "\n");
  buf_puts(&out, kl_contract_check);
  free(src);
  return out.p;
}

/* ---- running the host compiler ---- */

static int write_file(const char *dir, const char *name, const char *text) {
  char path[1024];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE *f = fopen(path, "wb");
  if (!f) return -1;
  size_t n = strlen(text);
  int ok = fwrite(text, 1, n, f) == n;
  return (fclose(f) == 0 && ok) ? 0 : -1;
}

/* Removes a build folder: its files, and those of the folders in it (the
 * headers' cooperative_groups/), `depth` levels down. */
static void remove_tree_at(const char *dir, int depth) {
  DIR *d = opendir(dir);
  if (d) {
    struct dirent *e;
    char path[1024];
    while ((e = readdir(d))) {
      if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
      snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
      if (unlink(path) != 0 && errno == EISDIR && depth > 0)
        remove_tree_at(path, depth - 1);
    }
    closedir(d);
  }
  rmdir(dir);
}
static void remove_tree(const char *dir) {
  remove_tree_at(dir, 2);
}

/* Keeps the first lines of the compiler's output that say "error". */
static void first_errors(const char *log, char *why, size_t whylen) {
  size_t used = 0;
  int found = 0;
  why[0] = 0;
  for (const char *l = log; *l && found < 3;) {
    const char *e = strchr(l, '\n');
    size_t n = e ? (size_t)(e - l) : strlen(l);
    if (memmem(l, n, "error", 5) || memmem(l, n, "Error", 5)) {
      int w = snprintf(why + used, whylen - used, "%s%.*s", found ? " | " : "",
                       (int)n, l);
      if (w < 0 || (size_t)w >= whylen - used) break;
      used += (size_t)w;
      found++;
    }
    l = e ? e + 1 : l + n;
  }
  if (!found) snprintf(why, whylen, "host compiler failed: %.200s", log);
  /* One line, whatever the compiler printed. */
  for (char *c = why; *c; c++)
    if (*c == '\n' || *c == '\r') *c = ' ';
}

/* Runs the host compiler in dir. Returns KL_OK, KL_ECOMPILE (why holds the
 * first error lines) or KL_EENV (the compiler could not be started). */
static const char *const *launcher; /* argv prefix, see kl_emu_set_launcher */

void kl_emu_set_launcher(const char *const *prefix) {
  launcher = prefix;
}

static double compile_deadline_s = KL_HOST_COMPILE_DEADLINE_S;

/* The compiles in flight (process group ids; 0 free, -1 taken by a
 * compile about to start), for kl_emu_kill_compiles from a signal
 * handler: plain atomics, no lock. A compile takes its slot before it
 * starts and waits while every slot is taken (more compiles at once than
 * slots: eval --jobs goes to 1024), so none runs unregistered. */
#define MAX_LIVE_COMPILES 64
static pid_t live_compiles[MAX_LIVE_COMPILES];

static int compile_slot(void) {
  for (;;) {
    for (int i = 0; i < MAX_LIVE_COMPILES; i++) {
      pid_t free_slot = 0;
      if (__atomic_compare_exchange_n(&live_compiles[i], &free_slot, -1, 0,
                                      __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST))
        return i;
    }
    usleep(1000);
  }
}

static void compile_slot_set(int slot, pid_t pid) {
  __atomic_store_n(&live_compiles[slot], pid, __ATOMIC_SEQ_CST);
}

void kl_emu_kill_compiles(void) {
  for (int i = 0; i < MAX_LIVE_COMPILES; i++) {
    pid_t pid = __atomic_load_n(&live_compiles[i], __ATOMIC_SEQ_CST);
    if (pid > 0) kill(-pid, SIGKILL);
  }
}

void kl_emu_set_compile_deadline(double seconds) {
  if (seconds > 0) compile_deadline_s = seconds;
}

static int run_compiler(const char *dir, char *why, size_t whylen) {
  const char *argv[N_CXX_FLAGS + 16];
  int n = 0;
  for (int i = 0; launcher && launcher[i] && i < 12; i++)
    argv[n++] = launcher[i];
  argv[n++] = KL_HOST_CXX;
  for (size_t i = 0; i < N_CXX_FLAGS; i++)
    argv[n++] = cxx_flags[i];
  argv[n] = NULL;
  char log_path[1024];
  snprintf(log_path, sizeof log_path, "%s/compile.log", dir);
  /* the compiler's own temporaries (cc*.s, cc*.o) in the build folder,
   * removed with it, also when the compile is killed */
  char tmpdir[1100];
  snprintf(tmpdir, sizeof tmpdir, "TMPDIR=%s", dir);
  size_t n_env = 0;
  while (environ[n_env])
    n_env++;
  char **envp = calloc(n_env + 2, sizeof *envp);
  if (!envp) {
    snprintf(why, whylen, "out of memory");
    return KL_EENV;
  }
  size_t e = 0;
  for (size_t i = 0; i < n_env; i++)
    if (strncmp(environ[i], "TMPDIR=", 7)) envp[e++] = environ[i];
  envp[e++] = tmpdir;
  envp[e] = NULL;
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, log_path, O_WRONLY | O_CREAT, 0600);
  posix_spawn_file_actions_adddup2(&fa, 1, 2);
  posix_spawn_file_actions_addchdir_np(&fa, dir);
  posix_spawnattr_t at;
  posix_spawnattr_init(&at);
  posix_spawnattr_setflags(&at, POSIX_SPAWN_SETPGROUP);
  posix_spawnattr_setpgroup(&at, 0);
  pid_t pid;
  int slot = compile_slot();
  int err = posix_spawnp(&pid, argv[0], &fa, &at, (char *const *)argv, envp);
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&at);
  free(envp);
  compile_slot_set(slot, err == 0 ? pid : 0);
  if (err != 0) {
    snprintf(why, whylen, "cannot start host compiler %s: %s", argv[0],
             strerror(err));
    return KL_EENV;
  }
  double start = now_ms();
  int status = 0;
  /* The registry's slot is cleared before the process is reaped: until
   * then its pid (and process group) cannot name another process. */
  for (;;) {
    siginfo_t si;
    si.si_pid = 0;
    int r = waitid(P_PID, (id_t)pid, &si, WEXITED | WNOHANG | WNOWAIT);
    if (r == 0 && si.si_pid == pid) break;
    if (r < 0 && errno != EINTR) break;
    if (now_ms() - start > compile_deadline_s * 1000.0) {
      kill(-pid, SIGKILL);
      compile_slot_set(slot, 0);
      waitpid(pid, &status, 0);
      snprintf(why, whylen, "host compile exceeded %.0f s", compile_deadline_s);
      return KL_ETIMEOUT;
    }
    usleep(2000);
  }
  compile_slot_set(slot, 0);
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return KL_OK;
  if (WIFEXITED(status) && WEXITSTATUS(status) == 127) {
    snprintf(why, whylen, "host compiler %s not found", KL_HOST_CXX);
    return KL_EENV;
  }
  uint8_t *log = NULL;
  FILE *f = fopen(log_path, "rb");
  if (f) {
    log = calloc(1, 65537);
    if (log) (void)!fread(log, 1, 65536, f);
    fclose(f);
  }
  first_errors(log ? (const char *)log : "", why, whylen);
  /* The compiler's own words for its limits (RLIMIT_AS, RLIMIT_CPU), at
   * the start of a line: a candidate's `#error out of memory` is a line
   * that starts with its file name. */
  int oom = 0, cpu = 0;
  for (const char *l = log ? (const char *)log : ""; *l;) {
    oom |= !strncmp(l, "virtual memory exhausted", 24) ||
           !strncmp(l, "cc1plus: out of memory", 22);
    const char *nl = strchr(l, '\n');
    /* the driver's "g++-12: fatal error: CPU time limit exceeded signal
     * terminated program cc1plus"; not a line of the candidate's own */
    size_t n = nl ? (size_t)(nl - l) : strlen(l);
    cpu |= strncmp(l, "candidate", 9) &&
           memmem(l, n, ": fatal error: CPU time limit exceeded", 38) != NULL;
    if (!nl) break;
    l = nl + 1;
  }
  free(log);
  if (cpu) snprintf(why, whylen, "host compile exceeded its CPU time limit");
  return oom ? KL_EOOM : cpu ? KL_ETIMEOUT : KL_ECOMPILE;
}

/* The emulator's cooperative groups (cg_shim.h, cg_reduce_shim.h), under
 * the names a candidate includes them by. Returns 0, or -1 if one could
 * not be written. */
static int write_cg_headers(const char *dir) {
  char sub[700];
  snprintf(sub, sizeof sub, "%s/cooperative_groups", dir);
  if (write_file(dir, "cooperative_groups.h", kl_emu_cg_header) ||
      mkdir(sub, 0700) != 0)
    return -1;
  return write_file(sub, "reduce.h", kl_emu_cg_reduce_header);
}

static const char mma_stub[] =
    "#error \"mma.h (wmma tensor-core fragments) is not available on the "
    "cpu-emu backend\"\n";

/* Each build folder holds BUILD_LOCK, flock'ed by the process that made
 * it for as long as it uses the folder. A pid alone is not proof of death:
 * a cache shared with a lab in another PID namespace names a pid that
 * means nothing here (kill says ESRCH while that lab compiles). */
#define BUILD_LOCK ".lock"

/* Removes the build folders (emu-build-PID-*) of processes that are gone:
 * a lab killed mid-compile leaves its folder (and, before TMPDIR pointed
 * there, the compiler's temporaries). Gone means the pid is not alive here
 * and nobody holds the folder's lock (a folder without one, from an older
 * kernlab or a moment old, goes by the pid alone). Once per process. */
static void sweep_build_dirs(void) {
  static int swept;
  if (__atomic_exchange_n(&swept, 1, __ATOMIC_SEQ_CST)) return;
  DIR *d = opendir(kl_cache_dir());
  struct dirent *e;
  while (d && (e = readdir(d))) {
    char *end;
    if (strncmp(e->d_name, "emu-build-", 10)) continue;
    long pid = strtol(e->d_name + 10, &end, 10);
    if (end == e->d_name + 10 || *end != '-' || pid <= 0 ||
        pid == (long)getpid())
      continue;
    if (kill((pid_t)pid, 0) == 0 || errno != ESRCH) continue; /* alive */
    char path[1024], lock[1100];
    snprintf(path, sizeof path, "%s/%s", kl_cache_dir(), e->d_name);
    snprintf(lock, sizeof lock, "%s/%s", path, BUILD_LOCK);
    int fd = open(lock, O_RDWR | O_CLOEXEC);
    if (fd >= 0 && flock(fd, LOCK_EX | LOCK_NB) != 0) {
      close(fd); /* held: its lab is alive elsewhere */
      continue;
    }
    remove_tree(path);
    if (fd >= 0) close(fd);
  }
  if (d) closedir(d);
}

/* What the host build of device code may import: what device code can
 * call on a GPU (the CUDA device runtime's malloc, free, memcpy, memset,
 * printf and assert; operator new and delete; the C math library that
 * CUDA's math API mirrors) plus what the compiler itself emits (TLS
 * access, memmove/memcmp for copies, the stack protector, C++ runtime
 * entries for virtual functions). Everything else is a host function:
 * state that outlives a launch (getenv, setenv, strtok, rand), or I/O. A
 * candidate reaches one by giving NVRTC a __device__ function of the same
 * name that g++ resolves to glibc's (see tests/cheats/memo_env_heap.cu),
 * or by a host-only block; the scanner and the sandbox are the other two
 * walls. */
static const char *const allowed_imports[] = {
    "__tls_get_addr", "malloc", "free", "memcpy", "memset", "memmove", "memcmp",
    "printf", "vprintf", "puts", "putchar", "__assert_fail", "__stack_chk_fail",
    /* the same under _FORTIFY_SOURCE, which some compilers define */
    "__memcpy_chk", "__memset_chk", "__memmove_chk", "__printf_chk",
    "__vprintf_chk", "__cxa_pure_virtual", "__cxa_deleted_virtual",
    "__gxx_personality_v0", "_Unwind_Resume",
    /* operator new/delete, sized, aligned and array forms */
    "_Znwm", "_Znam", "_ZnwmSt11align_val_t", "_ZnamSt11align_val_t", "_ZdlPv",
    "_ZdaPv", "_ZdlPvm", "_ZdaPvm", "_ZdlPvSt11align_val_t",
    "_ZdaPvSt11align_val_t", "_ZdlPvmSt11align_val_t",
    "_ZdaPvmSt11align_val_t"};

/* C99 math functions, each also with an f suffix (expf) */
static const char *const allowed_math[] = {
    "acos",      "acosh",     "asin",        "asinh",    "atan",    "atan2",
    "atanh",     "cbrt",      "ceil",        "copysign", "cos",     "cosh",
    "erf",       "erfc",      "exp",         "exp2",     "exp10",   "expm1",
    "fabs",      "fdim",      "floor",       "fma",      "fmax",    "fmin",
    "fmod",      "frexp",     "hypot",       "ilogb",    "ldexp",   "lgamma",
    "llrint",    "llround",   "log",         "log10",    "log1p",   "log2",
    "logb",      "lrint",     "lround",      "modf",     "nan",     "nearbyint",
    "nextafter", "pow",       "remainder",   "remquo",   "rint",    "round",
    "scalbln",   "scalbn",    "sin",         "sincos",   "sinh",    "sqrt",
    "tan",       "tanh",      "tgamma",      "trunc",    "__isnan", "__isinf",
    "__finite",  "__signbit", "__fpclassify"};

static int import_allowed(const char *name) {
  for (size_t i = 0; i < sizeof allowed_imports / sizeof(char *); i++)
    if (!strcmp(name, allowed_imports[i])) return 1;
  size_t n = strlen(name);
  for (size_t i = 0; i < sizeof allowed_math / sizeof(char *); i++) {
    size_t m = strlen(allowed_math[i]);
    if (!strncmp(name, allowed_math[i], m) &&
        (n == m || (n == m + 1 && name[m] == 'f')))
      return 1;
  }
  return 0;
}

/* The largest module kept: every candidate's module stays in the cache,
 * and an honest one is about 15 KB, so a few lines of inline assembly
 * (`.fill 240 << 20`) stored 240 MiB per candidate, each edit another
 * (the sandbox review). */
#define KL_EMU_MODULE_MAX (4 << 20)

/* The built module must run no code of its own while it loads: the
 * worker that loads it may still open files until the load is done
 * (sandbox.c, run-cpu-emu). Device code has nothing that runs at load on
 * a device, and the module is linked without start files, so a
 * constructor, a dynamic initialiser or an ifunc resolver is host code
 * the source scanner missed. Nor may it import a host function
 * (import_allowed). Refused before it enters the cache, and again on
 * every cache hit. */
static int check_module(const char *so, char *why, size_t whylen) {
  int fd = open(so, O_RDONLY | O_CLOEXEC);
  struct stat st;
  if (fd < 0 || fstat(fd, &st) != 0 || st.st_size <= 0) {
    snprintf(why, whylen, "cannot read the built module %s: %s", so,
             strerror(errno));
    if (fd >= 0) close(fd);
    return KL_EENV;
  }
  if (st.st_size > KL_EMU_MODULE_MAX) {
    close(fd);
    snprintf(why, whylen,
             "error: the emulator's host build of this kernel is %lld bytes, "
             "over the %d MiB a module may have (an honest kernel's is about "
             "15 KB; bytes emitted by inline assembly, such as .fill or "
             ".incbin, are not device code)",
             (long long)st.st_size, KL_EMU_MODULE_MAX >> 20);
    return KL_ECOMPILE;
  }
  void *img = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
  close(fd);
  if (img == MAP_FAILED) {
    snprintf(why, whylen, "cannot map the built module %s: %s", so,
             strerror(errno));
    return KL_EENV;
  }
  char what[200];
  int rc = kl_elf_load_time_code(img, (size_t)st.st_size, what, sizeof what);
  if (rc != KL_OK) {
    munmap(img, (size_t)st.st_size);
    snprintf(why, whylen,
             "error: the emulator's host build of this kernel runs code of "
             "its own when it loads or unloads (%s); device variables must be "
             "initialised with constants, and host code is not allowed",
             what);
    return KL_ECOMPILE;
  }
  const char *refused = NULL;
  rc = kl_elf_imports_allowed(img, (size_t)st.st_size, import_allowed, &refused,
                              what, sizeof what);
  if (rc != KL_OK)
    snprintf(why, whylen,
             "error: cannot read the imports of the emulator's host build "
             "of this kernel (%s)",
             what);
  else if (refused)
    snprintf(why, whylen,
             "error: the emulator's host build of this kernel calls the host "
             "library function %s, which device code cannot call (a "
             "__device__ function of that name, or code outside device "
             "code, resolved to the host's); device code may call malloc, "
             "free, memcpy, memset, printf, assert and the math library",
             refused);
  munmap(img, (size_t)st.st_size);
  if (rc == KL_OK && !refused) return KL_OK;
  return KL_ECOMPILE;
}

/* Compiles text into the .so at so_path (through a temporary folder and an
 * atomic rename). */
static int host_compile(const char *text, const char *so_path, char *why,
                        size_t whylen) {
  char dir[600];
  snprintf(dir, sizeof dir, "%s/emu-build-%ld-XXXXXX", kl_cache_dir(),
           (long)getpid());
  if (!mkdtemp(dir)) {
    snprintf(why, whylen, "cannot create build folder %s: %s", dir,
             strerror(errno));
    return KL_EENV;
  }
  /* held until the folder is gone (sweep_build_dirs); a new file of our
   * own, so the lock never waits */
  char lock[700];
  snprintf(lock, sizeof lock, "%s/%s", dir, BUILD_LOCK);
  int lock_fd = open(lock, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (lock_fd >= 0) flock(lock_fd, LOCK_EX);
  int rc = KL_EENV;
  if (write_file(dir, "candidate.cpp", text) ||
      write_file(dir, "cuda_shim.h", kl_emu_shim_header) ||
      write_file(dir, "kl_abi.h", kl_abi_header) ||
      write_file(dir, "cuda_fp16.h", "/* in cuda_shim.h */\n") ||
      write_file(dir, "cuda_bf16.h", "/* in cuda_shim.h */\n") ||
      write_file(dir, "cuda_pipeline.h", "/* in cuda_shim.h */\n") ||
      write_cg_headers(dir) || write_file(dir, "mma.h", mma_stub)) {
    snprintf(why, whylen, "cannot write to build folder %s", dir);
  } else {
    rc = run_compiler(dir, why, whylen);
    char built[700];
    snprintf(built, sizeof built, "%s/candidate.so", dir);
    if (rc == KL_OK) rc = check_module(built, why, whylen);
    if (rc == KL_OK) {
      if (rename(built, so_path) != 0) {
        snprintf(why, whylen, "cannot move %s to %s: %s", built, so_path,
                 strerror(errno));
        rc = KL_EENV;
      }
    }
  }
  remove_tree(dir);
  if (lock_fd >= 0) close(lock_fd);
  return rc;
}

/* ---- the public entry points ---- */

int kl_emu_needs_fibers(const char *src) {
  /* a cooperative groups tile (tiled_partition) exchanges as the warp
   * intrinsics do; a thread_block alone only meets at its sync, which is
   * __syncthreads and keeps the isolation */
  static const char *const exchange[] = {
      "atomic",   "__shfl",        "__syncwarp",      "__activemask",
      "__ballot", "__any",         "__all",           "__match",
      "__reduce", "__threadfence", "tiled_partition", "thread_block_tile"};
  int fibers = strstr(src, "sync") || strstr(src, "__shfl") ||
               strstr(src, "__activemask") || strstr(src, "cooperative_groups");
  int shares = 0;
  for (size_t i = 0; i < sizeof exchange / sizeof *exchange; i++)
    shares |= strstr(src, exchange[i]) != NULL;
  return (fibers ? KL_EMU_FIBERS : 0) | (shares ? KL_EMU_NO_ISOLATION : 0);
}

int kl_emu_compile(const char *src, size_t len, char *so_path, size_t pathlen,
                   double *build_ms, int *cache_hit, char *why, size_t whylen) {
  double start = now_ms();
  (void)len;
  sweep_build_dirs();
  char *text = rewrite_source(src);
  kl_sha256_ctx h;
  kl_sha256_init(&h);
  kl_sha256_update(&h, text, strlen(text) + 1);
  kl_sha256_update(&h, kl_emu_shim_header, strlen(kl_emu_shim_header) + 1);
  kl_sha256_update(&h, kl_emu_cg_header, strlen(kl_emu_cg_header) + 1);
  kl_sha256_update(&h, kl_emu_cg_reduce_header,
                   strlen(kl_emu_cg_reduce_header) + 1);
  kl_sha256_update(&h, kl_abi_header, strlen(kl_abi_header) + 1);
  const char *compiler = KL_HOST_CXX " " __VERSION__;
  kl_sha256_update(&h, compiler, strlen(compiler) + 1);
  /* How a module is built beyond its inputs: bumped when a change makes
   * older cached modules untrustworthy (2: the sandboxed compiler reads
   * only the toolchain and its build folder, so `.incbin` of a host file
   * fails; a module cached before may hold one). */
  static const char recipe[] = "build recipe 2";
  kl_sha256_update(&h, recipe, sizeof recipe);
  for (size_t i = 0; i < N_CXX_FLAGS; i++)
    kl_sha256_update(&h, cxx_flags[i], strlen(cxx_flags[i]) + 1);
  uint8_t digest[32];
  kl_sha256_final(&h, digest);
  char key[65];
  for (int i = 0; i < 32; i++)
    snprintf(key + 2 * i, 3, "%02x", digest[i]);
  kl_cache_path(key, ".emu.so", so_path, pathlen);
  struct stat st;
  int hit = stat(so_path, &st) == 0 && st.st_size > 0;
  /* a cached module is checked again: the check is cheap, and the cache
   * is a folder anyone with the user's rights can write to */
  int rc = hit ? check_module(so_path, why, whylen)
               : host_compile(text, so_path, why, whylen);
  free(text);
  if (build_ms) *build_ms = now_ms() - start;
  if (cache_hit) *cache_hit = hit;
  return rc;
}

/* The size of the module's thread-local block (its PT_TLS segment), 0
 * when it has none or it cannot be found: the runtime poisons that block
 * in every pool thread before each launch (emu_run.c). */
typedef struct tls_find {
  ElfW(Addr) base;
  size_t bytes;
} tls_find;

static int tls_of_object(struct dl_phdr_info *info, size_t size, void *arg) {
  (void)size;
  tls_find *f = arg;
  if (info->dlpi_addr != f->base) return 0;
  for (int i = 0; i < info->dlpi_phnum; i++)
    if (info->dlpi_phdr[i].p_type == PT_TLS)
      f->bytes = info->dlpi_phdr[i].p_memsz;
  return 1;
}

static size_t module_tls_bytes(void *so) {
  struct link_map *lm = NULL;
  if (dlinfo(so, RTLD_DI_LINKMAP, &lm) != 0 || !lm) return 0;
  tls_find f = {lm->l_addr, 0};
  dl_iterate_phdr(tls_of_object, &f);
  return f.bytes;
}

/* Makes the module's writable segments (.data, .bss, the GOT) read-only
 * once it is bound. A candidate has no business writing its own globals:
 * device code's file-scope state is flagged by the scanner, __shared__ is
 * thread-local (another mapping), and the shim writes its one global in
 * kl_emu_bind. Whatever file-scope memo got past the scanner (a const
 * object written through a cast, say) then faults on its first write
 * instead of outliving the launch. */
typedef struct data_find {
  ElfW(Addr) base;
  int failed;
} data_find;

static int protect_data_of_object(struct dl_phdr_info *info, size_t size,
                                  void *arg) {
  (void)size;
  data_find *f = arg;
  if (info->dlpi_addr != f->base) return 0;
  uintptr_t page = (uintptr_t)getpagesize();
  for (int i = 0; i < info->dlpi_phnum; i++) {
    const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
    if (ph->p_type != PT_LOAD || !(ph->p_flags & PF_W) || ph->p_memsz == 0)
      continue;
    uintptr_t lo = (info->dlpi_addr + ph->p_vaddr) & ~(page - 1);
    uintptr_t hi =
        (info->dlpi_addr + ph->p_vaddr + ph->p_memsz + page - 1) & ~(page - 1);
    if (mprotect((void *)lo, hi - lo, PROT_READ) != 0) f->failed = 1;
  }
  return 1;
}

static int protect_module_data(void *so) {
  struct link_map *lm = NULL;
  if (dlinfo(so, RTLD_DI_LINKMAP, &lm) != 0 || !lm) return -1;
  data_find f = {lm->l_addr, 0};
  dl_iterate_phdr(protect_data_of_object, &f);
  return f.failed ? -1 : 0;
}

int kl_emu_load(const char *so_path, int needs_fibers, void (*opened)(void *),
                void *ctx, kl_emu_module **out, char *why, size_t whylen) {
  *out = NULL;
  kl_emu_module *m = calloc(1, sizeof *m);
  if (!m) {
    snprintf(why, whylen, "out of memory");
    return KL_EENV;
  }
  snprintf(m->so_path, sizeof m->so_path, "%s", so_path);
  /* dlopen of a loaded object hands back the same one, whose data is
   * read-only by now (protect_module_data): binding it again would fault,
   * and its state would carry over from the first load anyway. */
  void *already = dlopen(m->so_path, RTLD_NOW | RTLD_NOLOAD);
  if (already) {
    dlclose(already);
    snprintf(why, whylen,
             "emulated kernel %s is already loaded in this process: a module "
             "runs once per process (a fresh process, or a copy of the file, "
             "for another job)",
             m->so_path);
    free(m);
    return KL_EENV;
  }
  m->so = dlopen(m->so_path, RTLD_NOW | RTLD_LOCAL);
  if (!m->so) {
    snprintf(why, whylen, "cannot load emulated kernel %s: %s", m->so_path,
             dlerror());
    free(m);
    return KL_EENV;
  }
  /* before the module's first call (abi, bind) and before a refusal below
   * closes it (dlclose runs what destructors check_module missed) */
  if (opened) opened(ctx);
  int (*abi)(void) = (int (*)(void))dlsym(m->so, "kl_emu_abi");
  void (*bind)(const kl_emu_hooks *) =
      (void (*)(const kl_emu_hooks *))dlsym(m->so, "kl_emu_bind");
  m->tls = (kl_emu_thread * *(*)(void)) dlsym(m->so, "kl_emu_tls");
  m->kernel = (kl_emu_kernel_fn)dlsym(m->so, "matmul");
  const kl_launch *g = dlsym(m->so, "kl_launch");
  if (!abi || !bind || !m->tls || abi() != KL_EMU_ABI_VERSION) {
    snprintf(why, whylen, "%s was not built with this emulator's shim",
             m->so_path);
    kl_emu_free(m);
    return KL_EENV;
  }
  if (!m->kernel) {
    snprintf(why, whylen,
             "no extern \"C\" symbol `matmul`: declare it as extern \"C\" "
             "__global__ void matmul(const float* A, const float* B, float* "
             "C, int M, int N, int K)");
    kl_emu_free(m);
    return KL_ECOMPILE;
  }
  if (!g) {
    snprintf(why, whylen, "no KL_LAUNCH(...) declaration at file scope");
    kl_emu_free(m);
    return KL_ECOMPILE;
  }
  bind(&kl_emu_runtime_hooks);
  if (protect_module_data(m->so) != 0) {
    snprintf(why, whylen,
             "cannot make the emulated kernel's data read-only (%s): %s",
             m->so_path, strerror(errno));
    dlclose(m->so);
    free(m);
    return KL_EENV;
  }
  m->tls_bytes = module_tls_bytes(m->so);
  m->launch = *g;
  m->needs_fibers = needs_fibers;
  *out = m;
  return KL_OK;
}

int kl_emu_build(const char *src, size_t len, kl_emu_module **out,
                 double *build_ms, int *cache_hit, char *why, size_t whylen) {
  char so_path[512];
  *out = NULL;
  int rc = kl_emu_compile(src, len, so_path, sizeof so_path, build_ms,
                          cache_hit, why, whylen);
  if (rc != KL_OK) return rc;
  return kl_emu_load(so_path, kl_emu_needs_fibers(src), NULL, NULL, out, why,
                     whylen);
}

const kl_launch *kl_emu_geometry(const kl_emu_module *m) {
  return &m->launch;
}

void kl_emu_free(kl_emu_module *m) {
  if (!m) return;
  if (m->so) dlclose(m->so);
  free(m);
}
