/*
 * sandbox/sandbox.h — the one public header of the sandbox module.
 *
 * Confines processes that touch candidate code. Every compile and run of
 * `kernlab eval` (and of campaigns) happens in a worker: this executable
 * re-exec'd as `kernlab __worker MODE` (fork+exec, never a bare fork: the
 * lab makes no CUDA call, and CUDA must not cross a fork), talking framed,
 * checksummed, versioned messages over pipes (sandbox/ipc.c).
 *
 *   compile       NVRTC, warmed up, then seccomp `compile`; persistent
 *   host-compile  the host C++ compiler under rlimits and namespaces
 *   run-cpu-emu   one job per process: `run-cpu-emu`, the candidate loaded,
 *                 then `run-cpu-emu-loaded` stacked (no files, no threads)
 *   matmul-cpu-emu  as run-cpu-emu, but one module serving many GEMMs
 *                 (--policy-matmul on the CPU; sbx_matmul below)
 *   run-gpu       CUDA initialised, then `run-gpu` with TSYNC (or record
 *                 mode: KERNLAB_GPU_SECCOMP=record lists the syscalls seen)
 *
 * A profile is data: a readable table of syscalls with an action and the
 * reason, plus rlimits, printed by `kernlab sandbox --explain` and installed
 * with libseccomp. Syscalls outside a profile's allowlist trap: the SIGSYS
 * handler reports the syscall number (a TRAP frame to the supervisor) and
 * ends the process, so the supervisor can say `killed:seccomp:<syscall>`.
 * The supervisor (sandbox/supervisor.c) holds the clock: deadlines, SIGKILL
 * through a pidfd and to the process group, PR_SET_PDEATHSIG in every
 * worker, respawn; a slot (one per evaluation thread) keeps a warm compile
 * worker and a pre-started run worker.
 *
 * Prefix: sbx_.
 */
#ifndef SANDBOX_SANDBOX_H
#define SANDBOX_SANDBOX_H

#include <stddef.h>
#include <stdio.h>

#include "kernels/kernels.h"

typedef enum sbx_profile_id {
  SBX_COMPILE = 0,  /* NVRTC on untrusted text, after a warm-up */
  SBX_HOST_COMPILE, /* the host C++ compiler for cpu-emu: rlimits only */
  SBX_RUN_CPU_EMU,  /* native candidate code; the dynamic loader allowed */
  SBX_RUN_CPU_EMU_LOADED, /* added after dlopen: no more opening files */
  SBX_RUN_GPU,            /* CUDA initialised first; measured on one H200 */
  SBX_PROFILE_COUNT
} sbx_profile_id;

/* RLIMIT_AS of the run-cpu-emu profile. */
#define SBX_RUN_MEMORY_LIMIT (2ull << 30)
/* RLIMIT_CPU of a run worker (the run-cpu-emu and run-gpu profiles): CPU
 * seconds over its life. */
#define SBX_RUN_CPU_LIMIT_S 600
/* RLIMIT_AS of the compile and host-compile workers. */
#define SBX_COMPILE_MEMORY_LIMIT (4ull << 30)

/* Exit status a confined process ends with after a trapped syscall. */
#define SBX_TRAP_EXIT 97

/* Confines the calling process (and threads it starts later): namespaces
 * where the kernel allows (user + net), rlimits, then the seccomp filter.
 * A forbidden syscall is reported through trap_slot (shared memory) if not
 * NULL and as a TRAP frame on trap_fd if >= 0, then the process exits with
 * SBX_TRAP_EXIT. Returns 2 (with namespaces), 1 (seccomp + rlimits only)
 * or -1 with why filled. Profiles stack: a second call only adds limits. */
int sbx_confine(sbx_profile_id id, volatile int *trap_slot, int trap_fd,
                char *why, size_t whylen);

/* Enters user + network namespaces now, once (later calls and sbx_confine
 * reuse the outcome). Call before starting threads. Returns 1 if entered. */
int sbx_enter_namespaces(void);

/* Name of syscall number nr on this architecture ("openat"), or "?". */
const char *sbx_syscall_name(int nr);

/* Prints every profile: its allowlist with reasons, what it denies and why,
 * its rlimits. With pfc, also the compiled filter in libseccomp's
 * pseudo-filter-code form. Returns 0, or -1 if a filter could not be
 * built. */
int sbx_explain(FILE *out, int pfc);

/* Time to start a worker of `mode` until it reports READY (ms), or -1. */
double sbx_measure_spawn_ms(const char *mode);

/* Entry of `kernlab __worker MODE ...`. Workers re-exec the running
 * executable, so every program that uses sbx_slot or sbx_matmul must start
 * with `if (argc > 1 && !strcmp(argv[1], "__worker")) return
 * sbx_worker_main(argc - 1, argv + 1);`. (modes: compile, run-cpu-emu,
 * matmul-cpu-emu, run-gpu, host-compile). Never returns for host-compile
 * (it execs the compiler). */
int sbx_worker_main(int argc, char **argv);

/* ---- the supervisor side ---- */

typedef struct sbx_limits {
  double compile_deadline_s;      /* NVRTC per candidate (default 60) */
  double host_compile_deadline_s; /* g++ per candidate (default 60) */
  /* 0 (the default): a slot's next run worker starts once the current one
   * has replied, and a job starts only after the workers that replied
   * before it have exited, so that no start-up (exec, emulator threads,
   * stacks and heap faulted in: ~50 ms of CPU here) or teardown of this
   * slot shares the cores with a candidate's checks and timed launches.
   * 1: the next worker starts as soon as the current one has its job and
   * exits are reaped later, as kernlab did before (up to one start-up
   * sooner when the next compile is a cache hit; bench_sandbox measures
   * both). */
  int overlap_workers;
} sbx_limits;

/* One evaluation slot: a warm compile worker and a pre-started run worker,
 * used by one thread at a time. A worker a candidate kills is respawned. */
typedef struct sbx_slot sbx_slot;
sbx_slot *sbx_slot_new(const sbx_limits *limits);
void sbx_slot_free(sbx_slot *s);
/* Fills ex so that kl_eval_source compiles and runs through this slot. */
void sbx_slot_executor(sbx_slot *s, kl_executor *ex);
/* Workers started by this process so far (for the respawn bench/tests). */
int sbx_spawn_count(void);

/* kl_executor.run_gpu through the sandbox (sandbox/gpu_exec.c): a fresh
 * `run-gpu` worker per job (CUDA initialised, then confined), the cubin in
 * the RUN frame, the job's deadline plus 60 s for CUDA's start. ctx is
 * unused (a slot, or NULL). Statuses as the cpu-emu run: timeout,
 * killed:seccomp:<name>, crashed:<signal>; a CUDA fault comes back in
 * rep->gpu.status with rep->failed. */
int sbx_run_gpu(void *ctx, const kl_run_job *job, const uint8_t *cubin,
                size_t cubin_size, kl_run_report *rep, float *outs,
                size_t n_outs, kl_result *out);

/* One candidate kernel behind many GEMMs (sandbox/matmul.c; the lab's
 * --policy-matmul on the CPU): a `matmul-cpu-emu` worker, confined as a
 * run worker (`run-cpu-emu`, then `run-cpu-emu-loaded` once so_path, a
 * kl_emu_compile output, is loaded), serving C = A·B (row-major,
 * contiguous, NN) one request at a time on `threads` emulator threads,
 * each under deadline_s. open: KL_OK, KL_EINPUT (the module does not load
 * or has no valid geometry) or KL_EENV, with why. run: KL_OK, KL_EINPUT
 * (the kernel failed, trapped, crashed or timed out: the worker is gone
 * and every later call fails the same way) or KL_EENV, with why. Calls
 * are serialised; close from the thread that opened (a worker dies with
 * the thread that started it). */
typedef struct sbx_matmul sbx_matmul;
int sbx_matmul_open(const char *so_path, int needs_fibers, int threads,
                    double deadline_s, sbx_matmul **out, char *why,
                    size_t whylen);
int sbx_matmul_run(sbx_matmul *s, const float *A, const float *B, float *C,
                   int M, int N, int K, char *why, size_t whylen);
void sbx_matmul_close(sbx_matmul *s);
/* The worker's CPU seconds after which the next request starts a fresh
 * worker (the module loaded again) instead: by default half of
 * SBX_RUN_CPU_LIMIT_S, which the worker's whole life is held to. Returns
 * how many fresh workers the server has started since its open. */
void sbx_matmul_set_recycle(sbx_matmul *s, double cpu_s);
int sbx_matmul_restarts(const sbx_matmul *s);

/* argv prefix that runs the host compiler under the host-compile profile
 * (for kl_emu_set_launcher). */
const char *const *sbx_host_compile_launcher(void);

#endif
