/*
 * sandbox/worker.c — the worker side: `kernlab __worker MODE PPID`, started
 * by the supervisor with fork+exec (sbx_spawn), talking over the pipes on
 * descriptors 3 (in) and 4 (out).
 *
 * Every worker first makes sure it cannot outlive the lab (PR_SET_PDEATHSIG,
 * then a check that the parent is still the one that started it) and closes
 * every descriptor it did not ask for. Then, by mode:
 *
 *   compile       load NVRTC and compile a tiny kernel (NVRTC dlopens its
 *                 builtins lazily), confine with the `compile` profile, say
 *                 READY, then serve COMPILE requests until the pipe closes.
 *                 No cache access: the supervisor reads and writes the cache.
 *   run-cpu-emu   say READY, wait for one RUN job, confine (`run-cpu-emu`),
 *                 load the candidate (its static initialisers run confined),
 *                 stack `run-cpu-emu-loaded`, run, reply, exit. One job per
 *                 process: after a candidate ran, the process is its.
 *   host-compile  apply the `host-compile` limits and namespaces, then exec
 *                 the compiler command that follows `--`.
 */
#define _GNU_SOURCE
#include "sandbox/sandbox_internal.h"

#include <dlfcn.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifndef SYS_close_range
#define SYS_close_range 436
#endif

static void die_with_parent(pid_t expected) {
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != expected) _exit(1); /* the lab is already gone */
}

static void close_other_fds(int keep_from) {
  if (syscall(SYS_close_range, (unsigned)keep_from, ~0u, 0) == 0) return;
  for (int fd = keep_from; fd < 1024; fd++) close(fd);
}

static const char warmup_src[] =
    "KL_LAUNCH(1, 1, 1, 1, 0);\n"
    "extern \"C\" __global__ void matmul(const float* A, const float* B, "
    "float* C, int M, int N, int K) { C[0] = A[0] * B[0]; }\n";

static int compile_worker(void) {
  char why[600];
  sbx_enter_namespaces(); /* before NVRTC starts its threads */
  if (kl_nvrtc_load(why, sizeof why) != KL_OK) {
    fprintf(stderr, "kernlab compile worker: %s\n", why);
    return 3;
  }
  kl_compiled warm;
  (void)kl_nvrtc_compile(warmup_src, sizeof warmup_src - 1, "sm_90", 0, &warm,
                         why, sizeof why);
  kl_compiled_free(&warm);
  if (sbx_confine(SBX_COMPILE, NULL, SBX_FD_OUT, why, sizeof why) < 0) {
    fprintf(stderr, "kernlab compile worker: %s\n", why);
    return 3;
  }
  if (sbx_send(SBX_FD_OUT, SBX_MSG_READY, NULL, 0, NULL, 0) != 0) return 1;
  for (;;) {
    int type;
    uint8_t *msg;
    size_t len;
    int rc = sbx_recv(SBX_FD_IN, &type, &msg, &len,
                      KL_MAX_SOURCE_BYTES + 4096, 1e18);
    if (rc != 0) return rc == SBX_EOF ? 0 : 1;
    const char *arch = (const char *)msg;
    const char *nul = memchr(msg, 0, len);
    if (type != SBX_MSG_COMPILE || !nul) {
      free(msg);
      return 1;
    }
    const char *src = nul + 1;
    size_t src_len = len - (size_t)(src - arch);
    kl_compiled c;
    sbx_compile_reply r;
    memset(&r, 0, sizeof r);
    r.rc = kl_nvrtc_compile(src, src_len, arch, 0, &c, r.why, sizeof r.why);
    memcpy(r.key, c.key, sizeof r.key);
    r.cubin_size = c.cubin_size;
    r.compile_ms = c.compile_ms;
    size_t loglen = c.log ? strlen(c.log) : 0;
    /* One frame: reply struct, cubin, log. */
    uint8_t *body = malloc(r.cubin_size + loglen + 1);
    if (body) {
      if (r.cubin_size) memcpy(body, c.cubin, r.cubin_size);
      if (loglen) memcpy(body + r.cubin_size, c.log, loglen);
    }
    int sent = body ? sbx_send(SBX_FD_OUT, SBX_MSG_COMPILED, &r, sizeof r,
                               body, r.cubin_size + loglen)
                    : -1;
    free(body);
    kl_compiled_free(&c);
    free(msg);
    if (sent != 0) return 1;
  }
}

static void stack_loaded_profile(void *ctx) {
  (void)ctx;
  char why[256];
  if (sbx_confine(SBX_RUN_CPU_EMU_LOADED, NULL, SBX_FD_OUT, why, sizeof why) <
      0)
    _exit(3); /* refusing to run unconfined */
}

static int run_worker(void) {
  /* Work that does not depend on the job happens before READY, while the
   * previous candidate is still being checked: the C++ runtime every
   * emulated module links, and the emulator's threads (the filter is
   * synchronised to them when it comes). */
  sbx_enter_namespaces(); /* while still single-threaded */
  dlopen("libstdc++.so.6", RTLD_NOW | RTLD_GLOBAL);
  long cores = sysconf(_SC_NPROCESSORS_ONLN);
  kl_emu_pool_start(cores > 0 ? (int)cores : 1);
  if (sbx_send(SBX_FD_OUT, SBX_MSG_READY, NULL, 0, NULL, 0) != 0) return 1;
  int type;
  uint8_t *msg;
  size_t len;
  if (sbx_recv(SBX_FD_IN, &type, &msg, &len, sizeof(kl_run_job), 1e18) != 0)
    return 1;
  if (type != SBX_MSG_RUN || len != sizeof(kl_run_job)) return 1;
  kl_run_job job;
  memcpy(&job, msg, sizeof job);
  free(msg);
  job.so_path[sizeof job.so_path - 1] = 0;
  if (job.n_shapes < 0 || job.n_shapes > KL_MAX_SHAPES ||
      job.n_timed_sets < 0 || job.n_timed_sets > KL_MAX_TIMED_SETS)
    return 1;
  size_t offs[KL_MAX_SHAPES + KL_MAX_TIMED_SETS + 2];
  size_t n_outs = kl_run_output_layout(&job, offs);
  float *outs = malloc(sizeof(float) * (n_outs ? n_outs : 1));
  kl_run_report *rep = calloc(1, sizeof *rep);
  if (!outs || !rep) return 1;
  sbx_run_reply reply = {0, n_outs};
  char why[256];
  reply.confinement =
      sbx_confine(SBX_RUN_CPU_EMU, NULL, SBX_FD_OUT, why, sizeof why);
  if (reply.confinement < 0) {
    snprintf(rep->why, sizeof rep->why, "sandbox: %s", why);
    rep->failed = 1;
  } else {
    kl_run_execute(&job, rep, outs, stack_loaded_profile, NULL);
  }
  /* Reply: sbx_run_reply, kl_run_report, outputs. */
  size_t body = sizeof *rep + n_outs * sizeof(float);
  uint8_t *buf = malloc(body);
  if (!buf) return 1;
  memcpy(buf, rep, sizeof *rep);
  memcpy(buf + sizeof *rep, outs, n_outs * sizeof(float));
  int rc = sbx_send(SBX_FD_OUT, SBX_MSG_RAN, &reply, sizeof reply, buf, body);
  /* The candidate's threads and state die with the process; exit without
   * running its destructors. */
  syscall(SYS_exit_group, rc == 0 ? 0 : 1);
  return 1;
}

static int host_compile_worker(int argc, char **argv) {
  int i = 0;
  while (i < argc && strcmp(argv[i], "--") != 0) i++;
  if (i + 1 >= argc) {
    fprintf(stderr, "kernlab host-compile worker: no command after --\n");
    return 2;
  }
  char why[256];
  if (sbx_confine(SBX_HOST_COMPILE, NULL, -1, why, sizeof why) < 0) {
    fprintf(stderr, "kernlab host-compile worker: %s\n", why);
    return 3;
  }
  execvp(argv[i + 1], argv + i + 1);
  fprintf(stderr, "kernlab host-compile worker: cannot run %s: %s\n",
          argv[i + 1], strerror(errno));
  return 127;
}

int sbx_worker_main(int argc, char **argv) {
  /* argv: __worker MODE PPID [-- command...] */
  if (argc < 3) {
    fprintf(stderr, "kernlab __worker: internal command, started by the lab\n");
    return 2;
  }
  const char *mode = argv[1];
  die_with_parent((pid_t)atol(argv[2]));
  if (!strcmp(mode, "host-compile")) {
    /* stdout/stderr go to the compile log; nothing else is inherited. */
    close_other_fds(3);
    return host_compile_worker(argc - 3, argv + 3);
  }
  close_other_fds(SBX_FD_OUT + 1);
  signal(SIGPIPE, SIG_IGN);
  if (!strcmp(mode, "compile")) return compile_worker();
  if (!strcmp(mode, "run-cpu-emu")) return run_worker();
  fprintf(stderr, "kernlab __worker: unknown mode '%s'\n", mode);
  return 2;
}
