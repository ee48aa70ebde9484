/*
 * kernels/check.c — the evaluation protocol behind `kernlab eval`: is the
 * candidate valid, does it compile, is it right, how fast did it run.
 *
 * Correctness: for every check shape (the target, any --shape, and the fixed
 * set 1x1x1, 127x129x65, 64x64x64, 33x17x200, 200x5x33) fresh inputs are
 * drawn from (seed, shape index), the output is poisoned with a NaN carrying
 * a payload (so unwritten elements are told apart from computed NaNs), and
 * the result is compared with a float64 reference at the tolerances stated
 * in kernels.h. The reference is computed in the lab process, before the
 * candidate runs, where the candidate cannot reach it.
 *
 * Running: the untrusted steps go through an executor (kl_executor): the
 * NVRTC compile and the run job (kernels/run.c). `kernlab eval` hands in the
 * sandbox's workers; without one, NVRTC runs here and the job in a forked
 * child. Either way the supervisor holds a wall deadline, so a kernel that
 * crashes or hangs costs its own result and nothing else. The host compile
 * for cpu-emu runs here as a separate, limited compiler process.
 *
 * Timing on cpu-emu: one warm-up run, then runs until at least 5 samples and
 * the time budget are reached (or max_samples); median, min, max of the
 * wall time of each launch. Under the sandbox the supervisor paces them
 * (kernels/pace.c): fresh inputs it drew, its clock, each launch checked
 * before the next; the runner's own samples are a claim held to those.
 * Without it (the fork executor) the runner paces itself the same way, in
 * the candidate's process. These are CPU times: they are
 * labelled cpu-emu and never presented as GPU speed. The baseline is the
 * naive seed, timed the same way.
 */
#define _GNU_SOURCE
#include "kernels/kernels.h"

#include <errno.h>
#include <stdarg.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static const kl_shape fixed_shapes[] = {
    {1, 1, 1}, {127, 129, 65}, {64, 64, 64}, {33, 17, 200}, {200, 5, 33}};

static double now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

void kl_eval_defaults(kl_eval_options *o) {
  memset(o, 0, sizeof *o);
  o->backend = "auto";
  o->time_budget_ms = 300;
  o->max_samples = 50;
  o->run_deadline_s = 120;
  o->baseline_us = -1;
  o->max_speedup = 1000;
}

/* The device kl_backend_resolve found. Not only set before threads start:
 * every evaluation resolves its backend again (eval_impl), on the
 * evaluator's slot threads at once, while the lab's thread reads it for a
 * result's device (kl_backend_device): under device_mu. */
static pthread_mutex_t device_mu = PTHREAD_MUTEX_INITIALIZER;
static char resolved_device[96];

const char *kl_backend_device(const char *backend, char *out, size_t len) {
  if (!strcmp(backend, "gpu")) {
    pthread_mutex_lock(&device_mu);
    snprintf(out, len, "%s", resolved_device[0] ? resolved_device : "gpu");
    pthread_mutex_unlock(&device_mu);
    return out;
  }
  snprintf(out, len, "cpu");
  FILE *f = fopen("/proc/cpuinfo", "r");
  char line[256];
  while (f && fgets(line, sizeof line, f)) {
    if (strncmp(line, "model name", 10)) continue;
    const char *v = strchr(line, ':');
    if (!v) break;
    v += strspn(v + 1, " \t") + 1;
    size_t n = strcspn(v, "\n");
    snprintf(out, len, "cpu (%.*s)", (int)n, v);
    break;
  }
  if (f) fclose(f);
  return out;
}

int kl_backend_resolve(const char *requested, char *backend, size_t len,
                       char *why, size_t whylen) {
  why[0] = 0;
  if (!strcmp(requested, "cpu-emu")) {
    snprintf(backend, len, "cpu-emu");
    return KL_OK;
  }
  if (!strcmp(requested, "gpu") || !strcmp(requested, "auto")) {
    char dev[96], probe[400];
    if (kl_gpu_probe(probe, sizeof probe, dev, sizeof dev) == KL_OK) {
      snprintf(backend, len, "gpu");
      pthread_mutex_lock(&device_mu);
      snprintf(resolved_device, sizeof resolved_device, "%s", dev);
      pthread_mutex_unlock(&device_mu);
      snprintf(why, whylen, "backend: gpu (%s)", dev);
      return KL_OK;
    }
    if (!strcmp(requested, "gpu")) {
      /* the probe's reason alone: the caller names what asked for the
       * device (eval's --backend, a campaign's backend field) */
      snprintf(why, whylen, "%s", probe);
      return KL_EENV;
    }
    snprintf(backend, len, "cpu-emu");
    snprintf(why, whylen,
             "backend: cpu-emu (no GPU: %s; times are CPU times, not GPU "
             "times)",
             probe);
    return KL_OK;
  }
  snprintf(why, whylen, "unknown backend '%s': expected auto, cpu-emu or gpu",
           requested);
  return KL_EINPUT;
}

/* ---- inputs, reference, comparison ---- */

uint64_t kl_splitmix64(uint64_t *s) {
  uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

void kl_fill_random_at(float *x, size_t n, uint64_t seed, uint64_t stream,
                       size_t first) {
  /* splitmix64's state only counts: draw i starts from s0 + i gamma */
  uint64_t s = (seed ^ (stream * 0xd1b54a32d192ed03ull)) +
               (uint64_t)first * 0x9e3779b97f4a7c15ull;
  for (size_t i = 0; i < n; i++)
    x[i] = (float)((double)(kl_splitmix64(&s) >> 40) * 0x1p-23 - 1.0);
}

void kl_fill_random(float *x, size_t n, uint64_t seed, uint64_t stream) {
  kl_fill_random_at(x, n, seed, stream, 0);
}

/* ---- a rerun whose inputs do not repeat (kernels.h, kl_scaled) ----
 * Why: the emulator runs the candidate as native code in the runner's
 * process, so a memo of earlier outputs can live anywhere in it (a probe
 * kept one in the slack after libc's data, found from &memcpy); no build
 * check can see that. The rerun of the first check (second_run) is
 * compared with the first run: on the same inputs a memo would answer it,
 * and a race would hide behind the replay. Scaled, a memo keyed on the
 * values misses and one that replays regardless replays the wrong scales
 * (test_emu.c, test_memo_misses_or_is_caught). Timed launches need none of
 * this: each has inputs of its own (kl_pace, kernels/gpu_run.c). Same
 * draws on both backends (kernels/run.c, kernels/gpu_run.c). */

/* 2^e for e in -6 .. 6: multiplying by one is exact, as ldexpf is */
static const float kl_pow2[13] = {0x1p-6f, 0x1p-5f, 0x1p-4f, 0x1p-3f, 0x1p-2f,
                                  0x1p-1f, 1.0f,    0x1p1f,  0x1p2f,  0x1p3f,
                                  0x1p4f,  0x1p5f,  0x1p6f};

int kl_scaled_init(kl_scaled *ss, const float *A, const float *B, kl_shape sh) {
  size_t na = (size_t)sh.M * sh.K, nb = (size_t)sh.K * sh.N;
  memset(ss, 0, sizeof *ss);
  ss->sh = sh;
  ss->A0 = malloc(na * sizeof(float));
  ss->B0 = malloc(nb * sizeof(float));
  ss->er = malloc((size_t)sh.M);
  ss->ec = malloc((size_t)sh.N);
  if (!ss->A0 || !ss->B0 || !ss->er || !ss->ec) {
    kl_scaled_free(ss);
    return -1;
  }
  memcpy(ss->A0, A, na * sizeof(float));
  memcpy(ss->B0, B, nb * sizeof(float));
  memset(ss->er, 0, (size_t)sh.M);
  memset(ss->ec, 0, (size_t)sh.N);
  return 0;
}

void kl_scaled_free(kl_scaled *ss) {
  free(ss->A0);
  free(ss->B0);
  free(ss->er);
  free(ss->ec);
  memset(ss, 0, sizeof *ss);
}

void kl_scaled_inputs(kl_scaled *ss, float *A, float *B, uint64_t seed,
                      uint64_t launch_no) {
  kl_shape sh = ss->sh;
  uint64_t s = seed ^ (launch_no * 0xd1b54a32d192ed03ull) ^ 0x5ca1ed;
  for (int r = 0; r < sh.M; r++)
    ss->er[r] = (signed char)((int)(kl_splitmix64(&s) % 7) - 3);
  for (int c = 0; c < sh.N; c++)
    ss->ec[c] = (signed char)((int)(kl_splitmix64(&s) % 7) - 3);
  for (int r = 0; r < sh.M; r++) {
    float f = kl_pow2[ss->er[r] + 6];
    const float *a0 = ss->A0 + (size_t)r * sh.K;
    float *a = A + (size_t)r * sh.K;
    for (int k = 0; k < sh.K; k++)
      a[k] = a0[k] * f;
  }
  for (int k = 0; k < sh.K; k++) {
    const float *b0 = ss->B0 + (size_t)k * sh.N;
    float *b = B + (size_t)k * sh.N;
    for (int c = 0; c < sh.N; c++)
      b[c] = b0[c] * kl_pow2[ss->ec[c] + 6];
  }
}

void kl_scaled_output(const kl_scaled *ss, float *C) {
  kl_shape sh = ss->sh;
  for (int r = 0; r < sh.M; r++) {
    float *c = C + (size_t)r * sh.N;
    for (int j = 0; j < sh.N; j++)
      c[j] *= kl_pow2[6 - ss->er[r] - ss->ec[j]];
  }
}

/* ---- references, cached ----
 *
 * A candidate's references depend only on its inputs, that is on (seed,
 * stream, shape): every candidate of a campaign step (and of a search
 * step) is evaluated with the step's seed, so they all check against the
 * same float64 products, which cost more than the emulated kernel at small
 * shapes (tests/bench/bench_reference measures what the cache saves). The
 * cache keeps the most recently used ones (REF_CACHE_BYTES in all, none
 * larger than a quarter of that) for the evaluation threads to share. A
 * hit is a copy, exactly what the computation gives. */

#define REF_CACHE_SLOTS 32
#define REF_CACHE_BYTES ((size_t)128 << 20)

typedef struct ref_entry {
  uint64_t seed, stream, used;
  int M, N, K;
  double *R, *S; /* NULL: a free slot */
} ref_entry;

static ref_entry ref_cache[REF_CACHE_SLOTS];
static size_t ref_bytes;
static uint64_t ref_clock;
static int64_t ref_hits;
static pthread_mutex_t ref_mu = PTHREAD_MUTEX_INITIALIZER;

int64_t kl_reference_cache_hits(void) {
  pthread_mutex_lock(&ref_mu);
  int64_t h = ref_hits;
  pthread_mutex_unlock(&ref_mu);
  return h;
}

static ref_entry *ref_find(uint64_t seed, uint64_t stream, kl_shape sh) {
  for (int i = 0; i < REF_CACHE_SLOTS; i++) {
    ref_entry *e = &ref_cache[i];
    if (e->R && e->seed == seed && e->stream == stream && e->M == sh.M &&
        e->N == sh.N && e->K == sh.K)
      return e;
  }
  return NULL;
}

/* R and S (M*N each, the caller's) for the inputs of (seed, stream, sh):
 * A from stream, B from stream + 1, as the runner makes them. 0, or -1 out
 * of memory. */
static int reference_for(uint64_t seed, uint64_t stream, kl_shape sh, double *R,
                         double *S) {
  size_t n = (size_t)sh.M * sh.N, bytes = 2 * n * sizeof(double);
  pthread_mutex_lock(&ref_mu);
  ref_entry *e = ref_find(seed, stream, sh);
  if (e) {
    memcpy(R, e->R, n * sizeof(double));
    memcpy(S, e->S, n * sizeof(double));
    e->used = ++ref_clock;
    ref_hits++;
  }
  pthread_mutex_unlock(&ref_mu);
  if (e) return 0;
  float *A = malloc(sizeof(float) * (size_t)sh.M * sh.K);
  float *B = malloc(sizeof(float) * (size_t)sh.K * sh.N);
  if (!A || !B) {
    free(A);
    free(B);
    return -1;
  }
  kl_fill_random(A, (size_t)sh.M * sh.K, seed, stream);
  kl_fill_random(B, (size_t)sh.K * sh.N, seed, stream + 1);
  kl_reference(A, B, R, S, sh.M, sh.N, sh.K);
  free(A);
  free(B);
  if (bytes > REF_CACHE_BYTES / 4) return 0;
  double *cr = malloc(n * sizeof(double)), *cs = malloc(n * sizeof(double));
  if (!cr || !cs) {
    free(cr);
    free(cs);
    return 0;
  }
  memcpy(cr, R, n * sizeof(double));
  memcpy(cs, S, n * sizeof(double));
  pthread_mutex_lock(&ref_mu);
  if (ref_find(seed, stream, sh)) { /* another thread was quicker */
    pthread_mutex_unlock(&ref_mu);
    free(cr);
    free(cs);
    return 0;
  }
  /* evict the least recently used until a slot and the bytes are free */
  for (;;) {
    int free_slot = -1, lru = -1;
    for (int i = 0; i < REF_CACHE_SLOTS; i++) {
      if (!ref_cache[i].R) {
        if (free_slot < 0) free_slot = i;
      } else if (lru < 0 || ref_cache[i].used < ref_cache[lru].used) {
        lru = i;
      }
    }
    if (free_slot >= 0 && ref_bytes + bytes <= REF_CACHE_BYTES) {
      ref_cache[free_slot] =
          (ref_entry){seed, stream, ++ref_clock, sh.M, sh.N, sh.K, cr, cs};
      ref_bytes += bytes;
      break;
    }
    ref_entry *v = &ref_cache[lru]; /* lru >= 0: the cache is not empty */
    ref_bytes -= 2 * (size_t)v->M * v->N * sizeof(double);
    free(v->R);
    free(v->S);
    memset(v, 0, sizeof *v);
  }
  pthread_mutex_unlock(&ref_mu);
  return 0;
}

void kl_reference(const float *A, const float *B, double *R, double *S, int M,
                  int N, int K) {
  memset(R, 0, sizeof(double) * (size_t)M * (size_t)N);
  memset(S, 0, sizeof(double) * (size_t)M * (size_t)N);
  for (int i = 0; i < M; i++) {
    double *r = R + (size_t)i * N, *s = S + (size_t)i * N;
    for (int k = 0; k < K; k++) {
      double a = A[(size_t)i * K + k], aa = fabs(a);
      const float *b = B + (size_t)k * N;
      for (int j = 0; j < N; j++) {
        r[j] += a * b[j];
        s[j] += aa * fabs((double)b[j]);
      }
    }
  }
}

void kl_poison(float *C, size_t n) {
  uint32_t bits = KL_POISON_BITS;
  for (size_t i = 0; i < n; i++)
    memcpy(&C[i], &bits, 4);
}

void kl_compare(const float *C, const double *R, const double *S,
                kl_shape_check *ck) {
  size_t n = (size_t)ck->shape.M * (size_t)ck->shape.N;
  double diff2 = 0, ref2 = 0, maxabs = 0;
  size_t finite = 0;
  ck->unwritten = ck->nonfinite = ck->over_tol = 0;
  for (size_t i = 0; i < n; i++) {
    uint32_t bits;
    memcpy(&bits, &C[i], 4);
    if (bits == KL_POISON_BITS) {
      ck->unwritten++;
      continue;
    }
    if (!isfinite(C[i])) {
      ck->nonfinite++;
      continue;
    }
    double d = fabs((double)C[i] - R[i]);
    finite++;
    diff2 += d * d;
    ref2 += R[i] * R[i];
    if (d > maxabs) maxabs = d;
    if (d > KL_TOL_ELEM * S[i]) ck->over_tol++;
  }
  ck->rel_err = ref2 > 0 ? sqrt(diff2 / ref2) : sqrt(diff2);
  ck->max_abs_err = maxabs;
  /* A NaN or inf the kernel wrote is an infinite error, and an output with
   * no finite element has none measured: either way 0 would read as exact
   * (an all-inf C was reported with rel_err 0). */
  if (ck->nonfinite > 0 || (n > 0 && finite == 0))
    ck->rel_err = ck->max_abs_err = INFINITY;
  ck->pass = ck->unwritten == 0 && ck->nonfinite == 0 && ck->over_tol == 0 &&
             ck->rel_err <= KL_TOL_REL;
}

void kl_compare_fp32(const float *c, const float *d, const float *bound, int M,
                     int N, int ld, kl_fp32_agreement *a) {
  double diff2 = 0, ref2 = 0, worst = 0;
  memset(a, 0, sizeof *a);
  a->first = -1;
  for (int m = 0; m < M; m++)
    for (int n = 0; n < N; n++) {
      size_t i = (size_t)m * ld + n;
      if (!isfinite(c[i])) {
        if (!a->nonfinite++ && a->first < 0) a->first = (long)i;
        continue;
      }
      double e = fabs((double)c[i] - d[i]);
      double r = e / (2 * KL_TOL_ELEM * (double)bound[i] + 1e-30);
      if (r > 1 && !a->over++ && a->first < 0) a->first = (long)i;
      if (r > worst) worst = r;
      diff2 += e * e;
      ref2 += (double)d[i] * d[i];
    }
  a->rel = ref2 > 0 ? sqrt(diff2 / ref2) : sqrt(diff2);
  if (a->rel / (2 * KL_TOL_REL) > worst) worst = a->rel / (2 * KL_TOL_REL);
  a->worst = worst;
  a->pass = !a->nonfinite && !a->over && a->rel <= 2 * KL_TOL_REL;
}

void kl_fp32_agreement_say(const kl_fp32_agreement *a, const float *c,
                           const float *d, int ld, char *why, size_t len) {
  long at = a->first >= 0 ? a->first : 0;
  snprintf(why, len,
           "%ld elements NaN/inf (unwritten?), %ld over %.0e x sum|a||b|, "
           "relative Frobenius error %.3g (tolerance %.0e); first at "
           "[%ld][%ld]: %g vs %g",
           a->nonfinite, a->over, 2 * KL_TOL_ELEM, a->rel, 2 * KL_TOL_REL,
           at / ld, at % ld, (double)c[at], (double)d[at]);
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

/* ---- one candidate ---- */

static void set_status(kl_result *out, const char *status, const char *fmt,
                       const char *msg) {
  snprintf(out->status, sizeof out->status, "%s", status);
  snprintf(out->error, sizeof out->error, fmt, msg);
}

static uint64_t pick_seed(void) {
  uint64_t s = 0;
  int fd = open("/dev/urandom", O_RDONLY);
  if (fd >= 0) {
    if (read(fd, &s, sizeof s) != (ssize_t)sizeof s) s = 0;
    close(fd);
  }
  if (!s) s = (uint64_t)now_us() ^ ((uint64_t)getpid() << 32);
  return s & 0xffffffffffffull; /* short enough to type back as --seed */
}

/* The shapes to check: target first, then --shape extras, then the fixed
 * set, without duplicates. */
static int plan_shapes(const kl_eval_options *o, kl_shape *shapes) {
  int n = 0;
  if (o->n_shapes > 0) {
    for (int i = 0; i < o->n_shapes && n < KL_MAX_SHAPES; i++)
      shapes[n++] = o->shapes[i];
  } else {
    shapes[n++] = (kl_shape){256, 256, 256};
  }
  for (size_t i = 0; i < sizeof fixed_shapes / sizeof *fixed_shapes; i++) {
    int dup = 0;
    for (int j = 0; j < n; j++)
      dup |= !memcmp(&shapes[j], &fixed_shapes[i], sizeof(kl_shape));
    if (!dup && n < KL_MAX_SHAPES) shapes[n++] = fixed_shapes[i];
  }
  return n;
}

/* Appends "; <text>" to the result's flag detail. */
static void add_detail(kl_result *out, const char *fmt, ...) {
  char text[160];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(text, sizeof text, fmt, ap);
  va_end(ap);
  size_t used = strlen(out->flag_detail);
  snprintf(out->flag_detail + used, sizeof out->flag_detail - used, "%s%s",
           used ? "; " : "", text);
}

/* The dynamic anti-cheat checks on a finished run (flags, and the verdict
 * where the evidence is a wrong output). Static flags are already set. */
/* Removes from detail ("; "-separated findings) those that start with
 * prefix. */
static void drop_findings(char *detail, const char *prefix) {
  char *w = detail;
  for (char *r = detail; *r;) {
    char *end = strstr(r, "; ");
    size_t len = end ? (size_t)(end - r) : strlen(r);
    if (strncmp(r, prefix, strlen(prefix)) != 0) {
      if (w != detail) memcpy(w, "; ", 2), w += 2;
      memmove(w, r, len);
      w += len;
    }
    r += len + (end ? 2 : 0);
  }
  *w = 0;
}

static void dynamic_checks(const kl_run_job *job, const kl_run_report *rep,
                           const float *outs, const size_t *offs,
                           kl_result *out) {
  int n = job->n_shapes;
  /* The checked run at the target shape was wrong: whatever the timed
   * launches (at that shape) gave is no news, and no sign of a cheat. The
   * flag is for a kernel right while checked and wrong while timed; raised
   * for a plain wrong kernel it cost 20 (default.lua), below a compile
   * error, and GRPO learned that crashing pays better than an honest
   * mistake (the walkthrough review). */
  uint64_t dyn = rep->flags & KL_FLAGS_DYNAMIC;
  char detail[sizeof rep->flag_detail];
  memcpy(detail, rep->flag_detail, sizeof detail);
  detail[sizeof detail - 1] = 0;
  if (n > 0 && !out->checks[0].pass &&
      (dyn >> KL_FLAG_TIMED_OUTPUT_WRONG & 1)) {
    dyn &= ~((uint64_t)1 << KL_FLAG_TIMED_OUTPUT_WRONG);
    drop_findings(detail, "timed launch "); /* kl_verify_launch's words */
  }
  /* What the runner saw: writes outside the buffers, changed inputs. */
  if (dyn) {
    out->flags |= dyn;
    add_detail(out, "%s", detail);
  }
  /* timed_output_wrong, from whoever drew a timed launch's inputs and
   * checked its output (kl_verify_launch: the pacer, the runner itself
   * unpaced, the GPU runner): a wrong output, as the one below */
  if ((dyn >> KL_FLAG_TIMED_OUTPUT_WRONG & 1) && out->correct) {
    out->correct = 0;
    snprintf(out->error, sizeof out->error,
             "a timed run was wrong although the checked runs were right (a "
             "timed launch failed its checks)");
  }
  int unwritten = 0, others_fail = 0, others_pass = 0;
  for (int s = 0; s < n; s++) {
    unwritten |= out->checks[s].unwritten > 0;
    if (s > 0) {
      others_fail |= !out->checks[s].pass;
      others_pass |= out->checks[s].pass;
    }
  }
  if (unwritten) {
    out->flags |= (uint64_t)1 << KL_FLAG_OUTPUT_NOT_WRITTEN;
    add_detail(out, "output_not_written: poison left in C");
  }
  /* Right at the target and wrong elsewhere (or the reverse). */
  if (n > 1 && ((out->checks[0].pass && others_fail) ||
                (!out->checks[0].pass && others_pass && !others_fail))) {
    out->flags |= (uint64_t)1 << KL_FLAG_SHAPE_SPECIAL_CASED;
    add_detail(out, "shape_special_cased: %s at the target, %s elsewhere",
               out->checks[0].pass ? "right" : "wrong",
               out->checks[0].pass ? "wrong" : "right");
  }
  /* Two runs of the same inputs must agree bit for bit. */
  if (job->second_run && n > 0) {
    size_t nc = (size_t)job->shapes[0].M * job->shapes[0].N;
    if (memcmp(outs + offs[0], outs + offs[n], nc * sizeof(float)) != 0) {
      /* The rerun's inputs are the first's scaled by powers of two and
       * its output scaled back: exact for A B, so a correct first run
       * that differs is a race or a memo. A wrong one may simply not
       * scale as A B does (C = A B + 1 is deterministic and differs):
       * no flag then (a wrong kernel is scored wrong already, and every
       * wrong probe was flagged: the second review; a flag cost it 10,
       * the walkthrough), only said after the error. */
      if (!out->checks[0].pass) {
        size_t used = strlen(out->error);
        snprintf(out->error + used, sizeof out->error - used,
                 "; the rerun (inputs scaled by powers of 2) differs too: a "
                 "race, or an output that does not scale as A B does");
      } else if (!strcmp(out->backend, "cpu-emu")) {
        out->flags |= (uint64_t)1 << KL_FLAG_NONDETERMINISTIC;
        /* the contract (abi.h) asks for the same bits every run: an
         * honest float atomicAdd reduction lands here too, and the
         * detail says so (and what to do) */
        add_detail(out,
                   "nondeterministic: a rerun (block threads in reverse "
                   "order) differs: a race (missing __syncthreads?) "
                   "or float atomics in varying order; C must be bit-exact");
      } else {
        out->flags |= (uint64_t)1 << KL_FLAG_NONDETERMINISTIC;
        add_detail(out, "nondeterministic: two runs of the same inputs "
                        "differ: a race (missing __syncthreads?) or float "
                        "atomics in varying order; C must be bit-exact");
      }
    }
  }
}

/* A paced run's samples are the driver's (kl_pace), taken outside the
 * runner's process; they replace the runner's in rep. The runner's own
 * claims must fit them: each launch's runner-side time lies inside the
 * driver's interval for it (go sent, done received), on the same clock,
 * whatever the load. A claim outside it (or NaN) or a count that differs
 * means the runner's report was rewritten from inside: the candidate
 * reached for its timing, which is implausible_speed even though the
 * score no longer rests on those numbers. Claims far below the driver's
 * are not a sign: short launches on a busy machine measured a third of
 * it (the rest is the frames between two processes, and waking them;
 * batches of short launches share one go, but a loaded machine still
 * delays a frame). */
static void paced_samples(kl_run_report *rep, kl_result *out) {
  int n = rep->paced_samples;
  if (n < 0 || n > KL_MAX_TIMING_SAMPLES) n = 0;
  int outside = -1;
  for (int i = 0; i < n && i < rep->samples; i++) {
    double c = rep->sample_us[i];
    if (outside < 0 && !(c >= 0 && c <= rep->paced_us[i] + 5)) outside = i;
  }
  const char *why = NULL;
  char buf[200];
  if (rep->samples != n) {
    snprintf(buf, sizeof buf,
             "the runner reports %d timed runs where its driver timed %d",
             rep->samples, n);
    why = buf;
  } else if (outside >= 0) {
    snprintf(buf, sizeof buf,
             "timed run %d: the runner claims %.6g us, more than the %.0f "
             "us its driver's clock allows",
             outside + 1, rep->sample_us[outside], rep->paced_us[outside]);
    why = buf;
  }
  if (why) {
    out->flags |= (uint64_t)1 << KL_FLAG_IMPLAUSIBLE_SPEED;
    add_detail(out, "implausible_speed: %s (report rewritten?)", why);
  }
  rep->samples = n;
  memcpy(rep->sample_us, rep->paced_us, sizeof(double) * (size_t)n);
}

/* A speedup over the baseline beyond belief: flag it and measure again
 * with a timing-only job on a fresh worker, keeping both numbers in the
 * detail (the flag stays: a cheat that is fast only sometimes is still
 * one). */
static void remeasure(const kl_eval_options *opts, const kl_run_job *job,
                      const kl_compiled *cc, int gpu, kl_result *out) {
  double first = opts->baseline_us / out->time_us;
  out->flags |= (uint64_t)1 << KL_FLAG_IMPLAUSIBLE_SPEED;
  kl_run_job again = *job;
  again.n_shapes = 0;
  again.second_run = 0;
  size_t offs[KL_OUT_SLOTS];
  size_t n_outs = kl_run_output_layout(&again, offs);
  kl_run_report *rep = calloc(1, sizeof *rep);
  kl_result *scratch = calloc(1, sizeof *scratch);
  float *outs = malloc(sizeof(float) * (n_outs ? n_outs : 1));
  int ran = 0;
  if (rep && scratch && outs) {
    if (gpu)
      ran = kl_gpu_run(opts, &again, cc->cubin, cc->cubin_size, rep, outs,
                       n_outs, scratch);
    else
      ran = opts->exec && opts->exec->run
                ? opts->exec->run(opts->exec->ctx, &again, rep, outs, n_outs,
                                  scratch)
                : kl_run_forked(NULL, &again, rep, outs, n_outs, scratch);
  }
  if (ran && again.paced) paced_samples(rep, scratch);
  int ok = ran && rep->done && rep->samples > 0;
  if (ok) {
    qsort(rep->sample_us, (size_t)rep->samples, sizeof(double), cmp_double);
    double t = rep->sample_us[rep->samples / 2];
    add_detail(out,
               "implausible_speed: %.3gx the baseline (bound %.3gx); "
               "re-measured %.3gx",
               first, opts->max_speedup, opts->baseline_us / t);
  } else {
    add_detail(out,
               "implausible_speed: %.3gx the baseline (bound %.3gx); the "
               "re-measurement failed",
               first, opts->max_speedup);
  }
  free(rep);
  free(scratch);
  free(outs);
}

/* 1 if the first error in text (a compiler log, lines or " | "-joined) is
 * the contract's static assertion. */
static int first_error_is_contract(const char *text) {
  const char *e = text ? strstr(text, ": error") : NULL;
  if (!e) return 0;
  const char *said = strstr(e, "kl_contract: matmul must be");
  const char *nl = strchr(e, '\n'), *bar = strstr(e, " | ");
  return said && (!nl || said < nl) && (!bar || said < bar);
}

/* A compile failed: is it the signature? Only when the first error is the
 * contract's own static assertion. Any error in its lines was taken for
 * one, so a completion cut off inside a function (the check appended
 * after it parses as more of its body, and the assertion fails last) was
 * bad_signature (the walkthrough). */
static int contract_failed(const char *log, const char *why) {
  return first_error_is_contract(log) || first_error_is_contract(why);
}

/* The line of the first error in a compiler message, NVRTC's
 * "candidate.cu(22): error" or the host compiler's "candidate.cu:22:31:
 * error"; 0 if none. */
static long first_error_line(const char *text) {
  for (const char *p = text; (p = strstr(p, "candidate.cu")) != NULL;) {
    p += strlen("candidate.cu");
    if (*p != '(' && *p != ':') continue;
    char *end, *col;
    long line = strtol(p + 1, &end, 10);
    if (end == p + 1) continue;
    if (*p == '(' && !strncmp(end, "): error", 8)) return line;
    if (*p == ':' && *end == ':' &&
        (strtol(end + 1, &col, 10), col > end + 1) &&
        !strncmp(col, ": error", 7))
      return line;
  }
  return 0;
}

/* A compile error past the candidate's last line (in the appended check)
 * means the text ended inside a construct: says so after why. */
static void note_cut_short(char *why, size_t whylen, const char *src,
                           size_t len) {
  long lines = 1;
  for (size_t i = 0; i < len; i++)
    lines += src[i] == '\n';
  if (len > 0 && src[len - 1] == '\n') lines--;
  long at = first_error_line(why);
  size_t used = strlen(why);
  if (at > lines && used < whylen)
    snprintf(why + used, whylen - used,
             " (the source ends at line %ld, inside a construct: was it cut "
             "short?)",
             lines);
}

static int eval_impl(const char *label, const char *src, size_t len,
                     const kl_eval_options *opts, kl_result *out,
                     int timing_only) {
  char why[600];
  memset(out, 0, sizeof *out);
  snprintf(out->file, sizeof out->file, "%s", label);
  out->time_us = out->time_min_us = out->time_max_us = -1;
  out->time_p20_us = out->time_p80_us = out->time_cv = -1;
  out->gflops = out->baseline_us = out->compile_ms = -1;
  out->res = (kl_resources){-1, -1, -1, -1, -1, -1};
  out->seed = opts->seed ? opts->seed : pick_seed();
  kl_sha256_hex(src, len, out->sha256);
  int rc = kl_backend_resolve(opts->backend, out->backend, sizeof out->backend,
                              why, sizeof why);
  if (rc != KL_OK) {
    set_status(out, "error",
               rc == KL_EENV ? "backend gpu: no device answers: %s" : "%s",
               why);
    return rc;
  }
  /* Static anti-cheat flags first: they are reported even for a text the
   * checks below reject. */
  out->flags = kl_scan(src, len, out->flag_detail, sizeof out->flag_detail);
  if (kl_source_validate(src, len, why, sizeof why) != KL_OK) {
    set_status(out, "invalid_input", "%s", why);
    return KL_EINPUT;
  }

  /* NVRTC is the authoritative compile: resources and geometry come from
   * the real sm_90 cubin even when the kernel then runs on the emulator. */
  size_t clen = len + strlen(kl_contract_check) + 2;
  char *csrc = malloc(clen);
  if (!csrc) {
    set_status(out, "error", "%s", "out of memory");
    return KL_EENV;
  }
  snprintf(csrc, clen, "%s\n%s", src, kl_contract_check);
  kl_compiled cc;
  memset(&cc, 0, sizeof cc);
  int have_nvrtc = kl_nvrtc_load(why, sizeof why) == KL_OK;
  if (!have_nvrtc) {
    rc = KL_EENV;
  } else if (opts->exec && opts->exec->compile) {
    rc = opts->exec->compile(opts->exec->ctx, csrc, strlen(csrc), "sm_90", &cc,
                             why, sizeof why);
  } else {
    rc = kl_nvrtc_compile(csrc, strlen(csrc), "sm_90", 1, &cc, why, sizeof why);
  }
  free(csrc);
  if (rc == KL_ECOMPILE || rc == KL_ETIMEOUT || rc == KL_EOOM) {
    out->confinement = cc.confinement; /* it never runs: its compile's */
    out->compile_ms = cc.compile_ms;   /* measured all the same */
    int sig = contract_failed(cc.log, why);
    if (!sig) note_cut_short(why, sizeof why, src, len);
    set_status(out,
               rc == KL_ETIMEOUT ? "compile_timeout"
               : rc == KL_EOOM   ? "oom"
               : sig             ? "bad_signature"
                                 : "compile_error",
               "%s", why);
    kl_compiled_free(&cc);
    return KL_OK;
  }
  int gpu = !strcmp(out->backend, "gpu");
  if (rc == KL_OK) {
    out->nvrtc = 1;
    out->res = cc.res;
    out->compile_ms = cc.compile_ms;
    out->cache_hit = cc.cache_hit;
    if (cc.has_launch) {
      out->launch = cc.launch;
      out->has_launch = 1;
    }
  } else if (gpu || have_nvrtc) {
    /* NVRTC is installed but the compile could not happen (a worker that
     * failed to start or was stopped): an environment problem, not the
     * candidate's. Without NVRTC at all, cpu-emu carries on. */
    kl_compiled_free(&cc);
    set_status(out, "sandbox_error", "%s", why);
    return KL_EENV;
  }
  if (!gpu) kl_compiled_free(&cc); /* the GPU run needs the cubin */
  if (out->has_launch &&
      kl_launch_validate(&out->launch, why, sizeof why) != KL_OK) {
    set_status(out, "bad_geometry", "%s", why);
    kl_compiled_free(&cc);
    return KL_EINPUT;
  }

  /* cpu-emu: the same text through the host compiler (in the lab; the
   * compiler is a separate, limited process), loaded only by the runner. */
  kl_run_job *job = calloc(1, sizeof *job);
  if (!job) {
    set_status(out, "error", "%s", "out of memory");
    return KL_EENV;
  }
  rc = gpu ? KL_OK
           : kl_emu_compile(src, len, job->so_path, sizeof job->so_path, NULL,
                            NULL, why, sizeof why);
  if (rc == KL_ECOMPILE || rc == KL_ETIMEOUT || rc == KL_EOOM) {
    int sig = contract_failed(NULL, why);
    if (!sig) note_cut_short(why, sizeof why, src, len);
    set_status(out,
               rc == KL_ETIMEOUT ? "compile_timeout"
               : rc == KL_EOOM   ? "oom"
               : sig             ? "bad_signature"
                                 : "compile_error",
               "cpu-emu: %s", why);
    free(job);
    return KL_OK;
  }
  if (rc != KL_OK) {
    set_status(out, "error", "%s", why);
    free(job);
    return rc;
  }
  out->compiled = 1;
  job->needs_fibers = gpu ? 0 : kl_emu_needs_fibers(src);
  job->seed = out->seed;
  job->threads =
      opts->threads > 0 ? opts->threads : (int)sysconf(_SC_NPROCESSORS_ONLN);
  if (job->threads < 1) job->threads = 1;
  job->timed = 1;
  job->max_samples = opts->max_samples;
  job->time_budget_ms = opts->time_budget_ms;
  job->deadline_s = opts->run_deadline_s;
  kl_shape target =
      opts->n_shapes ? opts->shapes[0] : (kl_shape){256, 256, 256};
  job->n_shapes = timing_only ? 0 : plan_shapes(opts, job->shapes);
  job->timed_shape = target;
  job->second_run = !timing_only;
  /* A paced job's timed launches are driven and verified by the driver
   * (kl_pace); others by their runner (kernels/run.c, kernels/gpu_run.c),
   * each launch on inputs of its own: no references for them here. */
  job->paced = !gpu && opts->exec && opts->exec->paced;

  /* References, made here before the candidate runs, from the same
   * (seed, stream) inputs the runner makes. */
  double *R[KL_MAX_SHAPES] = {0}, *S[KL_MAX_SHAPES] = {0};
  size_t offs[KL_OUT_SLOTS];
  size_t n_outs = kl_run_output_layout(job, offs);
  float *outs = malloc(sizeof(float) * (n_outs ? n_outs : 1));
  kl_run_report *rep = calloc(1, sizeof *rep);
  int ok = outs && rep;
  for (int s = 0; ok && s < job->n_shapes; s++) {
    kl_shape sh = job->shapes[s];
    if (gpu && kl_gpu_device_ref(sh)) continue; /* checked in the worker */
    R[s] = malloc(sizeof(double) * (size_t)sh.M * sh.N);
    S[s] = malloc(sizeof(double) * (size_t)sh.M * sh.N);
    ok = R[s] && S[s] &&
         reference_for(out->seed, 2 * (uint64_t)s, sh, R[s], S[s]) == 0;
  }
  rc = KL_OK;
  if (!ok) {
    set_status(out, "error", "%s", "out of memory for inputs");
    rc = KL_EENV;
  } else {
    int finished =
        gpu ? kl_gpu_run(opts, job, cc.cubin, cc.cubin_size, rep, outs, n_outs,
                         out)
        : opts->exec && opts->exec->run
            ? opts->exec->run(opts->exec->ctx, job, rep, outs, n_outs, out)
            : kl_run_forked(NULL, job, rep, outs, n_outs, out);
    /* sandbox_error: the run never reached the candidate (its worker did
     * not start or say READY, the outputs' memfd could not be sized under
     * a file-size limit, no memory for the paced inputs): the machine's
     * problem, as a compile that could not happen is, above. Returned as
     * KL_OK it was recorded as the candidate's failure: a search under
     * `ulimit -f` swept every configuration "sandbox_error", no correct
     * kernel, exit 0, and a campaign scored them -0.75. */
    if (!finished && !strcmp(out->status, "sandbox_error")) rc = KL_EENV;
    /* The report comes from a process the candidate ran in: its geometry
     * is used only when NVRTC's (read here from the cubin) is missing. */
    int from_report = !out->has_launch && rep->has_launch;
    if (from_report) {
      out->launch = rep->launch;
      out->has_launch = 1;
    }
    if (finished && rep->failed) {
      int geom = from_report &&
                 kl_launch_validate(&rep->launch, why, sizeof why) != KL_OK;
      set_status(out,
                 rep->gpu.status[0] ? rep->gpu.status
                 : geom             ? "bad_geometry"
                 : rep->deadlock    ? "deadlock"
                 : strstr(rep->why, "kl_launch") || strstr(rep->why, "`matmul`")
                     ? "bad_signature"
                     : "run_error",
                 "%s", rep->why);
      if (geom) rc = KL_EINPUT;
    } else if (finished) {
      out->correct = 1;
      out->n_checks = job->n_shapes;
      for (int s = 0; s < job->n_shapes; s++) {
        kl_shape_check *ck = &out->checks[s];
        ck->shape = job->shapes[s];
        if (R[s]) {
          kl_compare(outs + offs[s], R[s], S[s], ck);
        } else if (rep->gpu.dev_checked[s]) {
          *ck = rep->gpu.dev_checks[s]; /* float64 cuBLAS in the worker */
          ck->shape = job->shapes[s];
        } else {
          memset(ck, 0, sizeof *ck);
          ck->shape = job->shapes[s];
          ck->pass = 0; /* no reference: cannot be called right */
        }
        if (ck->rel_err > out->max_rel_err) out->max_rel_err = ck->rel_err;
        if (ck->max_abs_err > out->max_abs_err)
          out->max_abs_err = ck->max_abs_err;
        if (!ck->pass && out->correct) {
          out->correct = 0;
          /* NaN/inf elements first: "0 elements over tolerance" led the
           * line of an all-inf output, whose elements are never compared */
          snprintf(out->error, sizeof out->error,
                   "wrong at %dx%dx%d: %ld of %ld elements NaN/inf (%ld "
                   "still NaN-poisoned: unwritten or computed from the "
                   "poison; %ld other NaN/inf), rel_err %.3g (tol %.0e), "
                   "%ld finite elements over tolerance",
                   ck->shape.M, ck->shape.N, ck->shape.K,
                   ck->unwritten + ck->nonfinite,
                   (long)ck->shape.M * ck->shape.N, ck->unwritten,
                   ck->nonfinite, ck->rel_err, KL_TOL_REL, ck->over_tol);
        }
      }
      dynamic_checks(job, rep, outs, offs, out);
      if (job->paced) paced_samples(rep, out);
      snprintf(out->status, sizeof out->status, "%s",
               out->correct || timing_only ? "ok" : "wrong");
      out->launch_ms = rep->launch_us / 1e3;
      out->samples = rep->samples;
      out->timed_launches =
          rep->timed_launches > 0 ? rep->timed_launches : rep->samples;
      memcpy(out->sample_us, rep->sample_us,
             sizeof(double) * (size_t)rep->samples);
      /* On a GPU every sample can be dropped (throttled, or no CUPTI
       * record): an 'ok' with no time then says why, or it reads like a
       * kernel that was never timed. Not yet seen on a device. */
      if (gpu && rep->samples == 0 && !strcmp(out->status, "ok"))
        snprintf(out->error, sizeof out->error,
                 "timed, but no sample was kept (%d dropped as throttled, %d "
                 "invalid): no time",
                 rep->gpu.n_throttled, rep->gpu.n_invalid);
      if (rep->samples > 0) {
        qsort(rep->sample_us, (size_t)rep->samples, sizeof(double), cmp_double);
        out->time_min_us = rep->sample_us[0];
        out->time_max_us = rep->sample_us[rep->samples - 1];
        out->time_us = rep->samples % 2
                           ? rep->sample_us[rep->samples / 2]
                           : 0.5 * (rep->sample_us[rep->samples / 2 - 1] +
                                    rep->sample_us[rep->samples / 2]);
        out->time_p20_us =
            kl_stats_quantile(rep->sample_us, (size_t)rep->samples, 0.2);
        out->time_p80_us =
            kl_stats_quantile(rep->sample_us, (size_t)rep->samples, 0.8);
        double mean = 0, var = 0;
        for (int i = 0; i < rep->samples; i++)
          mean += rep->sample_us[i];
        mean /= rep->samples;
        for (int i = 0; i < rep->samples; i++)
          var += (rep->sample_us[i] - mean) * (rep->sample_us[i] - mean);
        out->time_cv =
            rep->samples > 1 ? sqrt(var / (rep->samples - 1)) / mean : 0;
        snprintf(out->timer, sizeof out->timer, "%s",
                 gpu && rep->gpu.timer[0] ? rep->gpu.timer : "wall");
        snprintf(out->timer_note, sizeof out->timer_note, "%s",
                 gpu ? rep->gpu.timer_note : "");
        out->gflops =
            2.0 * target.M * target.N * (double)target.K / (out->time_us * 1e3);
        if (!timing_only && opts->baseline_us > 0 && opts->max_speedup > 0 &&
            opts->baseline_us / out->time_us > opts->max_speedup)
          remeasure(opts, job, &cc, gpu, out);
        /* GPU only: the timed kernel is a sliver of what the launch took
         * on the host (work hidden outside the measured kernels). Launch
         * overhead is microseconds, hence the 1 ms floor. */
        if (gpu && !timing_only && rep->gpu.host_median_us > 0 &&
            rep->gpu.host_median_us > 10 * out->time_us &&
            rep->gpu.host_median_us - out->time_us > 1000) {
          out->flags |= (uint64_t)1 << KL_FLAG_IMPLAUSIBLE_SPEED;
          add_detail(out,
                     "implausible_speed: kernel %.1f us but the launch took "
                     "%.1f us on the host",
                     out->time_us, rep->gpu.host_median_us);
        }
      }
    }
  }
  for (int s = 0; s < KL_MAX_SHAPES; s++) {
    free(R[s]);
    free(S[s]);
  }
  free(outs);
  free(rep);
  free(job);
  kl_compiled_free(&cc);
  return rc;
}

int kl_eval_source(const char *label, const char *src, size_t len,
                   const kl_eval_options *opts, kl_result *out) {
  return eval_impl(label, src, len, opts, out, 0);
}

double kl_eval_baseline(kl_shape s, const kl_eval_options *opts, char *why,
                        size_t whylen) {
  kl_eval_options o = *opts;
  o.shapes[0] = s;
  o.n_shapes = 1;
  kl_result *r = malloc(sizeof *r);
  if (!r) {
    snprintf(why, whylen, "out of memory");
    return -1;
  }
  int rc = eval_impl("baseline:naive", kl_seed_naive, strlen(kl_seed_naive), &o,
                     r, 1);
  double t = r->time_us;
  if (rc != KL_OK || t < 0)
    snprintf(why, whylen, "baseline (naive seed) failed: %s %s", r->status,
             r->error);
  free(r);
  return rc == KL_OK ? t : -1;
}
