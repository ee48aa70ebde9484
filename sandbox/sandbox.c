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
#include "sandbox/sandbox.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <seccomp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

enum rule_kind {
  R_ALLOW,       /* allowed as is */
  R_THREAD_ONLY, /* clone: only with CLONE_THREAD */
  R_ENOSYS,      /* fails with ENOSYS (glibc falls back) */
  R_SELF_SIGNAL, /* tgkill/tkill: only to this thread group */
  R_NOT_SIGSYS,  /* rt_sigaction: any signal but SIGSYS */
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
} limit;

typedef struct profile {
  const char *name;
  const char *purpose;
  const rule *rules;
  size_t n_rules;
  const limit *limits;
  size_t n_limits;
  const char *denied; /* examples of what traps, for --explain */
} profile;

/* run-cpu-emu: the candidate is native code in this process. It may
 * compute, allocate, start threads (the emulator's block workers) and write
 * to the pipes it inherited; nothing else. */
static const rule run_cpu_emu_rules[] = {
    {"read", R_ALLOW, "inherited pipes"},
    {"write", R_ALLOW, "inherited pipes; RLIMIT_FSIZE 0 stops file growth"},
    {"close", R_ALLOW, "thread teardown"},
    {"mmap", R_ALLOW, "heap, fiber stacks, thread stacks"},
    {"munmap", R_ALLOW, "freeing the same"},
    {"mprotect", R_ALLOW, "guard pages under fiber and thread stacks"},
    {"madvise", R_ALLOW, "glibc returns thread stacks"},
    {"mremap", R_ALLOW, "realloc of large blocks"},
    {"brk", R_ALLOW, "heap"},
    {"futex", R_ALLOW, "thread join, locks"},
    {"clone", R_THREAD_ONLY, "block workers are threads; no new processes"},
    {"clone3", R_ENOSYS, "not inspectable by seccomp: glibc then uses clone"},
    {"set_robust_list", R_ALLOW, "thread start"},
    {"rseq", R_ALLOW, "thread start (glibc 2.35+)"},
    {"rt_sigprocmask", R_ALLOW, "thread start masks signals"},
    {"rt_sigreturn", R_ALLOW, "return from a signal handler"},
    {"rt_sigaction", R_NOT_SIGSYS,
     "glibc installs its thread-cancel handler at the first thread"},
    {"sigaltstack", R_ALLOW, "sanitizer runtimes give threads signal stacks"},
    {"sched_yield", R_ALLOW, "spinning threads"},
    {"sched_getaffinity", R_ALLOW, "glibc thread start"},
    {"getpid", R_ALLOW, "harmless identity"},
    {"gettid", R_ALLOW, "harmless identity"},
    {"clock_gettime", R_ALLOW, "timing (usually vDSO)"},
    {"gettimeofday", R_ALLOW, "timing (usually vDSO)"},
    {"nanosleep", R_ALLOW, "sleeping is harmless; the deadline still holds"},
    {"clock_nanosleep", R_ALLOW, "same"},
    {"tgkill", R_SELF_SIGNAL, "abort()/raise() on itself only"},
    {"tkill", R_SELF_SIGNAL, "same"},
    {"exit", R_ALLOW, "thread exit"},
    {"exit_group", R_ALLOW, "process exit"},
};

static const limit run_cpu_emu_limits[] = {
    {RLIMIT_AS, "RLIMIT_AS", 8ull << 30, "8 GiB address space"},
    {RLIMIT_CPU, "RLIMIT_CPU", 600,
     "CPU seconds (the wall deadline is "
     "the supervisor's)"},
    {RLIMIT_FSIZE, "RLIMIT_FSIZE", 0, "no file may grow"},
    {RLIMIT_NOFILE, "RLIMIT_NOFILE", 64, "few descriptors"},
    {RLIMIT_CORE, "RLIMIT_CORE", 0, "no core dumps"},
};

static const profile profiles[SBX_PROFILE_COUNT] = {
    [SBX_RUN_CPU_EMU] =
        {"run-cpu-emu",
         "runs a candidate compiled for the CPU emulator (native code)",
         run_cpu_emu_rules, sizeof run_cpu_emu_rules / sizeof(rule),
         run_cpu_emu_limits, sizeof run_cpu_emu_limits / sizeof(limit),
         "open/openat/creat (files), socket/connect (network), "
         "execve/execveat, fork/vfork and clone without CLONE_THREAD "
         "(processes), ptrace/process_vm_* (other processes), kill (signals "
         "to others), rt_sigaction on SIGSYS (replacing the trap handler), and "
         "every "
         "syscall not listed"},
};

static volatile int *trap_slot_ptr;

/* SIGSYS from a trapped syscall: note which, then end the whole process
 * without running any candidate-reachable code (no atexit, no stdio). */
static void on_sigsys(int sig, siginfo_t *si, void *uctx) {
  (void)sig;
  (void)uctx;
  if (trap_slot_ptr) *trap_slot_ptr = si->si_syscall;
  syscall(SYS_exit_group, SBX_TRAP_EXIT);
}

static scmp_filter_ctx build_filter(const profile *p, char *why,
                                    size_t whylen) {
  scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_TRAP);
  if (!ctx) {
    snprintf(why, whylen, "seccomp_init failed");
    return NULL;
  }
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
    case R_NOT_SIGSYS:
      rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, nr, 1,
                            SCMP_A0(SCMP_CMP_NE, (scmp_datum_t)SIGSYS));
      break;
    case R_ENOSYS:
      rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), nr, 0);
      break;
    case R_SELF_SIGNAL:
      /* tgkill's first argument is the thread group, tkill's a thread:
       * for the main thread both equal our pid. */
      rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, nr, 1,
                            SCMP_A0(SCMP_CMP_EQ, (scmp_datum_t)self));
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

/* Unprivileged user + network namespaces: no network at all inside. */
static int enter_namespaces(void) {
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

int sbx_confine(sbx_profile_id id, volatile int *trap_slot, char *why,
                size_t whylen) {
  if ((int)id < 0 || id >= SBX_PROFILE_COUNT) {
    snprintf(why, whylen, "unknown sandbox profile %d", (int)id);
    return -1;
  }
  const profile *p = &profiles[id];
  int ns = enter_namespaces() == 0;
  for (size_t i = 0; i < p->n_limits; i++) {
#if defined(__SANITIZE_ADDRESS__)
    /* AddressSanitizer reserves terabytes of shadow address space: an ASan
     * build of the lab (tests only) cannot live under RLIMIT_AS. */
    if (p->limits[i].resource == RLIMIT_AS) continue;
#endif
    struct rlimit rl = {p->limits[i].value, p->limits[i].value};
    if (setrlimit(p->limits[i].resource, &rl) != 0) {
      snprintf(why, whylen, "%s: setrlimit %s: %s", p->name, p->limits[i].name,
               strerror(errno));
      return -1;
    }
  }
  trap_slot_ptr = trap_slot;
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
  static char name[64];
  char *s = seccomp_syscall_resolve_num_arch(SCMP_ARCH_NATIVE, nr);
  snprintf(name, sizeof name, "%s", s ? s : "?");
  free(s);
  return name;
}

int sbx_explain(FILE *out, int pfc) {
  int ok = 0;
  for (int i = 0; i < SBX_PROFILE_COUNT; i++) {
    const profile *p = &profiles[i];
    fprintf(out, "profile %s — %s\n", p->name, p->purpose);
    fprintf(out, "  default: trap → the process ends, status "
                 "killed:seccomp:<syscall>\n  allowed:\n");
    for (size_t r = 0; r < p->n_rules; r++) {
      const rule *ru = &p->rules[r];
      const char *cond = ru->kind == R_THREAD_ONLY   ? " [CLONE_THREAD only]"
                         : ru->kind == R_NOT_SIGSYS  ? " [not for SIGSYS]"
                         : ru->kind == R_ENOSYS      ? " [fails: ENOSYS]"
                         : ru->kind == R_SELF_SIGNAL ? " [own process only]"
                                                     : "";
      fprintf(out, "    %-18s%-22s %s\n", ru->syscall, cond, ru->why);
    }
    fprintf(out, "  traps, among others: %s\n  rlimits (soft = hard):\n",
            p->denied);
    for (size_t l = 0; l < p->n_limits; l++)
      fprintf(out, "    %-14s %-12llu %s\n", p->limits[l].name,
              (unsigned long long)p->limits[l].value, p->limits[l].why);
    fprintf(out, "  namespaces: user + network where the kernel allows; "
                 "otherwise seccomp + rlimits alone\n");
    if (pfc) {
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
