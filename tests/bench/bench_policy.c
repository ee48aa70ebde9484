/*
 * tests/bench/bench_policy.c — how fast does the policy train on the CPU?
 *
 * Training tokens/s (forward + backward + gradient clipping + AdamW update,
 * a fixed random batch) of kernlab's model against the same model in
 * PyTorch (tests/bench/bench_policy_torch.py, float32, the same eight
 * tensors and math as tests/python/policy_torch_model.py), both on 2 cores
 * with OpenBLAS, measured in the same run. kernlab: its own pool of 2
 * threads (policy/parallel.c) splits the GEMMs (single-threaded OpenBLAS
 * calls), attention's heads and the element-wise loops. Torch has two thread
 * pools (intra-op OpenMP and OpenBLAS) and is run three ways: its default
 * (2 and 2, which oversubscribes the cores), 1 and 2, 2 and 1; the fastest
 * is the named baseline. Prints the split of a kernlab step (forward /
 * backward / update), each torch run, and
 *   training: kernlab N tok/s vs torch M tok/s (best: ...): ratio R
 * (plus the same line against torch's default setup), and the same for
 * sampling (KV cache, G = B rows of 256 tokens after a 64-token prompt,
 * torch's own KV-cache sampler under no_grad):
 *   sampling: kernlab N tok/s vs torch M tok/s (best: ...): ratio R
 * Default: the 3.6M-parameter model (vocab 2048, d 256, 4 layers,
 * 4 heads, d_ff 672) at B=8, T=256, median of 5 timed steps after 1 warm-up.
 *
 * usage: bench_policy [--vocab V] [--d C] [--layers L] [--heads NH]
 *                     [--B B] [--T T] [--steps N] [--threads N (kernlab)]
 *                     [--no-torch] [SOURCE_DIR]
 */
#include "bench_util.h"
#include "policy/policy.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* One torch run on 2 cores: its two thread pools (intra-op OpenMP threads
 * and OpenBLAS's own) and what the setup is called. */
typedef struct torch_setup {
  int intra, blas;
  const char *what;
} torch_setup;

/* Runs bench_policy_torch.py with args (its model and batch) under setup
 * and returns the tokens/s its line `match` reports (a sscanf format with
 * one %lf), printing that line; 0 with a message on stderr when it fails
 * (`baseline`: what failed). */
static double torch_rate(const char *src, const torch_setup *setup,
                         const char *args, const char *match,
                         const char *baseline) {
  char cmd[1024], prefix[128];
  snprintf(cmd, sizeof cmd,
           "OPENBLAS_NUM_THREADS=%d OMP_NUM_THREADS=%d /usr/bin/python3 "
           "%s/tests/bench/bench_policy_torch.py %s",
           setup->blas, setup->intra, src, args);
  snprintf(prefix, sizeof prefix, "%s: ", setup->what);
  double tps = bench_run_rate(cmd, match, prefix, NULL, NULL, 0);
  if (tps <= 0)
    fprintf(stderr, "bench_policy: the torch %s failed (%s)\n", baseline, cmd);
  return tps;
}

int main(int argc, char **argv) {
  pl_config cfg = {.vocab = 2048,
                   .d_model = 256,
                   .n_layers = 4,
                   .n_heads = 4,
                   .d_ff = 0,
                   .max_seq = 256};
  int B = 8, T = 256, steps = 5, torch = 1, threads = 2;
  const char *src = KL_DEFAULT_SOURCE_DIR;
  for (int i = 1; i < argc; i++) {
    int *dst = bench_model_option(argv[i], &cfg, &B, &T, &steps, &threads);
    if (dst && i + 1 < argc)
      *dst = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--no-torch"))
      torch = 0;
    else if (argv[i][0] != '-')
      src = argv[i];
    else {
      fprintf(stderr, "bench_policy: unknown argument %s\n", argv[i]);
      return 2;
    }
  }
  if (steps < 1 || steps > 1000) steps = 5;
  cfg.d_ff = pl_default_ff(cfg.d_model);
  cfg.max_seq = T;

  char why[256];
  pl_model m;
  pl_adamw opt;
  if (pl_model_init(&m, &cfg, 1, why, sizeof why) != PL_OK) {
    fprintf(stderr, "bench_policy: %s\n", why);
    return 2;
  }
  pl_adamw_config ac = pl_adamw_defaults();
  if (pl_adamw_init(&opt, &m, &ac, why, sizeof why) != PL_OK) {
    fprintf(stderr, "bench_policy: %s\n", why);
    return 2;
  }
  pl_set_num_threads(threads);
  /* At least 64 tokens: the sampling bench below uses the first 64 as its
   * prompt, whatever B x T is. */
  int n_tok = B * T < 64 ? 64 : B * T;
  int32_t *tokens = malloc(sizeof(int32_t) * n_tok);
  int32_t *targets = malloc(sizeof(int32_t) * n_tok);
  bench_batch(tokens, targets, n_tok, cfg.vocab);

  printf("model: vocab %d, d %d, %d layers, %d heads, d_ff %d: %zu "
         "parameters; batch B=%d T=%d; %d threads\n",
         cfg.vocab, cfg.d_model, cfg.n_layers, cfg.n_heads, cfg.d_ff,
         m.num_params, B, T, threads);
  double *total = malloc(sizeof(double) * steps);
  double fwd = 0, bwd = 0, upd = 0;
  float loss = 0;
  for (int i = -1; i < steps; i++) { /* step -1: warm-up, untimed */
    double t0 = bench_now_s();
    pl_model_zero_grad(&m);
    loss = pl_model_forward(&m, tokens, targets, B, T);
    double t1 = bench_now_s();
    pl_model_backward(&m);
    double t2 = bench_now_s();
    pl_adamw_step(&opt, &m);
    double t3 = bench_now_s();
    if (i < 0) continue;
    total[i] = t3 - t0;
    fwd += t1 - t0;
    bwd += t2 - t1;
    upd += t3 - t2;
  }
  double median = bench_median(total, steps);
  double kl_tps = (double)B * T / median;
  printf("kernlab: %.1f ms/step (forward %.1f, backward %.1f, update %.1f "
         "mean), loss %.4f, %.0f tok/s\n",
         median * 1e3, fwd / steps * 1e3, bwd / steps * 1e3, upd / steps * 1e3,
         loss, kl_tps);
  double kl_sample_tps = 0;
  {
    /* Sampling: pl_generate with the KV cache, G = B rows of 256 new tokens
     * after a 64-token prompt, no end token, plain T = 1 sampling; the same
     * weights with max_seq widened to hold prompt + completion. */
    pl_config sc = cfg;
    sc.max_seq = 64 + 256;
    pl_model sm;
    if (pl_model_init(&sm, &sc, 1, why, sizeof why) == PL_OK) {
      pl_sampling sp = pl_sampling_default();
      pl_generation gen;
      double t0 = bench_now_s();
      int rc = pl_generate(&sm, tokens, 64, B, 256, -1, &sp, 1, &gen, why,
                           sizeof why);
      double dt = bench_now_s() - t0;
      if (rc == PL_OK) {
        long n = 0;
        for (int g = 0; g < B; g++)
          n += gen.lengths[g];
        kl_sample_tps = n / dt;
        printf("sampling tokens/s: kernlab %.0f (KV cache, G=%d x 256 new "
               "tokens after a 64-token prompt, %.2f s)\n",
               n / dt, B, dt);
        pl_generation_free(&gen);
      } else
        fprintf(stderr, "bench_policy: sampling: %s\n", why);
      pl_model_free(&sm);
    }
  }
  if (torch) {
    /* torch's two thread pools: its intra-op OpenMP threads and OpenBLAS's
     * own. Three ways to use 2 cores; the fastest is the baseline. */
    static const torch_setup tc[] = {
        {2, 2, "torch default (intra-op 2, OpenBLAS 2)"},
        {1, 2, "torch intra-op 1, OpenBLAS 2 (kernlab's split)"},
        {2, 1, "torch intra-op 2, OpenBLAS 1"}};
    double best = 0, dflt = 0;
    const char *best_what = "";
    for (int k = 0; k < 3; k++) {
      char args[256];
      snprintf(args, sizeof args, "%d %d %d %d %d %d %d %d %d", cfg.vocab,
               cfg.d_model, cfg.n_layers, cfg.n_heads, cfg.d_ff, B, T, steps,
               tc[k].intra);
      double tps =
          torch_rate(src, &tc[k], args,
                     "torch: %*f ms/step, loss %*f, %lf tok/s", "baseline");
      if (tps <= 0) return 1;
      if (k == 0) dflt = tps;
      if (tps > best) {
        best = tps;
        best_what = tc[k].what;
      }
    }
    /* Sampling: the same G x 256 tokens after a 64-token prompt with
     * torch's KV-cache sampler (bench_policy_torch.py --sample), the same
     * three thread setups, the fastest named. */
    double sbest = 0;
    const char *sbest_what = "";
    for (int k = 0; k < 3 && kl_sample_tps > 0; k++) {
      char args[256];
      snprintf(args, sizeof args, "%d %d %d %d %d %d 256 1 %d --sample",
               cfg.vocab, cfg.d_model, cfg.n_layers, cfg.n_heads, cfg.d_ff, B,
               tc[k].intra);
      double tps = torch_rate(src, &tc[k], args, "torch sampling: %lf tok/s",
                              "sampling baseline");
      if (tps <= 0) return 1;
      if (tps > sbest) {
        sbest = tps;
        sbest_what = tc[k].what;
      }
    }
    if (sbest > 0)
      printf("sampling: kernlab %.0f tok/s vs torch %.0f tok/s (best: %s): "
             "ratio %.2fx\n",
             kl_sample_tps, sbest, sbest_what, kl_sample_tps / sbest);
    printf("training (vs the default torch setup): kernlab %.0f tok/s vs "
           "torch %.0f tok/s: ratio %.2fx\n",
           kl_tps, dflt, kl_tps / dflt);
    printf("training: kernlab %.0f tok/s vs torch %.0f tok/s (best: %s): "
           "ratio %.2fx\n",
           kl_tps, best, best_what, kl_tps / best);
  }
  free(total);
  free(tokens);
  free(targets);
  pl_adamw_free(&opt);
  pl_model_free(&m);
  return 0;
}
