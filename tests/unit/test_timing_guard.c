/*
 * tests/unit/test_timing_guard.c — paced timing (kernels/pace.c) and what
 * kernels/check.c makes of it. Here an executor plays the supervisor: it
 * forks a runner (kl_run_execute with go/done hooks on two pipes), drives
 * its timed launches with kl_pace on shared memory, and merges what it
 * saw into the report. In some modes it then plays a candidate that
 * reached into its runner: rewriting the runner's samples, or, inside the
 * runner before it answers a launch, spoiling C, A or a canary.
 *
 *   - honest: correct, no implausible_speed, and the time is the median of
 *     the driver's samples;
 *   - the runner's samples moved into the first, one added, one NaN:
 *     implausible_speed, and the time still the driver's;
 *   - cut to a tenth: no flag (claims below the driver's interval are what
 *     a busy machine gives short launches) and the time the driver's;
 *   - an executor that does not pace (no driver to hold claims to): no
 *     flag, whatever the samples say;
 *   - one element of C left poisoned, all of C off by 1%, or by 1e-4
 *     (inside the element-wise bound, not the relative one), one row of C
 *     zero (named within the first launches: Freivalds' check usually
 *     finds it at once, a spot check sometimes; test_verify_launch holds
 *     Freivalds' check to it alone): the launch is wrong (timed_output_wrong,
 * correct false); A changed: input_mutated; a float past C: canary_overwritten.
 */
#define _GNU_SOURCE
#include "kernels/kernels.h"
#include "tests/unit/kltest.h"

#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

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

enum {
  HONEST,
  TENTH,
  INTO_FIRST,
  ONE_MORE,
  NAN_SAMPLE,
  UNPACED,
  POISON_ONE,
  WRONG_ALL,
  SLIGHTLY,
  ZERO_ROW,
  MUTATE_A,
  CANARY,
  /* only on a batch's last launch, when it has more than one */
  LAZY_IN_BATCH,
  MUTATE_IN_BATCH,
  CANARY_IN_BATCH,
};

/* the median of the driver's samples in the last paced run, its timed
 * launches and its largest batch */
static double driver_median;
static int driver_launches, driver_batch_max;

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* ---- the runner: a forked child ---- */

typedef struct runner {
  int mode, from_driver, to_driver;
  const kl_run_job *job;
  float *region;
  int k; /* the batch's launches */
} runner;

static int child_go(void *ctx, int *k) {
  runner *r = ctx;
  int32_t v[2];
  if (read(r->from_driver, v, sizeof v) != (ssize_t)sizeof v) return -1;
  *k = r->k = v[1];
  return v[0];
}

/* The candidate's part, after a timed batch and before the answer: on
 * its last launch's set (the only one when launches go alone). */
static void child_done(void *ctx, int ok) {
  runner *r = ctx;
  kl_shape sh = r->job->timed_shape;
  float *A, *B, *C;
  kl_pace_buffers(sh, r->region, r->k > 0 ? r->k - 1 : 0, &A, &B, &C);
  size_t nc = (size_t)sh.M * sh.N;
  uint32_t poison = KL_POISON_BITS;
  if (r->mode == POISON_ONE) memcpy(&C[nc / 2], &poison, 4);
  if (r->mode == WRONG_ALL)
    for (size_t i = 0; i < nc; i++)
      C[i] *= 1.01f;
  if (r->mode == SLIGHTLY) /* within the element-wise bound everywhere */
    for (size_t i = 0; i < nc; i++)
      C[i] *= 1.0f + 1e-4f;
  if (r->mode == ZERO_ROW) /* one row of 128: the spot checks may miss it */
    memset(C + (size_t)(sh.M / 3) * sh.N, 0, sizeof(float) * (size_t)sh.N);
  if (r->mode == MUTATE_A) A[7] += 1.0f;
  if (r->mode == CANARY) C[nc + 3] = 0.0f;
  if (r->k > 1 && r->mode == LAZY_IN_BATCH) memset(C, 0, sizeof(float) * nc);
  if (r->k > 1 && r->mode == MUTATE_IN_BATCH) B[5] *= -1.0f;
  if (r->k > 1 && r->mode == CANARY_IN_BATCH) A[-1] = 0.0f;
  int32_t v = ok;
  if (write(r->to_driver, &v, sizeof v) != (ssize_t)sizeof v) _exit(2);
}

/* ---- the driver's io ---- */

typedef struct driver {
  int to_runner, from_runner;
  double deadline_ms;
} driver;

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static int drive_go(void *ctx, int n, int k) {
  driver *d = ctx;
  int32_t v[2] = {n, k};
  return write(d->to_runner, v, sizeof v) == (ssize_t)sizeof v ? 0 : -1;
}

static int drive_done(void *ctx) {
  driver *d = ctx;
  struct pollfd p = {d->from_runner, POLLIN, 0};
  double left = d->deadline_ms - now_ms();
  if (left < 0 || poll(&p, 1, (int)left) != 1) return -1;
  int32_t v;
  if (read(d->from_runner, &v, sizeof v) != (ssize_t)sizeof v) return -1;
  return v == 1;
}

static int run_paced(int mode, const kl_run_job *job, kl_run_report *rep,
                     float *outs, size_t n_outs, kl_result *out) {
  size_t n_pace = kl_pace_floats(job);
  size_t bytes = sizeof(kl_run_report) + sizeof(float) * (n_outs + n_pace);
  void *map = mmap(NULL, bytes, PROT_READ | PROT_WRITE,
                   MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  int down[2], up[2];
  if (map == MAP_FAILED || pipe(down) || pipe(up)) {
    snprintf(out->status, sizeof out->status, "error");
    return 0;
  }
  kl_run_report *shared = map;
  float *shared_outs = (float *)(shared + 1);
  fflush(NULL);
  pid_t pid = fork();
  if (pid == 0) {
    close(down[1]);
    close(up[0]);
    runner r = {mode, down[0], up[1], job, shared_outs + n_outs, 0};
    kl_run_hooks hooks = {NULL, child_go, child_done, &r};
    kl_run_execute(job, shared, shared_outs, &hooks);
    _exit(0);
  }
  close(down[0]);
  close(up[1]);
  driver d = {down[1], up[0], now_ms() + job->deadline_s * 1e3};
  kl_pace_io io = {&d, drive_go, drive_done};
  static kl_pace_result res;
  kl_pace(job, shared_outs + n_outs, &io, &res);
  close(down[1]);
  close(up[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  *rep = *shared;
  memcpy(outs, shared_outs, sizeof(float) * n_outs);
  munmap(map, bytes);
  kl_pace_merge(rep, &res);
  double s[KL_MAX_TIMING_SAMPLES];
  memcpy(s, res.sample_us, sizeof(double) * (size_t)res.samples);
  qsort(s, (size_t)res.samples, sizeof(double), cmp_double);
  driver_launches = res.launches;
  driver_batch_max = res.batch_max;
  driver_median = res.samples == 0 ? -1
                  : res.samples % 2
                      ? s[res.samples / 2]
                      : 0.5 * (s[res.samples / 2 - 1] + s[res.samples / 2]);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 || res.ended < 0) {
    snprintf(out->status, sizeof out->status, "crashed:exit");
    snprintf(out->error, sizeof out->error, "runner ended %d, pacing %d",
             status, res.ended);
    return 0;
  }
  return 1;
}

static int run_here(void *ctx, const kl_run_job *job, kl_run_report *rep,
                    float *outs, size_t n_outs, kl_result *out) {
  int mode = *(int *)ctx;
  int ok = mode == UNPACED ? kl_run_forked(NULL, job, rep, outs, n_outs, out)
                           : run_paced(mode, job, rep, outs, n_outs, out);
  if (!ok) return 0;
  /* the forger's part: the runner's samples rewritten */
  double sum = 0;
  for (int i = 0; i < rep->samples; i++)
    sum += rep->sample_us[i];
  for (int i = 0; i < rep->samples; i++) {
    if (mode == TENTH || mode == UNPACED) rep->sample_us[i] /= 10;
    if (mode == INTO_FIRST) rep->sample_us[i] = i ? sum * 1e-3 : sum * 0.9;
    if (mode == NAN_SAMPLE && i == 0) rep->sample_us[i] = NAN;
  }
  if (mode == ONE_MORE && rep->samples < KL_MAX_TIMING_SAMPLES)
    rep->sample_us[rep->samples++] = 1;
  return 1;
}

static kl_result r;
static int size = 128; /* the timed shape's M, N and K */

static uint64_t eval(int mode) {
  kl_executor ex = {&mode, NULL, run_here, NULL, mode != UNPACED};
  kl_eval_options o;
  kl_eval_defaults(&o);
  o.backend = "cpu-emu";
  o.exec = &ex;
  /* 128^3 with the naive kernel: a couple of ms per emulated launch, so the
   * timed runs last well over the check's 5 ms floor, and each goes alone;
   * 32^3: a tenth of a ms, in batches */
  o.shapes[0] = (kl_shape){size, size, size};
  o.n_shapes = 1;
  o.seed = 11;
  o.threads = 1;
  o.max_samples = 10;
  o.time_budget_ms = 100;
  kl_eval_source("guard.cu", kernel, strlen(kernel), &o, &r);
  return r.flags;
}

#define BIT(f) ((uint64_t)1 << (f))

/* A runner that spoils its timed launches (a mode of child_done): the
 * flag it must raise, and whether the candidate is then wrong. */
typedef struct spoil {
  int mode;
  const char *name;
  int flag, wrong;
} spoil;

/* Short launches go in batches, and every launch of a batch is checked:
 * honest at 32^3, each sample is a batch's mean (more launches than
 * samples) and nothing is flagged; a runner that skips the work of a
 * batch's last launch, changes its B or writes before its A is caught,
 * and the detail names a launch past the first of a batch. */
static void test_batches(void) {
  size = 32;
  uint64_t f = eval(HONEST);
  CHECK(r.correct && !(f & KL_FLAGS_DYNAMIC) &&
            !(f & BIT(KL_FLAG_IMPLAUSIBLE_SPEED)),
        "honest at 32^3: %s %s %s", r.status, r.error, r.flag_detail);
  CHECK(driver_batch_max > 1 && driver_batch_max <= KL_PACE_MAX_BATCH &&
            driver_launches > r.samples,
        "32^3 launches are batched: %d timed launches in %d samples, at most "
        "%d per batch",
        driver_launches, r.samples, driver_batch_max);
  CHECK(r.time_us == driver_median && r.time_us > 0,
        "the time %.3f us is the driver's per-launch median %.3f", r.time_us,
        driver_median);
  printf("test_timing_guard: 32^3: %d launches in %d samples (at most %d "
         "per batch), %.1f us each\n",
         driver_launches, r.samples, driver_batch_max, r.time_us);
  static const spoil spoiled[] = {
      {LAZY_IN_BATCH, "a batch's last C zero", KL_FLAG_TIMED_OUTPUT_WRONG, 1},
      {MUTATE_IN_BATCH, "a batch's last B changed", KL_FLAG_INPUT_MUTATED, 0},
      {CANARY_IN_BATCH, "a write before a batch's last A",
       KL_FLAG_CANARY_OVERWRITTEN, 0}};
  for (size_t i = 0; i < sizeof spoiled / sizeof spoiled[0]; i++) {
    f = eval(spoiled[i].mode);
    int launch = -1;
    const char *at = strstr(r.flag_detail, "timed launch ");
    if (at) launch = atoi(at + strlen("timed launch "));
    CHECK((f & BIT(spoiled[i].flag)) && launch > 1,
          "%s: flag %d not raised on a launch past the first of a batch (%s)",
          spoiled[i].name, spoiled[i].flag, r.flag_detail);
    if (spoiled[i].wrong)
      CHECK(!r.correct, "%s: still correct (%s)", spoiled[i].name, r.error);
    printf("test_timing_guard: %s: %s\n", spoiled[i].name, r.flag_detail);
  }
  size = 128;
}

int main(void) {
  uint64_t f = eval(HONEST);
  CHECK(r.correct && r.samples >= 5, "honest: %s %s (%d samples)", r.status,
        r.error, r.samples);
  CHECK(!(f & BIT(KL_FLAG_IMPLAUSIBLE_SPEED)) && !(f & KL_FLAGS_DYNAMIC),
        "honest run flagged: %s", r.flag_detail);
  CHECK(r.time_us == driver_median, "time %.3f us is not the driver's %.3f",
        r.time_us, driver_median);
  printf("test_timing_guard: honest: %d samples, median %.0f us\n", r.samples,
         r.time_us);

  static const struct {
    int mode;
    const char *name, *says;
  } forged[] = {{INTO_FIRST, "moved into the first", "clock allows"},
                {ONE_MORE, "one added", "where its driver timed"},
                {NAN_SAMPLE, "a NaN", "clock allows"}};
  for (size_t i = 0; i < sizeof forged / sizeof forged[0]; i++) {
    f = eval(forged[i].mode);
    CHECK((f & BIT(KL_FLAG_IMPLAUSIBLE_SPEED)) &&
              strstr(r.flag_detail, forged[i].says),
          "samples %s: not flagged (%s)", forged[i].name, r.flag_detail);
    CHECK(r.correct && r.time_us == driver_median,
          "samples %s: time %.3f us is not the driver's %.3f", forged[i].name,
          r.time_us, driver_median);
    printf("test_timing_guard: %s: %s\n", forged[i].name, r.flag_detail);
  }

  f = eval(TENTH);
  CHECK(r.correct && !(f & BIT(KL_FLAG_IMPLAUSIBLE_SPEED)) &&
            r.time_us == driver_median,
        "samples cut to a tenth: flagged (%s) or time %.3f us is not the "
        "driver's %.3f",
        r.flag_detail, r.time_us, driver_median);

  f = eval(UNPACED);
  CHECK(r.correct && !(f & BIT(KL_FLAG_IMPLAUSIBLE_SPEED)),
        "flagged without a driver: %s", r.flag_detail);

  static const spoil spoiled[] = {
      {POISON_ONE, "one element poisoned", KL_FLAG_TIMED_OUTPUT_WRONG, 1},
      {WRONG_ALL, "C off by 1%", KL_FLAG_TIMED_OUTPUT_WRONG, 1},
      {SLIGHTLY, "C off by 1e-4", KL_FLAG_TIMED_OUTPUT_WRONG, 1},
      {ZERO_ROW, "one row of C zero", KL_FLAG_TIMED_OUTPUT_WRONG, 1},
      {MUTATE_A, "A changed", KL_FLAG_INPUT_MUTATED, 0},
      {CANARY, "a float past C", KL_FLAG_CANARY_OVERWRITTEN, 0}};
  for (size_t i = 0; i < sizeof spoiled / sizeof spoiled[0]; i++) {
    f = eval(spoiled[i].mode);
    CHECK(f & BIT(spoiled[i].flag), "%s: flag %d not raised (%s)",
          spoiled[i].name, spoiled[i].flag, r.flag_detail);
    if (spoiled[i].mode == ZERO_ROW) {
      /* Every row is checked on every launch, but Freivalds' one +-1
       * vector passes a wrong row whose (C x)_42 lands inside the bound
       * (a few percent of launches here: 2 in 30 runs missed launch 0),
       * and then a spot check may still hit row 42. So: row 42 named, by
       * either, within the first four launches (all missing: about 1e-5). */
      const char *at = strstr(r.flag_detail, "timed launch ");
      int launch = at ? atoi(at + strlen("timed launch ")) : -1;
      CHECK(launch >= 0 && launch <= 3 &&
                (strstr(r.flag_detail, "row 42 of C x") ||
                 strstr(r.flag_detail, "C[42][")),
            "one row of C zero: row 42 not found within 4 launches (%s)",
            r.flag_detail);
    }
    if (spoiled[i].wrong)
      CHECK(!r.correct && strstr(r.error, "timed run was wrong"),
            "%s: still correct (%s)", spoiled[i].name, r.error);
    printf("test_timing_guard: %s: %s\n", spoiled[i].name, r.flag_detail);
  }
  test_batches();
  return kl_test_done("test_timing_guard");
}
