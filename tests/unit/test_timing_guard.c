/*
 * tests/unit/test_timing_guard.c — kernels/check.c holds a cpu-emu run's
 * claimed timing samples to a clock outside the candidate's process: the
 * supervisor's, between the runner's timing marks (kl_run_hooks, the MARK
 * frames of sandbox/supervisor.c). Here an executor plays the supervisor:
 * it runs the job with kl_run_execute in a forked child, stamps the marks
 * into timed_wall_us, and, as a candidate that rewrote the runner's memory
 * would, may then shrink the samples.
 *
 *   - honest samples: no implausible_speed flag;
 *   - samples cut to a tenth: implausible_speed, the detail naming the
 *     supervisor's clock;
 *   - one NaN sample: implausible_speed;
 *   - no marks (timed_wall_us 0, as an executor that measures nothing):
 *     no flag, whatever the samples say.
 */
#include "kernels/kernels.h"
#include "tests/unit/kltest.h"

#include <math.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

static const char kernel[] =
    "KL_LAUNCH(16, 16, 16, 16, 0);\n"
    "extern \"C\" __global__ void matmul(const float* A, const float* B, "
    "float* C, int M, int N, int K) {\n"
    "  int r = blockIdx.y * 16 + threadIdx.y, c = blockIdx.x * 16 + "
    "threadIdx.x;\n"
    "  if (r >= M || c >= N) return;\n"
    "  float acc = 0.0f;\n"
    "  for (int k = 0; k < K; k++) acc += A[r * K + k] * B[k * N + c];\n"
    "  C[r * N + c] = acc;\n"
    "}\n";

enum { HONEST, TENTH, NAN_SAMPLE, NO_MARKS };

static double now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

/* The runner, in a forked child (kl_run_in_fork: the emulator's threads
 * stay out of this process); its marks are stamped into the shared report
 * as the supervisor would stamp them. */
typedef struct marks {
  kl_run_report *rep;
  const kl_run_job *job;
  double t0;
} marks;

static void on_mark(void *ctx, int phase) {
  marks *m = ctx;
  if (phase == 0) m->t0 = now_us();
  if (phase == 1 && m->t0 > 0) m->rep->timed_wall_us = now_us() - m->t0;
}

static void runner(void *arg, kl_run_report *rep, float *outs) {
  marks m = {rep, arg, 0};
  kl_run_hooks hooks = {NULL, on_mark, &m};
  kl_run_execute(m.job, rep, outs, &hooks);
}

static int run_here(void *ctx, const kl_run_job *job, kl_run_report *rep,
                    float *outs, size_t n_outs, kl_result *out) {
  int mode = *(int *)ctx;
  if (!kl_run_in_fork(runner, (void *)job, job->deadline_s, "the kernel", rep,
                      outs, n_outs, out))
    return 0;
  if (mode == NO_MARKS) rep->timed_wall_us = 0;
  /* the forger's part: the runner's samples rewritten */
  for (int i = 0; i < rep->samples; i++) {
    if (mode == TENTH || mode == NO_MARKS) rep->sample_us[i] /= 10;
    if (mode == NAN_SAMPLE && i == 0) rep->sample_us[i] = NAN;
  }
  return 1;
}

static uint64_t eval(int mode, kl_result *r) {
  kl_executor ex = {&mode, NULL, run_here, NULL};
  kl_eval_options o;
  kl_eval_defaults(&o);
  o.backend = "cpu-emu";
  o.exec = &ex;
  /* 128^3 with the naive kernel: a couple of ms per emulated launch, so the
   * timed runs last well over the check's 5 ms floor */
  o.shapes[0] = (kl_shape){128, 128, 128};
  o.n_shapes = 1;
  o.seed = 11;
  o.threads = 1;
  o.max_samples = 10;
  o.time_budget_ms = 100;
  kl_eval_source("guard.cu", kernel, strlen(kernel), &o, r);
  return r->flags & ((uint64_t)1 << KL_FLAG_IMPLAUSIBLE_SPEED);
}

int main(void) {
  static kl_result r;
  uint64_t flagged = eval(HONEST, &r);
  CHECK(r.correct && r.samples >= 5, "honest: %s %s (%d samples)", r.status,
        r.error, r.samples);
  CHECK(!flagged, "honest samples flagged: %s", r.flag_detail);
  printf("test_timing_guard: honest: %d samples, median %.0f us\n", r.samples,
         r.time_us);
  flagged = eval(TENTH, &r);
  CHECK(flagged && strstr(r.flag_detail, "supervisor's clock"),
        "samples cut to a tenth not flagged (%s; %d samples, median %.1f us)",
        r.flag_detail, r.samples, r.time_us);
  printf("test_timing_guard: a tenth: %s\n", r.flag_detail);
  flagged = eval(NAN_SAMPLE, &r);
  CHECK(flagged, "a NaN sample not flagged: %s", r.flag_detail);
  flagged = eval(NO_MARKS, &r);
  CHECK(!flagged, "flagged without the supervisor's clock: %s", r.flag_detail);
  return kl_test_done("test_timing_guard");
}
