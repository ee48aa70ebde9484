/*
 * tests/bench/bench_reference.c — what the reference cache (kernels/check.c)
 * saves per evaluation.
 *
 * The same cached candidate (kernels/seeds/05_blocktile_2d.cu) is evaluated
 * through a sandbox slot at the default target, as a campaign evaluates:
 * once per iteration with the campaign step's seed (every candidate of a
 * step shares it, so its float64 references come from the cache) and, as
 * the named baseline measured in the same run, once with a seed never seen
 * before (references computed). Prints the medians, the ratio, and the
 * cache's hit count.
 *
 * usage: bench_reference [SOURCE_DIR] [REPEATS (default 9)] [SIZE (256)]
 */
#include "bench_util.h"
#include "kernels/kernels.h"
#include "sandbox/sandbox.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_ms(void) {
  return bench_now_s() * 1e3;
}

int main(int argc, char **argv) {
  if (argc > 1 && !strcmp(argv[1], "__worker"))
    return sbx_worker_main(argc - 1, argv + 1);
  const char *dir = argc > 1 ? argv[1] : getenv("KL_SOURCE_DIR");
  if (!dir) dir = KL_DEFAULT_SOURCE_DIR;
  int repeats = argc > 2 ? atoi(argv[2]) : 9;
  if (repeats < 1 || repeats > 100) repeats = 9;
  int n = argc > 3 ? atoi(argv[3]) : 256;
  if (n < 1 || n > 2048) n = 256;
  char path[1024], why[600];
  snprintf(path, sizeof path, "%s/kernels/seeds/05_blocktile_2d.cu", dir);
  char *src;
  size_t len;
  if (kl_source_load(path, &src, &len, why, sizeof why) != KL_OK) {
    fprintf(stderr, "bench_reference: %s\n", why);
    return 1;
  }
  kl_emu_set_launcher(sbx_host_compile_launcher());
  sbx_slot *slot = sbx_slot_new(NULL);
  kl_executor ex;
  sbx_slot_executor(slot, &ex);
  kl_eval_options opts;
  kl_eval_defaults(&opts);
  opts.shapes[0] = (kl_shape){n, n, n};
  opts.n_shapes = 1;
  opts.threads = 1;
  opts.exec = &ex;
  kl_result *r = malloc(sizeof *r);
  double hit[100], miss[100];
  opts.seed = 1; /* the step's seed: warm the cache and the workers */
  kl_eval_source(path, src, len, &opts, r);
  int64_t hits0 = kl_reference_cache_hits();
  for (int i = 0; i < repeats; i++) {
    opts.seed = 1;
    double t0 = now_ms();
    kl_eval_source(path, src, len, &opts, r);
    hit[i] = now_ms() - t0;
    opts.seed = 1000 + (uint64_t)i; /* never seen: computed */
    t0 = now_ms();
    kl_eval_source(path, src, len, &opts, r);
    miss[i] = now_ms() - t0;
    if (!r->correct) {
      fprintf(stderr, "bench_reference: not correct: %s %s\n", r->status,
              r->error);
      return 1;
    }
  }
  int64_t hits = kl_reference_cache_hits() - hits0;
  double h = bench_median(hit, repeats), m = bench_median(miss, repeats);
  printf("05_blocktile_2d at %d^3 through a sandbox slot, median of %d\n", n,
         repeats);
  printf("  baseline: a new seed (references computed)   %9.2f ms\n", m);
  printf("  the step's seed (references from the cache)  %9.2f ms\n", h);
  printf("ratio cached / computed: %.2fx (%lld cache hits, %.1f a run)\n",
         h / m, (long long)hits, (double)hits / repeats);
  sbx_slot_free(slot);
  free(r);
  free(src);
  return 0;
}
