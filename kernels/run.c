/*
 * kernels/run.c — one run job on cpu-emu (kl_run_execute), and the default
 * place to run it: a forked child of the calling process.
 *
 * kl_run_execute is what a sandboxed run worker calls. Inputs are made here
 * from (seed, shape index), the same way the supervisor makes them for its
 * reference, so only the seed crosses the pipe. Outputs are poisoned before
 * every launch; the timed runs use their own output buffer, and its last
 * content goes back so the supervisor can verify the timed run too.
 *
 * The fork executor (kl_run_forked) has no seccomp: it is for unit tests and
 * benches. `kernlab eval` always runs jobs in the sandbox's workers.
 */
#define _GNU_SOURCE
#include "kernels/kernels.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

size_t kl_run_output_layout(const kl_run_job *job, size_t *offs) {
  size_t total = 0;
  for (int s = 0; s < job->n_shapes; s++) {
    offs[s] = total;
    total += (size_t)job->shapes[s].M * job->shapes[s].N;
  }
  offs[job->n_shapes] = total;
  if (job->timed)
    total += (size_t)job->timed_shape.M * job->timed_shape.N;
  offs[job->n_shapes + 1] = total;
  return total;
}

/* Inputs of one shape, stream ids 2s and 2s+1 (the supervisor's reference
 * uses the same). */
static int make_inputs(const kl_run_job *job, kl_shape sh, int s, float **A,
                       float **B) {
  *A = malloc(sizeof(float) * (size_t)sh.M * sh.K);
  *B = malloc(sizeof(float) * (size_t)sh.K * sh.N);
  if (!*A || !*B) return -1;
  kl_fill_random(*A, (size_t)sh.M * sh.K, job->seed, 2 * (uint64_t)s);
  kl_fill_random(*B, (size_t)sh.K * sh.N, job->seed, 2 * (uint64_t)s + 1);
  return 0;
}

void kl_run_execute(const kl_run_job *job, kl_run_report *rep, float *outs,
                    void (*after_load)(void *), void *ctx) {
  kl_emu_module *m = NULL;
  /* Threads first: once the candidate is loaded, the sandbox may forbid
   * starting any. */
  kl_emu_pool_start(job->threads);
  if (kl_emu_load(job->so_path, job->needs_fibers, &m, rep->why,
                  sizeof rep->why) != KL_OK) {
    rep->failed = 1;
    return;
  }
  if (after_load) after_load(ctx);
  rep->launch = *kl_emu_geometry(m);
  rep->has_launch = 1;
  if (kl_launch_validate(&rep->launch, rep->why, sizeof rep->why) != KL_OK) {
    rep->failed = 1;
    return;
  }
  size_t offs[KL_MAX_SHAPES + 2];
  kl_run_output_layout(job, offs);
  for (int s = 0; s < job->n_shapes; s++) {
    kl_shape sh = job->shapes[s];
    float *A, *B, *C = outs + offs[s];
    if (make_inputs(job, sh, s, &A, &B) != 0) {
      snprintf(rep->why, sizeof rep->why, "out of memory for inputs");
      rep->failed = 1;
      return;
    }
    kl_poison(C, (size_t)sh.M * sh.N);
    int rc = kl_emu_run(m, A, B, C, sh.M, sh.N, sh.K, job->threads, rep->why,
                        sizeof rep->why);
    free(A);
    free(B);
    if (rc != KL_OK) {
      rep->failed = 1;
      rep->deadlock = strstr(rep->why, "deadlock") != NULL;
      return;
    }
  }
  if (job->timed) {
    kl_shape sh = job->timed_shape;
    float *A, *B, *C = outs + offs[job->n_shapes];
    /* The timed shape is shape 0 when there are checks, else its own. */
    if (make_inputs(job, sh, 0, &A, &B) != 0) {
      snprintf(rep->why, sizeof rep->why, "out of memory for inputs");
      rep->failed = 1;
      return;
    }
    double total = 0;
    for (int i = -1; i < job->max_samples && i < KL_MAX_TIMING_SAMPLES; i++) {
      kl_poison(C, (size_t)sh.M * sh.N);
      double t0 = now_us();
      int rc = kl_emu_run(m, A, B, C, sh.M, sh.N, sh.K, job->threads,
                          rep->why, sizeof rep->why);
      double dt = now_us() - t0;
      if (rc != KL_OK) {
        rep->failed = 1;
        rep->deadlock = strstr(rep->why, "deadlock") != NULL;
        break;
      }
      if (i < 0) continue; /* warm-up */
      rep->sample_us[rep->samples++] = dt;
      total += dt;
      if (rep->samples >= 5 && total >= job->time_budget_ms * 1e3) break;
    }
    free(A);
    free(B);
    if (rep->failed) return;
  }
  rep->done = 1;
  /* The module stays loaded: the process ends after the job. */
}

/* ---- the default executor: a forked child, no sandbox ---- */

int kl_run_forked(void *ctx, const kl_run_job *job, kl_run_report *rep,
                  float *outs, size_t n_outs, kl_result *out) {
  (void)ctx;
  size_t len = sizeof(kl_run_report) + n_outs * sizeof(float);
  void *map = mmap(NULL, len, PROT_READ | PROT_WRITE,
                   MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (map == MAP_FAILED) {
    snprintf(out->status, sizeof out->status, "error");
    snprintf(out->error, sizeof out->error, "cannot map %zu bytes", len);
    return 0;
  }
  kl_run_report *shared = map;
  memset(shared, 0, sizeof *shared);
  float *shared_outs = (float *)(shared + 1);
  fflush(NULL);
  pid_t pid = fork();
  if (pid == 0) {
    setpgid(0, 0);
    kl_run_execute(job, shared, shared_outs, NULL, NULL);
    _exit(0);
  }
  int status = 0, complete = 0;
  if (pid < 0) {
    snprintf(out->status, sizeof out->status, "error");
    snprintf(out->error, sizeof out->error, "fork: %s", strerror(errno));
  } else {
    double deadline = now_us() + job->deadline_s * 1e6;
    for (;;) {
      pid_t r = waitpid(pid, &status, WNOHANG);
      if (r == pid || (r < 0 && errno != EINTR)) break;
      if (now_us() > deadline) {
        kill(-pid, SIGKILL);
        kill(pid, SIGKILL);
        waitpid(pid, &status, 0);
        snprintf(out->status, sizeof out->status, "timeout");
        snprintf(out->error, sizeof out->error,
                 "runs did not finish within the %.0f s deadline",
                 job->deadline_s);
        goto unmap;
      }
      usleep(1000);
    }
    *rep = *shared;
    memcpy(outs, shared_outs, n_outs * sizeof(float));
    if (WIFSIGNALED(status)) {
      const char *name = sigabbrev_np(WTERMSIG(status));
      snprintf(out->status, sizeof out->status, "crashed:SIG%s",
               name ? name : "?");
      snprintf(out->error, sizeof out->error, "the kernel crashed (%s)",
               strsignal(WTERMSIG(status)));
    } else if (!rep->done && !rep->failed) {
      snprintf(out->status, sizeof out->status, "crashed:exit");
      snprintf(out->error, sizeof out->error,
               "the kernel ended the process (exit status %d)",
               WIFEXITED(status) ? WEXITSTATUS(status) : -1);
    } else {
      complete = 1;
    }
  }
unmap:
  munmap(map, len);
  return complete;
}
