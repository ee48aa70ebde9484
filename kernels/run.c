/*
 * kernels/run.c — one run job on cpu-emu (kl_run_execute), and the default
 * place to run it: a forked child of the calling process.
 *
 * kl_run_execute is what a sandboxed run worker calls. Inputs are made here
 * from (seed, shape index), the same way the supervisor makes them for its
 * reference, so only the seed crosses the pipe. Outputs are poisoned before
 * every launch. A paced job's timed launches (the sandbox's) wait for the
 * driver (kernels/pace.c), which makes their inputs and checks them; an
 * unpaced job's are driven by this process with the same kl_pace, so
 * either way every timed launch has inputs of its own and is checked
 * before the next, and no timed output goes back.
 *
 * The fork executor (kl_run_forked) has no seccomp: it is for unit tests and
 * benches. `kernlab eval` always runs jobs in the sandbox's workers.
 */
#define _GNU_SOURCE
#include "kernels/kernels.h"

#include <errno.h>
#include <math.h>
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
  if (job->second_run && job->n_shapes > 0)
    total += (size_t)job->shapes[0].M * job->shapes[0].N;
  offs[job->n_shapes + 1] = total;
  return total;
}

/* ---- guarded buffers: a canary band on each side ---- */

void kl_canary_fill(float *band) {
  const uint32_t bits = KL_CANARY_BITS;
  for (size_t i = 0; i < KL_CANARY_FLOATS; i++)
    memcpy(&band[i], &bits, 4);
}

int kl_canary_intact(const float *band) {
  for (size_t i = 0; i < KL_CANARY_FLOATS; i++) {
    uint32_t bits;
    memcpy(&bits, &band[i], 4);
    if (bits != KL_CANARY_BITS) return 0;
  }
  return 1;
}

static float *guarded_alloc(size_t n) {
  float *p = malloc(sizeof(float) * (n + 2 * KL_CANARY_FLOATS));
  if (!p) return NULL;
  kl_canary_fill(p);
  kl_canary_fill(p + KL_CANARY_FLOATS + n);
  return p + KL_CANARY_FLOATS;
}

static int guard_intact(const float *p, size_t n) {
  return kl_canary_intact(p - KL_CANARY_FLOATS) && kl_canary_intact(p + n);
}

static void guarded_free(float *p) {
  if (p) free(p - KL_CANARY_FLOATS);
}

/* The inputs' checksum, taken after every launch: four independent lanes
 * of xor-multiply over 8-byte words (each step a bijection of the lane, so
 * any changed word changes its lane), about a tenth of a byte-wise FNV's
 * cost. It runs between timed launches, where the supervisor's clock
 * counts it too (kernels/check.c's timing guard), so it must stay small
 * next to a launch. */
static uint64_t checksum(const float *p, size_t n) {
  const uint64_t K = 0x9e3779b97f4a7c15ull; /* odd */
  uint64_t h[4] = {1, 2, 3, 4};
  const unsigned char *b = (const unsigned char *)p;
  size_t bytes = n * sizeof(float), i = 0;
  for (; i + 32 <= bytes; i += 32)
    for (int l = 0; l < 4; l++) {
      uint64_t w;
      memcpy(&w, b + i + 8 * l, 8);
      h[l] = (h[l] ^ w) * K;
    }
  for (; i < bytes; i++)
    h[0] = (h[0] ^ b[i]) * K;
  return (h[0] ^ (h[1] * 3) ^ (h[2] * 5) ^ (h[3] * 7)) + bytes;
}

/* One shape's buffers, inputs made from (seed, stream pair). */
typedef struct buffers {
  kl_shape sh;
  float *A, *B, *C;
  uint64_t sum_a, sum_b;
} buffers;

static int buffers_make(buffers *b, const kl_run_job *job, kl_shape sh,
                        uint64_t stream) {
  memset(b, 0, sizeof *b);
  b->sh = sh;
  size_t na = (size_t)sh.M * sh.K, nb = (size_t)sh.K * sh.N,
         nc = (size_t)sh.M * sh.N;
  b->A = guarded_alloc(na);
  b->B = guarded_alloc(nb);
  b->C = guarded_alloc(nc);
  if (!b->A || !b->B || !b->C) return -1;
  kl_fill_random(b->A, na, job->seed, stream);
  kl_fill_random(b->B, nb, job->seed, stream + 1);
  b->sum_a = checksum(b->A, na);
  b->sum_b = checksum(b->B, nb);
  return 0;
}

static void buffers_free(buffers *b) {
  guarded_free(b->A);
  guarded_free(b->B);
  guarded_free(b->C);
}

/* One launch on b (poisoned first), then the guards and input checksums.
 * Returns the launch's wall time in microseconds, or -1 on failure. */
static double launch(kl_emu_module *m, buffers *b, const kl_run_job *job,
                     kl_run_report *rep) {
  kl_shape sh = b->sh;
  size_t na = (size_t)sh.M * sh.K, nb = (size_t)sh.K * sh.N,
         nc = (size_t)sh.M * sh.N;
  kl_poison(b->C, nc);
  double t0 = now_us();
  int rc = kl_emu_run(m, b->A, b->B, b->C, sh.M, sh.N, sh.K, job->threads,
                      rep->why, sizeof rep->why);
  double dt = now_us() - t0;
  rep->launch_us += dt;
  if (rc != KL_OK) {
    rep->failed = 1;
    rep->deadlock = strstr(rep->why, "deadlock") != NULL;
    return -1;
  }
  if (!guard_intact(b->A, na) || !guard_intact(b->B, nb) ||
      !guard_intact(b->C, nc))
    kl_report_flag_at(rep, KL_FLAG_CANARY_OVERWRITTEN,
                      "a write outside A, B or C", sh);
  if (checksum(b->A, na) != b->sum_a || checksum(b->B, nb) != b->sum_b)
    kl_report_flag_at(rep, KL_FLAG_INPUT_MUTATED, "A or B changed", sh);
  return dt;
}

/* The rerun's scaled inputs in b (kl_scaled_inputs, kernels/check.c: a
 * memo of the first run's output, kept anywhere in this process, does not
 * see the same inputs again), and their checksums (launch()). */
static void scale_buffers(kl_scaled *ss, buffers *b, uint64_t seed,
                          uint64_t launch_no) {
  kl_scaled_inputs(ss, b->A, b->B, seed, launch_no);
  b->sum_a = checksum(b->A, (size_t)b->sh.M * b->sh.K);
  b->sum_b = checksum(b->B, (size_t)b->sh.K * b->sh.N);
}

/* One batch of timed launches: launch i on set i of the paced region;
 * KL_OK, or the first launch's failure (rep->why says it). */
static int run_batch(kl_emu_module *m, const kl_run_job *job, float *region,
                     int k, kl_run_report *rep) {
  kl_shape sh = job->timed_shape;
  int rc = KL_OK;
  for (int i = 0; i < k && rc == KL_OK; i++) {
    float *A, *B, *C;
    kl_pace_buffers(sh, region, i, &A, &B, &C);
    rc = kl_emu_run(m, A, B, C, sh.M, sh.N, sh.K, job->threads, rep->why,
                    sizeof rep->why);
  }
  return rc;
}

/* A paced job's timed launches (kl_pace drives them from outside this
 * process), in batches of k the driver chose: launch i of a batch on set
 * i of the region, as the driver left it; the claim is the batch's time
 * over k. The
 * driver checks guards, inputs and output itself; the runner's samples
 * are only its claim (kernels/check.c holds them to the driver's). */
static void paced_runs(kl_emu_module *m, const kl_run_job *job,
                       kl_run_report *rep, float *region,
                       const kl_run_hooks *hooks) {
  if (!hooks->go || !hooks->done) {
    snprintf(rep->why, sizeof rep->why,
             "a paced job needs a driver (kl_run_hooks go and done)");
    rep->failed = 1;
    return;
  }
  kl_shape sh = job->timed_shape;
  for (;;) {
    int k = 0;
    int n = hooks->go(hooks->ctx, &k);
    if (n < 0) return;
    if (k < 1 || k > kl_pace_sets(sh)) {
      snprintf(rep->why, sizeof rep->why,
               "the driver asked for a batch of %d launches; 1 to %d were "
               "expected at %dx%dx%d",
               k, kl_pace_sets(sh), sh.M, sh.N, sh.K);
      rep->failed = 1;
      hooks->done(hooks->ctx, 0);
      return;
    }
    double t0 = now_us();
    int rc = run_batch(m, job, region, k, rep);
    double dt = now_us() - t0;
    rep->launch_us += dt;
    if (rc != KL_OK) {
      rep->failed = 1;
      rep->deadlock = strstr(rep->why, "deadlock") != NULL;
      hooks->done(hooks->ctx, 0);
      return;
    }
    if (n > 0 && rep->samples < KL_MAX_TIMING_SAMPLES)
      rep->sample_us[rep->samples++] = dt / k;
    hooks->done(hooks->ctx, 1);
  }
}

/* Unpaced timing (kl_run_forked and in-process runs: no sandbox, nobody
 * outside to drive it): this process drives its own launches with
 * kl_pace, as the supervisor drives a sandboxed runner's, so every timed
 * launch has fresh inputs from a secret seed and is checked before the
 * next, on either side of the sandbox. Go runs the launch at once; done
 * says how it went. It trusts the candidate, which runs in this process
 * and could reach the driver's state: the sandbox is what does not. */
typedef struct self_pace {
  kl_emu_module *m;
  const kl_run_job *job;
  kl_run_report *rep;
  float *region;
  int ok;
} self_pace;

static int self_go(void *ctx, int n, int k) {
  self_pace *p = ctx;
  if (n < 0) return 0;
  double t0 = now_us();
  int rc = run_batch(p->m, p->job, p->region, k, p->rep);
  p->rep->launch_us += now_us() - t0;
  p->ok = rc == KL_OK;
  if (!p->ok) {
    p->rep->failed = 1;
    p->rep->deadlock = strstr(p->rep->why, "deadlock") != NULL;
  }
  return 0;
}

static int self_done(void *ctx) {
  return ((self_pace *)ctx)->ok;
}

static void self_paced_runs(kl_emu_module *m, const kl_run_job *job,
                            kl_run_report *rep) {
  self_pace p = {m, job, rep, NULL, 0};
  kl_pace_result *res = malloc(sizeof *res);
  p.region = malloc(sizeof(float) * kl_pace_region_floats(job->timed_shape));
  if (!res || !p.region) {
    free(res);
    free(p.region);
    snprintf(rep->why, sizeof rep->why, "out of memory for timing");
    rep->failed = 1;
    return;
  }
  kl_pace_io io = {&p, self_go, self_done};
  kl_pace(job, p.region, &io, res);
  if (res->ended == -2 && !rep->failed) {
    snprintf(rep->why, sizeof rep->why, "out of memory for timing");
    rep->failed = 1;
  }
  rep->samples = res->samples;
  rep->timed_launches = res->launches;
  memcpy(rep->sample_us, res->sample_us, sizeof(double) * (size_t)res->samples);
  kl_report_flags(rep, res->flags, res->flag_detail);
  free(res);
  free(p.region);
}

void kl_run_execute(const kl_run_job *job, kl_run_report *rep, float *outs,
                    const kl_run_hooks *hooks) {
  static const kl_run_hooks none = {NULL, NULL, NULL, NULL};
  if (!hooks) hooks = &none;
  kl_emu_module *m = NULL;
  /* Threads first: once the candidate is loaded, the sandbox may forbid
   * starting any. */
  kl_emu_pool_start(job->threads);
  if (kl_emu_load(job->so_path, job->needs_fibers, hooks->after_load,
                  hooks->ctx, &m, rep->why, sizeof rep->why) != KL_OK) {
    rep->failed = 1;
    return;
  }
  rep->launch = *kl_emu_geometry(m);
  rep->has_launch = 1;
  if (kl_launch_validate(&rep->launch, rep->why, sizeof rep->why) != KL_OK) {
    rep->failed = 1;
    return;
  }
  size_t offs[KL_OUT_SLOTS];
  size_t n_outs = kl_run_output_layout(job, offs);
  /* Checks: every shape on fresh inputs; shape 0 twice when asked. */
  for (int s = 0; s < job->n_shapes; s++) {
    buffers b;
    kl_shape sh = job->shapes[s];
    size_t nc = (size_t)sh.M * sh.N;
    if (buffers_make(&b, job, sh, 2 * (uint64_t)s) != 0) {
      snprintf(rep->why, sizeof rep->why, "out of memory for inputs");
      rep->failed = 1;
      buffers_free(&b);
      return;
    }
    int ok = launch(m, &b, job, rep) >= 0;
    if (ok) memcpy(outs + offs[s], b.C, nc * sizeof(float));
    if (ok && s == 0 && job->second_run) {
      /* the same inputs with every block's threads in the other order: a
       * race (a missing barrier) that the first order hid shows here */
      /* ... and scaled (kl_scaled_inputs), so a memo cannot hand back the
       * first run's output instead */
      kl_scaled ss;
      ok = kl_scaled_init(&ss, b.A, b.B, sh) == 0;
      if (!ok) {
        snprintf(rep->why, sizeof rep->why, "out of memory for inputs");
        rep->failed = 1;
      }
      if (ok) scale_buffers(&ss, &b, job->seed, KL_SCALED_RERUN);
      kl_emu_set_reverse(m, 1, job->seed);
      ok = ok && launch(m, &b, job, rep) >= 0;
      kl_emu_set_reverse(m, 0, 0);
      if (ok) kl_scaled_output(&ss, b.C);
      kl_scaled_free(&ss);
      if (ok) memcpy(outs + offs[job->n_shapes], b.C, nc * sizeof(float));
    }
    buffers_free(&b);
    if (!ok) return;
  }
  if (job->timed && job->paced) {
    paced_runs(m, job, rep, outs + n_outs, hooks);
    if (rep->failed) return;
  }
  if (job->timed && !job->paced) {
    self_paced_runs(m, job, rep);
    if (rep->failed) return;
  }
  rep->done = 1;
  /* The module stays loaded: the process ends after the job. */
}

/* ---- the default executor: a forked child, no sandbox ---- */

int kl_run_in_fork(void (*body)(void *arg, kl_run_report *rep, float *outs),
                   void *arg, double deadline_s, const char *what,
                   kl_run_report *rep, float *outs, size_t n_outs,
                   kl_result *out) {
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
    body(arg, shared, shared_outs);
    _exit(0);
  }
  int status = 0, complete = 0;
  if (pid < 0) {
    snprintf(out->status, sizeof out->status, "error");
    snprintf(out->error, sizeof out->error, "fork: %s", strerror(errno));
    munmap(map, len);
    return 0;
  }
  double deadline = now_us() + deadline_s * 1e6;
  for (;;) {
    pid_t r = waitpid(pid, &status, WNOHANG);
    if (r == pid || (r < 0 && errno != EINTR)) break;
    if (now_us() > deadline) {
      kill(-pid, SIGKILL);
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      snprintf(out->status, sizeof out->status, "timeout");
      snprintf(out->error, sizeof out->error,
               "%s did not finish within the %g s deadline", what, deadline_s);
      munmap(map, len);
      return 0;
    }
    usleep(1000);
  }
  *rep = *shared;
  memcpy(outs, shared_outs, n_outs * sizeof(float));
  if (WIFSIGNALED(status)) {
    const char *name = sigabbrev_np(WTERMSIG(status));
    snprintf(out->status, sizeof out->status, "crashed:SIG%s",
             name ? name : "?");
    snprintf(out->error, sizeof out->error, "%s crashed (%s)", what,
             strsignal(WTERMSIG(status)));
  } else if (!rep->done && !rep->failed) {
    snprintf(out->status, sizeof out->status, "crashed:exit");
    snprintf(out->error, sizeof out->error,
             "%s ended the process (exit status %d)", what,
             WIFEXITED(status) ? WEXITSTATUS(status) : -1);
  } else {
    complete = 1;
  }
  munmap(map, len);
  return complete;
}

static void emu_body(void *arg, kl_run_report *rep, float *outs) {
  kl_run_execute(arg, rep, outs, NULL);
}

int kl_run_forked(void *ctx, const kl_run_job *job, kl_run_report *rep,
                  float *outs, size_t n_outs, kl_result *out) {
  (void)ctx;
  return kl_run_in_fork(emu_body, (void *)job, job->deadline_s, "the kernel",
                        rep, outs, n_outs, out);
}
