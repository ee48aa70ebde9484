/*
 * kernels/pace.c — paced timing: the timed launches of a cpu-emu job,
 * driven from outside the runner's process (kernels.h, kl_pace).
 *
 * Why: on cpu-emu the candidate is native code in its runner's process.
 * Whatever the runner measures, the candidate can rewrite (a probe moved
 * the runner's samples, keeping their sum, and claimed 6x); whatever the
 * runner knows, the candidate can read: the job's seed gives every input
 * the runner will make, so the untimed warm-up could compute the timed
 * launches' outputs ahead and the timed ones only copy them. Here the
 * driver (the supervisor, sandbox/supervisor.c) owns what the score rests
 * on: the inputs (a seed from getrandom per launch that never leaves
 * this process), the clock (taken around each go and done) and the
 * verdict on each launch (before the next one starts, so no launch can
 * finish its work after it said done).
 *
 * The same driver serves an unpaced run (kernels/run.c: the fork
 * executor, in-process runs), with go and done inside the runner, which
 * then trusts its candidate; and the checks on one launch
 * (kl_verify_launch) serve the GPU runner too (kernels/gpu_run.c), which
 * is the lab's own code there. So every timed launch, on every path, has
 * inputs of its own and is checked before the next.
 *
 * Region layout, in floats: kl_pace_sets sets of band A band B band C
 * band, each band KL_CANARY_FLOATS; a batch of k launches uses the first
 * k sets, one each (kernels.h says when and why launches are batched).
 * The runner maps the same memory (the outputs' memfd) and can write all
 * of it: the inputs' reference copies stay here.
 *
 * Where the issue was silent: every row of C by Freivalds' check (C x
 * against A (B x), x random, at the bound the element-wise tolerance
 * gives the row), then 64 spot checks against a float64 dot product at
 * the checks' two tolerances (KL_TOL_ELEM on each, KL_TOL_REL over the
 * 64), all drawn after the launch answered from a secret of their own.
 * The whole of C is scanned for poison and NaN. Each is O(M N) or less
 * next to the launch's O(M N K). A wrong launch is flagged and the timing
 * goes on, as the runner's own timing does: the samples are honest
 * whatever C holds, and the plausibility checks (a kernel that writes
 * nothing is implausibly fast) need them.
 *
 * What probes taught (tests/cheats/forge_input_checksum.cu and the notes
 * in kl_pace): nothing is taken from the shared memory but C, since the
 * runner can rewrite A and B behind any unkeyed checksum; and no seed
 * serves two launches, since one can be recovered from the inputs it drew
 * (2^40 inversions of the generator, minutes on two cores, which the
 * untimed warm-up has).
 */
#define _GNU_SOURCE
#include "kernels/kernels.h"

#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#define SPOTS 64

static double now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

/* One set: band A band B band C band. */
static size_t set_floats(kl_shape sh) {
  return (size_t)sh.M * sh.K + (size_t)sh.K * sh.N + (size_t)sh.M * sh.N +
         4 * (size_t)KL_CANARY_FLOATS;
}

int kl_pace_sets(kl_shape sh) {
  size_t fit = KL_PACE_BATCH_BYTES / (sizeof(float) * set_floats(sh));
  return fit < 1 ? 1 : fit > KL_PACE_MAX_BATCH ? KL_PACE_MAX_BATCH : (int)fit;
}

size_t kl_pace_region_floats(kl_shape sh) {
  return set_floats(sh) * (size_t)kl_pace_sets(sh);
}

size_t kl_pace_floats(const kl_run_job *job) {
  if (!job->timed || !job->paced) return 0;
  return kl_pace_region_floats(job->timed_shape);
}

void kl_pace_buffers(kl_shape sh, float *base, int set, float **A, float **B,
                     float **C) {
  base += set_floats(sh) * (size_t)set;
  *A = base + KL_CANARY_FLOATS;
  *B = *A + (size_t)sh.M * sh.K + KL_CANARY_FLOATS;
  *C = *B + (size_t)sh.K * sh.N + KL_CANARY_FLOATS;
}

static void note(kl_pace_result *res, int bit, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void note(kl_pace_result *res, int bit, const char *fmt, ...) {
  uint64_t f = (uint64_t)1 << bit;
  if (res->flags & f) return;
  res->flags |= f;
  size_t used = strlen(res->flag_detail);
  if (used && used + 2 < sizeof res->flag_detail) {
    memcpy(res->flag_detail + used, "; ", 3);
    used += 2;
  }
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(res->flag_detail + used, sizeof res->flag_detail - used, fmt, ap);
  va_end(ap);
}

uint64_t kl_secret_seed(void) {
  uint64_t s;
  if (getrandom(&s, sizeof s, 0) == (ssize_t)sizeof s) return s;
  s = (uint64_t)(now_us() * 1e3) ^ ((uint64_t)getpid() << 32);
  return kl_splitmix64(&s);
}

/* ---- the checks on one launch (kl_verify_launch) ----
 *
 * Three O(M N + M K + K N) passes, each split by rows over up to
 * `threads` threads (a timed 4096^3 launch on the GPU would otherwise
 * wait about 0.1 s on one core for its checks): the scan of C for poison
 * and NaN, y = B x, then every row of Freivalds' check. Each row's sums
 * run in the same order whatever the split, so the verdict, and the row
 * a failure names (the first), are those of one thread. */

#define MAX_VERIFY_THREADS 64

typedef struct verify_job {
  kl_shape sh;
  const float *A0, *B0, *C0;
  double *x, *y, *rb;
  long unwritten[MAX_VERIFY_THREADS], nonfinite[MAX_VERIFY_THREADS];
  int bad_row[MAX_VERIFY_THREADS]; /* first failing row, or -1 */
  double got[MAX_VERIFY_THREADS], want[MAX_VERIFY_THREADS];
  float *fill; /* kl_fill_random_mt's */
  uint64_t seed, stream;
} verify_job;

typedef void (*range_fn)(verify_job *v, size_t lo, size_t hi, int t);

typedef struct part {
  range_fn fn;
  verify_job *v;
  size_t lo, hi;
  int t;
} part;

static void *part_main(void *arg) {
  part *p = arg;
  p->fn(p->v, p->lo, p->hi, p->t);
  return NULL;
}

/* Starting and joining a thread costs tens of microseconds (100 on this
 * project's 2-core VM): a part is worth a thread only with about 2^18
 * elements of work, a quarter of a millisecond or more. */
#define MIN_PART_WORK ((size_t)1 << 18)

/* fn over [0, n) in up to `threads` contiguous parts, part t on thread t
 * (part 0 on the caller's); `work` is the whole's, in elements touched.
 * A thread that cannot start leaves its part to the caller: the same
 * work, later. */
static void split(int threads, size_t n, size_t work, range_fn fn,
                  verify_job *v) {
  if (threads > MAX_VERIFY_THREADS) threads = MAX_VERIFY_THREADS;
  if ((size_t)threads > work / MIN_PART_WORK)
    threads = (int)(work / MIN_PART_WORK);
  if ((size_t)threads > n) threads = (int)n;
  if (threads < 1) threads = 1;
  part parts[MAX_VERIFY_THREADS];
  pthread_t tid[MAX_VERIFY_THREADS];
  int started[MAX_VERIFY_THREADS] = {0};
  for (int t = 0; t < threads; t++)
    parts[t] = (part){fn, v, n * (size_t)t / (size_t)threads,
                      n * (size_t)(t + 1) / (size_t)threads, t};
  for (int t = 1; t < threads; t++)
    started[t] = pthread_create(&tid[t], NULL, part_main, &parts[t]) == 0;
  part_main(&parts[0]);
  for (int t = 1; t < threads; t++) {
    if (started[t])
      pthread_join(tid[t], NULL);
    else
      part_main(&parts[t]);
  }
}

static void scan_rows(verify_job *v, size_t lo, size_t hi, int t) {
  long unwritten = 0, nonfinite = 0;
  for (size_t i = lo * v->sh.N; i < hi * v->sh.N; i++) {
    uint32_t bits;
    memcpy(&bits, &v->C0[i], 4);
    if (bits == KL_POISON_BITS)
      unwritten++;
    else if (!isfinite(v->C0[i]))
      nonfinite++;
  }
  v->unwritten[t] = unwritten;
  v->nonfinite[t] = nonfinite;
}

/* y = B x and rb = |B| 1, rows lo .. hi of B */
static void b_times_x(verify_job *v, size_t lo, size_t hi, int t) {
  (void)t;
  int N = v->sh.N;
  for (size_t k = lo; k < hi; k++) {
    const float *b = v->B0 + k * N;
    double sum = 0, mag = 0;
    for (int j = 0; j < N; j++) {
      sum += b[j] * v->x[j];
      mag += fabs(b[j]);
    }
    v->y[k] = sum;
    v->rb[k] = mag;
  }
}

/* Freivalds' check of rows lo .. hi: C x against A (B x). Honest rounding
 * moves row i of C x by at most KL_TOL_ELEM sum_j S_ij (S the checks'
 * scale, sum_k |A_ik| |B_kj|), which is sum_k |A_ik| rb_k; a row of C
 * wrong by more than that shows whatever positions the spot checks drew,
 * so a kernel that got those (or the inputs) ahead still has to compute
 * every row. */
static void check_rows(verify_job *v, size_t lo, size_t hi, int t) {
  int N = v->sh.N, K = v->sh.K;
  v->bad_row[t] = -1;
  for (size_t i = lo; i < hi; i++) {
    const float *a = v->A0 + i * K, *c = v->C0 + i * N;
    double want = 0, bound = 0, got = 0;
    for (int k = 0; k < K; k++) {
      want += a[k] * v->y[k];
      bound += fabs(a[k]) * v->rb[k];
    }
    for (int j = 0; j < N; j++)
      got += c[j] * v->x[j];
    if (!(fabs(got - want) <= KL_TOL_ELEM * bound)) {
      v->bad_row[t] = (int)i;
      v->got[t] = got;
      v->want[t] = want;
      return;
    }
  }
}

static void fill_part(verify_job *v, size_t lo, size_t hi, int t) {
  (void)t;
  kl_fill_random_at(v->fill + lo, hi - lo, v->seed, v->stream, lo);
}

void kl_fill_random_mt(float *x, size_t n, uint64_t seed, uint64_t stream,
                       int threads) {
  verify_job v = {.fill = x, .seed = seed, .stream = stream};
  split(threads, n, n, fill_part, &v);
}

void kl_verify_launch(kl_shape sh, const float *A0, const float *B0,
                      const float *C0, double *scratch, uint64_t *rng, int n,
                      int threads, kl_pace_result *res) {
  if (res->flags >> KL_FLAG_TIMED_OUTPUT_WRONG & 1)
    return; /* one wrong launch says it; the rest only cost time */
  verify_job job = {.sh = sh}, *v = &job;
  v->A0 = A0;
  v->B0 = B0;
  v->C0 = C0;
  v->x = scratch;
  v->y = v->x + sh.N;
  v->rb = v->y + sh.K;
  split(threads, (size_t)sh.M, (size_t)sh.M * sh.N, scan_rows, v);
  long unwritten = 0, nonfinite = 0;
  for (int t = 0; t < MAX_VERIFY_THREADS; t++) {
    unwritten += v->unwritten[t];
    nonfinite += v->nonfinite[t];
  }
  if (unwritten || nonfinite) {
    note(res, KL_FLAG_TIMED_OUTPUT_WRONG,
         "timed launch %d left %ld elements of C unwritten, %ld NaN/inf", n,
         unwritten, nonfinite);
    return;
  }
  for (int j = 0; j < sh.N; j++)
    v->x[j] = kl_splitmix64(rng) >> 63 ? 1.0 : -1.0;
  split(threads, (size_t)sh.K, (size_t)sh.K * sh.N, b_times_x, v);
  for (int t = 0; t < MAX_VERIFY_THREADS; t++)
    v->bad_row[t] = -1;
  split(threads, (size_t)sh.M, (size_t)sh.M * (sh.K + sh.N), check_rows, v);
  for (int t = 0; t < MAX_VERIFY_THREADS; t++) {
    if (v->bad_row[t] < 0) continue; /* parts ascend: the first is first */
    note(res, KL_FLAG_TIMED_OUTPUT_WRONG,
         "timed launch %d: row %d of C x is %.6g where A (B x) gives %.6g "
         "(Freivalds)",
         n, v->bad_row[t], v->got[t], v->want[t]);
    return;
  }
  double diff2 = 0, ref2 = 0;
  for (int t = 0; t < SPOTS; t++) {
    int r = (int)(kl_splitmix64(rng) % (uint64_t)sh.M);
    int c = (int)(kl_splitmix64(rng) % (uint64_t)sh.N);
    double ref = 0, mag = 0;
    for (int k = 0; k < sh.K; k++) {
      double p = (double)A0[(size_t)r * sh.K + k] * B0[(size_t)k * sh.N + c];
      ref += p;
      mag += fabs(p);
    }
    double got = C0[(size_t)r * sh.N + c];
    diff2 += (got - ref) * (got - ref);
    ref2 += ref * ref;
    if (!(fabs(got - ref) <= KL_TOL_ELEM * mag)) {
      note(res, KL_FLAG_TIMED_OUTPUT_WRONG,
           "timed launch %d: C[%d][%d] = %.6g where %.6g was expected", n, r, c,
           got, ref);
      return;
    }
  }
  /* the checks' other bound, on the sample: the element-wise one alone
   * lets through an error of 1e-4 on every element (or lower precision) */
  double rel = ref2 > 0 ? sqrt(diff2 / ref2) : sqrt(diff2);
  if (!(rel <= KL_TOL_REL))
    note(res, KL_FLAG_TIMED_OUTPUT_WRONG,
         "timed launch %d: relative error %.3g over %d sampled elements "
         "(tolerance %.0e)",
         n, rel, SPOTS, KL_TOL_REL);
}

/* The checks on launch n, finished on set `set` of a paced region; flags
 * in res. */
static void verify(const kl_run_job *job, float *region, int set,
                   const float *A0, const float *B0, const float *C0,
                   double *scratch, uint64_t *rng, int n, kl_pace_result *res) {
  kl_shape sh = job->timed_shape;
  float *A, *B, *C;
  kl_pace_buffers(sh, region, set, &A, &B, &C);
  size_t na = (size_t)sh.M * sh.K, nb = (size_t)sh.K * sh.N,
         nc = (size_t)sh.M * sh.N;
  if (!kl_canary_intact(A - KL_CANARY_FLOATS) ||
      !kl_canary_intact(B - KL_CANARY_FLOATS) ||
      !kl_canary_intact(C - KL_CANARY_FLOATS) || !kl_canary_intact(C + nc))
    note(res, KL_FLAG_CANARY_OVERWRITTEN,
         "a write outside A, B or C at %dx%dx%d (timed launch %d)", sh.M, sh.N,
         sh.K, n);
  if (memcmp(A, A0, na * sizeof(float)) || memcmp(B, B0, nb * sizeof(float)))
    note(res, KL_FLAG_INPUT_MUTATED,
         "A or B changed at %dx%dx%d (timed launch %d)", sh.M, sh.N, sh.K, n);
  kl_verify_launch(sh, A0, B0, C0, scratch, rng, n, 1, res);
}

void kl_pace(const kl_run_job *job, float *region, const kl_pace_io *io,
             kl_pace_result *res) {
  memset(res, 0, sizeof *res);
  kl_shape sh = job->timed_shape;
  int sets = kl_pace_sets(sh);
  size_t na = (size_t)sh.M * sh.K, nb = (size_t)sh.K * sh.N,
         nc = (size_t)sh.M * sh.N, per = na + nb + nc;
  /* The inputs as drawn, in this process only: the spot checks' reference
   * and what A and B must still equal. The runner can write the shared
   * copies, so nothing is ever taken from them (a probe rewrote A into
   * zeros whose unkeyed checksum it had made to match, then wrote C = 0).
   * And C0, the output as it was when the runner answered. One of each
   * per set. */
  float *keep = malloc(sizeof(float) * per * (size_t)sets);
  double *scratch = malloc(sizeof(double) * KL_VERIFY_SCRATCH(sh));
  if (!keep || !scratch) {
    free(keep);
    free(scratch);
    res->ended = -2;
    io->go(io->ctx, -1, 0);
    return;
  }
  for (int i = 0; i < sets; i++) {
    float *A, *B, *C;
    kl_pace_buffers(sh, region, i, &A, &B, &C);
    kl_canary_fill(A - KL_CANARY_FLOATS);
    kl_canary_fill(B - KL_CANARY_FLOATS);
    kl_canary_fill(C - KL_CANARY_FLOATS);
    kl_canary_fill(C + nc);
  }
  uint64_t rng = kl_secret_seed();
  int max = job->max_samples < KL_MAX_TIMING_SAMPLES ? job->max_samples
                                                     : KL_MAX_TIMING_SAMPLES;
  double total = 0, fastest = 0; /* a launch's time, the least so far */
  int launch = 0;                /* the next launch's number (0 the warm-up) */
  for (int n = 0;; n++) {
    if (n > 0 && (res->samples >= max ||
                  (res->samples >= 5 && total >= job->time_budget_ms * 1e3)))
      break;
    int k = 1;
    if (fastest > 0) {
      double want = ceil(KL_PACE_BATCH_US / fastest);
      k = want > sets ? sets : want < 1 ? 1 : (int)want;
    }
    /* Fresh inputs drawn here for each launch of the batch, a poisoned C,
     * then the inputs shared, just before the clock starts: the launches
     * are what is timed. (Code of the candidate's still running in the
     * runner could start on the inputs as they appear: it gains the
     * copy's time at most.) A seed of its own per launch: one recovered
     * from a launch's inputs (the generator is a bijection of a 64-bit
     * state, and each float shows 24 bits of it) would otherwise give
     * every later launch's inputs, and the untimed warm-up time to
     * compute their outputs. */
    for (int i = 0; i < k; i++) {
      float *A, *B, *C, *A0 = keep + per * (size_t)i, *B0 = A0 + na;
      kl_pace_buffers(sh, region, i, &A, &B, &C);
      uint64_t seed = kl_secret_seed();
      kl_fill_random(A0, na, seed, 0);
      kl_fill_random(B0, nb, seed, 1);
      kl_poison(C, nc);
      memcpy(A, A0, na * sizeof(float));
      memcpy(B, B0, nb * sizeof(float));
    }
    double t0 = now_us();
    if (io->go(io->ctx, n, k) != 0) {
      res->ended = -1;
      break;
    }
    int ran = io->done(io->ctx);
    double dt = now_us() - t0;
    /* Every C as it is at the answer, before anything else: code of the
     * candidate's still running (a pool thread kept back from the
     * launch's end) could otherwise finish rows while the checks below
     * read them, work off the clock (a probe's estimate: near 2x on 16
     * cores). */
    if (ran > 0)
      for (int i = 0; i < k; i++) {
        float *A, *B, *C;
        kl_pace_buffers(sh, region, i, &A, &B, &C);
        memcpy(keep + per * (size_t)i + na + nb, C, nc * sizeof(float));
      }
    if (ran <= 0) {
      res->ended = ran < 0 ? -1 : 1;
      break;
    }
    for (int i = 0; i < k; i++) {
      const float *A0 = keep + per * (size_t)i;
      verify(job, region, i, A0, A0 + na, A0 + na + nb, scratch, &rng,
             launch + i, res);
    }
    launch += k;
    if (n == 0) continue; /* the warm-up */
    res->sample_us[res->samples++] = dt / k;
    res->launches += k;
    if (k > res->batch_max) res->batch_max = k;
    total += dt;
    if (fastest <= 0 || dt / k < fastest) fastest = dt / k;
  }
  if (res->ended == 0 && io->go(io->ctx, -1, 0) != 0) res->ended = -1;
  free(keep);
  free(scratch);
}

void kl_report_flags(kl_run_report *rep, uint64_t flags, const char *detail) {
  uint64_t fresh = flags & ~rep->flags;
  rep->flags |= flags;
  if (!fresh) return;
  /* appended as far as it fits: the detail is a hint, the bits count */
  char *d = rep->flag_detail;
  size_t cap = sizeof rep->flag_detail - 1, used = strnlen(d, cap),
         add = strnlen(detail, cap);
  if (used && used + 2 <= cap) {
    memcpy(d + used, "; ", 2);
    used += 2;
  }
  if (add > cap - used) add = cap - used;
  memcpy(d + used, detail, add);
  d[used + add] = 0;
}

void kl_report_flag_at(kl_run_report *rep, int bit, const char *what,
                       kl_shape sh) {
  char detail[160];
  snprintf(detail, sizeof detail, "%s at %dx%dx%d", what, sh.M, sh.N, sh.K);
  kl_report_flags(rep, (uint64_t)1 << bit, detail);
}

void kl_pace_merge(kl_run_report *rep, const kl_pace_result *res) {
  rep->paced_samples = res->samples;
  rep->timed_launches = res->launches;
  memcpy(rep->paced_us, res->sample_us, sizeof(double) * (size_t)res->samples);
  kl_report_flags(rep, res->flags, res->flag_detail);
}
