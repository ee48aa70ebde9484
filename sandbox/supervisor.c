/*
 * sandbox/supervisor.c — the lab's side of the sandbox: starting workers
 * (fork+exec of this executable), holding the clock, killing, respawning,
 * and the kl_executor that kl_eval_source uses.
 *
 * A slot owns one warm compile worker (persistent: NVRTC stays loaded) and
 * one pre-started run worker (one job each, so a fresh one is started when
 * the previous has replied: starting it while the previous candidate is
 * timed would put its start-up on the cores being measured, unless
 * sbx_limits.overlap_workers asks for that). Waits use poll with the deadline;
 * kills go through a pidfd (no pid-reuse race) and to the worker's process
 * group. Statuses come from what the worker said (a TRAP frame names the
 * syscall) or how it ended (signal, exit) — never from the candidate's word
 * alone.
 *
 * A run-cpu-emu worker's outputs come back through a memfd made for that
 * worker alone (sized and sealed here before the job, checked against the
 * CRC-32C in the reply after it), not through the reply pipe: pipes move
 * about 1 GB/s here, and the copy was most of the sandbox's cost.
 *
 * A paced cpu-emu job's timed launches are driven from here (kl_pace,
 * kernels/pace.c): this process writes each launch's inputs into the
 * memfd after the outputs, says PACE, times until the worker's PACED on
 * its own clock and checks the output before the next launch. The
 * candidate runs inside the runner's process: it can rewrite what the
 * runner measures and read what the runner knows, but not this clock nor
 * inputs drawn here. The worker's own samples stay in its report as a
 * claim kernels/check.c holds to these.
 */
#define _GNU_SOURCE
#include "sandbox/sandbox_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif
#ifndef SYS_pidfd_send_signal
#define SYS_pidfd_send_signal 424
#endif

static char self_exe[PATH_MAX];
static pthread_once_t self_once = PTHREAD_ONCE_INIT;
static int spawned_count; /* atomic */

static void read_self_exe(void) {
  ssize_t n = readlink("/proc/self/exe", self_exe, sizeof self_exe - 1);
  if (n <= 0)
    snprintf(self_exe, sizeof self_exe, "/proc/self/exe");
  else
    self_exe[n] = 0;
}

/* This executable's path, read once: slot threads spawn their first
 * workers at once (kernlab corpus, eval), and a lazy read without the
 * once had one thread's readlink writing the path while another read it
 * for its worker's argv[0]. */
static const char *self_path(void) {
  pthread_once(&self_once, read_self_exe);
  return self_exe;
}

/* What workers exec: this very executable through /proc/self/exe, which
 * names the running image even after its file was replaced or removed (a
 * rebuild during a campaign must not start workers of another build, whose
 * frames this one would refuse); its path where /proc is missing. */
static const char *spawn_path(void) {
  return access("/proc/self/exe", X_OK) == 0 ? "/proc/self/exe" : self_path();
}

int sbx_spawn_count(void) {
  return __atomic_load_n(&spawned_count, __ATOMIC_RELAXED);
}

/* Whether variable var (NAME=VALUE) goes into a run worker's environment.
 * A native candidate (run-cpu-emu, matmul-cpu-emu) can read its process's
 * memory, environment included, so its worker gets only what the lab's
 * code and the libraries it loads read (paths, locale, kernlab's and the
 * thread pools' settings, the sanitizers' options), none of the tokens
 * and keys a user's shell exports. A run-gpu worker's candidate is device
 * code, but with HMM device code can read its process's host memory; its
 * worker gets the lab's environment less the variables whose names say
 * they hold a secret: CUDA reads variables of its own (CUDA_*, NVIDIA_*,
 * __GL_*, paths) that an allowlist made without a device could miss. */
static const char *const env_keep[] = {"PATH=",
                                       "HOME=",
                                       "TMPDIR=",
                                       "XDG_CACHE_HOME=",
                                       "LANG=",
                                       "LC_",
                                       "TZ=",
                                       "KERNLAB_",
                                       "KL_",
                                       "OPENBLAS_",
                                       "OMP_",
                                       "ASAN_",
                                       "UBSAN_",
                                       "LSAN_",
                                       "LD_LIBRARY_PATH="};
static const char *const env_secret[] = {"TOKEN",      "SECRET",     "PASSWORD",
                                         "PASSWD",     "CREDENTIAL", "API_KEY",
                                         "ACCESS_KEY", "PRIVATE_KEY"};
#define N_ENV_KEEP (sizeof env_keep / sizeof *env_keep)
#define N_ENV_SECRET (sizeof env_secret / sizeof *env_secret)

static int env_kept(const char *var, int native) {
  if (native) {
    for (size_t j = 0; j < N_ENV_KEEP; j++)
      if (!strncmp(var, env_keep[j], strlen(env_keep[j]))) return 1;
    return 0;
  }
  const char *eq = strchr(var, '=');
  size_t len = eq ? (size_t)(eq - var) : strlen(var);
  if (!strncmp(var, "AWS_", 4)) return 0;
  for (size_t j = 0; j < N_ENV_SECRET; j++)
    if (memmem(var, len, env_secret[j], strlen(env_secret[j]))) return 0;
  return 1;
}

void sbx_explain_env(FILE *out, int native) {
  const char *const *list = native ? env_keep : env_secret;
  size_t n = native ? N_ENV_KEEP : N_ENV_SECRET;
  fprintf(out, native ? "  environment: only"
                      : "  environment: the lab's, "
                        "less AWS_* and names with");
  for (size_t j = 0; j < n; j++) {
    size_t len = strlen(list[j]);
    int eq = len > 0 && list[j][len - 1] == '=';
    fprintf(out, "%s %.*s%s", j ? "," : "", (int)(len - (size_t)eq), list[j],
            native && !eq ? "*" : "");
  }
  fprintf(out, native ? " (the candidate can read its process's memory)\n"
                      : " (device code can read host memory through HMM)\n");
}

/* A run worker's environment (env_kept): pointers into environ,
 * NULL-terminated; free the array only. NULL when out of memory. */
static char **run_worker_env(int native) {
  size_t n = 0;
  while (environ[n])
    n++;
  char **env = malloc((n + 1) * sizeof *env);
  if (!env) return NULL;
  size_t k = 0;
  for (size_t i = 0; i < n; i++)
    if (env_kept(environ[i], native)) env[k++] = environ[i];
  env[k] = NULL;
  return env;
}

int sbx_spawn(sbx_worker *w, const char *mode, char *why, size_t whylen) {
  int to[2], from[2];
  memset(w, 0, sizeof *w);
  w->pidfd = w->to = w->from = w->outs = -1;
  if (pipe2(to, O_CLOEXEC) != 0 || pipe2(from, O_CLOEXEC) != 0) {
    snprintf(why, whylen, "pipe: %s", strerror(errno));
    return -1;
  }
  /* A run worker writes its outputs (megabytes) straight into a memfd of
   * its own instead of the reply pipe, which moves about 1 GB/s here: that
   * copy was most of the sandbox's cost per candidate. Sealable, so the
   * supervisor can fix its size before the candidate runs. */
  int outs_fd = -1;
  if (!strcmp(mode, "run-cpu-emu") || !strcmp(mode, "matmul-cpu-emu") ||
      !strcmp(mode, "run-gpu")) {
    outs_fd = memfd_create("kernlab-outputs", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (outs_fd < 0) {
      snprintf(why, whylen, "memfd_create: %s", strerror(errno));
      close(to[0]);
      close(to[1]);
      close(from[0]);
      close(from[1]);
      return -1;
    }
  }
  char ppid[32];
  snprintf(ppid, sizeof ppid, "%ld", (long)getpid());
  const char *argv[] = {self_path(), "__worker", mode, ppid, NULL};
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, to[0], SBX_FD_IN);
  posix_spawn_file_actions_adddup2(&fa, from[1], SBX_FD_OUT);
  if (outs_fd >= 0) posix_spawn_file_actions_adddup2(&fa, outs_fd, SBX_FD_OUTS);
  /* A candidate's printf must not land in the lab's output (--json), nor
   * read what the lab's user types or pipes in. */
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
  /* Nor write into the lab's stderr: where the candidate runs, fd 2 is
   * /dev/null too (the lab's stderr may be a file, where RLIMIT_FSIZE 0
   * would turn a write into SIGXFSZ: a verdict that hung on where the user
   * sent stderr). Compile workers keep it (compilers' last words), and a
   * run-gpu worker in KERNLAB_GPU_SECCOMP=record mode, which reports there
   * (sandbox/worker.c). */
  int runs_candidate = outs_fd >= 0;
  const char *record = getenv("KERNLAB_GPU_SECCOMP");
  if (runs_candidate &&
      !(!strcmp(mode, "run-gpu") && record && !strcmp(record, "record")))
    posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
  posix_spawnattr_t at;
  posix_spawnattr_init(&at);
  posix_spawnattr_setflags(&at, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK |
                                    POSIX_SPAWN_SETSIGDEF);
  posix_spawnattr_setpgroup(&at, 0);
  sigset_t none, all;
  sigemptyset(&none);
  sigfillset(&all);
  posix_spawnattr_setsigmask(&at, &none);
  posix_spawnattr_setsigdefault(&at, &all);
  int native = strcmp(mode, "run-cpu-emu") == 0 ||
               strcmp(mode, "matmul-cpu-emu") == 0,
      filtered = native || strcmp(mode, "run-gpu") == 0;
  char **env = filtered ? run_worker_env(native) : environ;
  int err = env ? posix_spawn(&w->pid, spawn_path(), &fa, &at,
                              (char *const *)argv, env)
                : ENOMEM;
  if (filtered) free(env);
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&at);
  close(to[0]);
  close(from[1]);
  if (err != 0) {
    close(to[1]);
    close(from[0]);
    if (outs_fd >= 0) close(outs_fd);
    snprintf(why, whylen, "cannot start worker %s: %s", argv[0], strerror(err));
    return -1;
  }
  __atomic_fetch_add(&spawned_count, 1, __ATOMIC_RELAXED);
  w->to = to[1];
  w->from = from[0];
  w->outs = outs_fd;
  w->pidfd = (int)syscall(SYS_pidfd_open, w->pid, 0);
  if (w->pidfd >= 0) fcntl(w->pidfd, F_SETFD, FD_CLOEXEC);
  w->up = 1;
  return 0;
}

int sbx_outs_size(sbx_worker *w, size_t n_outs, kl_result *out) {
  size_t bytes = sizeof(float) * (n_outs ? n_outs : 1);
  if (ftruncate(w->outs, (off_t)bytes) == 0 &&
      fcntl(w->outs, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) ==
          0)
    return 0;
  snprintf(out->status, sizeof out->status, "sandbox_error");
  snprintf(out->error, sizeof out->error,
           "cannot size the outputs' memfd to %zu bytes: %s", bytes,
           strerror(errno));
  sbx_kill(w);
  return -1;
}

int sbx_outs_take(sbx_worker *w, float *outs, size_t n_outs,
                  const sbx_run_reply *reply, const char *what,
                  kl_result *out) {
  size_t bytes = sizeof(float) * (n_outs ? n_outs : 1);
  void *map =
      mmap(NULL, bytes, PROT_READ, MAP_SHARED | MAP_POPULATE, w->outs, 0);
  if (map == MAP_FAILED) {
    snprintf(out->status, sizeof out->status, "sandbox_error");
    snprintf(out->error, sizeof out->error,
             "cannot map the outputs' memfd (%zu bytes): %s", bytes,
             strerror(errno));
    sbx_kill(w);
    return -1;
  }
  memcpy(outs, map, n_outs * sizeof(float));
  munmap(map, bytes);
  if (reply->n_outs == n_outs &&
      sbx_crc32c(0, outs, n_outs * sizeof(float)) == reply->outs_crc)
    return 0;
  sbx_kill(w);
  snprintf(out->status, sizeof out->status, "run_error");
  snprintf(out->error, sizeof out->error,
           "%s's outputs do not match its reply (%s; expected %zu floats "
           "with the reply's checksum)",
           what, reply->n_outs != n_outs ? "wrong count" : "checksum differs",
           n_outs);
  return -1;
}

static void close_worker(sbx_worker *w) {
  if (w->to >= 0) close(w->to);
  if (w->from >= 0) close(w->from);
  if (w->pidfd >= 0) close(w->pidfd);
  if (w->outs >= 0) close(w->outs);
  w->to = w->from = w->pidfd = w->outs = -1;
  w->up = 0;
}

/* 1 while the worker process has not exited (it is not reaped here). */
static int worker_alive(const sbx_worker *w) {
  siginfo_t si;
  memset(&si, 0, sizeof si);
  if (waitid(P_PID, (id_t)w->pid, &si, WEXITED | WNOHANG | WNOWAIT) != 0)
    return 0;
  return si.si_pid == 0;
}

int sbx_kill(sbx_worker *w) {
  int status = 0;
  if (!w->up) return 0;
  if (w->pidfd >= 0)
    syscall(SYS_pidfd_send_signal, w->pidfd, SIGKILL, NULL, 0);
  else
    kill(w->pid, SIGKILL);
  kill(-w->pid, SIGKILL); /* anything it started in its group */
  struct rusage ru;
  memset(&ru, 0, sizeof ru);
  while (wait4(w->pid, &status, 0, &ru) < 0 && errno == EINTR) {
  }
  w->maxrss_kb = ru.ru_maxrss;
  close_worker(w);
  return status;
}

int sbx_reap(sbx_worker *w, double timeout_ms) {
  int status = 0;
  if (!w->up) return 0;
  double deadline = sbx_now_ms() + timeout_ms;
  for (;;) {
    struct rusage ru;
    memset(&ru, 0, sizeof ru);
    pid_t r = wait4(w->pid, &status, WNOHANG, &ru);
    if (r == w->pid) {
      w->maxrss_kb = ru.ru_maxrss;
      kill(-w->pid, SIGKILL);
      close_worker(w);
      return status;
    }
    if (r < 0 && errno != EINTR) break;
    if (sbx_now_ms() > deadline) return sbx_kill(w);
    if (w->pidfd >= 0) {
      struct pollfd pf = {w->pidfd, POLLIN, 0};
      poll(&pf, 1, 5);
    } else {
      usleep(1000);
    }
  }
  close_worker(w);
  return status;
}

int sbx_await_ready(sbx_worker *w, double timeout_ms, char *why,
                    size_t whylen) {
  int type;
  uint8_t *msg;
  size_t len;
  int rc = sbx_recv(w->from, &type, &msg, &len, 64, sbx_now_ms() + timeout_ms);
  if (rc == 0 && type == SBX_MSG_READY) {
    w->confinement = sbx_ready_confinement(msg, len);
    free(msg);
    return 0;
  }
  free(msg);
  int st = sbx_kill(w);
  snprintf(why, whylen, "worker did not start (%s; exit status %d%s%s)",
           rc == SBX_TIMEOUT ? "timeout" : "no READY",
           WIFEXITED(st) ? WEXITSTATUS(st) : -1,
           WIFSIGNALED(st) ? ", signal " : "",
           WIFSIGNALED(st) ? strsignal(WTERMSIG(st)) : "");
  return -1;
}

/* ---- the slot and its executor ---- */

#define SBX_MAX_EXITING 8

struct sbx_slot {
  sbx_limits limits;
  sbx_worker compile;
  sbx_worker run; /* pre-started, waiting for its one job */
  /* Run workers that replied and are exiting on their own: reaped later,
   * so their exit (freeing the candidate's memory) does not hold up the
   * next candidate. */
  sbx_worker exiting[SBX_MAX_EXITING];
  int n_exiting;
};

/* Reaps exiting workers that are done; with force, waits for all. */
static void reap_exiting(sbx_slot *s, int force) {
  int kept = 0;
  for (int i = 0; i < s->n_exiting; i++) {
    sbx_worker *w = &s->exiting[i];
    int status;
    if (force) {
      sbx_reap(w, 1000);
    } else if (waitpid(w->pid, &status, WNOHANG) == w->pid) {
      kill(-w->pid, SIGKILL);
      w->pid = -1; /* reaped: only its descriptors remain */
      close_worker(w);
    } else {
      s->exiting[kept++] = *w;
    }
  }
  s->n_exiting = force ? 0 : kept;
}

sbx_slot *sbx_slot_new(const sbx_limits *limits) {
  sbx_slot *s = calloc(1, sizeof *s);
  if (!s) return NULL;
  s->limits.compile_deadline_s = 60;
  s->limits.host_compile_deadline_s = 60;
  if (limits) s->limits = *limits;
  s->compile.to = s->compile.from = s->compile.pidfd = s->compile.outs = -1;
  s->run.to = s->run.from = s->run.pidfd = s->run.outs = -1;
  return s;
}

void sbx_slot_free(sbx_slot *s) {
  if (!s) return;
  reap_exiting(s, 1);
  if (s->compile.up) {
    close(s->compile.to); /* EOF: the compile worker exits by itself */
    s->compile.to = -1;
    sbx_reap(&s->compile, 200);
  }
  sbx_kill(&s->run);
  free(s);
}

void sbx_status_from_wait(int st, const char *what, kl_result *out) {
  if (WIFSIGNALED(st) && WTERMSIG(st) == SIGSYS) {
    /* The trap came while the candidate had signals blocked: the kernel
     * killed with SIGSYS before the handler could report the call. */
    snprintf(out->status, sizeof out->status, "killed:seccomp:unknown");
    snprintf(out->error, sizeof out->error,
             "the sandbox stopped %s at a forbidden system call made with "
             "signals blocked (which call was not recorded)",
             what);
  } else if (WIFSIGNALED(st)) {
    const char *name = sigabbrev_np(WTERMSIG(st));
    snprintf(out->status, sizeof out->status, "crashed:SIG%s",
             name ? name : "?");
    snprintf(out->error, sizeof out->error, "%s crashed (%s%s)", what,
             strsignal(WTERMSIG(st)),
             WTERMSIG(st) == SIGSEGV
                 ? ": an access out of bounds, or, on cpu-emu, local arrays "
                   "past an emulated thread's 128 KiB stack or a write to "
                   "the kernel's own file-scope data, read-only there"
                 : "");
  } else if (WIFEXITED(st) && WEXITSTATUS(st) == SBX_TRAP_EXIT) {
    snprintf(out->status, sizeof out->status, "killed:seccomp:unknown");
    snprintf(out->error, sizeof out->error,
             "the sandbox stopped %s (report lost)", what);
  } else {
    snprintf(out->status, sizeof out->status, "crashed:exit");
    snprintf(out->error, sizeof out->error,
             "%s ended the process (exit status %d)", what,
             WIFEXITED(st) ? WEXITSTATUS(st) : -1);
  }
}

static int exec_compile(void *ctx, const char *src, size_t len,
                        const char *arch, kl_compiled *out, char *why,
                        size_t whylen) {
  sbx_slot *s = ctx;
  double t0 = sbx_now_ms();
  if (kl_nvrtc_cached(src, len, arch, out)) return KL_OK;
  /* the entry's key is the lab's own, computed here from the source: the
   * worker's reply also names one, but a worker NVRTC ran in could name
   * any entry of the cache for its cubin (the second sandbox review) */
  char key[sizeof out->key];
  memcpy(key, out->key, sizeof key);
  kl_compiled_free(out);
  size_t alen = strlen(arch) + 1;
  int killed_retry = 0, confinement = 0;
again:
  /* A worker can be gone between two candidates without any fault of the
   * next one: PR_SET_PDEATHSIG fires when the *thread* that started it
   * ends, and slots outlive the threads that use them. So: one fresh start
   * and one retry before calling it an environment problem. */
  for (int attempt = 0;; attempt++) {
    if (s->compile.up && !worker_alive(&s->compile)) sbx_kill(&s->compile);
    if (!s->compile.up) {
      if (sbx_spawn(&s->compile, "compile", why, whylen) != 0) return KL_EENV;
      if (sbx_await_ready(&s->compile, 30000, why, whylen) != 0) return KL_EENV;
    }
    confinement = s->compile.confinement;
    if (sbx_send(s->compile.to, SBX_MSG_COMPILE, arch, alen, src, len) == 0)
      break;
    sbx_kill(&s->compile);
    if (attempt == 1) {
      snprintf(why, whylen, "compile worker went away twice");
      return KL_EENV;
    }
  }
  int type;
  uint8_t *msg;
  size_t mlen;
  /* the most an honest worker sends: a cubin and a log at their caps */
  int rc = sbx_recv(s->compile.from, &type, &msg, &mlen,
                    sizeof(sbx_compile_reply) + KL_MAX_CUBIN_BYTES +
                        KL_MAX_LOG_BYTES + 1,
                    t0 + s->limits.compile_deadline_s * 1e3);
  if (rc == SBX_TIMEOUT) {
    sbx_kill(&s->compile);
    snprintf(why, whylen,
             "NVRTC did not finish within %.0f s (compile worker "
             "killed)",
             s->limits.compile_deadline_s);
    out->confinement = confinement;
    return KL_ETIMEOUT;
  }
  if (rc == 0 && type == SBX_MSG_TRAP && mlen == 4) {
    int32_t nr;
    memcpy(&nr, msg, 4);
    free(msg);
    sbx_reap(&s->compile, 1000);
    snprintf(why, whylen,
             "the compile worker was stopped by the sandbox at %s: NVRTC "
             "needs a syscall the compile profile does not allow",
             sbx_syscall_name(nr));
    return KL_EENV;
  }
  if (rc != 0 || type != SBX_MSG_COMPILED || mlen < sizeof(sbx_compile_reply)) {
    free(msg);
    int st = sbx_reap(&s->compile, 1000);
    /* A SIGKILL with little memory used came from outside the compile (its
     * starting thread ended between the liveness check and the request,
     * or someone killed it): not the candidate's doing, so compile it
     * again on a fresh worker, once, rather than calling it oom. */
    if (WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL && !killed_retry &&
        s->compile.maxrss_kb < (long)((SBX_COMPILE_MEMORY_LIMIT >> 10) / 2)) {
      killed_retry = 1;
      goto again;
    }
    if (WIFSIGNALED(st) &&
        (WTERMSIG(st) == SIGABRT || WTERMSIG(st) == SIGKILL ||
         WTERMSIG(st) == SIGSEGV)) {
      snprintf(why, whylen,
               "the compile worker died (%s): most likely out of memory under "
               "the compile profile's limit (4 GiB above its own start)",
               strsignal(WTERMSIG(st)));
      out->confinement = confinement;
      return KL_EOOM;
    }
    snprintf(why, whylen, "the compile worker failed (exit status %d)",
             WIFEXITED(st) ? WEXITSTATUS(st) : -1);
    return KL_EENV;
  }
  sbx_compile_reply r;
  memcpy(&r, msg, sizeof r);
  size_t body = mlen - sizeof r;
  if (r.cubin_size > body || r.cubin_size > KL_MAX_CUBIN_BYTES) {
    free(msg);
    snprintf(why, whylen, "malformed reply from the compile worker");
    return KL_EENV;
  }
  r.why[sizeof r.why - 1] = 0;
  memset(out, 0, sizeof *out);
  out->res = (kl_resources){-1, -1, -1, -1, -1, -1};
  memcpy(out->key, key, sizeof out->key);
  out->cubin_size = r.cubin_size;
  out->cubin = malloc(r.cubin_size ? r.cubin_size : 1);
  out->log = malloc(body - r.cubin_size + 1);
  if (!out->cubin || !out->log) {
    free(msg);
    snprintf(why, whylen, "out of memory");
    return KL_EENV;
  }
  memcpy(out->cubin, msg + sizeof r, r.cubin_size);
  memcpy(out->log, msg + sizeof r + r.cubin_size, body - r.cubin_size);
  out->log[body - r.cubin_size] = 0;
  free(msg);
  snprintf(why, whylen, "%s", r.why);
  if (r.rc == KL_OK) {
    kl_compiled_finish(out);
    kl_nvrtc_store(out);
  }
  out->compile_ms = sbx_now_ms() - t0;
  out->confinement = confinement;
  return r.rc;
}

/* kl_pace's io over a run worker's pipes. A frame that is not PACED is
 * kept for exec_run, which handles it as the job's end.
 *
 * Both ends wait asleep in poll. Waking a process is on the batch's
 * clock (50 to 80 us each way on a two-core VM), which batches amortise
 * for short launches (kl_pace); waiting awake instead cut it to 40 us at
 * 256^3 on an idle machine, but on a loaded one a spinner that yields its
 * CPU saw the frame milliseconds late (a sleeper woken by the frame is
 * run first), so it went. */
typedef struct pace_io {
  sbx_worker *w;
  double deadline_ms;
  size_t want; /* the largest frame expected: RAN */
  int have, rc, type;
  uint8_t *msg;
  size_t len;
} pace_io;

static int pace_go(void *ctx, int n, int k) {
  pace_io *p = ctx;
  int32_t v[2] = {n, k};
  return sbx_send(p->w->to, SBX_MSG_PACE, v, sizeof v, NULL, 0) == 0 ? 0 : -1;
}

static int pace_done(void *ctx) {
  pace_io *p = ctx;
  int type;
  uint8_t *msg = NULL;
  size_t len = 0;
  int rc = sbx_recv(p->w->from, &type, &msg, &len, p->want, p->deadline_ms);
  if (rc == 0 && type == SBX_MSG_PACED && len == sizeof(int32_t)) {
    int32_t v;
    memcpy(&v, msg, sizeof v);
    free(msg);
    return v == 1;
  }
  p->have = 1;
  p->rc = rc;
  p->type = type;
  p->msg = msg;
  p->len = len;
  return -1;
}

static int exec_run(void *ctx, const kl_run_job *job, kl_run_report *rep,
                    float *outs, size_t n_outs, kl_result *out) {
  sbx_slot *s = ctx;
  char why[512];
  double t0 = sbx_now_ms();
  /* A pre-started worker has said READY by now, or says it shortly. One
   * that is gone (its starting thread ended: see exec_compile) is started
   * again once. */
  int ready = -1;
  for (int attempt = 0; attempt < 2 && ready != 0; attempt++) {
    if (s->run.up && !worker_alive(&s->run)) sbx_kill(&s->run);
    if (!s->run.up && sbx_spawn(&s->run, "run-cpu-emu", why, sizeof why) != 0)
      break;
    ready = sbx_await_ready(&s->run, 30000, why, sizeof why);
  }
  if (ready != 0) {
    snprintf(out->status, sizeof out->status, "sandbox_error");
    snprintf(out->error, sizeof out->error, "%s", why);
    return 0;
  }
  sbx_worker w = s->run;
  s->run.up = 0;
  /* Said now, from READY: a candidate that hangs, crashes or is killed
   * never replies, and it ran confined all the same. */
  out->confinement = w.confinement;
  int complete = 0;
  kl_pace_result *pace = NULL;
  /* The workers that replied before are gone before this job starts (or
   * reaped when done, with overlap_workers): a process's exit frees the
   * candidate's memory, work the timed launches would share cores with. */
  reap_exiting(s, !s->limits.overlap_workers);
  /* A paced job's timed buffers follow the outputs in the memfd; this
   * side writes their inputs and checks their output (kl_pace). */
  size_t n_pace = kl_pace_floats(job);
  if (sbx_outs_size(&w, n_outs + n_pace, out) != 0) goto respawn;
  size_t map_bytes = sizeof(float) * (n_outs + n_pace);
  float *map = NULL;
  if (n_pace) {
    map = mmap(NULL, map_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, w.outs, 0);
    if (map == MAP_FAILED) {
      snprintf(out->status, sizeof out->status, "sandbox_error");
      snprintf(out->error, sizeof out->error,
               "cannot map the paced buffers (%zu bytes): %s", map_bytes,
               strerror(errno));
      sbx_kill(&w);
      goto respawn;
    }
  }
  if (sbx_send(w.to, SBX_MSG_RUN, job, sizeof *job, NULL, 0) != 0) {
    if (map) munmap(map, map_bytes);
    int st = sbx_kill(&w);
    sbx_status_from_wait(st, "the run worker", out);
    goto respawn;
  }
  /* With overlap_workers the next candidate's worker starts while this
   * one runs; by default at respawn, below, once this one has replied. */
  if (s->limits.overlap_workers &&
      sbx_spawn(&s->run, "run-cpu-emu", why, sizeof why) != 0)
    s->run.up = 0;
  int type, rc;
  uint8_t *msg = NULL;
  size_t len;
  size_t want = sizeof(sbx_run_reply) + sizeof(kl_run_report);
  double deadline = t0 + job->deadline_s * 1e3;
  /* Paced: PACE n / PACED until this side stops, then RAN. Any other
   * frame ends the pacing and is handled below as if it came first (RAN
   * from a job that failed its checks, TRAP, a timeout). */
  pace_io pio = {&w, deadline, want, 0, 0, 0, NULL, 0};
  if (n_pace) {
    pace = malloc(sizeof *pace);
    if (pace) {
      kl_pace_io io = {&pio, pace_go, pace_done};
      kl_pace(job, map + n_outs, &io, pace);
    }
    munmap(map, map_bytes);
  }
  if (n_pace && (!pace || pace->ended == -2)) {
    free(pio.msg);
    sbx_kill(&w);
    snprintf(out->status, sizeof out->status, "sandbox_error");
    snprintf(out->error, sizeof out->error,
             "out of memory for the paced launches' inputs");
    goto respawn;
  }
  if (pio.have) {
    rc = pio.rc;
    type = pio.type;
    msg = pio.msg;
    len = pio.len;
  } else {
    rc = sbx_recv(w.from, &type, &msg, &len, want, deadline);
  }
  if (rc == SBX_TIMEOUT) {
    sbx_kill(&w);
    snprintf(out->status, sizeof out->status, "timeout");
    snprintf(out->error, sizeof out->error,
             "runs did not finish within the %g s deadline (worker killed)",
             job->deadline_s);
    goto respawn;
  }
  if (rc == 0 && type == SBX_MSG_TRAP && len == 4) {
    int32_t nr;
    memcpy(&nr, msg, 4);
    free(msg);
    sbx_reap(&w, 1000);
    const char *name = sbx_syscall_name(nr);
    snprintf(out->status, sizeof out->status, "killed:seccomp:%s", name);
    snprintf(out->error, sizeof out->error,
             "the sandbox stopped the kernel at a forbidden system call: %s "
             "(number %d)",
             name, nr);
    goto respawn;
  }
  if (rc != 0 || type != SBX_MSG_RAN || len != want) {
    free(msg);
    int st = sbx_reap(&w, 1000);
    int trapped = (WIFSIGNALED(st) && WTERMSIG(st) == SIGSYS) ||
                  (WIFEXITED(st) && WEXITSTATUS(st) == SBX_TRAP_EXIT);
    if (!trapped && rc == 0 && type == SBX_MSG_PACED) {
      /* a launch answered that nobody started: a frame the runner did
       * not write (forge_pace_answer.cu) */
      snprintf(out->status, sizeof out->status, "run_error");
      snprintf(out->error, sizeof out->error,
               "the run worker answered a timed launch the supervisor did "
               "not start (a frame the runner did not write); its reply was "
               "expected");
    } else if (!trapped && (rc == 0 || rc == SBX_EBAD)) {
      snprintf(out->status, sizeof out->status, "run_error");
      snprintf(out->error, sizeof out->error,
               "the run worker sent a malformed reply (%s)",
               WIFSIGNALED(st) ? strsignal(WTERMSIG(st)) : "exited");
    } else if (!trapped &&
               w.maxrss_kb > (long)(SBX_RUN_MEMORY_LIMIT >> 10) / 2) {
      /* It died having used most of its address-space limit: the usual end
       * of a memory bomb is a failed allocation dereferenced. */
      snprintf(out->status, sizeof out->status, "oom");
      snprintf(out->error, sizeof out->error,
               "the kernel ran out of memory (peak %ld MiB under the sandbox's "
               "%llu MiB limit)",
               w.maxrss_kb >> 10,
               (unsigned long long)(SBX_RUN_MEMORY_LIMIT >> 20));
    } else {
      sbx_status_from_wait(st, "the kernel", out);
    }
    goto respawn;
  }
  sbx_run_reply reply;
  memcpy(&reply, msg, sizeof reply);
  memcpy(rep, msg + sizeof reply, sizeof *rep);
  free(msg);
  rep->why[sizeof rep->why - 1] = 0;
  rep->flag_detail[sizeof rep->flag_detail - 1] = 0;
  if (rep->samples < 0 || rep->samples > KL_MAX_TIMING_SAMPLES)
    rep->samples = 0;
  /* the driver's part of the report is never the worker's word, nor is a
   * GPU's (all zero on cpu-emu): the candidate runs in this worker and
   * can write the reply itself, and its gpu.status became the result's
   * status, any string it liked, "ok" on a failed run among them (the
   * second sandbox review) */
  rep->paced_samples = 0;
  memset(&rep->gpu, 0, sizeof rep->gpu);
  rep->timed_launches = 0;
  if (pace) kl_pace_merge(rep, pace);
  if (sbx_outs_take(&w, outs, n_outs, &reply, "the run worker", out) != 0)
    goto respawn;
  close(w.outs); /* the exiting worker keeps its own mapping */
  w.outs = -1;
  if (s->n_exiting == SBX_MAX_EXITING) reap_exiting(s, 1);
  s->exiting[s->n_exiting++] = w;
  complete = 1;
respawn:
  free(pace);
  if (!s->run.up && sbx_spawn(&s->run, "run-cpu-emu", why, sizeof why) != 0)
    s->run.up = 0;
  return complete;
}

void sbx_slot_executor(sbx_slot *s, kl_executor *ex) {
  ex->ctx = s;
  ex->compile = exec_compile;
  ex->run = exec_run;
  ex->run_gpu = sbx_run_gpu; /* sandbox/gpu_exec.c */
  ex->paced = 1;             /* exec_run drives the timed launches (kl_pace) */
}

const char *const *sbx_host_compile_launcher(void) {
  static char ppid[32];
  static const char *argv[6];
  snprintf(ppid, sizeof ppid, "%ld", (long)getpid());
  argv[0] = spawn_path(); /* the program run, as for sbx_spawn */
  argv[1] = "__worker";
  argv[2] = "host-compile";
  argv[3] = ppid;
  argv[4] = "--";
  argv[5] = NULL;
  return argv;
}

double sbx_measure_spawn_ms(const char *mode) {
  sbx_worker w;
  char why[256];
  double t0 = sbx_now_ms();
  if (sbx_spawn(&w, mode, why, sizeof why) != 0) return -1;
  if (sbx_await_ready(&w, 30000, why, sizeof why) != 0) return -1;
  double dt = sbx_now_ms() - t0;
  sbx_kill(&w);
  return dt;
}
