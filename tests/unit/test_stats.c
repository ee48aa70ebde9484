/*
 * tests/unit/test_stats.c — kl_stats_* on synthetic sample streams: type-7
 * quantiles against values worked out by hand (numpy.quantile's default),
 * the exact median interval ranks against the published tables, the
 * stopping rule on constant, noisy, outlier-ridden, throttled and endless
 * streams, and the rule's input checks. Streams come from a seeded RNG, so
 * every run sees the same samples. It does not time anything real.
 */
#include "kernels/kernels.h"
#include "kltest.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* a equals b up to rounding (relative 1e-12). */
static int NEAR(double a, double b) {
  return fabs(a - b) <= 1e-12 * (1 + fabs(b));
}

/* splitmix64: a small seeded generator; uniform doubles in (0, 1). */
static uint64_t kl_rng_next(uint64_t *state) {
  uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}
static double kl_rng_uniform(uint64_t *state) {
  return ((double)(kl_rng_next(state) >> 11) + 0.5) / 9007199254740992.0;
}
/* Standard normal by Box-Muller (one of the pair; simple beats fast). */
static double kl_rng_normal(uint64_t *state) {
  double u1 = kl_rng_uniform(state), u2 = kl_rng_uniform(state);
  return sqrt(-2 * log(u1)) * cos(6.283185307179586 * u2);
}

/* A rule with no time floor and no time cap, so tests that are about the
 * sample count or the noise are about nothing else. */
static kl_stats_rule kl_rule_counts(int min_samples, double target) {
  kl_stats_rule r;
  kl_stats_rule_defaults(&r);
  r.min_samples = min_samples;
  r.min_total_us = 0;
  r.target_rel_noise = target;
  r.max_total_us = INFINITY;
  return r;
}

/* Feeds values (clock unknown) and returns the summary. */
static kl_stats kl_summary_of(const double *v, int n) {
  kl_sampler s;
  kl_stats st;
  kl_stats_rule r = kl_rule_counts(1, 0.005);
  kl_stats_init(&s, &r);
  for (int i = 0; i < n; i++)
    kl_stats_add(&s, v[i], 0, 0);
  kl_stats_summary(&s, &st);
  return st;
}

static void test_defaults(void) {
  kl_stats_rule r;
  kl_stats_rule_defaults(&r);
  CHECK(r.min_samples == 10, "min_samples %d", r.min_samples);
  CHECK(r.min_total_us == 500000, "min_total_us %g", r.min_total_us);
  CHECK(r.target_rel_noise == 0.005, "target %g", r.target_rel_noise);
  CHECK(r.max_samples == 1000, "max_samples %d", r.max_samples);
  CHECK(r.max_total_us == 10e6, "max_total_us %g", r.max_total_us);
  CHECK(r.throttle_ratio == 0.75, "throttle_ratio %g", r.throttle_ratio);
  CHECK(kl_stats_rule_check(&r, NULL, 0) == KL_OK, "defaults valid");
  CHECK(!strcmp(kl_stats_stop_name(KL_STATS_STOP_RUNNING), "running"), "n");
  CHECK(!strcmp(kl_stats_stop_name(KL_STATS_STOP_CONVERGED), "converged"), "n");
  CHECK(!strcmp(kl_stats_stop_name(KL_STATS_STOP_SAMPLE_CAP), "sample_cap"),
        "n");
  CHECK(!strcmp(kl_stats_stop_name(KL_STATS_STOP_TIME_CAP), "time_cap"), "n");
  CHECK(!strcmp(kl_stats_stop_name(42), "unknown"), "n");
}

/* numpy.quantile(x, p) with the default method='linear' (type 7). */
static void test_quantiles(void) {
  const double a[] = {1, 2, 3, 4, 5};
  CHECK(NEAR(kl_stats_quantile(a, 5, 0.2), 1.8), "p20 [1..5]");
  CHECK(NEAR(kl_stats_quantile(a, 5, 0.8), 4.2), "p80 [1..5]");
  CHECK(NEAR(kl_stats_quantile(a, 5, 0.5), 3.0), "median [1..5]");
  CHECK(NEAR(kl_stats_quantile(a, 5, 0.25), 2.0), "p25 [1..5]");
  CHECK(NEAR(kl_stats_quantile(a, 5, 0.0), 1.0), "p0");
  CHECK(NEAR(kl_stats_quantile(a, 5, 1.0), 5.0), "p100");
  CHECK(NEAR(kl_stats_quantile(a, 5, 0.33), 2.32), "p33 h=1.32");
  const double two[] = {10, 20};
  CHECK(NEAR(kl_stats_quantile(two, 2, 0.2), 12), "p20 [10,20]");
  CHECK(NEAR(kl_stats_quantile(two, 2, 0.8), 18), "p80 [10,20]");
  const double one[] = {7};
  CHECK(NEAR(kl_stats_quantile(one, 1, 0.2), 7), "p20 [7]");
  CHECK(kl_stats_quantile(one, 0, 0.5) == -1, "empty");

  /* Offered out of order: the summary sorts. [1,2,3,4]: h = 0.6, 1.5, 2.4. */
  const double b[] = {3, 1, 4, 2};
  kl_stats st = kl_summary_of(b, 4);
  CHECK(NEAR(st.p20, 1.6), "p20 %g", st.p20);
  CHECK(NEAR(st.median, 2.5), "median %g", st.median);
  CHECK(NEAR(st.p80, 3.4), "p80 %g", st.p80);
  CHECK(NEAR(st.p25, 1.75) && NEAR(st.p75, 3.25), "p25 %g p75 %g", st.p25,
        st.p75);
  CHECK(st.min == 1 && st.max == 4, "min %g max %g", st.min, st.max);
  CHECK(st.rel_noise == -1 && st.ci_lo == -1, "n=4: no interval");

  kl_stats e = kl_summary_of(NULL, 0);
  CHECK(e.n_kept == 0 && e.median == -1 && e.mean == -1 && e.cv == -1,
        "empty summary median %g", e.median);
  kl_stats o = kl_summary_of(one, 1);
  CHECK(o.median == 7 && o.p20 == 7 && o.stddev == 0 && o.cv == 0,
        "single sample stddev %g", o.stddev);
}

/* mean 5, sum of squared deviations 32: stddev sqrt(32/7), CV that / 5. */
static void test_cv(void) {
  const double v[] = {2, 4, 4, 4, 5, 5, 7, 9};
  kl_stats st = kl_summary_of(v, 8);
  CHECK(NEAR(st.mean, 5), "mean %g", st.mean);
  CHECK(NEAR(st.stddev, sqrt(32.0 / 7)), "stddev %.15g", st.stddev);
  CHECK(NEAR(st.cv, sqrt(32.0 / 7) / 5), "cv %.15g", st.cv);
  CHECK(NEAR(st.kept_us, 40), "kept_us %g", st.kept_us);
}

/* The interval ranks of the published tables (e.g. Conover, Practical
 * Nonparametric Statistics): n = 6 ranks 1..6, n = 10 ranks 2..9, n = 20
 * ranks 6..15; n = 5 has no 95% interval (2 / 32 > 0.05). */
static void test_median_interval(void) {
  double v[20];
  for (int i = 0; i < 20; i++)
    v[i] = i + 1;
  kl_stats st = kl_summary_of(v, 5);
  CHECK(st.rel_noise == -1, "n=5 rel_noise %g", st.rel_noise);
  st = kl_summary_of(v, 6);
  CHECK(st.ci_lo == 1 && st.ci_hi == 6, "n=6 [%g, %g]", st.ci_lo, st.ci_hi);
  st = kl_summary_of(v, 10);
  CHECK(st.ci_lo == 2 && st.ci_hi == 9, "n=10 [%g, %g]", st.ci_lo, st.ci_hi);
  CHECK(NEAR(st.rel_noise, 3.5 / 5.5), "n=10 rel_noise %.15g", st.rel_noise);
  st = kl_summary_of(v, 20);
  CHECK(st.ci_lo == 6 && st.ci_hi == 15, "n=20 [%g, %g]", st.ci_lo, st.ci_hi);
  CHECK(NEAR(st.rel_noise, 4.5 / 10.5), "n=20 rel_noise %g", st.rel_noise);
}

/* Zero noise cannot stop the rule before min_samples (nor before the time
 * floor). The interval exists from 6 samples on, so min_samples below 6
 * waits for 6. */
static void test_min_samples_floor(void) {
  const int mins[] = {1, 6, 10, 25};
  const int expect[] = {6, 6, 10, 25};
  for (int k = 0; k < 4; k++) {
    kl_stats_rule r = kl_rule_counts(mins[k], 0.005);
    kl_sampler s;
    kl_stats_init(&s, &r);
    int n = 0;
    while (!kl_stats_done(&s) && n < 100) {
      kl_stats_add(&s, 50.0, 0, 0);
      n++;
    }
    CHECK(n == expect[k], "min_samples %d: stopped after %d, expected %d",
          mins[k], n, expect[k]);
    CHECK(kl_stats_stop_reason(&s) == KL_STATS_STOP_CONVERGED, "reason %s",
          kl_stats_stop_name(kl_stats_stop_reason(&s)));
  }
}

/* Defaults, constant stream: stops exactly when both floors are met. */
static void test_constant_stream(void) {
  const double us[] = {100000, 10000, 1000};
  const int expect[] = {10, 50, 500}; /* max(10, 0.5 s / us) */
  for (int k = 0; k < 3; k++) {
    kl_sampler s;
    CHECK(kl_stats_init(&s, NULL) == KL_OK, "init defaults");
    int n = 0;
    while (!kl_stats_done(&s) && n < 2000) {
      CHECK(kl_stats_add(&s, us[k], 1980, 1980) == KL_STATS_SAMPLE_KEPT,
            "kept");
      n++;
    }
    kl_stats st;
    kl_stats_summary(&s, &st);
    CHECK(n == expect[k], "%g us: stopped after %d, expected %d", us[k], n,
          expect[k]);
    CHECK(st.stop == KL_STATS_STOP_CONVERGED, "%s",
          kl_stats_stop_name(st.stop));
    CHECK(st.median == us[k] && st.rel_noise == 0 && st.cv == 0,
          "median %g noise %g cv %g", st.median, st.rel_noise, st.cv);
    CHECK(st.n_outliers == 0, "outliers %d", st.n_outliers);
  }
}

/* Runs one lognormal stream (median 100 us, sigma 1%) to its stop. */
static kl_stats kl_run_lognormal(uint64_t seed, double sigma,
                                 const kl_stats_rule *r, int *decisions_ok) {
  kl_sampler s;
  kl_stats st;
  kl_stats_init(&s, r);
  *decisions_ok = 1;
  while (!kl_stats_done(&s)) {
    /* Every sample was asked for because the rule said "not yet". */
    kl_stats_summary(&s, &st);
    if (s.n_kept >= r->min_samples && st.rel_noise >= 0 &&
        st.rel_noise < r->target_rel_noise)
      *decisions_ok = 0;
    kl_stats_add(&s, 100.0 * exp(sigma * kl_rng_normal(&seed)), 0, 0);
  }
  kl_stats_summary(&s, &st);
  return st;
}

/* 1% lognormal noise against a 0.5% target: the rule keeps sampling past
 * min_samples until the median's interval is narrow enough (theory: about
 * (1.96 * 1.2533 * 1% / 0.5%)^2 = 24 samples), and the interval covers the
 * true median (100) about 95% of the time over many seeds. */
static void test_noisy_stream(void) {
  kl_stats_rule r = kl_rule_counts(10, 0.005);
  int covered = 0, runs = 400, within = 0, at_floor = 0;
  double n_sum = 0;
  for (int k = 0; k < runs; k++) {
    int ok;
    kl_stats st = kl_run_lognormal(1000 + (uint64_t)k, 0.01, &r, &ok);
    CHECK(ok, "seed %d: a sample was taken after the rule was met", k);
    CHECK(st.stop == KL_STATS_STOP_CONVERGED, "seed %d: %s", k,
          kl_stats_stop_name(st.stop));
    CHECK(st.rel_noise < 0.005, "seed %d: noise %g", k, st.rel_noise);
    CHECK(st.n_kept >= 10 && st.n_kept < 80, "seed %d: n %d", k, st.n_kept);
    at_floor += st.n_kept == 10;
    covered += st.ci_lo <= 100 && 100 <= st.ci_hi;
    within += fabs(st.median - 100) < 1.0;
    n_sum += st.n_kept;
  }
  double mean_n = n_sum / runs;
  printf("noisy stream: mean n %.1f, interval covered the true median in "
         "%d/%d runs, median within 1%% in %d, stopped at min_samples in %d\n",
         mean_n, covered, runs, within, at_floor);
  CHECK(mean_n > 18 && mean_n < 40, "mean n %g", mean_n);
  /* A lucky first 10 samples can already be narrow enough; rarely. */
  CHECK(at_floor <= runs / 20, "stopped at min_samples in %d", at_floor);
  /* Stopping when the interval first gets narrow biases it a little
   * (optional stopping); 88% leaves room for that and for chance. */
  CHECK(covered >= runs * 88 / 100, "coverage %d/%d", covered, runs);
  CHECK(within == runs, "median within 1%% in %d/%d", within, runs);

  /* With the default floors (0.5 s of 1 ms samples) the time floor binds
   * and the median is far tighter. */
  kl_stats_rule d;
  kl_stats_rule_defaults(&d);
  uint64_t seed = 7;
  kl_sampler s;
  kl_stats_init(&s, &d);
  while (!kl_stats_done(&s))
    kl_stats_add(&s, 1000.0 * exp(0.01 * kl_rng_normal(&seed)), 1900, 1980);
  kl_stats st;
  kl_stats_summary(&s, &st);
  CHECK(st.n_kept >= 490 && st.n_kept <= 510 &&
            st.stop == KL_STATS_STOP_CONVERGED && st.kept_us >= 500000 &&
            st.kept_us - 500000 < st.max,
        "n %d stop %s", st.n_kept, kl_stats_stop_name(st.stop));
  CHECK(fabs(st.median - 1000) < 2.5, "median %g", st.median);
  CHECK(fabs(st.cv - 0.01) < 0.001, "cv %g", st.cv);
  CHECK(st.p20 < st.median && st.median < st.p80, "p20 %g p80 %g", st.p20,
        st.p80);
}

/* One sample in 20 is 10x slower (a preemption): the median stays right,
 * the rule still converges, and exactly the injected samples are counted
 * as outliers; the mean and CV show the damage (they are not filtered). */
static void test_outliers(void) {
  kl_stats_rule r = kl_rule_counts(10, 0.005);
  r.min_total_us = 20000; /* at least 200 samples: 10 outliers */
  uint64_t seed = 99;
  kl_sampler s;
  kl_stats_init(&s, &r);
  int injected = 0;
  while (!kl_stats_done(&s)) {
    double us = 100.0 * exp(0.01 * kl_rng_normal(&seed));
    if (s.n_offered % 20 == 19) {
      us *= 10;
      injected++;
    }
    kl_stats_add(&s, us, 0, 0);
  }
  kl_stats st;
  kl_stats_summary(&s, &st);
  CHECK(st.stop == KL_STATS_STOP_CONVERGED, "%s", kl_stats_stop_name(st.stop));
  CHECK(injected >= 5, "injected %d", injected);
  CHECK(st.n_outliers == injected, "outliers %d, injected %d", st.n_outliers,
        injected);
  CHECK(fabs(st.median - 100) < 0.5, "median %g", st.median);
  CHECK(st.p80 < 102, "p80 %g", st.p80);
  CHECK(st.max > 900, "max %g", st.max);
  CHECK(st.mean > 140 && st.cv > 1, "mean %g cv %g", st.mean, st.cv);
  /* Every sample above the fence is one of the 10x ones. */
  int above = 0;
  for (int i = 0; i < s.n_kept; i++)
    above += s.us[i] > st.outlier_fence && s.us[i] > 500;
  CHECK(above == st.n_outliers, "above fence %d", above);

  /* IQR = 0: every sample above the median is an outlier (documented). */
  double v[9] = {5, 5, 5, 5, 5, 5, 5, 6, 50};
  kl_stats z = kl_summary_of(v, 9);
  CHECK(z.n_outliers == 2 && z.outlier_fence == 5, "iqr 0: %d fence %g",
        z.n_outliers, z.outlier_fence);
}

/* Clock at 60% of the default: discarded and counted, its time counts
 * toward the time cap only. Unknown clocks keep everything. */
static void test_throttle(void) {
  kl_stats_rule r = kl_rule_counts(10, 0.005);
  kl_sampler s;
  kl_stats_init(&s, &r);
  for (int i = 0; i < 40; i++) {
    int throttled = i % 2;
    double us = throttled ? 1000.0 : 100.0;
    int rc = kl_stats_add(&s, us, throttled ? 0.6 * 1980 : 1980, 1980);
    CHECK(rc == (throttled ? KL_STATS_SAMPLE_THROTTLED : KL_STATS_SAMPLE_KEPT),
          "sample %d rc %d", i, rc);
    CHECK(s.throttled_run == throttled, "run %d", s.throttled_run);
  }
  kl_stats st;
  kl_stats_summary(&s, &st);
  CHECK(st.n_kept == 20 && st.n_throttled == 20 && st.n_offered == 40,
        "kept %d throttled %d", st.n_kept, st.n_throttled);
  CHECK(st.median == 100 && st.max == 100, "median %g max %g", st.median,
        st.max);
  CHECK(NEAR(st.kept_us, 2000) && NEAR(st.offered_us, 22000), "us %g %g",
        st.kept_us, st.offered_us);

  /* The boundary: exactly 75% is kept, just below is not; runs count up. */
  kl_stats_init(&s, &r);
  CHECK(kl_stats_add(&s, 1, 1500, 2000) == KL_STATS_SAMPLE_KEPT, "75%%");
  CHECK(kl_stats_add(&s, 1, 1499, 2000) == KL_STATS_SAMPLE_THROTTLED, "<75");
  CHECK(kl_stats_add(&s, 1, 100, 2000) == KL_STATS_SAMPLE_THROTTLED, "5%%");
  CHECK(s.throttled_run == 2, "run %d", s.throttled_run);
  CHECK(kl_stats_add(&s, 1, 2600, 2000) == KL_STATS_SAMPLE_KEPT, "boost");
  CHECK(s.throttled_run == 0, "run reset %d", s.throttled_run);

  /* Unknown clocks (either <= 0, or NaN) keep every sample. */
  kl_stats_init(&s, &r);
  CHECK(kl_stats_add(&s, 1, 0, 1980) == KL_STATS_SAMPLE_KEPT, "sm 0");
  CHECK(kl_stats_add(&s, 1, 100, 0) == KL_STATS_SAMPLE_KEPT, "default 0");
  CHECK(kl_stats_add(&s, 1, -1, -1) == KL_STATS_SAMPLE_KEPT, "both -1");
  CHECK(kl_stats_add(&s, 1, NAN, 1980) == KL_STATS_SAMPLE_KEPT, "NaN");
  CHECK(s.n_kept == 4 && s.n_throttled == 0, "kept %d", s.n_kept);

  /* Invalid times are discarded with their own count. */
  CHECK(kl_stats_add(&s, NAN, 0, 0) == KL_STATS_SAMPLE_INVALID, "NaN us");
  CHECK(kl_stats_add(&s, INFINITY, 0, 0) == KL_STATS_SAMPLE_INVALID, "inf");
  CHECK(kl_stats_add(&s, 0, 0, 0) == KL_STATS_SAMPLE_INVALID, "0 us");
  CHECK(kl_stats_add(&s, -3, 0, 0) == KL_STATS_SAMPLE_INVALID, "-3 us");
  kl_stats_summary(&s, &st);
  CHECK(st.n_invalid == 4 && st.n_kept == 4 && st.n_offered == 8 &&
            NEAR(st.offered_us, 4),
        "invalid %d offered %d us %g", st.n_invalid, st.n_offered,
        st.offered_us);
}

/* Each cap stops the rule with its own name, and caps count everything
 * offered, so a device stuck throttled or a backend returning garbage
 * still stops. */
static void test_caps(void) {
  /* Sample cap: 20% noise never meets 0.01%. */
  kl_stats_rule r = kl_rule_counts(10, 0.0001);
  r.max_samples = 50;
  uint64_t seed = 5;
  kl_sampler s;
  kl_stats_init(&s, &r);
  int n = 0;
  while (!kl_stats_done(&s)) {
    kl_stats_add(&s, 100.0 * exp(0.2 * kl_rng_normal(&seed)), 0, 0);
    n++;
  }
  kl_stats st;
  kl_stats_summary(&s, &st);
  CHECK(n == 50 && st.stop == KL_STATS_STOP_SAMPLE_CAP, "n %d stop %s", n,
        kl_stats_stop_name(st.stop));
  CHECK(st.rel_noise > 0.0001, "noise %g", st.rel_noise);

  /* Time cap: 100 us samples, 5 ms of measured time. */
  r = kl_rule_counts(10, 0.0001);
  r.max_total_us = 5000;
  kl_stats_init(&s, &r);
  n = 0;
  while (!kl_stats_done(&s)) {
    kl_stats_add(&s, 100.0 * exp(0.2 * kl_rng_normal(&seed)), 0, 0);
    n++;
  }
  kl_stats_summary(&s, &st);
  CHECK(st.stop == KL_STATS_STOP_TIME_CAP && st.offered_us >= 5000 &&
            st.offered_us - 5000 < st.max,
        "stop %s offered %g after %d", kl_stats_stop_name(st.stop),
        st.offered_us, n);

  /* Every sample throttled: nothing kept, the time cap still stops it. */
  r = kl_rule_counts(10, 0.005);
  r.max_total_us = 10000;
  kl_stats_init(&s, &r);
  n = 0;
  while (!kl_stats_done(&s) && n < 10000) {
    kl_stats_add(&s, 100, 1000, 1980);
    n++;
  }
  kl_stats_summary(&s, &st);
  CHECK(n == 100 && st.stop == KL_STATS_STOP_TIME_CAP && st.n_kept == 0,
        "n %d stop %s kept %d", n, kl_stats_stop_name(st.stop), st.n_kept);
  CHECK(st.median == -1 && st.n_throttled == 100, "median %g", st.median);

  /* Every sample invalid: carries no time; the sample cap stops it. */
  r.max_samples = 30;
  kl_stats_init(&s, &r);
  n = 0;
  while (!kl_stats_done(&s) && n < 10000) {
    kl_stats_add(&s, NAN, 0, 0);
    n++;
  }
  CHECK(n == 30 && kl_stats_stop_reason(&s) == KL_STATS_STOP_SAMPLE_CAP, "n %d",
        n);

  /* Converged wins when a cap is reached by the same sample. */
  r = kl_rule_counts(10, 0.005);
  r.max_samples = 10;
  kl_stats_init(&s, &r);
  for (int i = 0; i < 10; i++)
    kl_stats_add(&s, 42, 0, 0);
  CHECK(kl_stats_stop_reason(&s) == KL_STATS_STOP_CONVERGED, "%s",
        kl_stats_stop_name(kl_stats_stop_reason(&s)));

  /* A caller that ignores done() cannot overrun the array. */
  r = kl_rule_counts(10, 0);
  kl_stats_init(&s, &r);
  for (int i = 0; i < KL_STATS_MAX_SAMPLES; i++)
    kl_stats_add(&s, 1 + i % 7, 0, 0);
  CHECK(kl_stats_stop_reason(&s) == KL_STATS_STOP_SAMPLE_CAP, "cap");
  CHECK(kl_stats_add(&s, 1, 0, 0) == KL_STATS_SAMPLE_FULL, "full");
  CHECK(s.n_kept == KL_STATS_MAX_SAMPLES && s.n_offered == KL_STATS_MAX_SAMPLES,
        "kept %d", s.n_kept);
  kl_stats_summary(&s, &st);
  CHECK(st.min == 1 && st.max == 7 && st.median == 4, "median %g", st.median);
}

/* Bad rules are refused with the field named; the sampler falls back to
 * the defaults and stays usable. */
static void test_rule_check(void) {
  char why[160];
  kl_stats_rule r;
  kl_stats_rule_defaults(&r);
  r.min_samples = 0;
  CHECK(kl_stats_rule_check(&r, why, sizeof why) == KL_EINPUT &&
            strstr(why, "min_samples"),
        "%s", why);
  kl_stats_rule_defaults(&r);
  r.max_samples = KL_STATS_MAX_SAMPLES + 1;
  CHECK(kl_stats_rule_check(&r, why, sizeof why) == KL_EINPUT &&
            strstr(why, "max_samples"),
        "%s", why);
  kl_stats_rule_defaults(&r);
  r.min_samples = 20;
  r.max_samples = 19;
  CHECK(kl_stats_rule_check(&r, why, sizeof why) == KL_EINPUT &&
            strstr(why, "max_samples"),
        "%s", why);
  kl_stats_rule_defaults(&r);
  r.min_total_us = NAN;
  CHECK(kl_stats_rule_check(&r, why, sizeof why) == KL_EINPUT &&
            strstr(why, "min_total_us"),
        "%s", why);
  kl_stats_rule_defaults(&r);
  r.max_total_us = 0;
  CHECK(kl_stats_rule_check(&r, why, sizeof why) == KL_EINPUT &&
            strstr(why, "max_total_us"),
        "%s", why);
  kl_stats_rule_defaults(&r);
  r.target_rel_noise = -0.1;
  CHECK(kl_stats_rule_check(&r, why, sizeof why) == KL_EINPUT &&
            strstr(why, "target_rel_noise"),
        "%s", why);
  kl_stats_rule_defaults(&r);
  r.throttle_ratio = 1.5;
  CHECK(kl_stats_rule_check(&r, why, sizeof why) == KL_EINPUT &&
            strstr(why, "throttle_ratio"),
        "%s", why);
  kl_stats_rule_defaults(&r);
  r.max_total_us = INFINITY;
  CHECK(kl_stats_rule_check(&r, why, sizeof why) == KL_OK, "inf time cap");

  kl_sampler s;
  r.min_samples = -5;
  CHECK(kl_stats_init(&s, &r) == KL_EINPUT, "init refuses");
  CHECK(s.rule.min_samples == 10 && s.rule.max_samples == 1000,
        "fell back to defaults");
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

/* kl_stats_sort against qsort on every size up to 300 (heapsort's edge
 * cases are the small ones and the powers of two), with repeated values,
 * and NaNs sorted last. */
static void test_sort(void) {
  double a[300], b[300];
  uint64_t x = 0x2545f4914f6cdd1dull;
  int bad = -1;
  for (int n = 0; n <= 300 && bad < 0; n++) {
    for (int i = 0; i < n; i++) {
      x ^= x << 13, x ^= x >> 7, x ^= x << 17;
      a[i] = b[i] = (double)(x % 97) - 40.5; /* repeats */
    }
    kl_stats_sort(a, (size_t)n);
    qsort(b, (size_t)n, sizeof *b, cmp_double);
    if (memcmp(a, b, (size_t)n * sizeof *a)) bad = n;
  }
  CHECK(bad < 0, "kl_stats_sort differs from qsort at n = %d", bad);
  double v[6] = {3, NAN, -1, 2, NAN, 0};
  kl_stats_sort(v, 6);
  CHECK(v[0] == -1 && v[1] == 0 && v[2] == 2 && v[3] == 3 && isnan(v[4]) &&
            isnan(v[5]),
        "NaNs last: %g %g %g %g %g %g", v[0], v[1], v[2], v[3], v[4], v[5]);
}

int main(void) {
  test_sort();
  test_defaults();
  test_quantiles();
  test_cv();
  test_median_interval();
  test_min_samples_floor();
  test_constant_stream();
  test_noisy_stream();
  test_outliers();
  test_throttle();
  test_caps();
  test_rule_check();
  return kl_test_done("test_stats");
}
