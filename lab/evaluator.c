/*
 * lab/evaluator.c — evaluating many candidates the way a campaign does:
 * the campaign's backend resolved once, one sandbox slot per core (a warm
 * compile worker and a run worker each), one thread per slot pulling the
 * next candidate, kl_eval_source at the campaign's task shape, and the
 * baseline (cuBLAS SGEMM on a GPU, the naive seed on the emulator) timed
 * once at start on slot 0 so every candidate's baseline_us is the same
 * number (or, for a resumed campaign, the one its records already hold, so
 * that the whole file is against one baseline). `kernlab search` uses it; it is
 * the evaluation half of `kernlab run`'s loop, factored out so the two measure
 * alike.
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
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

typedef struct lab_pool pool;

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

int lab_make_dir(const char *dir) {
  char tmp[1100];
  if (snprintf(tmp, sizeof tmp, "%s", dir) >= (int)sizeof tmp) {
    errno = ENAMETOOLONG;
    return -1;
  }
  for (char *p = tmp + 1; *p; p++)
    if (*p == '/') {
      *p = 0;
      if (mkdir(tmp, 0755) != 0 && errno != EEXIST) return -1;
      *p = '/';
    }
  if (mkdir(tmp, 0755) == 0) return 0;
  /* EEXIST is fine for a folder only: a file of that name was taken for
   * one and the error came later, from a create inside it */
  struct stat st;
  if (errno == EEXIST && stat(tmp, &st) == 0 && !S_ISDIR(st.st_mode))
    errno = ENOTDIR;
  return errno == EEXIST ? 0 : -1;
}

int lab_make_parent(const char *path) {
  char tmp[1100];
  snprintf(tmp, sizeof tmp, "%s", path);
  char *slash = strrchr(tmp, '/');
  if (!slash || slash == tmp) return 0;
  *slash = 0;
  return lab_make_dir(tmp);
}

int lab_out_exit(int err) {
  switch (err) {
  case ENOENT: /* a folder in the path that cannot be made (/proc/x) */
  case ENOTDIR:
  case EISDIR:
  case ENAMETOOLONG:
  case ELOOP:
  case EINVAL:
    return LAB_EXIT_USAGE;
  default: /* EACCES, EROFS, ENOSPC, EIO: the path is fine, the system
            * will not take the file */
    return LAB_EXIT_ENV;
  }
}

int lab_out_path_ok(const char *path, const char *where, char *why,
                    size_t whylen) {
  const char *base = strrchr(path, '/');
  base = base ? base + 1 : path;
  struct stat st;
  if (!path[0])
    snprintf(why, whylen, "%s wants a file name, got ''", where);
  else if (!base[0] || !strcmp(base, ".") || !strcmp(base, "..") ||
           (stat(path, &st) == 0 && S_ISDIR(st.st_mode)))
    snprintf(why, whylen, "%s %s names a folder; name the file to write", where,
             path);
  else {
    /* too long for the system: a typo, said as one (not as ENAMETOOLONG
     * from a create much later); its temporary adds ".tmp.PID" */
    size_t part = 0, longest = 0;
    for (const char *p = path; *p; p++) {
      part = *p == '/' ? 0 : part + 1;
      longest = part > longest ? part : longest;
    }
    if (strlen(path) + 32 < PATH_MAX && longest + 16 <= NAME_MAX) return 0;
    snprintf(why, whylen,
             "%s %.60s... is too long (a name of %zu bytes, a path of %zu; "
             "at most %d and %d here, less room for a temporary's suffix)",
             where, path, longest, strlen(path), NAME_MAX - 16, PATH_MAX - 32);
  }
  return -1;
}

int lab_try_write(const char *path, char *why, size_t whylen) {
  kl_outfile o; /* its temporary, as the write will make it, then gone */
  char ignored[64];
  if (kl_outfile_open(&o, path, ignored, sizeof ignored) == 0) {
    kl_outfile_abort(&o);
    return 0;
  }
  int err = errno ? errno : EIO; /* open's: snprintf and free keep it */
  snprintf(why, whylen, "cannot write %s: %s%s", path, strerror(err),
           err == ENOENT ? " (its folder does not exist)" : "");
  return err;
}

int lab_prepare_out(const char *path, char *why, size_t whylen) {
  if (lab_make_parent(path) != 0) {
    int err = errno ? errno : EIO;
    char folder[1100];
    snprintf(folder, sizeof folder, "%s", path);
    char *slash = strrchr(folder, '/');
    if (slash) *slash = 0;
    /* a file where a folder should be: named, as the path's mistake */
    struct stat st;
    for (char *p = folder + 1; err == ENOTDIR && p <= folder + strlen(folder);
         p++)
      if (*p == '/' || !*p) {
        char keep = *p;
        *p = 0;
        int file = stat(folder, &st) == 0 && !S_ISDIR(st.st_mode);
        if (file) {
          snprintf(why, whylen, "cannot write %s: %s is a file, not a folder",
                   path, folder);
          return err;
        }
        *p = keep;
      }
    snprintf(why, whylen, "cannot create the folder %s for %s: %s", folder,
             path, strerror(err));
    return err;
  }
  return lab_try_write(path, why, whylen);
}

int lab_evaluator_start(lab_evaluator *e, const lab_campaign *c,
                        int max_parallel, uint64_t seed,
                        const lab_known_baseline *known, char *why,
                        size_t whylen) {
  memset(e, 0, sizeof *e);
  e->baseline_us = -1;
  int rc = kl_backend_resolve(c->backend, e->backend, sizeof e->backend, why,
                              whylen);
  if (rc != KL_OK) {
    /* the campaign's field asked for the device (run and search take no
     * --backend): named, with the probe's reason */
    if (rc == KL_EENV) {
      char probe[512];
      snprintf(probe, sizeof probe, "%s", why);
      snprintf(why, whylen,
               "%s: backend = \"gpu\", and no device answers: %s (\"auto\" "
               "falls back to cpu-emu)",
               c->path, probe);
    }
    return rc == KL_EENV ? LAB_EXIT_ENV : LAB_EXIT_USAGE;
  }
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
  sbx_limits limits = {60, 60, 0};
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

  /* A known baseline stands for this one only where it was timed on the
   * same backend and device: another GPU's cuBLAS, or another CPU's naive
   * seed, is not this machine's baseline. */
  if (known && known->us > 0) {
    char device[160];
    kl_backend_device(e->backend, device, sizeof device);
    if (!strcmp(known->backend, e->backend) && !strcmp(known->device, device)) {
      e->baseline_us = e->opts.baseline_us = known->us;
      e->baseline_reused = 1;
      return 0;
    }
    snprintf(e->baseline_note, sizeof e->baseline_note,
             "timed on %s (%s), this run is on %s (%s)", known->backend,
             known->device, e->backend, device);
  }
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

/* ---- the queue: one thread per slot, for the evaluator's lifetime ----
 *
 * A batch is an items array; the caller pushes indices into it as items
 * become ready (`kernlab run` pushes a completion the moment its row stops
 * sampling, so evaluation overlaps sampling; lab_evaluator_run pushes them
 * all at once) and waits for the batch. The threads live as long as the
 * evaluator, not one batch: a sandbox worker dies with the thread that
 * started it (PR_SET_PDEATHSIG is per thread), so a thread that ended after
 * each step would take the workers it (re)started with it, and the next
 * step's first candidate on that slot could meet a worker in the middle of
 * dying (reported as "oom"); long-lived threads also keep warm workers
 * warm. Without any thread (none could start) the waiting caller evaluates
 * on slot 0 itself. */

typedef struct lab_pool {
  pthread_mutex_t mu;
  pthread_cond_t more;  /* an item was pushed, or quit */
  pthread_cond_t done;  /* an item finished */
  lab_eval_item *items; /* the current batch */
  int *order;           /* item indices in push order */
  int cap;              /* room in order */
  int pushed, taken, finished;
  kl_eval_options opts; /* the batch's options (seed); exec per thread */
  int quit;
  int n_threads;
  pthread_t tid[256];
  sbx_slot *slot[256];
} pool;

/* Evaluates the next queued item on slot; called with mu held, returns
 * with it held. 0 when nothing is queued. */
static int take_one(pool *p, sbx_slot *slot) {
  if (p->taken == p->pushed) return 0;
  lab_eval_item *it = &p->items[p->order[p->taken++]];
  kl_executor ex;
  kl_eval_options opts = p->opts;
  sbx_slot_executor(slot, &ex);
  opts.exec = &ex;
  pthread_mutex_unlock(&p->mu);
  it->rc = kl_eval_source(it->label, it->src, it->len, &opts, &it->r);
  pthread_mutex_lock(&p->mu);
  p->finished++;
  pthread_cond_broadcast(&p->done);
  return 1;
}

typedef struct thread_arg {
  pool *p;
  int index;
} thread_arg;

static void *pool_thread(void *arg) {
  thread_arg a = *(thread_arg *)arg;
  free(arg);
  pool *p = a.p;
  pthread_mutex_lock(&p->mu);
  for (;;) {
    while (p->taken == p->pushed && !p->quit)
      pthread_cond_wait(&p->more, &p->mu);
    if (p->taken == p->pushed) break; /* quit, and nothing left */
    take_one(p, p->slot[a.index]);
  }
  pthread_mutex_unlock(&p->mu);
  return NULL;
}

static pool *pool_start(lab_evaluator *e) {
  pool *p = calloc(1, sizeof *p);
  if (!p) return NULL;
  pthread_mutex_init(&p->mu, NULL);
  pthread_cond_init(&p->more, NULL);
  pthread_cond_init(&p->done, NULL);
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
  pthread_cond_broadcast(&p->more);
  pthread_mutex_unlock(&p->mu);
  for (int i = 0; i < p->n_threads; i++)
    pthread_join(p->tid[i], NULL);
  pthread_cond_destroy(&p->more);
  pthread_cond_destroy(&p->done);
  pthread_mutex_destroy(&p->mu);
  free(p->order);
  free(p);
}

int lab_evaluator_begin(lab_evaluator *e, lab_eval_item *items, int cap,
                        uint64_t seed) {
  if (!e->pool) e->pool = pool_start(e);
  pool *p = e->pool;
  if (!p) return -1;
  pthread_mutex_lock(&p->mu);
  int ok = 1;
  if (cap > p->cap) {
    int *o = realloc(p->order, sizeof *o * (size_t)cap);
    if (o) {
      p->order = o;
      p->cap = cap;
    } else {
      ok = 0;
    }
  }
  if (ok) {
    p->items = items;
    p->pushed = p->taken = p->finished = 0;
    p->opts = e->opts;
    p->opts.seed = seed;
  }
  pthread_mutex_unlock(&p->mu);
  return ok ? 0 : -1;
}

void lab_evaluator_push(lab_evaluator *e, int k) {
  pool *p = e->pool;
  pthread_mutex_lock(&p->mu);
  if (p->pushed < p->cap) {
    p->order[p->pushed++] = k;
    pthread_cond_signal(&p->more);
  }
  pthread_mutex_unlock(&p->mu);
}

int lab_evaluator_finished(lab_evaluator *e) {
  pool *p = e->pool;
  pthread_mutex_lock(&p->mu);
  int f = p->finished;
  pthread_mutex_unlock(&p->mu);
  return f;
}

void lab_evaluator_wait(lab_evaluator *e, int n,
                        void (*tick)(void *ctx, int finished), void *ctx) {
  pool *p = e->pool;
  pthread_mutex_lock(&p->mu);
  while (p->finished < n && p->finished < p->pushed) {
    if (!p->n_threads) { /* nobody else will: evaluate here */
      take_one(p, e->slots[0]);
    } else {
      struct timespec ts;
      clock_gettime(CLOCK_REALTIME, &ts);
      ts.tv_nsec += 250000000; /* a tick at least every 250 ms */
      if (ts.tv_nsec >= 1000000000) ts.tv_sec++, ts.tv_nsec -= 1000000000;
      pthread_cond_timedwait(&p->done, &p->mu, &ts);
    }
    if (tick) {
      int f = p->finished;
      pthread_mutex_unlock(&p->mu);
      tick(ctx, f);
      pthread_mutex_lock(&p->mu);
    }
  }
  for (int i = 0; i < p->pushed; i++)
    p->items[p->order[i]].r.baseline_us = e->baseline_us;
  pthread_mutex_unlock(&p->mu);
}

int lab_evaluator_run(lab_evaluator *e, lab_eval_item *items, int n,
                      uint64_t seed) {
  if (lab_evaluator_begin(e, items, n, seed) != 0) return -1;
  for (int k = 0; k < n; k++)
    lab_evaluator_push(e, k);
  lab_evaluator_wait(e, n, NULL, NULL);
  return 0;
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

/* Running sums for one step's /steps statistics. */
typedef struct step_sums {
  int n, scored, correct;
  double sum, sq, mx, mn;
} step_sums;

static void sums_add(step_sums *a, double reward, int correct) {
  a->n++;
  a->correct += correct != 0;
  if (isnan(reward)) return; /* not scored */
  a->scored++;
  a->sum += reward, a->sq += reward * reward;
  a->mx = a->scored == 1 || reward > a->mx ? reward : a->mx;
  a->mn = a->scored == 1 || reward < a->mn ? reward : a->mn;
}

static void sums_done(const step_sums *a, res_step *s) {
  int k = a->scored;
  double mean = k ? a->sum / k : NAN;
  double var = k > 1 ? (a->sq - k * mean * mean) / (k - 1) : 0;
  s->n_candidates = a->n;
  s->reward_mean = mean;
  s->reward_std = var > 0 ? sqrt(var) : 0;
  s->reward_max = k ? a->mx : NAN;
  s->reward_min = k ? a->mn : NAN;
  s->correct_frac = a->n ? (double)a->correct / a->n : 0;
}

void lab_step_stats(const lab_eval_item *items, const rw_components *comps,
                    int n, res_step *s) {
  step_sums a = {0};
  for (int k = 0; k < n; k++)
    sums_add(&a, comps[k].script_sha256[0] ? comps[k].total : NAN,
             items[k].r.correct);
  sums_done(&a, s);
}

void lab_step_stats_of(const double *reward, const uint8_t *correct, int n,
                       res_step *s) {
  step_sums a = {0};
  for (int k = 0; k < n; k++)
    sums_add(&a, reward[k], correct[k]);
  sums_done(&a, s);
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

void lab_name_path(const char *path, char *why, size_t whylen) {
  if (!strncmp(why, path, strlen(path))) return;
  char rest[1024];
  snprintf(rest, sizeof rest, "%s", why);
  snprintf(why, whylen, "%s: %s", path, rest);
}

res_file *lab_results_open(const char *path, int fresh, const char *config_text,
                           const char *reward_path, rw_script *script,
                           const char *backend, uint64_t seed,
                           const char *run_id, const char *checkpoint_sha256,
                           int *exit, char *why, size_t whylen) {
  const char *flag_names[64];
  for (int b = 0; b < 64; b++) {
    const char *name = kl_flag_name(b);
    flag_names[b] = name ? name : "";
  }
  char device[160];
  res_campaign_meta meta = {
      .config = config_text,
      .reward_script = reward_path,
      .reward_sha256 = rw_sha256(script),
      .device = kl_backend_device(backend, device, sizeof device),
      .backend = backend,
      .kernlab_version = "0.1",
      .nvrtc_version = kl_nvrtc_version(),
      .seed = seed,
      .flag_names = flag_names,
      .n_flags = 64,
      .run_id = run_id,
      .checkpoint_sha256 = checkpoint_sha256};
  int code = 0;
  res_file *f = fresh ? res_create(path, &meta, &code, why, whylen)
                      : res_open_append(path, &meta, &code, why, whylen);
  if (!f) {
    *exit = code == RES_EENV ? LAB_EXIT_ENV : LAB_EXIT_USAGE;
    lab_name_path(path, why, whylen);
    /* a fresh file the command checked was not there a moment ago */
    if (fresh && strstr(why, "already exists")) {
      size_t n = strlen(why);
      snprintf(why + n, whylen - n,
               " (it appeared after this command started: is another kernlab "
               "writing the same output?)");
    }
  }
  return f;
}
