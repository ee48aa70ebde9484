/*
 * sandbox/sandbox_internal.h — what the sandbox's own files share: the frame
 * protocol, worker spawning, and the worker side. Not for other modules.
 */
#ifndef SANDBOX_SANDBOX_INTERNAL_H
#define SANDBOX_SANDBOX_INTERNAL_H

#include "sandbox/sandbox.h"

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* 2: CRC-32C frames; 3: MARK; 4: PACE; 5: no timed input sets; 6: PACE
 * n k (batches); 7: READY carries the confinement */
#define SBX_PROTOCOL_VERSION 7

/* Message types. */
enum {
  SBX_MSG_READY = 1,    /* worker -> lab: initialised and confined; int32
                           confinement (sbx_confine's level, 0 none) */
  SBX_MSG_COMPILE = 2,  /* lab -> compile worker: arch NUL source */
  SBX_MSG_COMPILED = 3, /* reply: sbx_compile_reply, cubin, log */
  SBX_MSG_RUN = 4,      /* lab -> run worker: kl_run_job */
  SBX_MSG_RAN = 5,      /* reply: sbx_run_reply, outputs */
  SBX_MSG_TRAP = 6,     /* worker -> lab: int32 syscall number, then death */
  SBX_MSG_PACE = 7,     /* lab -> run-cpu-emu: int32 n, int32 k: batch n
                           of a paced job's timed runs (0 the warm-up), k
                           launches; n -1 stop */
  SBX_MSG_MM_LOAD = 8,  /* lab -> matmul-cpu-emu: sbx_mm_load */
  SBX_MSG_MM_GO = 9,    /* lab -> matmul-cpu-emu: int32 M, N, K */
  SBX_MSG_MM_DONE = 10, /* reply to either: sbx_mm_reply */
  SBX_MSG_PACED = 11,   /* run-cpu-emu -> lab: int32 1 launch n ran, 0 it
                           failed (then RAN says why) */
};

/* sbx_recv results besides 0. */
enum { SBX_EOF = -1, SBX_TIMEOUT = -2, SBX_EBAD = -3 };

/* The worker's end of the pipes, and (run-cpu-emu) the outputs' memfd. */
#define SBX_FD_IN 3
#define SBX_FD_OUT 4
#define SBX_FD_OUTS 5

typedef struct sbx_compile_reply {
  int32_t rc; /* KL_OK, KL_ECOMPILE, KL_EOOM, KL_EINPUT, KL_EENV */
  char why[512];
  char key[65];
  uint64_t cubin_size; /* bytes of cubin after this struct, then the log */
  double compile_ms;
} sbx_compile_reply;

/* The RAN reply: this struct, then kl_run_report; run-gpu sends the
 * outputs after them, run-cpu-emu leaves them in its SBX_FD_OUTS memfd,
 * with their CRC-32C here. */
typedef struct sbx_run_reply {
  int32_t confinement; /* 2 seccomp+rlimits+namespaces, 1 without ns */
  uint32_t outs_crc;   /* run-cpu-emu: CRC-32C of the memfd's outputs */
  uint64_t n_outs;     /* floats of output */
} sbx_run_reply;

/* The matmul-cpu-emu worker's requests and replies (sandbox/matmul.c). */
typedef struct sbx_mm_load {
  char so_path[512];
  int32_t needs_fibers, threads;
} sbx_mm_load;

typedef struct sbx_mm_reply {
  int32_t rc; /* KL_OK, or KL_EINPUT with why */
  char why[320];
} sbx_mm_reply;

/* The matmul worker's memfd for one M, N, K: A, B and C with a canary band
 * of KL_CANARY_FLOATS floats before, between and after them, as the
 * harness guards its buffers (kernels/run.c), so that a write outside C
 * shows. Fills off[] with A's, B's and C's offsets in floats; returns the
 * floats in all. */
static inline size_t sbx_mm_layout(int M, int N, int K, size_t off[3]) {
  size_t at = KL_CANARY_FLOATS;
  off[0] = at, at += (size_t)M * K + KL_CANARY_FLOATS;
  off[1] = at, at += (size_t)K * N + KL_CANARY_FLOATS;
  off[2] = at, at += (size_t)M * N + KL_CANARY_FLOATS;
  return at;
}

/* CRC-32C of data continuing from crc (0 to start): with the SSE4.2
 * instruction where the CPU has it, tables otherwise; the same value. */
uint32_t sbx_crc32c(uint32_t crc, const void *data, size_t len);
uint32_t sbx_crc32c_portable(uint32_t crc, const void *data, size_t len);
int sbx_crc32c_has_hw(void);
double sbx_now_ms(void);
/* The process's peak address space (VmPeak), read from fd (an open
 * /proc/self/status, rewound here: a confined worker cannot open it) or,
 * with fd -1, from a fresh open. 0 when it cannot be read. */
unsigned long long sbx_vm_peak_bytes(int fd);
/* Sends one frame whose payload is a then b. Returns 0 or -1. */
int sbx_send(int fd, int type, const void *a, size_t alen, const void *b,
             size_t blen);
/* Receives one frame of at most max_len payload bytes before deadline_ms
 * (absolute, sbx_now_ms). Returns 0 (payload malloc'd, caller frees),
 * SBX_EOF, SBX_TIMEOUT or SBX_EBAD. */
int sbx_recv(int fd, int *type, uint8_t **payload, size_t *len, size_t max_len,
             double deadline_ms);
/* Async-signal-safe: a TRAP frame with the syscall number. */
void sbx_send_trap(int fd, int syscall_nr);

/* A worker process as the supervisor sees it. */
typedef struct sbx_worker {
  pid_t pid;
  int pidfd; /* -1 where pidfd_open is unavailable */
  int to;    /* lab -> worker */
  int from;  /* worker -> lab */
  int outs;  /* run-cpu-emu, matmul-cpu-emu: its memfd; -1 otherwise */
  int up;
  long maxrss_kb; /* peak resident memory, once reaped */
  /* What its READY said it is confined by (0 none, 1 seccomp + rlimits, 2
   * also namespaces). READY comes before any candidate text reaches the
   * worker, so this is the worker's word, not the candidate's, and known
   * even when the candidate then hangs or crashes. */
  int confinement;
} sbx_worker;

/* How a worker that did not reply ended, as a status (crashed:<signal>,
 * killed:seccomp:unknown, crashed:exit) in out; `what` names it in the
 * message. */
struct kl_result;
void sbx_status_from_wait(int st, const char *what, struct kl_result *out);

/* Starts `kernlab __worker MODE` (this executable, re-exec'd). */
int sbx_spawn(sbx_worker *w, const char *mode, char *why, size_t whylen);
/* The kernel's Landlock ABI version, or 0 without Landlock. */
int sbx_landlock_abi(void);
/* Limits what this process and the programs it execs may open
 * (sandbox/landlock.c): read and execute the toolchain (/usr, /lib*, /bin,
 * /sbin, the loader's cache, the prefix of `compiler` as found on PATH),
 * read and write /dev/null, anything inside build_dir; nothing else.
 * Returns the ABI version enforced, 0 if the kernel has no Landlock (why
 * says so; nothing was changed), or -1 with why. */
int sbx_landlock_toolchain(const char *build_dir, const char *compiler,
                           char *why, size_t whylen);

/* Prints the rule for a run worker's environment (--explain): the
 * allowlist of a native (cpu-emu) worker, or the GPU worker's denylist. */
void sbx_explain_env(FILE *out, int native);
/* SIGKILL to the worker's process group (through the pidfd where there is
 * one), reap it, close its pipes. Returns its wait status. */
int sbx_kill(sbx_worker *w);
/* Reaps a worker that is exiting by itself, waiting at most timeout_ms, then
 * kills it. Returns its wait status. */
int sbx_reap(sbx_worker *w, double timeout_ms);
/* Waits for the worker's READY, setting w->confinement from it; 0, or -1
 * with why (the worker is then killed and reaped). */
int sbx_await_ready(sbx_worker *w, double timeout_ms, char *why, size_t whylen);
/* The confinement a READY payload states: 0 for a malformed one or a level
 * out of range (a worker that could not confine says -1). */
int sbx_ready_confinement(const uint8_t *msg, size_t len);
/* Sends READY stating `confinement` (sbx_confine's return). Returns 0 or -1. */
int sbx_send_ready(int fd, int confinement);

/* A run worker's outputs travel in its memfd (w->outs), not in the reply.
 * sbx_outs_size gives it the job's n_outs floats, sealed: the worker can
 * neither grow it (write is allowed on any descriptor it holds) nor shrink
 * it under the supervisor's mapping. sbx_outs_take copies them into outs
 * and holds them to the reply's count and checksum: what is verified is
 * exactly what the worker vouched for when it replied, even if a thread
 * of the candidate still writes to the memfd while its process exits.
 * Both return 0, or -1 with out->status/error set and the worker killed
 * (`what` names it in the message). */
int sbx_outs_size(sbx_worker *w, size_t n_outs, struct kl_result *out);
int sbx_outs_take(sbx_worker *w, float *outs, size_t n_outs,
                  const sbx_run_reply *reply, const char *what,
                  struct kl_result *out);

#endif
