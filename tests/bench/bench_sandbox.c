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
 * speed is noise here), with their quartiles —, the pacing gap (what the
 * supervisor's clock adds to a timed launch: the frames to and from the
 * runner, per launch and per go, whose ratio is the launches a batch
 * shares it by, kl_pace) and the time to start a worker until it says
 * READY (respawn time).
 *
 * Then what a worker's start-up does to the timings: the same candidate on
 * all cores, as a campaign of one job runs it, through a slot that starts
 * the next run worker once the current one has replied (the default) and,
 * as the named baseline in the same run, through one that starts it while
 * the candidate runs (sbx_limits.overlap_workers), the two alternating.
 * Each evaluation is followed by an idle pause standing for the next
 * candidate's compile, so that one slot's start-up does not land in the
 * other's evaluation. Prints, for each, the medians over the evaluations of
 * the candidate's timing spread (the samples' p80/p20 and max/median, and
 * their coefficient of variation) and of its median time; a start-up in
 * the timed window shows as a wider spread.
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

/* The sandboxed executor seen from outside: after each run, the median
 * of what the supervisor's clock adds to the runner's own per timed
 * launch (the frames to and from the runner, waking each, over the
 * launches of a batch), read before the evaluation replaces the runner's
 * samples by the supervisor's; and the launches per sample. */
typedef struct gap_exec {
  kl_executor inner;
  double gap_us, per_sample;
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
  g->per_sample = n > 0 ? (double)rep->timed_launches / n : 0;
  return rc;
}

/* The timing spread of evaluations through a slot whose next run worker
 * starts after the reply (clean) or while the candidate runs (overlap),
 * alternating; see the header. 0, or -1 if an evaluation was not correct. */
static int start_up_spread(const char *path, const char *src, size_t len,
                           kl_eval_options *opts, int repeats, kl_result *r) {
  sbx_limits lim[2] = {{60, 60, 0}, {60, 60, 1}};
  const char *name[2] = {"next worker started after the reply (default)",
                         "baseline: started while the candidate runs"};
  sbx_slot *slot[2];
  kl_executor ex[2];
  double p[2][100], mx[2][100], cv[2][100], med[2][100];
  opts->threads = 0; /* all cores */
  for (int m = 0; m < 2; m++) {
    slot[m] = sbx_slot_new(&lim[m]);
    sbx_slot_executor(slot[m], &ex[m]);
    opts->exec = &ex[m];
    kl_eval_source(path, src, len, opts, r); /* warm */
    usleep(150000);
  }
  for (int i = 0; i < repeats; i++)
    for (int m = 0; m < 2; m++) {
      opts->exec = &ex[m];
      kl_eval_source(path, src, len, opts, r);
      if (!r->correct || r->time_us <= 0) {
        fprintf(stderr, "bench_sandbox: %s: not correct or not timed: %s %s\n",
                name[m], r->status, r->error);
        return -1;
      }
      p[m][i] = r->time_p80_us / r->time_p20_us;
      mx[m][i] = r->time_max_us / r->time_us;
      cv[m][i] = r->time_cv;
      med[m][i] = r->time_us;
      usleep(150000); /* the next candidate's compile */
    }
  printf("worker start-up and the timings, %d evaluations each on all cores, "
         "alternating, medians over them:\n",
         repeats);
  double c[2];
  for (int m = 0; m < 2; m++) {
    c[m] = bench_median(cv[m], repeats);
    printf("  %-48s p80/p20 %.3f  max/median %.3f  cv %.3f  median %.1f us\n",
           name[m], bench_median(p[m], repeats), bench_median(mx[m], repeats),
           c[m], bench_median(med[m], repeats));
    sbx_slot_free(slot[m]);
  }
  printf("timing spread (cv) started after the reply vs while the candidate "
         "runs: %.2fx\n",
         c[0] / c[1]);
  return 0;
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
  gap_exec g;
  sbx_slot_executor(slot, &g.inner);
  kl_executor sandboxed = g.inner,
              local = {NULL, NULL, run_in_process, NULL, 0};
  sandboxed.ctx = &g;
  sandboxed.run = run_gap;
  kl_result *r = malloc(sizeof *r);
  double t_sbx[100], t_local[100], h_sbx[100], h_local[100], gap[100],
      per_sample[100];
  /* Warm both paths (caches, the compile worker, the first run worker). */
  opts.exec = &sandboxed;
  kl_eval_source(path, src, len, &opts, r);
  opts.exec = &local;
  kl_eval_source(path, src, len, &opts, r);
  for (int i = 0; i < repeats; i++) {
    opts.exec = &sandboxed;
    double t0 = now_ms();
    kl_eval_source(path, src, len, &opts, r);
    t_sbx[i] = now_ms() - t0;
    /* Harness time: the evaluation less the time inside the kernel's
     * launches (checks, warm-up, timed runs), so that the kernel's speed,
     * noisy on a shared machine, cancels out. */
    h_sbx[i] = t_sbx[i] - r->launch_ms;
    gap[i] = g.gap_us;
    per_sample[i] = g.per_sample;
    if (!r->correct) {
      fprintf(stderr, "bench_sandbox: sandboxed run not correct: %s %s\n",
              r->status, r->error);
      return 1;
    }
    /* The slot starts its next run worker once this one has replied: an
     * idle pause, standing for the next candidate's compile, keeps that
     * start-up out of the baseline's evaluation. */
    usleep(150000);
    opts.exec = &local;
    t0 = now_ms();
    kl_eval_source(path, src, len, &opts, r);
    t_local[i] = now_ms() - t0 - copy_ms;
    h_local[i] = t_local[i] - r->launch_ms;
    if (!r->correct) {
      fprintf(stderr, "bench_sandbox: in-process run not correct: %s %s\n",
              r->status, r->error);
      return 1;
    }
  }
  double spawn[20];
  for (int i = 0; i < 20; i++)
    spawn[i] = sbx_measure_spawn_ms("run-cpu-emu");
  /* The overhead is the median of the paired differences (sandboxed minus
   * in-process, the two evaluations of one iteration run back to back), so
   * that load which comes and goes on a shared machine hits both sides of
   * a pair; the quartiles of those differences show the spread. */
  double d[100];
  for (int i = 0; i < repeats; i++)
    d[i] = h_sbx[i] - h_local[i];
  double dmed = bench_median(d, repeats); /* sorts d */
  double dq1 = d[repeats / 4], dq3 = d[(3 * repeats) / 4];
  double s = bench_median(t_sbx, repeats), l = bench_median(t_local, repeats);
  double hs = bench_median(h_sbx, repeats), hl = bench_median(h_local, repeats);
  printf("05_blocktile_2d at %d^3, cached, median of %d evaluations\n", n,
         repeats);
  printf("  baseline: in-process evaluation       %9.2f ms\n", l);
  printf("  sandboxed (pooled workers)            %9.2f ms\n", s);
  printf("  harness time (evaluation less the kernel's launches): "
         "in-process %.2f ms, sandboxed %.2f ms\n",
         hl, hs);
  printf("sandbox overhead: %+.2f ms = %+.2f%% of an emulated evaluation "
         "(goal <= 2%%; median of %d paired differences, quartiles %+.2f%% "
         "and %+.2f%%)\n",
         dmed, 100.0 * dmed / l, repeats, 100.0 * dq1 / l, 100.0 * dq3 / l);
  printf("  (whole evaluations differ by %+.2f%%, kernel-speed noise "
         "included)\n",
         100.0 * (s - l) / l);
  /* What the sandbox adds to each timed launch: the supervisor's clock
   * spans the frames to and from the runner, the runner's only its
   * launches; short launches share one go in batches (kl_pace), the
   * named baseline being the gap of a go itself. */
  double gm = bench_median(gap, repeats), k = bench_median(per_sample, repeats);
  printf("pacing gap (the supervisor's sample less the runner's own, median "
         "of %d): %.1f us per timed launch, %.1f us per go of %.3g launches "
         "(%.3gx)\n",
         repeats, gm, gm * k, k, k);
  printf("run-worker respawn (spawn to READY), median of 20: %.2f ms\n",
         bench_median(spawn, 20));
  sbx_slot_free(slot);
  if (start_up_spread(path, src, len, &opts, repeats, r) != 0) return 1;
  free(r);
  free(src);
  return 0;
}
