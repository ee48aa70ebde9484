/*
 * tests/bench/bench_util.h — what the benchmarks share: the clock and the
 * median of timed runs (all of them), and for the policy's (bench_policy.c
 * on the CPU, bench_policy_cuda.c on a device) the model options both take, the
 * fixed random batch both train on, and running a baseline program (torch) to
 * read its tokens/s. Static functions: included once per benchmark
 * executable, no source file goes with it.
 */
#ifndef KL_BENCH_UTIL_H
#define KL_BENCH_UTIL_H

#include "policy/policy.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Seconds on the monotonic clock. */
static inline double bench_now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

static inline int bench_cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

/* The median of t (n >= 1 timings; sorts t in place). */
static inline double bench_median(double *t, int n) {
  qsort(t, (size_t)n, sizeof *t, bench_cmp_double);
  return t[n / 2];
}

/* The integer options both benchmarks take: --vocab V --d C --layers L
 * --heads NH (into cfg), --B --T --steps --threads. Returns where the
 * value of option `arg` goes, NULL when arg is none of them. */
static inline int *bench_model_option(const char *arg, pl_config *cfg, int *B,
                                      int *T, int *steps, int *threads) {
  return !strcmp(arg, "--vocab")     ? &cfg->vocab
         : !strcmp(arg, "--d")       ? &cfg->d_model
         : !strcmp(arg, "--layers")  ? &cfg->n_layers
         : !strcmp(arg, "--heads")   ? &cfg->n_heads
         : !strcmp(arg, "--B")       ? B
         : !strcmp(arg, "--T")       ? T
         : !strcmp(arg, "--steps")   ? steps
         : !strcmp(arg, "--threads") ? threads
                                     : NULL;
}

/* n random tokens below vocab from the LCG state *s (advanced); the same
 * state gives the same tokens in every benchmark. */
static inline void bench_tokens(int32_t *tokens, int n, int vocab,
                                uint32_t *s) {
  for (int i = 0; i < n; i++) {
    *s = *s * 1664525u + 1013904223u;
    tokens[i] = (int32_t)((*s >> 8) % (uint32_t)vocab);
  }
}

/* The training batch: n tokens (bench_tokens from seed 7) and, as
 * targets, each token's successor (the last one masked, -1). Returns the
 * LCG state after the tokens, for any further draws. */
static inline uint32_t bench_batch(int32_t *tokens, int32_t *targets, int n,
                                   int vocab) {
  uint32_t s = 7;
  bench_tokens(tokens, n, vocab, &s);
  for (int i = 0; i < n; i++)
    targets[i] = i + 1 < n ? tokens[i + 1] : -1;
  return s;
}

/* Runs cmd (popen) and reads a rate from its output: every line that fmt
 * (a sscanf format with one %lf) matches is printed after echo_prefix,
 * and the last match is the result; a line starting with also_echo (NULL:
 * none) is printed as it is. last (NULL: not kept) gets the last line of
 * output without its newline, for a failure message. Returns the rate, or
 * 0 when cmd failed (exit status not 0) or no line matched. */
static inline double bench_run_rate(const char *cmd, const char *fmt,
                                    const char *echo_prefix,
                                    const char *also_echo, char *last,
                                    size_t lastlen) {
  char line[512];
  FILE *p = popen(cmd, "r");
  double rate = 0;
  if (last && lastlen) last[0] = 0;
  while (p && fgets(line, sizeof line, p)) {
    if (also_echo && !strncmp(line, also_echo, strlen(also_echo)))
      printf("%s", line);
    if (sscanf(line, fmt, &rate) == 1) printf("%s%s", echo_prefix, line);
    if (last && lastlen) snprintf(last, lastlen, "%s", line);
  }
  int rc = p ? pclose(p) : -1;
  if (last && lastlen) last[strcspn(last, "\n")] = 0;
  return rc == 0 && rate > 0 ? rate : 0;
}

#endif
