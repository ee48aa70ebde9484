/*
 * tests/bench/bench_sandbox.c — what the sandbox costs per candidate.
 *
 * The same cached candidate (kernels/seeds/05_blocktile_2d.cu) is evaluated
 * with kl_eval_source twice over: through a sandbox slot (NVRTC in the
 * compile worker — a cache hit —, the run in a fresh pre-started run worker
 * behind seccomp), and, as the named baseline measured in the same run,
 * in-process (NVRTC cache lookup here, the run job executed in this very
 * process, no fork, no filter), the two back to back in each iteration.
 * Prints the median of each, the overhead as a percentage of the in-process
 * evaluation (goal <= 2%) — the median of the paired differences of harness
 * time (the evaluation less the time inside the kernel's launches, whose
 * speed is noise here), with their quartiles — and the time to start a worker
 * until it says READY (respawn time).
 *
 * usage: bench_sandbox [SOURCE_DIR] [REPEATS (default 25)] [SIZE (default 256,
 * the default target)]
 */
#include "bench_util.h"
#include "kernels/kernels.h"
#include "sandbox/sandbox.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static double now_ms(void) {
  return bench_now_s() * 1e3;
}

/* The time the last in-process run spent copying the module (taken off
 * the baseline's harness time below). */
static double copy_ms;

/* Copies the file at from to a new file at to; 0 on success. */
static int copy_file(const char *from, const char *to) {
  FILE *in = fopen(from, "rb"), *out = in ? fopen(to, "wb") : NULL;
  char buf[1 << 16];
  size_t n;
  int rc = in && out ? 0 : -1;
  while (rc == 0 && (n = fread(buf, 1, sizeof buf, in)) > 0)
    if (fwrite(buf, 1, n, out) != n) rc = -1;
  if (in && ferror(in)) rc = -1;
  if (in) fclose(in);
  if (out && fclose(out) != 0) rc = -1;
  return rc;
}

/* The baseline executor: the job runs right here. A module loads once per
 * process (kl_emu_load), so each run loads its own copy of the file. */
static int run_in_process(void *ctx, const kl_run_job *job, kl_run_report *rep,
                          float *outs, size_t n_outs, kl_result *out) {
  (void)ctx;
  (void)n_outs;
  static int runs;
  double t0 = now_ms();
  kl_run_job j = *job;
  snprintf(j.so_path, sizeof j.so_path, "/tmp/kl-bench-sandbox-%d-%d.so",
           (int)getpid(), runs++);
  if (copy_file(job->so_path, j.so_path) != 0) {
    snprintf(out->status, sizeof out->status, "error");
    snprintf(out->error, sizeof out->error, "cannot copy %.400s to %.80s",
             job->so_path, j.so_path);
    return 0;
  }
  copy_ms = now_ms() - t0;
  memset(rep, 0, sizeof *rep);
  kl_run_execute(&j, rep, outs, NULL);
  unlink(j.so_path); /* the mapping stays */
  return 1;
}

/* A sandboxed executor seen from outside: after each run, the median of
 * what the supervisor's clock adds to the runner's own for one timed
 * launch (frames to and from the runner, waking each), read before the
 * evaluation replaces the runner's samples by the supervisor's. */
typedef struct gap_exec {
  kl_executor inner;
  double gap_us;
} gap_exec;

static int run_gap(void *ctx, const kl_run_job *job, kl_run_report *rep,
                   float *outs, size_t n_outs, kl_result *out) {
  gap_exec *g = ctx;
  int rc = g->inner.run(g->inner.ctx, job, rep, outs, n_outs, out);
  double d[KL_MAX_TIMING_SAMPLES];
  int n = rep->paced_samples < rep->samples ? rep->paced_samples : rep->samples;
  for (int i = 0; i < n; i++)
    d[i] = rep->paced_us[i] - rep->sample_us[i];
  g->gap_us = n > 0 ? bench_median(d, n) : -1;
  return rc;
}

int main(int argc, char **argv) {
  if (argc > 1 && !strcmp(argv[1], "__worker"))
    return sbx_worker_main(argc - 1, argv + 1);
  const char *dir = argc > 1 ? argv[1] : getenv("KL_SOURCE_DIR");
  if (!dir) dir = KL_DEFAULT_SOURCE_DIR;
  int repeats = argc > 2 ? atoi(argv[2]) : 25;
  if (repeats < 1 || repeats > 100) repeats = 25;
  char path[1024], why[600];
  snprintf(path, sizeof path, "%s/kernels/seeds/05_blocktile_2d.cu", dir);
  char *src;
  size_t len;
  if (kl_source_load(path, &src, &len, why, sizeof why) != KL_OK) {
    fprintf(stderr, "bench_sandbox: %s\n", why);
    return 1;
  }
  kl_emu_set_launcher(sbx_host_compile_launcher());
  kl_eval_options opts;
  kl_eval_defaults(&opts);
  int n = argc > 3 ? atoi(argv[3]) : 256; /* the default target */
  if (n < 1 || n > 2048) n = 256;
  opts.shapes[0] = (kl_shape){n, n, n};
  opts.n_shapes = 1;
  opts.seed = 1;
  opts.threads = 1;

  sbx_slot *slot = sbx_slot_new(NULL);
  sbx_limits asleep = {60, 60, 1};
  sbx_slot *slot_asleep = sbx_slot_new(&asleep);
  gap_exec g[2];
  sbx_slot_executor(slot, &g[0].inner);
  sbx_slot_executor(slot_asleep, &g[1].inner);
  kl_executor sandboxed = g[0].inner, sandboxed_asleep = g[1].inner,
              local = {NULL, NULL, run_in_process, NULL, 0};
  sandboxed.ctx = &g[0];
  sandboxed.run = run_gap;
  sandboxed_asleep.ctx = &g[1];
  sandboxed_asleep.run = run_gap;
  kl_result *r = malloc(sizeof *r);
  /* per path (0 sandboxed, 1 sandboxed waiting asleep, 2 in-process): the
   * evaluation, its harness time, and (sandboxed) the pacing gap */
  double t[3][100], h[3][100], gap[2][100];
  kl_executor *via[3] = {&sandboxed, &sandboxed_asleep, &local};
  const char *name[3] = {"sandboxed", "sandboxed, waits asleep", "in-process"};
  /* Warm every path (caches, the compile workers, the first run workers). */
  for (int p = 0; p < 3; p++) {
    opts.exec = via[p];
    kl_eval_source(path, src, len, &opts, r);
  }
  for (int i = 0; i < repeats; i++) {
    for (int p = 0; p < 3; p++) {
      opts.exec = via[p];
      double t0 = now_ms();
      kl_eval_source(path, src, len, &opts, r);
      t[p][i] = now_ms() - t0 - (p == 2 ? copy_ms : 0);
      /* Harness time: the evaluation less the time inside the kernel's
       * launches (checks, warm-up, timed runs), so that the kernel's
       * speed, noisy on a shared machine, cancels out. */
      h[p][i] = t[p][i] - r->launch_ms;
      if (p < 2) gap[p][i] = g[p].gap_us;
      if (!r->correct) {
        fprintf(stderr, "bench_sandbox: %s run not correct: %s %s\n", name[p],
                r->status, r->error);
        return 1;
      }
    }
  }
  double spawn[20];
  for (int i = 0; i < 20; i++)
    spawn[i] = sbx_measure_spawn_ms("run-cpu-emu");
  /* The overhead is the median of the paired differences (sandboxed minus
   * in-process, the evaluations of one iteration run back to back), so
   * that load which comes and goes on a shared machine hits both sides of
   * a pair; the quartiles of those differences show the spread. */
  double l = bench_median(t[2], repeats);
  printf("05_blocktile_2d at %d^3, cached, median of %d evaluations\n", n,
         repeats);
  printf("  baseline: in-process evaluation       %9.2f ms\n", l);
  for (int p = 0; p < 2; p++)
    printf("  %-36s  %9.2f ms\n", name[p], bench_median(t[p], repeats));
  printf("  harness time (evaluation less the kernel's launches): "
         "in-process %.2f ms, sandboxed %.2f ms, waiting asleep %.2f ms\n",
         bench_median(h[2], repeats), bench_median(h[0], repeats),
         bench_median(h[1], repeats));
  double d[100], over[2], q1[2], q3[2];
  for (int p = 0; p < 2; p++) {
    for (int i = 0; i < repeats; i++)
      d[i] = h[p][i] - h[2][i];
    over[p] = bench_median(d, repeats); /* sorts d */
    q1[p] = d[repeats / 4];
    q3[p] = d[(3 * repeats) / 4];
  }
  printf("sandbox overhead: %+.2f ms = %+.2f%% of an emulated evaluation "
         "(goal <= 2%%; median of %d paired differences, quartiles %+.2f%% "
         "and %+.2f%%); waiting asleep: %+.2f%%\n",
         over[0], 100.0 * over[0] / l, repeats, 100.0 * q1[0] / l,
         100.0 * q3[0] / l, 100.0 * over[1] / l);
  printf("  (whole evaluations differ by %+.2f%%, kernel-speed noise "
         "included)\n",
         100.0 * (bench_median(t[0], repeats) - l) / l);
  /* What the sandbox adds to each timed sample: the supervisor's clock
   * spans the frames to and from the runner; the runner's spans only the
   * launch. The baseline: both sides waiting asleep. */
  printf("pacing gap per timed launch (driver's sample less the runner's "
         "own, median of %d runs' medians): %.1f us, waiting asleep %.1f us "
         "(%.2fx)\n",
         repeats, bench_median(gap[0], repeats), bench_median(gap[1], repeats),
         bench_median(gap[1], repeats) / bench_median(gap[0], repeats));
  printf("run-worker respawn (spawn to READY), median of 20: %.2f ms\n",
         bench_median(spawn, 20));
  sbx_slot_free(slot);
  sbx_slot_free(slot_asleep);
  free(r);
  free(src);
  return 0;
}
