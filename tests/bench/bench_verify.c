/*
 * tests/bench/bench_verify.c — what one timed launch costs the host on
 * the GPU path (kernels/gpu_run.c): fresh A and B (kl_fill_random_mt) and
 * the checks on its C (kl_verify_launch), split over the machine's cores,
 * against the same work on one thread, the named baseline, measured in
 * the same run. The device's kernel time is not in it: this is the
 * overhead each sample adds to a run's wall time, outside the samples.
 *
 * usage: bench_verify [SIZE (2048)] [REPEATS (5)] [THREADS (all cores)]
 */
#include "bench_util.h"
#include "kernels/kernels.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* One launch's host work on `threads` threads: fresh inputs drawn into
 * A2 and B2, then the checks of C against A and B (a product known
 * without a GEMM, whose checks cost what any honest one's do); the
 * verdict's flags. */
typedef struct bench_bufs {
  float *A, *B, *C, *A2, *B2;
  double *scratch;
} bench_bufs;

static uint64_t one_launch(kl_shape sh, bench_bufs *b, int threads,
                           double *sec) {
  double t0 = bench_now_s();
  uint64_t seed = kl_secret_seed(), rng = kl_secret_seed();
  kl_fill_random_mt(b->A2, (size_t)sh.M * sh.K, seed, 0, threads);
  kl_fill_random_mt(b->B2, (size_t)sh.K * sh.N, seed, 1, threads);
  kl_pace_result res;
  memset(&res, 0, sizeof res);
  kl_verify_launch(sh, b->A, b->B, b->C, b->scratch, &rng, 1, threads, &res);
  *sec = bench_now_s() - t0;
  return res.flags;
}

int main(int argc, char **argv) {
  int n = argc > 1 ? atoi(argv[1]) : 2048;
  int repeats = argc > 2 ? atoi(argv[2]) : 5;
  int threads = argc > 3 ? atoi(argv[3]) : (int)sysconf(_SC_NPROCESSORS_ONLN);
  if (n < 64 || n > 16384) n = 2048;
  if (repeats < 1 || repeats > 100) repeats = 5;
  if (threads < 1) threads = 1;
  kl_shape sh = {n, n, n};
  size_t nn = (size_t)n * n;
  bench_bufs b = {malloc(nn * 4), calloc(nn, 4),
                  malloc(nn * 4), malloc(nn * 4),
                  malloc(nn * 4), malloc(KL_VERIFY_SCRATCH(sh) * 8)};
  double *t1 = malloc(sizeof(double) * repeats),
         *tn = malloc(sizeof(double) * repeats);
  float *d = malloc((size_t)n * sizeof(float));
  if (!b.A || !b.B || !b.C || !b.A2 || !b.B2 || !b.scratch || !t1 || !tn ||
      !d) {
    fprintf(stderr, "bench_verify: out of memory for %dx%dx%d\n", n, n, n);
    return 1;
  }
  /* A random, B = diag(d): C = A B is each A_ij d_j, one rounding */
  kl_fill_random(b.A, nn, 1, 0);
  kl_fill_random(d, (size_t)n, 1, 1);
  for (int i = 0; i < n; i++) {
    b.B[(size_t)i * n + i] = d[i];
    for (int j = 0; j < n; j++)
      b.C[(size_t)i * n + j] = b.A[(size_t)i * n + j] * d[j];
  }
  uint64_t f1 = 0, fn = 0;
  for (int r = 0; r < repeats; r++) {
    f1 |= one_launch(sh, &b, 1, &t1[r]);
    fn |= one_launch(sh, &b, threads, &tn[r]);
  }
  double m1 = bench_median(t1, repeats), mn = bench_median(tn, repeats);
  printf("bench_verify: %dx%dx%d, median of %d: fresh inputs and the "
         "checks of one launch\n",
         n, n, n, repeats);
  printf("  baseline, 1 thread     %8.1f ms\n", m1 * 1e3);
  printf("  %2d threads             %8.1f ms\n", threads, mn * 1e3);
  printf("  ratio (1 thread / %d)  %8.2fx\n", threads, m1 / mn);
  if (f1 || fn) {
    fprintf(stderr,
            "bench_verify: an honest product was flagged (%llx, %llx)\n",
            (unsigned long long)f1, (unsigned long long)fn);
    return 1;
  }
  free(b.A);
  free(b.B);
  free(b.C);
  free(b.A2);
  free(b.B2);
  free(b.scratch);
  free(t1);
  free(tn);
  free(d);
  return 0;
}
