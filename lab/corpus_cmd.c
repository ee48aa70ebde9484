/*
 * lab/corpus_cmd.c — `kernlab corpus [--script lua/corpus.lua] [--out DIR]
 * [--shape MxNxK] [--jobs N]`: builds the priming corpus.
 *
 * The Lua script (lua/corpus.lua documents its contract) returns variants of
 * the seed kernels; every variant is evaluated like any candidate (NVRTC,
 * the sandboxed CPU emulator, every check shape), and only the correct ones
 * are written. Held-out configurations go to DIR/holdout instead of
 * DIR/train, so that later campaigns can show discovery beyond what the
 * policy was shown: the ones the script names (`holdout = {...}`), or the
 * fastest `holdout_fraction` of the correct configurations by emulated time
 * at the target shape. A named list makes the corpus reproducible: the
 * emulator's timings vary by 10-30% between runs on a busy machine, enough
 * to reorder near-equal configurations and so change the corpus, the
 * tokenizer and the primed policy. Either way the line printed at the end
 * gives each held-out configuration's measured rank here.
 * DIR/MANIFEST.tsv lists every variant with its verdict. train/ and holdout/
 * appear whole or not at all (written under temporary names, renamed once
 * complete), so a kill never leaves prime a part of the corpus.
 *
 * The script runs in lab/lua_script.c's restricted Lua state (base,
 * string, table and math without file access, an instruction budget) plus
 * `kl.seed(name)`; it reads seeds, it writes nothing itself.
 */
#include "lab/lab.h"

#include "sandbox/sandbox.h"

#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

typedef struct variant {
  char name[128];
  char config[128];
  char *source;
  size_t len;
  kl_result r;
  int rc;
  int holdout;
} variant;

typedef struct corpus_run {
  variant *v;
  int n;
  int next; /* atomic */
  kl_eval_options opts;
} corpus_run;

static char seeds_dir[1024];

/* Runs the script (lab/lua_script.c: a restricted Lua state with
 * kl.seed); fills *out with its variants. Returns 0 or -1 with why naming
 * the script (and line, for Lua errors). */
static int run_script(const char *path, variant **out, int *n,
                      lab_seed_split *split, char *why, size_t whylen) {
  lab_seed_variant *sv = NULL;
  int count = 0;
  if (lab_seed_script_run(path, seeds_dir, &sv, &count, split, why, whylen) !=
      0)
    return -1;
  variant *v = calloc((size_t)(count ? count : 1), sizeof *v);
  if (!v) {
    lab_seed_variants_free(sv, count);
    snprintf(why, whylen, "out of memory");
    return -1;
  }
  for (int i = 0; i < count; i++) { /* the sources change hands */
    memcpy(v[i].name, sv[i].name, sizeof v[i].name);
    memcpy(v[i].config, sv[i].config, sizeof v[i].config);
    v[i].source = sv[i].source;
    v[i].len = sv[i].len;
    sv[i].source = NULL;
  }
  lab_seed_variants_free(sv, count);
  *out = v;
  *n = count;
  return 0;
}

static void *corpus_thread(void *arg) {
  corpus_run *c = arg;
  sbx_slot *slot = sbx_slot_new(NULL);
  kl_executor ex;
  kl_eval_options opts = c->opts;
  if (slot) {
    sbx_slot_executor(slot, &ex);
    opts.exec = &ex;
  }
  for (;;) {
    int i = __atomic_fetch_add(&c->next, 1, __ATOMIC_RELAXED);
    if (i >= c->n) break;
    variant *v = &c->v[i];
    v->rc = kl_eval_source(v->name, v->source, v->len, &opts, &v->r);
  }
  sbx_slot_free(slot);
  return NULL;
}

/* One file of the corpus, whole or not at all (kl_outfile): a full disk
 * must not leave a cut kernel in train/ for prime to learn from. 0, or -1
 * with why naming the file and the error. */
static int write_file(const char *path, const char *text, size_t len, char *why,
                      size_t whylen) {
  kl_outfile o;
  if (kl_outfile_open(&o, path, why, whylen) != 0) return -1;
  if (fwrite(text, 1, len, o.f) != len) {
    snprintf(why, whylen, "%.900s: write failed: %s", path, strerror(errno));
    kl_outfile_abort(&o);
    return -1;
  }
  return kl_outfile_commit(&o, 0, why, whylen);
}

/* Checked before anything is evaluated: --out must be a new folder, or
 * one without a corpus in it. Writing over an old corpus would leave its
 * files that the new one does not name next to the new ones, and prime
 * trains on whatever train/ holds. */
static int out_unusable(const char *dir, char *why, size_t whylen) {
  struct stat st;
  if (stat(dir, &st) != 0) return 0;
  if (!S_ISDIR(st.st_mode)) {
    snprintf(why, whylen, "%s exists and is not a folder", dir);
    return -1;
  }
  static const char *const parts[] = {"train", "holdout", "MANIFEST.tsv"};
  for (int i = 0; i < 3; i++) {
    char sub[1100];
    snprintf(sub, sizeof sub, "%s/%s", dir, parts[i]);
    /* lstat: a link to a corpus moved away is one too (stat passed it, and
     * train/ could not be made after every variant was evaluated) */
    if (lstat(sub, &st) == 0) {
      snprintf(why, whylen,
               "%s already holds a corpus (%s); name a new folder, or remove "
               "it first: an old corpus's files would stay next to the new "
               "one's, and prime trains on all of train/",
               dir, parts[i]);
      return -1;
    }
  }
  return 0;
}

/* Removes the train.tmp.PID and holdout.tmp.PID folders (and the kernels
 * in them) a corpus killed while writing left in dir, where that process is
 * gone. Returns how many it removed. */
static int sweep_parts(const char *dir) {
  DIR *d = opendir(dir);
  int removed = 0;
  struct dirent *e;
  while (d && (e = readdir(d))) {
    const char *n = e->d_name, *at = NULL;
    if (!strncmp(n, "train.tmp.", 10))
      at = n + 10;
    else if (!strncmp(n, "holdout.tmp.", 12))
      at = n + 12;
    if (!at) continue;
    char *end;
    long pid = strtol(at, &end, 10);
    if (end == at || *end || pid <= 0 || pid == (long)getpid()) continue;
    if (kill((pid_t)pid, 0) == 0 || errno != ESRCH) continue; /* alive */
    char sub[1400], file[2400];
    snprintf(sub, sizeof sub, "%s/%s", dir, n);
    DIR *s = opendir(sub);
    struct dirent *f;
    while (s && (f = readdir(s)))
      if (strcmp(f->d_name, ".") && strcmp(f->d_name, "..")) {
        snprintf(file, sizeof file, "%s/%s", sub, f->d_name);
        unlink(file);
      }
    if (s) closedir(s);
    removed += rmdir(sub) == 0;
  }
  if (d) closedir(d);
  return removed;
}

typedef struct config_rank {
  const char *config;
  double best_us;
} config_rank;

static int cmp_rank(const void *a, const void *b) {
  const config_rank *x = a, *y = b;
  return x->best_us < y->best_us ? -1 : x->best_us > y->best_us;
}

/* The closing line: where the variants went and why those were held out,
 * with each held-out configuration's measured rank among the correct ones
 * (ranks, sorted fastest first); a named configuration that is not
 * correct here is said on stderr, since nothing of it was written. */
static void print_split(const lab_seed_split *split, const config_rank *ranks,
                        int ranked, int n_hold, const variant *v, int n,
                        int correct, int n_train, int n_held,
                        const char *out_dir, const char *script) {
  printf("corpus: %d variants, %d correct: %d in %s/train, %d held out in "
         "%s/holdout ",
         n, correct, n_train, out_dir, n_held, out_dir);
  if (!split->n_names) {
    printf("(the fastest %d of %d configurations; holdout_fraction %.2f); "
           "MANIFEST.tsv lists all\n",
           n_hold, ranked, split->fraction);
    return;
  }
  printf("(the %d configurations %s names; measured here they rank",
         split->n_names, script);
  int shown = 0;
  for (int j = 0; j < ranked; j++)
    for (int k = 0; k < split->n_names; k++)
      if (!strcmp(ranks[j].config, split->names[k]))
        printf("%s %d", shown++ ? "," : "", j + 1);
  printf("%s of %d correct configurations); MANIFEST.tsv lists all\n",
         shown ? "" : " nowhere", ranked);
  for (int k = 0; k < split->n_names; k++) {
    int j = 0;
    while (j < ranked && strcmp(ranks[j].config, split->names[k]))
      j++;
    if (j < ranked) continue;
    const char *status = "?";
    int good = 0, all = 0;
    for (int i = 0; i < n; i++)
      if (!strcmp(v[i].config, split->names[k])) {
        all++;
        if (v[i].r.correct)
          good++;
        else
          status = v[i].r.status;
      }
    if (good)
      fprintf(stderr,
              "kernlab corpus: held-out configuration %s: %d of its %d "
              "variants are not correct here (%s); the %d correct ones are "
              "held out, unranked\n",
              split->names[k], all - good, all, status, good);
    else
      fprintf(stderr,
              "kernlab corpus: held-out configuration %s is not correct here "
              "(%s): none of its variants was written\n",
              split->names[k], status);
  }
}

static const char corpus_synopsis[] =
    "corpus [--script lua/corpus.lua] [--out DIR] [--shape MxNxK] [--jobs N]";

int lab_corpus(int argc, char **argv) {
  const char *script = "lua/corpus.lua", *out_dir = "runs/corpus";
  int jobs = 0, script_given = 0;
  long num;
  kl_eval_options opts;
  kl_eval_defaults(&opts);
  opts.shapes[0] = (kl_shape){128, 128, 128};
  opts.n_shapes = 1;
  opts.max_samples = 8;
  opts.time_budget_ms = 60;
  for (int i = 1; i < argc; i++) {
    const char *val = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(argv[i], "--script") && val) {
      script = val;
      script_given = 1;
      i++;
    } else if (!strcmp(argv[i], "--out") && val) {
      out_dir = val;
      i++;
    } else if (!strcmp(argv[i], "--jobs")) {
      if (lab_arg_long(val, 1, 1024, &num))
        return lab_usage("corpus", "--jobs wants a count from 1 to 1024, got",
                         val ? val : "nothing", corpus_synopsis);
      jobs = (int)num;
      i++;
    } else if (!strcmp(argv[i], "--shape")) {
      if (!val || lab_arg_shape(val, &opts.shapes[0]) != 0)
        return lab_usage("corpus",
                         "--shape wants MxNxK with sizes >= 1 and each matrix "
                         "under 2^28 elements, got",
                         val ? val : "nothing", corpus_synopsis);
      i++;
    } else {
      int known = !strcmp(argv[i], "--script") || !strcmp(argv[i], "--out");
      return lab_usage("corpus",
                       known ? "missing value after" : "unknown option",
                       argv[i], corpus_synopsis);
    }
  }
  /* Seeds live next to the script's project: kernels/seeds of the source
   * tree the script is in, else of the current folder. */
  snprintf(seeds_dir, sizeof seeds_dir, "kernels/seeds");
  const char *env = getenv("KL_SOURCE_DIR");
  if (env) snprintf(seeds_dir, sizeof seeds_dir, "%s/kernels/seeds", env);
  /* the default script too, as search finds its default space there */
  char default_script[1100];
  if (env && !script_given) {
    snprintf(default_script, sizeof default_script, "%s/lua/corpus.lua", env);
    script = default_script;
  }

  char why[1024];
  if (!out_dir[0]) {
    fprintf(stderr, "kernlab corpus: --out wants a folder name, got ''\n");
    return LAB_EXIT_USAGE;
  }
  if (out_unusable(out_dir, why, sizeof why)) {
    fprintf(stderr, "kernlab corpus: --out %s\n", why);
    return LAB_EXIT_USAGE;
  }
  if (sweep_parts(out_dir) > 0)
    fprintf(stderr,
            "kernlab corpus: removed the half-written corpus a killed "
            "corpus left in %s\n",
            out_dir);
  variant *v = NULL;
  int n = 0;
  lab_seed_split split = {0};
  if (run_script(script, &v, &n, &split, why, sizeof why) != 0) {
    fprintf(stderr, "kernlab corpus: %s\n", why);
    return LAB_EXIT_USAGE;
  }
  /* The folder is made (with its parents: runs/corpus in a fresh clone)
   * and a file created in it now, before the evaluations: one that cannot
   * be made or written was said only after every variant had been
   * evaluated (minutes at the default shape). A run that writes nothing
   * removes the folder again if it made it. */
  struct stat st_out;
  const int made = stat(out_dir, &st_out) != 0;
  char probe[1100];
  snprintf(probe, sizeof probe, "%s/MANIFEST.tsv", out_dir);
  int perr = lab_prepare_out(probe, why, sizeof why);
  if (perr != 0) {
    fprintf(stderr, "kernlab corpus: --out %s: %s\n", out_dir, why);
    for (int i = 0; i < n; i++)
      free(v[i].source);
    free(v);
    return lab_out_exit(perr);
  }
  /* names and configs arrive checked (lab/lua_script.c: a name is a file
   * name, a config has no control bytes, so both fit MANIFEST.tsv) */
  char backend[16];
  kl_backend_resolve("cpu-emu", backend, sizeof backend, why, sizeof why);
  opts.backend = backend;
  kl_emu_set_launcher(sbx_host_compile_launcher());
  kl_nvrtc_load(why, sizeof why);
  int cores = (int)sysconf(_SC_NPROCESSORS_ONLN);
  if (jobs <= 0) jobs = cores > 0 ? cores : 1;
  if (jobs > n) jobs = n > 0 ? n : 1;
  opts.threads = cores / jobs > 0 ? cores / jobs : 1;
  opts.seed = 0x5eed;
  fprintf(stderr,
          "kernlab corpus: %d variants from %s, evaluated on cpu-emu "
          "at %dx%dx%d (%d at a time)\n",
          n, script, opts.shapes[0].M, opts.shapes[0].N, opts.shapes[0].K,
          jobs);
  corpus_run run = {v, n, 0, opts};
  pthread_t tids[64];
  int started = 0;
  for (int i = 0; i < jobs && i < 64; i++)
    if (pthread_create(&tids[i], NULL, corpus_thread, &run) == 0) started++;
  if (!started) corpus_thread(&run);
  for (int i = 0; i < started; i++)
    pthread_join(tids[i], NULL);

  /* Rank the configurations whose variants are all correct; hold out the
   * named ones, or the fastest fraction. */
  config_rank *ranks = calloc((size_t)(n ? n : 1), sizeof *ranks);
  int nr = 0, correct = 0;
  for (int i = 0; ranks && i < n; i++) {
    correct += v[i].r.correct;
    int j = 0;
    while (j < nr && strcmp(ranks[j].config, v[i].config))
      j++;
    if (j == nr) {
      ranks[nr].config = v[i].config;
      ranks[nr].best_us = INFINITY;
      nr++;
    }
    if (!v[i].r.correct)
      ranks[j].best_us = NAN; /* one wrong: not ranked */
    else if (!isnan(ranks[j].best_us) && v[i].r.time_us < ranks[j].best_us)
      ranks[j].best_us = v[i].r.time_us;
  }
  int ranked = 0;
  for (int j = 0; j < nr; j++)
    if (!isnan(ranks[j].best_us)) ranks[ranked++] = ranks[j];
  qsort(ranks, (size_t)ranked, sizeof *ranks, cmp_rank);
  int n_hold = (int)ceil(split.fraction * ranked);
  if (ranked > 1 && n_hold >= ranked) n_hold = ranked - 1;
  if (split.n_names) n_hold = 0;
  for (int i = 0; i < n; i++) {
    for (int j = 0; j < n_hold; j++)
      if (!strcmp(ranks[j].config, v[i].config)) v[i].holdout = 1;
    for (int j = 0; j < split.n_names; j++)
      if (!strcmp(split.names[j], v[i].config)) v[i].holdout = 1;
  }
  if (correct == 0) {
    fprintf(stderr,
            "kernlab corpus: none of the %d variants from %s is correct; "
            "nothing written (first error: %s)\n",
            n, script, n ? v[0].r.error : "no variants");
    if (made) rmdir(out_dir); /* empty: nothing was written */
    for (int i = 0; i < n; i++)
      free(v[i].source);
    free(v);
    free(ranks);
    return LAB_EXIT_USAGE;
  }
  /* The kernels go into train.tmp.PID and holdout.tmp.PID, renamed to
   * train and holdout once all are written, holdout first: train/ is what
   * prime reads and what `make demo` takes for a built corpus, and written
   * in place, a Ctrl-C (no handler here: it stops at once) or a kill
   * part-way through left a train/ of a few kernels, which prime trained
   * on without a word and which a second corpus refused to replace.
   * MANIFEST.tsv last. A failure removes what this run wrote, so the
   * folder is as it was and the command can be run again once there is
   * room. */
  char dirs[2][1200], final_dirs[2][1100];
  static const char *const part[2] = {"train", "holdout"};
  int mk = 0;
  for (int k = 0; k < 2; k++) {
    snprintf(final_dirs[k], sizeof final_dirs[k], "%s/%s", out_dir, part[k]);
    kl_outfile_tmpname(final_dirs[k], dirs[k], sizeof dirs[k]);
    mk |= lab_make_dir(dirs[k]);
  }
  if (mk != 0) {
    fprintf(stderr, "kernlab corpus: cannot create the folders of %s: %s\n",
            out_dir, strerror(errno));
    return LAB_EXIT_ENV;
  }
  char path[2048];
  int n_train = 0, n_held = 0, written = 0, failed = 0;
  for (; written < n && !failed; written++) {
    if (!v[written].r.correct) continue;
    snprintf(path, sizeof path, "%s/%s.cu", dirs[v[written].holdout],
             v[written].name);
    failed = write_file(path, v[written].source, v[written].len, why,
                        sizeof why) != 0;
    if (failed) break;
    if (v[written].holdout)
      n_held++;
    else
      n_train++;
  }
  for (int k = 1; k >= 0 && !failed; k--) {
    if (rename(dirs[k], final_dirs[k]) != 0) {
      /* the folder's own name (why holds 1024 bytes, the temporary one
       * is it plus .tmp.PID) */
      snprintf(why, sizeof why,
               "%.900s: cannot rename its temporary folder into place: %s",
               final_dirs[k], strerror(errno));
      failed = 1;
      break;
    }
    snprintf(dirs[k], sizeof dirs[k], "%s", final_dirs[k]);
  }
  kl_outfile man;
  snprintf(path, sizeof path, "%s/MANIFEST.tsv", out_dir);
  if (!failed && kl_outfile_open(&man, path, why, sizeof why) != 0) failed = 1;
  if (!failed) {
    fprintf(man.f, "name\tconfig\tsplit\tstatus\ttime_us_cpu_emu\n");
    for (int i = 0; i < n; i++)
      fprintf(man.f, "%s\t%s\t%s\t%s\t%.1f\n", v[i].name, v[i].config,
              !v[i].r.correct ? "rejected"
              : v[i].holdout  ? "holdout"
                              : "train",
              v[i].r.status, v[i].r.time_us);
    failed = kl_outfile_commit(&man, 0, why, sizeof why) != 0;
  }
  if (failed) {
    fprintf(stderr,
            "kernlab corpus: %s; the corpus's files written so far are "
            "removed\n",
            why);
    for (int i = 0; i < written && i < n; i++)
      if (v[i].r.correct) {
        snprintf(path, sizeof path, "%s/%s.cu", dirs[v[i].holdout], v[i].name);
        unlink(path);
      }
    for (int k = 0; k < 2; k++)
      rmdir(dirs[k]);
    if (made) rmdir(out_dir);
    for (int i = 0; i < n; i++)
      free(v[i].source);
    free(v);
    free(ranks);
    return LAB_EXIT_ENV;
  }
  print_split(&split, ranks, ranked, n_hold, v, n, correct, n_train, n_held,
              out_dir, script);
  for (int i = 0; i < n; i++)
    free(v[i].source);
  free(v);
  free(ranks);
  return LAB_EXIT_OK;
}
