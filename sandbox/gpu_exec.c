/*
 * sandbox/gpu_exec.c — the lab's side of a GPU run: sbx_run_gpu, the
 * kl_executor.run_gpu that starts a `run-gpu` worker (sandbox/worker.c),
 * hands it one job with the cubin, and holds the clock.
 *
 * One worker per job, started on demand: CUDA state cannot be reused after
 * a candidate faulted, and a context is cheap next to a 4096^3 timing run.
 * The outputs come back through a memfd of the job's size (the reply pipe
 * carries the report only), checked against the reply's checksum.
 * (Pre-starting the next worker while a result is checked, as the cpu-emu
 * slot does, is a later optimisation.) The deadline is the job's plus 60 s
 * for cuInit, the context, CUPTI and cuBLAS.
 */
#define _GNU_SOURCE
#include "sandbox/sandbox_internal.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#define GPU_START_MS 60000.0

int sbx_run_gpu(void *ctx, const kl_run_job *job, const uint8_t *cubin,
                size_t cubin_size, kl_run_report *rep, float *outs,
                size_t n_outs, kl_result *out) {
  (void)ctx;
  char why[512];
  double t0 = sbx_now_ms();
  sbx_worker w;
  if (sbx_spawn(&w, "run-gpu", why, sizeof why) != 0) {
    snprintf(out->status, sizeof out->status, "sandbox_error");
    snprintf(out->error, sizeof out->error, "%s", why);
    return 0;
  }
  int type;
  uint8_t *msg = NULL;
  size_t len;
  int rc = sbx_recv(w.from, &type, &msg, &len, 64, t0 + GPU_START_MS);
  if (rc == 0 && type == SBX_MSG_READY)
    w.confinement = sbx_ready_confinement(msg, len);
  free(msg);
  msg = NULL;
  if (rc != 0 || type != SBX_MSG_READY) {
    int st = rc == SBX_TIMEOUT ? sbx_kill(&w) : sbx_reap(&w, 1000);
    snprintf(out->status, sizeof out->status, "sandbox_error");
    snprintf(out->error, sizeof out->error,
             "the GPU run worker did not start (%s; exit status %d)",
             rc == SBX_TIMEOUT ? "no READY within 60 s" : "no READY",
             WIFEXITED(st) ? WEXITSTATUS(st) : -1);
    return 0;
  }
  /* From READY, so that a run that hangs or faults says it too. */
  out->confinement = w.confinement;
  /* the outputs' memfd, as the cpu-emu slot's (sbx_outs_size) */
  if (sbx_outs_size(&w, n_outs, out) != 0) return 0;
  if (sbx_send(w.to, SBX_MSG_RUN, job, sizeof *job, cubin,
               cubin ? cubin_size : 0) != 0) {
    sbx_status_from_wait(sbx_kill(&w), "the GPU run worker", out);
    return 0;
  }
  size_t want = sizeof(sbx_run_reply) + sizeof(kl_run_report);
  rc = sbx_recv(w.from, &type, &msg, &len, want,
                t0 + GPU_START_MS + job->deadline_s * 1e3);
  if (rc == SBX_TIMEOUT) {
    sbx_kill(&w);
    snprintf(out->status, sizeof out->status, "timeout");
    snprintf(out->error, sizeof out->error,
             "GPU runs did not finish within the %g s deadline (worker "
             "killed; a hung kernel dies with its context)",
             job->deadline_s);
    return 0;
  }
  if (rc == 0 && type == SBX_MSG_TRAP && len == 4) {
    int32_t nr;
    memcpy(&nr, msg, 4);
    free(msg);
    sbx_reap(&w, 1000);
    const char *name = sbx_syscall_name(nr);
    snprintf(out->status, sizeof out->status, "killed:seccomp:%s", name);
    snprintf(out->error, sizeof out->error,
             "the run-gpu sandbox stopped a forbidden system call: %s (number "
             "%d); if the driver made it, the profile needs measuring "
             "(KERNLAB_GPU_SECCOMP=record)",
             name, nr);
    return 0;
  }
  if (rc != 0 || type != SBX_MSG_RAN || len != want) {
    free(msg);
    sbx_status_from_wait(sbx_reap(&w, 1000), "the GPU run worker", out);
    return 0;
  }
  sbx_run_reply reply;
  memcpy(&reply, msg, sizeof reply);
  memcpy(rep, msg + sizeof reply, sizeof *rep);
  rep->why[sizeof rep->why - 1] = 0;
  rep->gpu.status[sizeof rep->gpu.status - 1] = 0;
  rep->gpu.device[sizeof rep->gpu.device - 1] = 0;
  rep->gpu.timer[sizeof rep->gpu.timer - 1] = 0;
  rep->gpu.timer_note[sizeof rep->gpu.timer_note - 1] = 0;
  if (rep->samples < 0 || rep->samples > KL_MAX_TIMING_SAMPLES)
    rep->samples = 0;
  free(msg);
  if (sbx_outs_take(&w, outs, n_outs, &reply, "the GPU run worker", out) != 0)
    return 0;
  sbx_reap(&w, 1000);
  return 1;
}
