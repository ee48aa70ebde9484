/*
 * kernels/stats.c — timing statistics and the stopping rule shared by the
 * GPU backend and the CPU emulator.
 *
 * The backend measures; this module decides. It takes one sample at a time
 * (kl_stats_add), says when enough were taken (kl_stats_done) and why, and
 * summarises the kept samples (kl_stats_summary). It does not time anything,
 * sleep after a throttled sample (the caller does: nvbench waits 50 ms and
 * lengthens the wait after repeated discards, hence throttled_run), or
 * allocate: the sampler is a fixed array, so it needs no free, has no
 * out-of-memory path, and is plain data. Everything is deterministic.
 *
 * Definitions, and why (facts from shared/research/perf-anchors.md §3, §6):
 *
 * - Throttle filter. A sample whose SM clock is known and below
 *   throttle_ratio (0.75) x the device's default clock is discarded and
 *   counted, as nvbench does: such a sample measures the power manager,
 *   not the kernel. "Known" means both clocks > 0; with either unknown
 *   (the emulator, or a device whose clock cannot be read) every sample is
 *   kept. A time that is not finite or not > 0 is discarded as invalid.
 *
 * - Quantiles are type 7 (Hyndman & Fan; numpy's and R's default): linear
 *   interpolation between order statistics, h = (n - 1) p. The median is
 *   the quantile at 0.5. Chosen because anyone can check a number against
 *   numpy.quantile by hand; [1,2,3,4,5] has p20 = 1.8 and p80 = 4.2.
 *
 * - Relative noise, the stopping statistic, is the half-width of a
 *   distribution-free 95% confidence interval of the median, divided by the
 *   median. With x(1) <= ... <= x(n), the interval [x(l), x(n+1-l)] holds
 *   the true median with probability 1 - 2 P(B <= l - 1), B ~ Bin(n, 1/2);
 *   l is the largest rank that keeps this >= 95%, computed exactly from
 *   the binomial (n = 10: ranks 2 and 9; n = 20: 6 and 15, as the
 *   published tables). It needs n >= 6; below, the noise is undefined and
 *   the rule cannot converge. rel_noise = (x(n+1-l) - x(l)) / 2 / median.
 *   Why this and not the alternatives:
 *   . nvbench stops on stddev/mean. That is a noise level, not a
 *     precision: it does not shrink with more samples, so a kernel with 1%
 *     run-to-run noise never meets 0.5% and runs to the 15 s timeout
 *     (nvbench then needs a second heuristic, "noise has stabilised").
 *   . The standard error of the mean shrinks with n but is ruled by the
 *     tail: GPU timings are right-skewed, with sporadic preemptions and
 *     clock dips; one sample in 20 at 10x gives a CV near 1.4 and SE/mean
 *     of 4% even at 1000 samples, so it would never stop.
 *   . We report the median. Its interval is what a reader needs ("this
 *     median is known to within 0.5%"), it shrinks like 1/sqrt(n) (1%
 *     lognormal noise: 24 samples in theory, 28 on average in the tests),
 *     it ignores a few huge outliers, and it assumes no distribution.
 *   The CV (stddev/mean) is still reported, so the noise level is visible.
 *
 * - Stopping. Converged: at least min_samples kept (10), at least
 *   min_total_us of kept time (0.5 s, as nvbench's --min-time), and
 *   rel_noise < target_rel_noise (0.5%). Caps: max_samples samples offered
 *   (kept or discarded, so a device stuck throttled or a backend returning
 *   garbage still stops), or max_total_us of measured time offered (kept
 *   plus throttled; invalid samples carry no time). When several hold,
 *   the reason is converged, then sample_cap, then time_cap: a converged
 *   median is a good result however it ended.
 *
 * - Outliers: kept samples above median + 3 x IQR (IQR = p75 - p25, type
 *   7) are counted, not removed. k = 3 sits close to Tukey's "far out"
 *   fence (p75 + 3 IQR): for a normal stream the fence is 4.05 sigma above
 *   the median, about 1 false flag in 39,000 samples, while k = 1.5 (2.02
 *   sigma) would flag 2% of a clean stream and more of the ordinary right
 *   tail of a GPU timing stream. Only the upper side: a kernel is slowed by
 *   interference, not sped up. They are not removed because every statistic
 *   that matters is robust already (median, its interval, p20/p80) and the
 *   mean, stddev and CV should show the noise that really happened. With
 *   IQR = 0 (more than half the samples identical) every sample above the
 *   median counts; real timers (ns) make that a synthetic case.
 */
#include "kernels/kernels.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* The median interval's confidence: 1 - KL_STATS_ALPHA. */
#define KL_STATS_ALPHA 0.05
/* Tukey's far-out fence. */
#define KL_STATS_OUTLIER_K 3.0

void kl_stats_rule_defaults(kl_stats_rule *rule) {
  rule->min_samples = 10;
  rule->min_total_us = 500000.0;
  rule->target_rel_noise = 0.005;
  rule->max_samples = KL_STATS_MAX_SAMPLES;
  rule->max_total_us = 10e6;
  rule->throttle_ratio = 0.75;
}

int kl_stats_rule_check(const kl_stats_rule *r, char *why, size_t whylen) {
  const char *bad = NULL;
  char msg[160];
  if (r->min_samples < 1) {
    snprintf(msg, sizeof msg, "min_samples is %d, expected >= 1",
             r->min_samples);
    bad = msg;
  } else if (r->max_samples < r->min_samples ||
             r->max_samples > KL_STATS_MAX_SAMPLES) {
    snprintf(msg, sizeof msg, "max_samples is %d, expected %d..%d",
             r->max_samples, r->min_samples, KL_STATS_MAX_SAMPLES);
    bad = msg;
  } else if (!isfinite(r->min_total_us) || r->min_total_us < 0) {
    bad = "min_total_us must be a finite number >= 0";
  } else if (isnan(r->max_total_us) || !(r->max_total_us > 0)) {
    bad = "max_total_us must be > 0 (+inf for no time cap)";
  } else if (!isfinite(r->target_rel_noise) || r->target_rel_noise < 0) {
    bad = "target_rel_noise must be a finite number >= 0";
  } else if (!isfinite(r->throttle_ratio) || r->throttle_ratio < 0 ||
             r->throttle_ratio > 1) {
    bad = "throttle_ratio must be in [0, 1]";
  }
  if (!bad) return KL_OK;
  if (why && whylen) snprintf(why, whylen, "timing rule: %s", bad);
  return KL_EINPUT;
}

int kl_stats_init(kl_sampler *s, const kl_stats_rule *rule) {
  int rc = KL_OK;
  memset(s, 0, sizeof *s);
  if (rule && kl_stats_rule_check(rule, NULL, 0) == KL_OK) {
    s->rule = *rule;
  } else {
    rc = rule ? KL_EINPUT : KL_OK;
    kl_stats_rule_defaults(&s->rule);
  }
  return rc;
}

/* The rank l (1-based) of the distribution-free 1 - KL_STATS_ALPHA interval
 * [x(l), x(n+1-l)] of the median: the largest l with 2 P(B <= l - 1) <=
 * alpha, B ~ Bin(n, 1/2). 0 when even l = 1 fails (n <= 5). The binomial
 * terms are summed in log space so that 2^-n does not underflow. */
static int kl_median_ci_rank(int n) {
  double log_choose = 0; /* log C(n, i) */
  double log_half_n = -n * log(2.0);
  double cdf = 0;
  for (int i = 0; i <= n / 2; i++) {
    if (i > 0) log_choose += log((double)(n - i + 1)) - log((double)i);
    cdf += exp(log_choose + log_half_n);
    if (2 * cdf > KL_STATS_ALPHA) return i;
  }
  return n / 2;
}

/* Relative noise as defined above, or INFINITY while undefined. */
static double kl_rel_noise(const kl_sampler *s, double *lo, double *hi) {
  int n = s->n_kept, l = s->ci_rank;
  if (l < 1) return INFINITY;
  *lo = s->sorted[l - 1];
  *hi = s->sorted[n - l];
  double med = kl_stats_quantile(s->sorted, (size_t)n, 0.5);
  return (*hi - *lo) / 2 / med;
}

int kl_stats_add(kl_sampler *s, double us, double sm_clock_mhz,
                 double default_clock_mhz) {
  if (s->n_kept >= KL_STATS_MAX_SAMPLES) return KL_STATS_SAMPLE_FULL;
  s->n_offered++;
  if (!isfinite(us) || !(us > 0)) {
    s->n_invalid++;
    return KL_STATS_SAMPLE_INVALID;
  }
  s->offered_us += us;
  if (sm_clock_mhz > 0 && default_clock_mhz > 0 &&
      sm_clock_mhz < s->rule.throttle_ratio * default_clock_mhz) {
    s->n_throttled++;
    s->throttled_run++;
    return KL_STATS_SAMPLE_THROTTLED;
  }
  s->throttled_run = 0;
  s->kept_us += us;
  s->us[s->n_kept] = us;
  /* Insert into the ascending copy: binary search for the first element
   * greater than us, then shift the tail up by one (O(n), n <= 1000). */
  int lo = 0, hi = s->n_kept;
  while (lo < hi) {
    int mid = lo + (hi - lo) / 2;
    if (s->sorted[mid] <= us)
      lo = mid + 1;
    else
      hi = mid;
  }
  memmove(s->sorted + lo + 1, s->sorted + lo,
          (size_t)(s->n_kept - lo) * sizeof(double));
  s->sorted[lo] = us;
  s->n_kept++;
  s->ci_rank = kl_median_ci_rank(s->n_kept);
  return KL_STATS_SAMPLE_KEPT;
}

int kl_stats_stop_reason(const kl_sampler *s) {
  const kl_stats_rule *r = &s->rule;
  if (s->n_kept >= r->min_samples && s->kept_us >= r->min_total_us) {
    double lo, hi;
    if (kl_rel_noise(s, &lo, &hi) < r->target_rel_noise)
      return KL_STATS_STOP_CONVERGED;
  }
  if (s->n_offered >= r->max_samples) return KL_STATS_STOP_SAMPLE_CAP;
  if (s->offered_us >= r->max_total_us) return KL_STATS_STOP_TIME_CAP;
  return KL_STATS_STOP_RUNNING;
}

int kl_stats_done(const kl_sampler *s) {
  return kl_stats_stop_reason(s) != KL_STATS_STOP_RUNNING;
}

const char *kl_stats_stop_name(int stop) {
  switch (stop) {
  case KL_STATS_STOP_RUNNING:
    return "running";
  case KL_STATS_STOP_CONVERGED:
    return "converged";
  case KL_STATS_STOP_SAMPLE_CAP:
    return "sample_cap";
  case KL_STATS_STOP_TIME_CAP:
    return "time_cap";
  }
  return "unknown";
}

/* a < b with NaN greater than everything: a total order for the sort */
static int before(double a, double b) {
  return isnan(b) ? !isnan(a) : a < b;
}

static void sift_down(double *v, size_t root, size_t n) {
  for (;;) {
    size_t child = 2 * root + 1;
    if (child >= n) return;
    if (child + 1 < n && before(v[child], v[child + 1])) child++;
    if (!before(v[root], v[child])) return;
    double t = v[root];
    v[root] = v[child];
    v[child] = t;
    root = child;
  }
}

void kl_stats_sort(double *v, size_t n) {
  for (size_t i = n / 2; i-- > 0;)
    sift_down(v, i, n);
  for (size_t end = n; end > 1; end--) {
    double t = v[0];
    v[0] = v[end - 1];
    v[end - 1] = t;
    sift_down(v, 0, end - 1);
  }
}

double kl_stats_median(double *v, size_t n) {
  if (n < 1) return -1;
  kl_stats_sort(v, n);
  return kl_stats_quantile(v, n, 0.5);
}

double kl_stats_quantile(const double *sorted, size_t n, double p) {
  if (n == 0) return -1;
  if (!(p > 0)) return sorted[0];
  if (p >= 1) return sorted[n - 1];
  double h = (double)(n - 1) * p;
  size_t i = (size_t)floor(h);
  if (i + 1 >= n) return sorted[n - 1];
  return sorted[i] + (h - (double)i) * (sorted[i + 1] - sorted[i]);
}

void kl_stats_summary(const kl_sampler *s, kl_stats *out) {
  int n = s->n_kept;
  const double *x = s->sorted;
  memset(out, 0, sizeof *out);
  out->n_kept = n;
  out->n_throttled = s->n_throttled;
  out->n_invalid = s->n_invalid;
  out->n_offered = s->n_offered;
  out->kept_us = s->kept_us;
  out->offered_us = s->offered_us;
  out->stop = kl_stats_stop_reason(s);
  out->median = out->min = out->max = out->p20 = out->p80 = -1;
  out->p25 = out->p75 = out->mean = out->stddev = out->cv = -1;
  out->ci_lo = out->ci_hi = out->rel_noise = out->outlier_fence = -1;
  if (n == 0) return;

  out->min = x[0];
  out->max = x[n - 1];
  out->median = kl_stats_quantile(x, (size_t)n, 0.5);
  out->p20 = kl_stats_quantile(x, (size_t)n, 0.2);
  out->p80 = kl_stats_quantile(x, (size_t)n, 0.8);
  out->p25 = kl_stats_quantile(x, (size_t)n, 0.25);
  out->p75 = kl_stats_quantile(x, (size_t)n, 0.75);

  /* Two passes over the ascending copy (fixed order: deterministic, and no
   * cancellation from sum-of-squares). */
  double sum = 0, ss = 0;
  for (int i = 0; i < n; i++)
    sum += x[i];
  out->mean = sum / n;
  for (int i = 0; i < n; i++)
    ss += (x[i] - out->mean) * (x[i] - out->mean);
  out->stddev = n > 1 ? sqrt(ss / (n - 1)) : 0;
  out->cv = out->stddev / out->mean;

  double lo, hi, noise = kl_rel_noise(s, &lo, &hi);
  if (isfinite(noise)) {
    out->ci_lo = lo;
    out->ci_hi = hi;
    out->rel_noise = noise;
  }

  out->outlier_fence = out->median + KL_STATS_OUTLIER_K * (out->p75 - out->p25);
  for (int i = n - 1; i >= 0 && x[i] > out->outlier_fence; i--)
    out->n_outliers++;
}
