/*
 * policy/parallel.c — the policy's fork-join pool: the model's element-wise
 * loops, attention and AdamW split an index range over the calling thread
 * and (threads - 1) long-lived helpers, so that the work between two GEMMs
 * uses every core OpenBLAS uses for the GEMMs themselves.
 *
 * pl_set_num_threads sets the count for both (OpenBLAS and this pool); until
 * it is called the pool takes OpenBLAS's own count. Slices are contiguous
 * and equal (the first ones one longer), a function only of n and the
 * thread count, so a loop that reduces per slice gives the same bits on
 * every run with the same count.
 *
 * It does not do: nesting (a region inside a region runs inline), two
 * regions at once (the second caller, say another thread's model, runs its
 * loop inline), or work stealing. A child after fork() runs everything
 * inline (the helpers stayed in the parent).
 */
#include "policy/policy.h"

#include <cblas.h>
#include <pthread.h>
#include <stdint.h>
#include <unistd.h>

static struct {
  pthread_mutex_t region; /* held by the thread running a region */
  pthread_mutex_t mu;     /* guards everything below */
  pthread_cond_t go, done;
  int want;    /* threads to use; 0: not set, OpenBLAS's own count */
  int started; /* helpers running */
  pid_t owner; /* the process that started them */
  unsigned long generation; /* bumped once per region */
  int pending;              /* helpers still working on this region */
  int nthreads;             /* this region's threads, caller included */
  size_t n;
  pl_par_fn fn;
  void *ctx;
} pool = {.region = PTHREAD_MUTEX_INITIALIZER,
          .mu = PTHREAD_MUTEX_INITIALIZER,
          .go = PTHREAD_COND_INITIALIZER,
          .done = PTHREAD_COND_INITIALIZER};

static __thread int in_region;

/* slice k of [0,n) over nt threads: [*begin, *end) */
static void slice(size_t n, int nt, int k, size_t *begin, size_t *end) {
  size_t q = n / nt, r = n % nt;
  *begin = k * q + ((size_t)k < r ? (size_t)k : r);
  *end = *begin + q + ((size_t)k < r);
}

static void *helper_main(void *arg) {
  int k = (int)(intptr_t)arg;
  unsigned long seen = 0;
  in_region = 1; /* anything a helper runs nests: inline */
  pthread_mutex_lock(&pool.mu);
  for (;;) {
    while (pool.generation == seen)
      pthread_cond_wait(&pool.go, &pool.mu);
    seen = pool.generation;
    if (k >= pool.nthreads) continue;
    pl_par_fn fn = pool.fn;
    void *ctx = pool.ctx;
    size_t begin, end;
    slice(pool.n, pool.nthreads, k, &begin, &end);
    pthread_mutex_unlock(&pool.mu);
    if (begin < end) fn(ctx, begin, end, k);
    pthread_mutex_lock(&pool.mu);
    if (--pool.pending == 0) pthread_cond_signal(&pool.done);
  }
  return NULL;
}

/* Both set OpenBLAS to one thread: from then on the pool splits the GEMMs
 * (pl_linear_gemm) and OpenBLAS's own helpers, which would spin on the
 * cores between GEMMs, stay asleep. */
void pl_pool_set_threads(int n) {
  pthread_mutex_lock(&pool.mu);
  pool.want = n < 1 ? 1 : n > PL_POOL_MAX ? PL_POOL_MAX : n;
  openblas_set_num_threads(1);
  pthread_mutex_unlock(&pool.mu);
}

int pl_pool_threads(void) {
  pthread_mutex_lock(&pool.mu);
  if (pool.want == 0) { /* not set: OpenBLAS's count, taken over once */
    int n = openblas_get_num_threads();
    pool.want = n < 1 ? 1 : n > PL_POOL_MAX ? PL_POOL_MAX : n;
    openblas_set_num_threads(1);
  }
  int n = pool.want;
  pthread_mutex_unlock(&pool.mu);
  return n;
}

/* Starts helpers up to nt - 1 (pool.mu held); returns how many threads a
 * region can use. */
static int ensure_helpers(int nt) {
  if (pool.started && pool.owner != getpid()) return 1; /* forked child */
  while (pool.started < nt - 1) {
    pthread_t th;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    int rc = pthread_create(&th, &attr, helper_main,
                            (void *)(intptr_t)(pool.started + 1));
    pthread_attr_destroy(&attr);
    if (rc) break;
    pool.started++;
    pool.owner = getpid();
  }
  return pool.started + 1 < nt ? pool.started + 1 : nt;
}

int pl_parallel_for(pl_par_fn fn, void *ctx, size_t n, size_t min_slice) {
  int nt = pl_pool_threads();
  if (min_slice < 1) min_slice = 1;
  if ((size_t)nt > n / min_slice) nt = (int)(n / min_slice);
  if (nt <= 1 || in_region || pthread_mutex_trylock(&pool.region)) {
    if (n) fn(ctx, 0, n, 0);
    return 1;
  }
  pthread_mutex_lock(&pool.mu);
  nt = ensure_helpers(nt);
  if (nt <= 1) {
    pthread_mutex_unlock(&pool.mu);
    pthread_mutex_unlock(&pool.region);
    fn(ctx, 0, n, 0);
    return 1;
  }
  pool.fn = fn;
  pool.ctx = ctx;
  pool.n = n;
  pool.nthreads = nt;
  pool.pending = nt - 1;
  pool.generation++;
  pthread_cond_broadcast(&pool.go);
  pthread_mutex_unlock(&pool.mu);

  size_t begin, end;
  slice(n, nt, 0, &begin, &end);
  in_region = 1;
  fn(ctx, begin, end, 0);
  in_region = 0;

  pthread_mutex_lock(&pool.mu);
  while (pool.pending)
    pthread_cond_wait(&pool.done, &pool.mu);
  pthread_mutex_unlock(&pool.mu);
  pthread_mutex_unlock(&pool.region);
  return nt;
}
