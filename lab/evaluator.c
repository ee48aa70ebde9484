/*
 * lab/evaluator.c — evaluating many candidates the way a campaign does:
 * the campaign's backend resolved once, one sandbox slot per core (a warm
 * compile worker and a run worker each), one thread per slot pulling the
 * next candidate, kl_eval_source at the campaign's task shape, and the
 * baseline (cuBLAS SGEMM on a GPU, the naive seed on the emulator) timed
 * once at start on slot 0 so every candidate's baseline_us is the same
 * number. `kernlab search` uses it; it is the evaluation half of
 * `kernlab run`'s loop, factored out so the two measure alike.
 *
 * Seeds: lab_derive_seed is the campaign's pure function of (seed, step,
 * group, purpose), so a search and a run with the same campaign seed draw
 * the same evaluation inputs at the same step.
 *
 * Also here, for the same two commands: scoring a step's candidates in
 * groups (lab_score_groups), its /steps statistics (lab_step_stats) and
 * recording a candidate (lab_record_candidate), and creating the results
 * file with the campaign's attributes (lab_results_open).
 *
 * Not here: sampling (policy/), the reward formula (reward/), the file
 * format (results/).
 */
#include "lab/lab.h"

#include "sandbox/sandbox.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

typedef struct lab_pool pool;
static pool *pool_start(lab_evaluator *e);

static uint64_t mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

uint64_t lab_derive_seed(uint64_t seed, int step, int group, int purpose) {
  uint64_t s = mix64(mix64(mix64(seed) ^ (uint64_t)step) ^
                     ((uint64_t)group << 8 | (uint64_t)purpose));
  s &= 0xffffffffffffull;
  return s ? s : 1;
}

double lab_now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

int lab_make_parent(const char *path) {
  char tmp[1100];
  snprintf(tmp, sizeof tmp, "%s", path);
  char *slash = strrchr(tmp, '/');
  if (!slash || slash == tmp) return 0;
  *slash = 0;
  for (char *p = tmp + 1; *p; p++)
    if (*p == '/') {
      *p = 0;
      if (mkdir(tmp, 0755) != 0 && errno != EEXIST) return -1;
      *p = '/';
    }
  return mkdir(tmp, 0755) != 0 && errno != EEXIST ? -1 : 0;
}

int lab_evaluator_start(lab_evaluator *e, const lab_campaign *c,
                        int max_parallel, uint64_t seed, char *why,
                        size_t whylen) {
  memset(e, 0, sizeof *e);
  e->baseline_us = -1;
  int rc = kl_backend_resolve(c->backend, e->backend, sizeof e->backend, why,
                              whylen);
  if (rc != KL_OK) return rc == KL_EENV ? LAB_EXIT_ENV : LAB_EXIT_USAGE;
  if (why[0]) fprintf(stderr, "kernlab: %s\n", why);
  if (kl_nvrtc_load(why, whylen) != KL_OK)
    fprintf(stderr,
            "kernlab: warning: %s; cpu-emu runs without sm_90 resource "
            "figures\n",
            why);
  why[0] = 0;
  kl_emu_set_launcher(sbx_host_compile_launcher());
  int cores = (int)sysconf(_SC_NPROCESSORS_ONLN);
  if (cores < 1) cores = 1;
  if (max_parallel < 1) max_parallel = 1;
  int n = cores < max_parallel ? cores : max_parallel;
  e->slots = calloc((size_t)n, sizeof *e->slots);
  if (!e->slots) {
    snprintf(why, whylen, "out of memory");
    return LAB_EXIT_ENV;
  }
  sbx_limits limits = {60, 60};
  for (; e->n_slots < n; e->n_slots++)
    if (!(e->slots[e->n_slots] = sbx_slot_new(&limits))) {
      snprintf(why, whylen, "cannot start sandbox slot %d", e->n_slots);
      return LAB_EXIT_ENV;
    }
  kl_eval_defaults(&e->opts);
  e->opts.run_deadline_s = c->timeout_s;
  e->opts.backend = e->backend;
  e->opts.shapes[0] = (kl_shape){c->M, c->N, c->K};
  e->opts.n_shapes = 1;
  e->opts.threads = cores / n > 0 ? cores / n : 1;
  e->opts.seed = seed;
  snprintf(e->task, sizeof e->task, "fp32_%dx%dx%d", c->M, c->N, c->K);

  kl_executor ex;
  kl_eval_options bopts = e->opts;
  sbx_slot_executor(e->slots[0], &ex);
  bopts.exec = &ex;
  char bwhy[512];
  e->baseline_us =
      !strcmp(e->backend, "gpu")
          ? kl_gpu_cublas_time_us(bopts.shapes[0], &bopts, NULL, bwhy,
                                  sizeof bwhy)
          : kl_eval_baseline(bopts.shapes[0], &bopts, bwhy, sizeof bwhy);
  if (e->baseline_us < 0)
    fprintf(stderr, "kernlab: warning: baseline: %s\n", bwhy);
  e->opts.baseline_us = e->baseline_us;
  return 0; /* the pool starts with the first lab_evaluator_run */
}

static void pool_stop(pool *p);

void lab_evaluator_stop(lab_evaluator *e) {
  pool_stop(e->pool);
  e->pool = NULL;
  for (int i = 0; e->slots && i < e->n_slots; i++)
    sbx_slot_free(e->slots[i]);
  free(e->slots);
  e->slots = NULL;
  e->n_slots = 0;
}

void lab_evaluator_options(lab_evaluator *e, kl_executor *ex,
                           kl_eval_options *opts) {
  *opts = e->opts;
  sbx_slot_executor(e->slots[0], ex);
  opts->exec = ex;
}

/* ---- one thread per slot, for the evaluator's lifetime ----
 *
 * The threads live as long as the evaluator, not one batch: a sandbox
 * worker dies with the thread that started it (PR_SET_PDEATHSIG is per
 * thread), so a thread that ended after each step would take the workers
 * it (re)started with it, and the next step's first candidate on that slot
 * could meet a worker in the middle of dying (reported as "oom"). */

typedef struct lab_pool {
  pthread_mutex_t mu;
  pthread_cond_t work, idle;
  lab_eval_item *items; /* the current batch */
  int n;
  int next;             /* atomic: the next item to take */
  kl_eval_options opts; /* the batch's options (seed), exec per thread */
  unsigned batch;       /* counts batches; a change wakes the threads */
  int active;           /* threads still working on the current batch */
  int quit;
  int n_threads;
  pthread_t tid[256];
  sbx_slot *slot[256];
} pool;

/* Takes items until the batch is exhausted. */
static void drain(pool *p, sbx_slot *slot) {
  kl_executor ex;
  kl_eval_options opts = p->opts;
  sbx_slot_executor(slot, &ex);
  opts.exec = &ex;
  for (;;) {
    int i = __atomic_fetch_add(&p->next, 1, __ATOMIC_RELAXED);
    if (i >= p->n) break;
    lab_eval_item *it = &p->items[i];
    it->rc = kl_eval_source(it->label, it->src, it->len, &opts, &it->r);
  }
}

typedef struct thread_arg {
  pool *p;
  int index;
} thread_arg;

static void *pool_thread(void *arg) {
  thread_arg a = *(thread_arg *)arg;
  free(arg);
  pool *p = a.p;
  unsigned seen = 0;
  pthread_mutex_lock(&p->mu);
  for (;;) {
    while (!p->quit && p->batch == seen)
      pthread_cond_wait(&p->work, &p->mu);
    if (p->quit) break;
    seen = p->batch;
    pthread_mutex_unlock(&p->mu);
    drain(p, p->slot[a.index]);
    pthread_mutex_lock(&p->mu);
    if (--p->active == 0) pthread_cond_signal(&p->idle);
  }
  pthread_mutex_unlock(&p->mu);
  return NULL;
}

static pool *pool_start(lab_evaluator *e) {
  pool *p = calloc(1, sizeof *p);
  if (!p) return NULL;
  pthread_mutex_init(&p->mu, NULL);
  pthread_cond_init(&p->work, NULL);
  pthread_cond_init(&p->idle, NULL);
  for (int i = 0; i < e->n_slots && i < 256; i++) {
    thread_arg *a = malloc(sizeof *a);
    if (!a) break;
    *a = (thread_arg){p, i};
    p->slot[i] = e->slots[i];
    if (pthread_create(&p->tid[i], NULL, pool_thread, a) != 0) {
      free(a);
      break;
    }
    p->n_threads++;
  }
  return p;
}

static void pool_stop(pool *p) {
  if (!p) return;
  pthread_mutex_lock(&p->mu);
  p->quit = 1;
  pthread_cond_broadcast(&p->work);
  pthread_mutex_unlock(&p->mu);
  for (int i = 0; i < p->n_threads; i++)
    pthread_join(p->tid[i], NULL);
  pthread_cond_destroy(&p->work);
  pthread_cond_destroy(&p->idle);
  pthread_mutex_destroy(&p->mu);
  free(p);
}

void lab_evaluator_run(lab_evaluator *e, lab_eval_item *items, int n,
                       uint64_t seed) {
  if (!e->pool) e->pool = pool_start(e); /* NULL: no memory, run here */
  pool *p = e->pool;
  if (!p || !p->n_threads) { /* no thread could start: this one works */
    pool local = {.items = items, .n = n, .opts = e->opts};
    local.opts.seed = seed;
    if (n > 0) drain(&local, e->slots[0]);
  } else {
    pthread_mutex_lock(&p->mu);
    p->items = items;
    p->n = n;
    p->next = 0;
    p->opts = e->opts;
    p->opts.seed = seed;
    p->active = p->n_threads;
    p->batch++;
    pthread_cond_broadcast(&p->work);
    while (p->active > 0)
      pthread_cond_wait(&p->idle, &p->mu);
    pthread_mutex_unlock(&p->mu);
  }
  for (int i = 0; i < n; i++)
    items[i].r.baseline_us = e->baseline_us;
}

/* ---- scoring, step statistics, recording ---- */

int lab_score_groups(rw_script *script, const lab_eval_item *items, int n,
                     int group_size, const char *task, const kl_shape *shape,
                     rw_components *comps, char *why, size_t whylen) {
  rw_candidate *rwc = malloc(sizeof *rwc * (size_t)(n > 0 ? n : 1));
  const char **names = malloc(sizeof *names * 64 * (size_t)(n > 0 ? n : 1));
  if (!rwc || !names) {
    free(rwc), free(names);
    snprintf(why, whylen, "out of memory");
    return -1;
  }
  for (int k = 0; k < n; k++)
    lab_rw_candidate(&items[k].r, (long)items[k].len, names + 64 * k, 64,
                     &rwc[k]);
  int failed = 0;
  for (int g = 0; g * group_size < n; g++) {
    int first = g * group_size;
    int size = n - first < group_size ? n - first : group_size;
    rw_context ctx = {task,     "fp32",      shape->M, shape->N,
                      shape->K, rwc + first, size};
    char gwhy[512];
    if (rw_score_group(script, &ctx, comps + first, gwhy, sizeof gwhy) !=
            RW_OK &&
        !failed++)
      snprintf(why, whylen, "group %d: %s", g, gwhy);
  }
  free(rwc), free(names);
  return failed;
}

void lab_step_stats(const lab_eval_item *items, const rw_components *comps,
                    int n, res_step *s) {
  int scored = 0, correct = 0;
  double sum = 0, sq = 0, mx = -INFINITY, mn = INFINITY;
  for (int k = 0; k < n; k++) {
    correct += items[k].r.correct;
    if (!comps[k].script_sha256[0]) continue; /* not scored */
    double v = comps[k].total;
    scored++;
    sum += v, sq += v * v;
    mx = v > mx ? v : mx;
    mn = v < mn ? v : mn;
  }
  double mean = scored ? sum / scored : NAN;
  double var = scored > 1 ? (sq - scored * mean * mean) / (scored - 1) : 0;
  s->n_candidates = n;
  s->reward_mean = mean;
  s->reward_std = var > 0 ? sqrt(var) : 0;
  s->reward_max = scored ? mx : NAN;
  s->reward_min = scored ? mn : NAN;
  s->correct_frac = n ? (double)correct / n : 0;
}

int lab_record_candidate(res_file *store, const lab_eval_item *it,
                         const rw_components *reward, const char *task,
                         int step, int group, int sample, char *why,
                         size_t whylen) {
  if (reward && !reward->script_sha256[0]) reward = NULL; /* not scored */
  res_candidate rec;
  lab_res_candidate(&it->r, reward, task, &rec);
  rec.step = step;
  rec.group = group;
  rec.sample = sample;
  const char *cn[RW_MAX_COMPONENTS];
  double cv[RW_MAX_COMPONENTS];
  int nc = reward ? reward->n : 0;
  if (nc > RW_MAX_COMPONENTS) nc = RW_MAX_COMPONENTS;
  for (int j = 0; j < nc; j++) {
    cn[j] = reward->items[j].name;
    cv[j] = reward->items[j].value;
  }
  return res_append_candidate(store, &rec, it->src, it->len, it->r.sample_us,
                              it->r.samples, cn, cv, nc, NULL, why, whylen);
}

res_file *lab_results_open(const char *path, const char *config_text,
                           const char *reward_path, rw_script *script,
                           const char *backend, uint64_t seed, int *exit,
                           char *why, size_t whylen) {
  const char *flag_names[64];
  for (int b = 0; b < 64; b++) {
    const char *name = kl_flag_name(b);
    flag_names[b] = name ? name : "";
  }
  res_campaign_meta meta = {.config = config_text,
                            .reward_script = reward_path,
                            .reward_sha256 = rw_sha256(script),
                            .device = "cpu",
                            .backend = backend,
                            .kernlab_version = "0.1",
                            .nvrtc_version = kl_nvrtc_version(),
                            .seed = seed,
                            .flag_names = flag_names,
                            .n_flags = 64};
  int code = 0;
  res_file *f = res_open_append(path, &meta, &code, why, whylen);
  if (!f) *exit = code == RES_EENV ? LAB_EXIT_ENV : LAB_EXIT_USAGE;
  return f;
}
