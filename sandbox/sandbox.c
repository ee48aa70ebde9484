/*
 * sandbox/sandbox.c — seccomp profiles as data, and confining a process with
 * one of them (see sandbox.h).
 *
 * Each profile is a table: the syscalls it allows, each with the reason it
 * is needed; everything else traps (SIGSYS → the handler records which
 * syscall → exit SBX_TRAP_EXIT). A few rules carry argument conditions:
 * `clone` only for threads (CLONE_THREAD), `clone3` answered with ENOSYS so
 * glibc falls back to the checkable `clone`, signals only to this process.
 *
 * Order inside sbx_confine: user + network namespaces (if the kernel lets
 * us; otherwise carry on, reported to the caller), rlimits with soft = hard
 * so the candidate cannot raise them, the SIGSYS handler, then the filter
 * (NO_NEW_PRIVS set by libseccomp). After the filter, rt_sigaction on SIGSYS
 * traps, so candidate code cannot replace the handler.
 */
#define _GNU_SOURCE
#include "sandbox/sandbox_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <seccomp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

enum rule_kind {
  R_ALLOW,            /* allowed as is */
  R_THREAD_ONLY,      /* clone: only with CLONE_THREAD */
  R_ENOSYS,           /* fails with ENOSYS (glibc falls back) */
  R_WRITE_EACCES,     /* open/openat: for writing, fails with EACCES (not
                        fatal); read-only opens still trap */
  R_SELF_SIGNAL,      /* tgkill/tkill: only to this thread group */
  R_NOT_SIGSYS,       /* rt_sigaction: any signal 0..64 but SIGSYS */
  R_READ_ONLY,        /* open/openat: only without write, create or truncate */
  R_READ_ELSE_EACCES, /* open/openat: as R_READ_ONLY, but an open that would
                         write, create or truncate fails with EACCES rather
                         than trapping */
  R_TRAP,             /* in a default-allow profile: this one traps */
  R_QUERY_ONLY,       /* prlimit64: on this process only (pid 0) */
  R_ISATTY_ONLY,      /* ioctl: TCGETS only (isatty); never TIOCSTI and kin */
  R_TRAP_EXEC,        /* in a default-allow profile: traps with PROT_EXEC */
  R_TRAP_SETTING,     /* in a default-allow profile: rt_sigaction traps when it
                         installs (a new action, argument 1, not NULL) */
  R_TRAP_REMOVE,      /* in a default-allow profile: madvise traps with
                         MADV_REMOVE */
};

typedef struct rule {
  const char *syscall;
  enum rule_kind kind;
  const char *why;
} rule;

typedef struct limit {
  int resource;
  const char *name;
  rlim_t value;
  const char *why;
  /* 1: value is added to the worker's peak address space at confinement
   * (VmPeak): the limit bounds what the confined work may add on top of
   * what the worker itself reserved, whatever the machine (below). */
  int above_peak;
} limit;

typedef struct profile {
  const char *name;
  const char *purpose;
  int seccomp;        /* 0: rlimits only (the host compiler must exec) */
  int default_allow;  /* 1: a stacked profile listing what now traps */
  int tsync;          /* synchronise the filter to every thread (CUDA) */
  const char *status; /* how far this profile is measured */
  const rule *rules;
  size_t n_rules;
  const limit *limits;
  size_t n_limits;
  const char *denied; /* examples of what traps, for --explain */
} profile;

/* What every confined worker needs: memory, time, exit, and the pipes it
 * inherited (SBX_BASE_RULES); most also start threads (SBX_COMMON_RULES). */
#if defined(__SANITIZE_THREAD__)
/* A ThreadSanitizer build (tests only, CMake's KL_TSAN): its dlopen
 * interceptor readlinks the name of every library loaded, the candidate's
 * module included, which would trap before the candidate ran. */
#define SBX_TSAN_RULES {"readlink", R_ALLOW, "ThreadSanitizer's dlopen"},
#else
#define SBX_TSAN_RULES
#endif
#define SBX_BASE_RULES                                                         \
  SBX_TSAN_RULES{"read", R_ALLOW, "inherited pipes"},                          \
      {"write", R_ALLOW, "inherited pipes; RLIMIT_FSIZE stops file growth"},   \
      {"close", R_ALLOW, "thread teardown"},                                   \
      {"mmap", R_ALLOW, "heap, stacks, loaded code"},                          \
      {"munmap", R_ALLOW, "freeing the same"},                                 \
      {"mprotect", R_ALLOW, "guard pages; relocation of loaded code"},         \
      {"madvise", R_ALLOW, "glibc returns thread stacks"},                     \
      {"mremap", R_ALLOW, "realloc of large blocks"},                          \
      {"brk", R_ALLOW, "heap"}, {"futex", R_ALLOW, "thread join, locks"},      \
      {"poll", R_ALLOW, "waiting on the inherited pipes"},                     \
      {"set_robust_list", R_ALLOW, "thread start"},                            \
      {"rseq", R_ALLOW, "thread start (glibc 2.35+)"},                         \
      {"rt_sigprocmask", R_ALLOW, "thread start masks signals"},               \
      {"rt_sigreturn", R_ALLOW, "return from a signal handler"},               \
      {"rt_sigaction", R_NOT_SIGSYS,                                           \
       "glibc's thread-cancel handler; never SIGSYS (the trap's)"},            \
      {"sigaltstack", R_ALLOW,                                                 \
       "sanitizer runtimes give threads signal "                               \
       "stacks"},                                                              \
      {"sched_yield", R_ALLOW, "spinning threads"},                            \
      {"mbind", R_ALLOW,                                                       \
       "OpenBLAS's idle threads, started as the binary loads and perhaps "     \
       "scheduled only after the filter, place their own buffers"},            \
      {"sched_getaffinity", R_ALLOW, "glibc thread start"},                    \
      {"getpid", R_ALLOW, "harmless identity"},                                \
      {"gettid", R_ALLOW, "harmless identity"},                                \
      {"clock_gettime", R_ALLOW, "timing (usually vDSO)"},                     \
      {"gettimeofday", R_ALLOW, "timing (usually vDSO)"},                      \
      {"nanosleep", R_ALLOW, "sleeping is harmless; the deadline holds"},      \
      {"clock_nanosleep", R_ALLOW, "same"},                                    \
      {"tgkill", R_SELF_SIGNAL, "abort()/raise() on itself only"},             \
      {"tkill", R_SELF_SIGNAL, "same"}, {"exit", R_ALLOW, "thread exit"}, {    \
    "exit_group", R_ALLOW, "process exit"                                      \
  }
#define SBX_COMMON_RULES                                                       \
  SBX_BASE_RULES, {"clone", R_THREAD_ONLY, "threads, never new processes"}, {  \
    "clone3", R_ENOSYS, "not inspectable: glibc then uses clone"               \
  }

/* compile: NVRTC parses untrusted text. It was loaded and warmed up (its
 * builtins library is dlopen'ed lazily) before the filter, so it needs no
 * files at all afterwards. With TSYNC: threads already run by then (OpenBLAS
 * starts its pool as the binary loads), and one left unfiltered would be a
 * way out for code that took over the compiling thread. */
static const rule compile_rules[] = {
    SBX_COMMON_RULES,
    {"getrusage", R_ALLOW, "NVRTC and ptxas time themselves"},
    {"times", R_ALLOW, "same"},
    {"getrandom", R_ALLOW, "hash seeds in the C++ runtime"},
    {"fstat", R_ALLOW, "stdio on the inherited descriptors"},
    {"newfstatat", R_ALLOW, "same"},
    {"lseek", R_ALLOW, "same"},
    {"ioctl", R_ISATTY_ONLY, "isatty() on inherited descriptors"},
    {"getcwd", R_ALLOW, "NVRTC resolves the program's folder"},
    /* A write refused, not trapped: NVRTC 13 keeps a cache of its own
     * through the driver where one is installed (it loads libcuda and
     * calls cuInit at its first compile) and, on the H200 machine, opened
     * a file for writing on each later compile: a trap there killed every
     * GPU compile (tests/gpu/LOG.md, 2026-12-04). The worker also sets
     * CUDA_CACHE_DISABLE (worker.c): the lab's cache is the one. */
    {"openat", R_READ_ELSE_EACCES,
     "NVRTC reads the allowlisted CUDA headers (" KL_INCLUDE_ALLOWLIST
     ") from the toolkit; the allowlist is checked before NVRTC sees the "
     "text"},
    {"open", R_READ_ELSE_EACCES, "same"},
    {"prlimit64", R_QUERY_ONLY,
     "NVRTC adjusts its own stack limit (within the hard limits set here)"},
    {"stat", R_ALLOW, "NVRTC looks at its include folder (no open)"},
};
static const limit compile_limits[] = {
    /* Above the peak, not absolute: what the worker reserved itself is not
     * the candidate's doing. Where a driver is installed, NVRTC 13 loads
     * libcuda and calls cuInit at its first compile (the warm-up), and
     * CUDA_CACHE_DISABLE does not stop it: 12.4 GiB of PROT_NONE address
     * space on the H200 machine, against 330 MiB on a machine without a
     * driver. An absolute 4 GiB made every seed's compile `oom` there
     * (tests/gpu/LOG.md, 2026-12-04). */
    {RLIMIT_AS, "RLIMIT_AS", SBX_COMPILE_MEMORY_LIMIT,
     "4 GiB above the worker's peak after its warm-up compile: a template "
     "bomb ends as oom",
     1},
    {RLIMIT_CPU, "RLIMIT_CPU", 600, "CPU seconds over the worker's life", 0},
    {RLIMIT_FSIZE, "RLIMIT_FSIZE", 0, "no file may grow", 0},
    {RLIMIT_NOFILE, "RLIMIT_NOFILE", 64, "few descriptors", 0},
    {RLIMIT_CORE, "RLIMIT_CORE", 0, "no core dumps", 0},
};

/* host-compile: the host C++ compiler runs cc1plus, as and ld, so it cannot
 * live under a no-exec filter. It runs in a private folder of the cache,
 * in its own user + network namespace where allowed, under these limits and
 * the supervisor's deadline; the candidate's text has passed the include
 * allowlist, so it names no host file. */
static const limit host_compile_limits[] = {
    {RLIMIT_AS, "RLIMIT_AS", SBX_COMPILE_MEMORY_LIMIT,
     "4 GiB per compiler process", 0},
    {RLIMIT_CPU, "RLIMIT_CPU", 120, "CPU seconds per compiler process", 0},
    {RLIMIT_FSIZE, "RLIMIT_FSIZE", 64ull << 20,
     "64 MiB per written file (a module is refused over 4 MiB)", 0},
    {RLIMIT_NOFILE, "RLIMIT_NOFILE", 256, "descriptors", 0},
    {RLIMIT_CORE, "RLIMIT_CORE", 0, "no core dumps", 0},
};

/* run-cpu-emu: the candidate is native code. Until its shared object is
 * loaded the dynamic loader may read files; then run-cpu-emu-loaded is
 * stacked on top and no file can be opened at all. The candidate's static
 * initialisers run during the load, under this profile. No thread may
 * start: the emulator's exist before the filter, and a thread of the
 * candidate's own would run beside the runner, free to rewrite its
 * timings and outputs between launches. */
static const rule run_cpu_emu_rules[] = {
    SBX_BASE_RULES,
    {"clone3", R_ENOSYS, "glibc falls back to clone, which traps"},
    {"openat", R_READ_ONLY, "the dynamic loader (until the .so is loaded)"},
    {"open", R_READ_ONLY, "same"},
    {"fstat", R_ALLOW, "the dynamic loader"},
    {"newfstatat", R_ALLOW, "the dynamic loader"},
    {"pread64", R_ALLOW, "the dynamic loader"},
    {"lseek", R_ALLOW, "the dynamic loader"},
    {"seccomp", R_ALLOW,
     "stacking run-cpu-emu-loaded (filters can only add restrictions)"},
    {"ioctl", R_ISATTY_ONLY,
     "stdio's isatty() (device printf goes to /dev/null)"},
    {"mincore", R_ALLOW,
     "the emulator finds the fiber-stack pages a kernel touched, to poison "
     "them before each launch (residency of its own pages only)"},
};
static const rule run_cpu_emu_loaded_rules[] = {
    {"openat", R_TRAP, "no file may be opened once the candidate is loaded"},
    {"open", R_TRAP, "same"},
    {"pread64", R_TRAP, "nothing left to read"},
    /* fstat (on a descriptor) stays; newfstatat takes a path, and told a
     * candidate the size, owner and times of any file (the second sandbox
     * review). stdio's fstat of stdout never comes: the worker gives
     * stdout a buffer of its own before this filter. */
    {"newfstatat", R_TRAP, "no file's metadata by path"},
    /* W^X from here on: no page may become executable, so the candidate
     * can neither write code nor patch the runner's (its clock, the vDSO's
     * clock_gettime, the reply) and run it. */
    {"mprotect", R_TRAP_EXEC, "no new executable pages (code patching)"},
    {"pkey_mprotect", R_TRAP_EXEC, "same"},
    {"mmap", R_TRAP_EXEC, "same"},
    /* No candidate code outside a launch: a handler it installed runs on
     * whatever thread it signals (tgkill to an idle pool thread, or to the
     * runner's while it waits for the supervisor), with no launch going.
     * Nothing of the runner's installs one after load; queries still
     * pass, and abort() still ends the process (SIGABRT's default). */
    {"rt_sigaction", R_TRAP_SETTING, "no signal handler from the candidate"},
    /* Punching holes in the shared buffers makes pages read as zeros
     * (neither the poison nor an input): nothing legitimate needs it. */
    {"madvise", R_TRAP_REMOVE, "no holes punched in shared memory"},
};
static const limit run_cpu_emu_limits[] = {
    {RLIMIT_AS, "RLIMIT_AS", SBX_RUN_MEMORY_LIMIT,
     "2 GiB address space (dying near it reads as oom)", 0},
    {RLIMIT_CPU, "RLIMIT_CPU", SBX_RUN_CPU_LIMIT_S,
     "CPU seconds (the wall deadline is the supervisor's)", 0},
    {RLIMIT_FSIZE, "RLIMIT_FSIZE", 0, "no file may grow", 0},
    {RLIMIT_NOFILE, "RLIMIT_NOFILE", 64, "few descriptors", 0},
    {RLIMIT_CORE, "RLIMIT_CORE", 0, "no core dumps", 0},
};

/* run-gpu: the starting allowlist of infra-anchors §1.5.2, installed with
 * TSYNC after CUDA is initialised. Not yet measured on a device: the GPU
 * issue runs the trap mode there and freezes the list. */
static const rule run_gpu_rules[] = {
    SBX_COMMON_RULES,
    {"ioctl", R_ALLOW, "the driver (/dev/nvidia* descriptors)"},
    {"poll", R_ALLOW, "driver waits"},
    {"ppoll", R_ALLOW, "driver waits"},
    {"epoll_wait", R_ALLOW, "driver waits"},
    {"epoll_pwait", R_ALLOW, "driver waits"},
    {"memfd_create", R_ALLOW, "pinned/shared allocations"},
    {"ftruncate", R_ALLOW, "same"},
    {"fcntl", R_ALLOW, "seals on those memfds"},
    /* kernels/gpu_run.c draws each timed launch's inputs, and the launch
     * checks' random rows, from kl_secret_seed after the filter: seeds the
     * device never sees. */
    {"getrandom", R_ALLOW, "kl_secret_seed: each timed launch's own inputs"},
    /* Opening for writing is refused, not trapped: drivers 570+ name each
     * thread they start by writing /proc/<tgid>/task/<tid>/comm, and a
     * thread started after the filter (CUPTI's, a lazily loaded library's)
     * would otherwise kill a worker whose candidate did nothing wrong. A
     * read-only open still traps and names itself (a lazy dlopen should
     * say so, not surface as a CUDA error). The candidate is device code
     * and makes no syscall. */
    {"openat", R_WRITE_EACCES,
     "the driver naming late threads (/proc/.../comm)"},
    {"open", R_WRITE_EACCES, "same, the older call"},
};
static const limit run_gpu_limits[] = {
    {RLIMIT_CPU, "RLIMIT_CPU", SBX_RUN_CPU_LIMIT_S,
     "CPU seconds (no RLIMIT_AS: CUDA "
     "reserves huge address ranges)",
     0},
    /* Not 0: the rules above let the driver grow a memfd for a pinned or
     * shared allocation, and growing any file past this limit is a
     * SIGXFSZ crash (a memfd's too; test_sandbox). No file can be opened
     * for writing here, and the candidate, device code, makes no call. */
    {RLIMIT_FSIZE, "RLIMIT_FSIZE", 1ull << 30,
     "the driver's memfds may grow to 1 GiB", 0},
    {RLIMIT_NOFILE, "RLIMIT_NOFILE", 256, "the driver opens several", 0},
    {RLIMIT_CORE, "RLIMIT_CORE", 0, "no core dumps", 0},
};

#define N(a) (sizeof(a) / sizeof((a)[0]))
static const profile profiles[SBX_PROFILE_COUNT] = {
    [SBX_COMPILE] = {"compile", "NVRTC compiling untrusted source", 1, 0, 1,
                     "measured here (CPU machine)", compile_rules,
                     N(compile_rules), compile_limits, N(compile_limits),
                     "exec, sockets, opening files for write, fork, ptrace, "
                     "kill"},
    [SBX_HOST_COMPILE] = {"host-compile",
                          "the host C++ compiler building a cpu-emu module", 0,
                          0, 0, "rlimits + namespaces + Landlock + deadline",
                          NULL, 0, host_compile_limits, N(host_compile_limits),
                          "no seccomp: the compiler must exec its passes"},
    [SBX_RUN_CPU_EMU] =
        {"run-cpu-emu",
         "runs a candidate compiled for the CPU emulator (native code)", 1, 0,
         1, "measured here", run_cpu_emu_rules, N(run_cpu_emu_rules),
         run_cpu_emu_limits, N(run_cpu_emu_limits),
         "opening files for write, socket/connect, execve/execveat, fork/vfork "
         "and clone (threads too: the emulator's start before the filter), "
         "ptrace/process_vm_*, kill (signals to others), rt_sigaction on "
         "SIGSYS, and every syscall not listed"},
    [SBX_RUN_CPU_EMU_LOADED] = {"run-cpu-emu-loaded",
                                "stacked on run-cpu-emu after the candidate's "
                                ".so is loaded (TSYNC: the emulator's threads "
                                "exist already)",
                                1, 1, 1, "measured here",
                                run_cpu_emu_loaded_rules,
                                N(run_cpu_emu_loaded_rules), NULL, 0,
                                "the listed calls; the rest as run-cpu-emu"},
    [SBX_RUN_GPU] = {"run-gpu", "a GPU run worker after cuInit", 1, 0, 1,
                     "measured on one H200 (driver 580, 2026-12-04, "
                     "tests/gpu/LOG.md): every call recorded is listed",
                     run_gpu_rules, N(run_gpu_rules), run_gpu_limits,
                     N(run_gpu_limits),
                     "exec, sockets, fork, ptrace, opening files"},
};

static volatile int *trap_slot_ptr;
static int trap_fd = -1;

/* SIGSYS from a trapped syscall: report which, then end the whole process
 * without running any candidate-reachable code (no atexit, no stdio). */
static void on_sigsys(int sig, siginfo_t *si, void *uctx) {
  (void)sig;
  (void)uctx;
  if (trap_slot_ptr) *trap_slot_ptr = si->si_syscall;
  if (trap_fd >= 0) sbx_send_trap(trap_fd, si->si_syscall);
  syscall(SYS_exit_group, SBX_TRAP_EXIT);
}

_Static_assert(SIGSYS == 31, "R_NOT_SIGSYS's ranges are those around 31");

static scmp_filter_ctx build_filter(const profile *p, char *why,
                                    size_t whylen) {
  scmp_filter_ctx ctx =
      seccomp_init(p->default_allow ? SCMP_ACT_ALLOW : SCMP_ACT_TRAP);
  if (!ctx) {
    snprintf(why, whylen, "seccomp_init failed");
    return NULL;
  }
  /* Fail closed: a filter loaded without TSYNC would leave the threads
   * started before it (the emulator's pool, where candidates run; CUDA's)
   * with no filter at all. */
  int arc = p->tsync ? seccomp_attr_set(ctx, SCMP_FLTATR_CTL_TSYNC, 1) : 0;
  if (arc != 0) {
    snprintf(why, whylen,
             "%s: cannot synchronise the filter to every thread (TSYNC): %s; "
             "the threads started before it would run unconfined",
             p->name, strerror(-arc));
    seccomp_release(ctx);
    return NULL;
  }
  /* A system call of another ABI (x32's numbers, which libseccomp matches
   * as a foreign architecture) traps like any refused call. The default,
   * killing the calling thread alone, left a worker whose pool thread had
   * vanished, reported as a timeout after the whole deadline. */
  if (seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_TRAP) != 0) {
    snprintf(why, whylen, "%s: cannot set the foreign-ABI action", p->name);
    seccomp_release(ctx);
    return NULL;
  }
  /* A stacked profile: NO_NEW_PRIVS is set already, and prctl may be
   * forbidden by the filter below it. */
  if (p->default_allow) seccomp_attr_set(ctx, SCMP_FLTATR_CTL_NNP, 0);
  pid_t self = getpid();
  for (size_t i = 0; i < p->n_rules; i++) {
    const rule *r = &p->rules[i];
    int nr = seccomp_syscall_resolve_name(r->syscall);
    if (nr == __NR_SCMP_ERROR) continue; /* not on this architecture */
    int rc;
    switch (r->kind) {
    case R_THREAD_ONLY:
      rc = seccomp_rule_add(
          ctx, SCMP_ACT_ALLOW, nr, 1,
          SCMP_A0(SCMP_CMP_MASKED_EQ, CLONE_THREAD, CLONE_THREAD));
      break;
    case R_ENOSYS:
      rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), nr, 0);
      break;
    case R_WRITE_EACCES: {
      /* the access mode (O_ACCMODE of the flags) is O_WRONLY or O_RDWR */
      unsigned arg = strcmp(r->syscall, "open") ? 2 : 1;
      struct scmp_arg_cmp wr = {arg, SCMP_CMP_MASKED_EQ, O_ACCMODE, O_WRONLY};
      struct scmp_arg_cmp rw = {arg, SCMP_CMP_MASKED_EQ, O_ACCMODE, O_RDWR};
      rc = seccomp_rule_add_array(ctx, SCMP_ACT_ERRNO(EACCES), nr, 1, &wr);
      if (rc == 0)
        rc = seccomp_rule_add_array(ctx, SCMP_ACT_ERRNO(EACCES), nr, 1, &rw);
      break;
    }
    case R_SELF_SIGNAL:
      /* tgkill's first argument is the thread group, tkill's a thread:
       * for the main thread both equal our pid. */
      rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, nr, 1,
                            SCMP_A0(SCMP_CMP_EQ, (scmp_datum_t)self));
      break;
    case R_NOT_SIGSYS:
      /* the signal is an int: the kernel reads its low 32 bits, the
       * filter all 64, so SIGSYS | 1 << 32 passed a plain NE (the sandbox
       * review). Allowed: 0..30, 32..63 and 64, each compared on all 64
       * bits (one rule may not compare an argument twice). */
      rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, nr, 1,
                            SCMP_A0(SCMP_CMP_LT, (scmp_datum_t)SIGSYS));
      if (rc == 0)
        rc = seccomp_rule_add(
            ctx, SCMP_ACT_ALLOW, nr, 1,
            SCMP_A0(SCMP_CMP_MASKED_EQ, ~(scmp_datum_t)31, (scmp_datum_t)32));
      if (rc == 0)
        rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, nr, 1,
                              SCMP_A0(SCMP_CMP_EQ, (scmp_datum_t)64));
      break;
    case R_READ_ONLY: {
      /* The flags are argument 1 of open and argument 2 of openat. */
      unsigned arg = strcmp(r->syscall, "open") ? 2 : 1;
      scmp_datum_t bad = O_WRONLY | O_RDWR | O_CREAT | O_TRUNC | O_APPEND;
      struct scmp_arg_cmp cmp = {arg, SCMP_CMP_MASKED_EQ, bad, 0};
      rc = seccomp_rule_add_array(ctx, SCMP_ACT_ALLOW, nr, 1, &cmp);
      break;
    }
    case R_READ_ELSE_EACCES: {
      unsigned arg = strcmp(r->syscall, "open") ? 2 : 1;
      scmp_datum_t bad = O_CREAT | O_TRUNC | O_APPEND;
      /* one comparison per argument and rule (libseccomp): O_RDONLY is 0 */
      struct scmp_arg_cmp ok = {arg, SCMP_CMP_MASKED_EQ, O_ACCMODE | bad, 0};
      /* Refused: any write access mode, or any of the bad bits. The
       * rules' conditions split the flags; none overlaps the allow. */
      struct scmp_arg_cmp no[5] = {
          {arg, SCMP_CMP_MASKED_EQ, O_ACCMODE, O_WRONLY},
          {arg, SCMP_CMP_MASKED_EQ, O_ACCMODE, O_RDWR},
          {arg, SCMP_CMP_MASKED_EQ, O_CREAT, O_CREAT},
          {arg, SCMP_CMP_MASKED_EQ, O_TRUNC, O_TRUNC},
          {arg, SCMP_CMP_MASKED_EQ, O_APPEND, O_APPEND}};
      rc = seccomp_rule_add_array(ctx, SCMP_ACT_ALLOW, nr, 1, &ok);
      for (int i = 0; rc == 0 && i < 5; i++)
        rc = seccomp_rule_add_array(ctx, SCMP_ACT_ERRNO(EACCES), nr, 1, &no[i]);
      break;
    }
    case R_TRAP:
      rc = seccomp_rule_add(ctx, SCMP_ACT_TRAP, nr, 0);
      break;
    case R_TRAP_SETTING:
      rc = seccomp_rule_add(ctx, SCMP_ACT_TRAP, nr, 1,
                            SCMP_A1(SCMP_CMP_NE, (scmp_datum_t)0));
      break;
    case R_TRAP_REMOVE:
      /* the advice is an int: compared on its low 32 bits, which are what
       * the kernel reads (MADV_REMOVE | 1 << 32 passed a plain EQ and
       * punched the hole; the sandbox review) */
      rc = seccomp_rule_add(
          ctx, SCMP_ACT_TRAP, nr, 1,
          SCMP_A2(SCMP_CMP_MASKED_EQ, 0xffffffffu, (scmp_datum_t)MADV_REMOVE));
      break;
    case R_TRAP_EXEC: /* prot is argument 2 of all three */
      rc = seccomp_rule_add(ctx, SCMP_ACT_TRAP, nr, 1,
                            SCMP_A2(SCMP_CMP_MASKED_EQ, PROT_EXEC, PROT_EXEC));
      break;
    case R_ISATTY_ONLY:
      rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, nr, 1,
                            SCMP_A1(SCMP_CMP_MASKED_EQ, 0xffffffffu, TCGETS));
      break;
    case R_QUERY_ONLY:
      rc =
          seccomp_rule_add(ctx, SCMP_ACT_ALLOW, nr, 1, SCMP_A0(SCMP_CMP_EQ, 0));
      break;
    default:
      rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, nr, 0);
    }
    if (rc != 0) {
      snprintf(why, whylen, "seccomp rule for %s: %s", r->syscall,
               strerror(-rc));
      seccomp_release(ctx);
      return NULL;
    }
  }
  return ctx;
}

/* Unprivileged user + network namespaces: no network at all inside.
 * unshare(CLONE_NEWUSER) needs a single-threaded process, so workers that
 * start threads early call sbx_enter_namespaces first; the outcome is kept
 * and sbx_confine does not try again. */
static int ns_state; /* 0 not tried, 1 entered, -1 refused */

static int enter_namespaces_now(void);

int sbx_enter_namespaces(void) {
  if (ns_state == 0) ns_state = enter_namespaces_now() == 0 ? 1 : -1;
  return ns_state > 0;
}

static int enter_namespaces(void) {
  return sbx_enter_namespaces() ? 0 : -1;
}

static int enter_namespaces_now(void) {
  uid_t uid = getuid();
  gid_t gid = getgid();
  if (unshare(CLONE_NEWUSER | CLONE_NEWNET) != 0) return -1;
  char map[64];
  int fd = open("/proc/self/uid_map", O_WRONLY);
  if (fd >= 0) {
    int n = snprintf(map, sizeof map, "0 %u 1\n", (unsigned)uid);
    (void)!write(fd, map, (size_t)n);
    close(fd);
  }
  fd = open("/proc/self/setgroups", O_WRONLY);
  if (fd >= 0) {
    (void)!write(fd, "deny\n", 5);
    close(fd);
  }
  fd = open("/proc/self/gid_map", O_WRONLY);
  if (fd >= 0) {
    int n = snprintf(map, sizeof map, "0 %u 1\n", (unsigned)gid);
    (void)!write(fd, map, (size_t)n);
    close(fd);
  }
  return 0;
}

unsigned long long sbx_vm_peak_bytes(int fd) {
  int own = fd < 0;
  if (own) fd = open("/proc/self/status", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  char buf[4096];
  ssize_t n = lseek(fd, 0, SEEK_SET) == 0 ? read(fd, buf, sizeof buf - 1) : -1;
  if (own) close(fd);
  if (n <= 0) return 0;
  buf[n] = 0;
  const char *v = strstr(buf, "\nVmPeak:");
  unsigned long long kb = 0;
  if (!v || sscanf(v + 8, "%llu kB", &kb) != 1) return 0;
  return kb << 10;
}

int sbx_confine(sbx_profile_id id, volatile int *trap_slot, int fd, char *why,
                size_t whylen) {
  if ((int)id < 0 || id >= SBX_PROFILE_COUNT) {
    snprintf(why, whylen, "unknown sandbox profile %d", (int)id);
    return -1;
  }
  const profile *p = &profiles[id];
  int ns = 1;
  if (!p->default_allow) ns = enter_namespaces() == 0;
  for (size_t i = 0; i < p->n_limits; i++) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
    /* AddressSanitizer and ThreadSanitizer reserve terabytes of shadow
     * address space: such a build of the lab (tests only) cannot live
     * under RLIMIT_AS. */
    if (p->limits[i].resource == RLIMIT_AS) continue;
#endif
    rlim_t value = p->limits[i].value;
    if (p->limits[i].above_peak) {
      unsigned long long peak = sbx_vm_peak_bytes(-1);
      if (!peak) {
        snprintf(why, whylen,
                 "%s: cannot read the worker's VmPeak from /proc/self/status "
                 "(needed for %s)",
                 p->name, p->limits[i].name);
        return -1;
      }
      value += (rlim_t)peak;
    }
    /* A limit the lab inherited lower (ulimit -f, a batch system's) is
     * kept: raising a hard limit is refused (EPERM), and every host
     * compile under `ulimit -f 8192` failed "setrlimit RLIMIT_FSIZE:
     * Operation not permitted", recorded as each candidate's
     * compile_error. Lower is as confined, and what it stops says so. */
    struct rlimit cur;
    if (getrlimit(p->limits[i].resource, &cur) == 0 &&
        cur.rlim_max != RLIM_INFINITY && cur.rlim_max < value)
      value = cur.rlim_max;
    struct rlimit rl = {value, value};
    if (setrlimit(p->limits[i].resource, &rl) != 0) {
      snprintf(why, whylen, "%s: setrlimit %s: %s", p->name, p->limits[i].name,
               strerror(errno));
      return -1;
    }
  }
  if (!p->seccomp) return ns ? 2 : 1;
  trap_slot_ptr = trap_slot;
  trap_fd = fd;
  /* A stacked profile keeps the handler the first one installed (and could
   * not install another: rt_sigaction on SIGSYS traps by then). */
  static int handler_installed;
  if (handler_installed) goto load;
  handler_installed = 1;
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = on_sigsys;
  sa.sa_flags = SA_SIGINFO;
  sigemptyset(&sa.sa_mask);
  if (sigaction(SIGSYS, &sa, NULL) != 0) {
    snprintf(why, whylen, "%s: sigaction(SIGSYS): %s", p->name,
             strerror(errno));
    return -1;
  }
load:;
  scmp_filter_ctx ctx = build_filter(p, why, whylen);
  if (!ctx) return -1;
  int rc = seccomp_load(ctx);
  seccomp_release(ctx);
  if (rc != 0) {
    snprintf(why, whylen, "%s: seccomp_load: %s", p->name, strerror(-rc));
    return -1;
  }
  return ns ? 2 : 1;
}

const char *sbx_syscall_name(int nr) {
  static _Thread_local char name[64];
  char *s = seccomp_syscall_resolve_num_arch(SCMP_ARCH_NATIVE, nr);
#if defined(__x86_64__)
  /* x32's numbers are x86-64's with bit 30 set (the foreign-ABI trap) */
  if (!s && (nr & 0x40000000)) {
    char *x =
        seccomp_syscall_resolve_num_arch(SCMP_ARCH_X86_64, nr & ~0x40000000);
    snprintf(name, sizeof name, "x32-%s", x ? x : "?");
    free(x);
    return name;
  }
#endif
  snprintf(name, sizeof name, "%s", s ? s : "?");
  free(s);
  return name;
}

int sbx_explain(FILE *out, int pfc) {
  int ok = 0;
  for (int i = 0; i < SBX_PROFILE_COUNT; i++) {
    const profile *p = &profiles[i];
    fprintf(out, "profile %s — %s\n  status: %s\n", p->name, p->purpose,
            p->status);
    if (i == SBX_HOST_COMPILE) {
      int abi = sbx_landlock_abi();
      if (abi > 0)
        fprintf(out,
                "  files: Landlock (ABI %d): the compiler opens only the "
                "toolchain (/usr, /lib*, /bin, /sbin, its own prefix, the "
                "loader's cache), /dev/null and its build folder\n",
                abi);
      else
        fprintf(out, "  files: no Landlock in this kernel: the compiler can "
                     "read any file the lab's user can (.incbin)\n");
    }
    if (i == SBX_RUN_CPU_EMU || i == SBX_RUN_GPU)
      sbx_explain_env(out, i == SBX_RUN_CPU_EMU);
    if (!p->seccomp)
      fprintf(out, "  seccomp: none (%s)\n", p->denied);
    else if (p->default_allow)
      fprintf(out, "  stacked filter: these now trap:\n");
    else
      fprintf(out,
              "  default: trap → the process ends, status "
              "killed:seccomp:<syscall>%s\n  allowed:\n",
              p->tsync ? "; synchronised to every thread (TSYNC)" : "");
    for (size_t r = 0; r < p->n_rules; r++) {
      const rule *ru = &p->rules[r];
      const char *cond =
          ru->kind == R_THREAD_ONLY        ? " [CLONE_THREAD only]"
          : ru->kind == R_NOT_SIGSYS       ? " [not for SIGSYS]"
          : ru->kind == R_ENOSYS           ? " [fails: ENOSYS]"
          : ru->kind == R_WRITE_EACCES     ? " [fails: EACCES if writing]"
          : ru->kind == R_SELF_SIGNAL      ? " [own process only]"
          : ru->kind == R_READ_ONLY        ? " [read-only]"
          : ru->kind == R_READ_ELSE_EACCES ? " [read-only; else EACCES]"
          : ru->kind == R_TRAP             ? " [traps]"
          : ru->kind == R_QUERY_ONLY       ? " [own process only]"
          : ru->kind == R_ISATTY_ONLY      ? " [TCGETS only]"
          : ru->kind == R_TRAP_EXEC        ? " [traps with PROT_EXEC]"
          : ru->kind == R_TRAP_SETTING     ? " [traps when installing]"
          : ru->kind == R_TRAP_REMOVE      ? " [traps MADV_REMOVE]"
                                           : "";
      fprintf(out, "    %-18s%-22s %s\n", ru->syscall, cond, ru->why);
    }
    if (p->seccomp && !p->default_allow)
      fprintf(out, "  traps, among others: %s\n", p->denied);
    if (p->n_limits) fprintf(out, "  rlimits (soft = hard):\n");
    for (size_t l = 0; l < p->n_limits; l++)
      fprintf(out, "    %-14s %s%-12llu %s\n", p->limits[l].name,
              p->limits[l].above_peak ? "+" : "",
              (unsigned long long)p->limits[l].value, p->limits[l].why);
    if (!p->default_allow)
      fprintf(out, "  namespaces: user + network where the kernel allows; "
                   "otherwise the rest alone (said once)\n");
    if (pfc && p->seccomp) {
      char why[256];
      scmp_filter_ctx ctx = build_filter(p, why, sizeof why);
      if (!ctx) {
        fprintf(out, "  (filter could not be built: %s)\n", why);
        ok = -1;
        continue;
      }
      fflush(out);
      seccomp_export_pfc(ctx, fileno(out));
      seccomp_release(ctx);
    }
    fputc('\n', out);
  }
  return ok;
}
