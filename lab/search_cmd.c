/*
 * lab/search_cmd.c — `kernlab search random|exhaustive CAMPAIGN.lua`: the
 * search baselines, in the same framework as a campaign.
 *
 * The space is lua/search_space.lua (--space): (seed, #define values)
 * configurations of the kernels in kernels/seeds/, read by the seed-script
 * plumbing the corpus uses (lab/lua_script.c). Both modes evaluate
 * configurations exactly as `kernlab run` evaluates the policy's samples
 * (lab/evaluator.c: the campaign's backend and task shape, sandbox slots, one
 * thread per slot, the baseline timed once at start), score them with the
 * campaign's reward script in groups of group_size, and write the results
 * format of a campaign, so `kernlab top/show/report` work unchanged: random a
 * seeded sample (the campaign's seed) of the space, of the campaign's
 * evaluation budget, steps x prompts_per_step x group_size (--budget N
 * overrides it); without replacement while the space lasts, then a fresh
 * shuffle, so every configuration is measured once before any twice; exhaustive
 * every configuration once, in the script's order. Candidate i is recorded as
 * step i / (prompts_per_step * group_size), group (i / group_size) %
 * prompts_per_step, sample i % group_size, and each such "step" gets a /steps
 * record (reward mean/std/max/min, correct fraction, best time so far; the
 * policy's fields, which search has no value for, are NaN) and one line on
 * stdout. At the end: lab_compare_print (lab/compare.c): the best correct
 * kernel, the priming corpus's best, and evaluations to reach 95% of the
 * exhaustive best.
 *
 * Choices where the issue is silent:
 *   - the output file is never reused: an existing one is an error that
 *     names it (a search is a few minutes; there is no --resume);
 *   - an interrupt (Ctrl-C, SIGTERM; lab/interrupt.c) lets the step in
 *     flight finish and be recorded, prints how far the search got and its
 *     best kernel so far, and exits 130; a second stops at once. One before
 *     the first step (while the baseline is timed) removes the new file,
 *     which holds nothing, so that the same command runs again;
 *   - `exhaustive` writes the campaign's `exhaustive` file by default
 *     (runs/<name>-exhaustive.h5), the file random search and `kernlab
 *     run` compare with; `random` writes runs/<name>-random.h5;
 *   - --limit N keeps the first N configurations of the space (tests, and
 *     a quick look); --list prints the space and evaluates nothing;
 *   - an exhaustive search cut short by --limit is no exhaustive baseline.
 *     Its file is consumed by lab/compare.c ("evaluations to reach 95% of
 *     the exhaustive best", printed by `kernlab run` and by `search random`
 *     from the campaign's `exhaustive` file or --exhaustive) and listed by
 *     name in `kernlab report`: a best of the first N configurations read
 *     as the space's best makes a campaign look better than it is. Written
 *     to the default name, it would also stand where the real sweep goes
 *     and make that sweep refuse to run (an existing output is an error).
 *     So with --limit N below the space's size: without --out the file is
 *     the default's name with "-limitN" before ".h5"
 *     (runs/quick-exhaustive-limit5.h5), and whatever its name, its config
 *     line says "-- kernlab search exhaustive: partial (the first N of M
 *     configurations, --limit N): ..." (describe_search), which compare.c
 *     reads to refuse the file as a baseline with the reason, as it
 *     refuses a random search's. A refusal of --limit without --out was
 *     the other choice; a quick look that needs no file name is what
 *     --limit is for;
 *   - the reward script is loaded once (no hot reload: a search is short);
 *   - the results file's config attribute is the campaign's text with one
 *     leading Lua comment line saying which search made the file;
 *   - search samples no policy: the campaign's checkpoint and tokenizer
 *     need not exist (lab_campaign_load_flags, LAB_CAMPAIGN_NO_POLICY).
 */
#include "lab/lab.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char synopsis[] =
    "search random|exhaustive CAMPAIGN.lua [--out FILE.h5] [--budget N] "
    "[--exhaustive FILE.h5] [--space FILE.lua] [--limit N] [--list]";

/* order[0..total): which configuration each evaluation takes. Exhaustive:
 * 0..n-1. Random: blocks of n, each the start of a fresh seeded shuffle of
 * 0..n-1 (a partial Fisher-Yates: position i draws uniformly from the
 * configurations not yet drawn in its block; draw i of block b is the
 * counter-based lab_derive_seed(seed, b, i, ...), so a larger budget
 * extends the same sequence). Returns -1 when out of memory. */
static int plan(int *order, int total, int n, int random, uint64_t seed) {
  for (int i = 0; i < total; i++)
    order[i] = i % n;
  if (!random) return 0;
  int *all = malloc(sizeof *all * (size_t)n);
  if (!all) return -1;
  for (int done = 0; done < total; done += n) {
    for (int j = 0; j < n; j++)
      all[j] = j;
    for (int i = 0; i < n && done + i < total; i++) {
      uint64_t draw = lab_derive_seed(seed, done / n, i, 9);
      int k = i + (int)(draw % (uint64_t)(n - i));
      int t = all[i];
      all[i] = all[k], all[k] = t;
      order[done + i] = all[i];
    }
  }
  free(all);
  return 0;
}

/* The size of the buffers --out, --exhaustive and --space are copied into
 * (and the names made from them). */
#define SEARCH_PATH_MAX 1100

typedef struct search_args {
  int random;
  const char *campaign, *out, *exhaustive, *space;
  long budget, limit;
  int list;
} search_args;

static int parse_count(const char *opt, const char *s, long *out) {
  char *end;
  long v = strtol(s, &end, 10);
  if (*end || end == s || v <= 0 || v > 10000000) {
    char msg[96];
    snprintf(msg, sizeof msg, "%s wants a count from 1 to 10000000, got", opt);
    return lab_usage("search", msg, s, synopsis);
  }
  *out = v;
  return 0;
}

/* A path option's value must fit SEARCH_PATH_MAX whole: cut there, a long
 * --out wrote the results to a file named by its first 1099 bytes (a folder
 * above it, or a name without its .h5), and --space and --exhaustive read
 * such a file in place of the one named. */
static int path_fits(const char *opt, const char *val) {
  size_t len = strlen(val);
  if (len < SEARCH_PATH_MAX) return 0;
  fprintf(stderr,
          "kernlab search: %s is %zu bytes long (at most %d): %.60s...; name "
          "a shorter path\nusage: kernlab %s\n",
          opt, len, SEARCH_PATH_MAX - 1, val, synopsis);
  return LAB_EXIT_USAGE;
}

static int parse_args(int argc, char **argv, search_args *a) {
  memset(a, 0, sizeof *a);
  if (argc < 2)
    return lab_usage("search", "no mode given (random or exhaustive)", NULL,
                     synopsis);
  if (!strcmp(argv[1], "random"))
    a->random = 1;
  else if (strcmp(argv[1], "exhaustive"))
    return lab_usage("search",
                     "unknown mode (expected random or exhaustive), got",
                     argv[1], synopsis);
  for (int i = 2; i < argc; i++) {
    const char *val = i + 1 < argc ? argv[i + 1] : NULL;
    int rc = 0;
    if (!strcmp(argv[i], "--list")) {
      a->list = 1;
      continue;
    }
    int known = !strcmp(argv[i], "--out") || !strcmp(argv[i], "--budget") ||
                !strcmp(argv[i], "--exhaustive") ||
                !strcmp(argv[i], "--space") || !strcmp(argv[i], "--limit");
    if (known && !val)
      return lab_usage("search", "missing value after", argv[i], synopsis);
    if (!strcmp(argv[i], "--out") && !val[0])
      return lab_usage("search", "--out wants a file name, got", "''",
                       synopsis);
    if (!strcmp(argv[i], "--out"))
      rc = path_fits("--out", a->out = val);
    else if (!strcmp(argv[i], "--exhaustive"))
      rc = path_fits("--exhaustive", a->exhaustive = val);
    else if (!strcmp(argv[i], "--space"))
      rc = path_fits("--space", a->space = val);
    else if (!strcmp(argv[i], "--budget"))
      rc = parse_count("--budget", val, &a->budget);
    else if (!strcmp(argv[i], "--limit"))
      rc = parse_count("--limit", val, &a->limit);
    else if (argv[i][0] == '-')
      return lab_usage("search", "unknown option", argv[i], synopsis);
    else if (!a->campaign) {
      a->campaign = argv[i];
      continue;
    } else
      return lab_usage("search", "unexpected argument", argv[i], synopsis);
    if (rc) return rc;
    i++;
  }
  if (!a->campaign)
    return lab_usage("search", "no campaign file given", NULL, synopsis);
  if (!a->random && a->budget)
    return lab_usage("search",
                     "--budget is for random search; exhaustive evaluates "
                     "every configuration (--limit N restricts the space)",
                     NULL, synopsis);
  if (!a->random && a->exhaustive)
    return lab_usage("search",
                     "--exhaustive names the file random search compares "
                     "with; exhaustive search compares with its own --out",
                     NULL, synopsis);
  return 0;
}

/* Reads the space (is_default: no --space); refuses duplicate names.
 * Returns 0 or prints why and returns LAB_EXIT_USAGE. */
static int load_space(const char *path, int is_default, lab_seed_variant **v,
                      int *n) {
  char seeds[1024], why[1024];
  const char *src_dir = getenv("KL_SOURCE_DIR");
  if (src_dir)
    snprintf(seeds, sizeof seeds, "%s/kernels/seeds", src_dir);
  else
    snprintf(seeds, sizeof seeds, "kernels/seeds");
  if (lab_seed_script_run(path, seeds, v, n, NULL, why, sizeof why) != 0) {
    /* The default space and the seeds are found from the folder kernlab
     * runs in: run from elsewhere, "lua/search_space.lua: cannot read the
     * script: No such file or directory" named a file the user never
     * gave, with no word on where it is looked for */
    int lost = (is_default && access(path, F_OK) != 0) ||
               (strstr(why, "kl.seed:") && access(seeds, F_OK) != 0);
    if (lost && src_dir)
      fprintf(stderr,
              "kernlab search: %s (KL_SOURCE_DIR is %s: expected the source "
              "tree, with lua/search_space.lua and kernels/seeds/)\n",
              why, src_dir);
    else if (lost)
      fprintf(stderr,
              "kernlab search: %s (the default space lua/search_space.lua "
              "and the seeds in kernels/seeds/ are looked for in the folder "
              "kernlab runs in: run it from the source tree, or set "
              "KL_SOURCE_DIR to that tree)\n",
              why);
    else
      fprintf(stderr, "kernlab search: %s\n", why);
    return LAB_EXIT_USAGE;
  }
  if (*n == 0) {
    fprintf(stderr, "kernlab search: %s: the space is empty\n", path);
    return LAB_EXIT_USAGE;
  }
  return 0;
}

/* What one search needs beyond the campaign. */
typedef struct search_run {
  const lab_campaign *c;
  lab_evaluator *ev;
  rw_script *script;
  res_file *store;
  const char *out;
  const lab_seed_variant *space;
  const int *order;
  int total;
  int random;
} search_run;

/* The line of a search an interrupt stopped after `done` evaluations. */
static void interrupted(const search_run *s, int done, double best,
                        const char *best_label) {
  char best_s[200] = "none correct yet";
  if (best > 0)
    snprintf(best_s, sizeof best_s, "best %.1f us, %s", best, best_label);
  printf("interrupted: %d of %d evaluations recorded in %s%s; %s\n", done,
         s->total, s->out,
         done == s->total ? " (the comparison is skipped)" : "", best_s);
  /* lab/compare.c refuses it as a baseline; said here too, since the
   * file stands where the whole sweep goes and a re-run refuses it */
  if (!s->random && done < s->total)
    printf("a sweep stopped short is no exhaustive baseline: remove %s and "
           "run the search again for one\n",
           s->out);
}

/* Evaluates, scores, records and prints every step; returns an exit code.
 * *none: 1 when an interrupt stopped it before the first step, so nothing
 * was recorded (the caller removes the file and says so). */
static int run_steps(const search_run *s, int *none) {
  const lab_campaign *c = s->c;
  const int G = c->group_size, per_step = c->prompts_per_step * G;
  const int steps = (s->total + per_step - 1) / per_step;
  lab_eval_item *items = calloc((size_t)per_step, sizeof *items);
  rw_components *comps = calloc((size_t)per_step, sizeof *comps);
  if (!items || !comps) {
    free(items), free(comps);
    fprintf(stderr, "kernlab search: out of memory\n");
    return LAB_EXIT_ENV;
  }
  char why[1024], best_label[128] = "";
  double best = -1, t0 = lab_now_s();
  int exit_code = 0;
  for (int step = 0; step < steps && !exit_code; step++) {
    if (lab_interrupted()) { /* read between steps */
      if (step == 0)
        *none = 1;
      else
        interrupted(s, step * per_step, best, best_label);
      exit_code = LAB_EXIT_INTERRUPTED;
      break;
    }
    double t_step = lab_now_s();
    int first = step * per_step;
    int n = s->total - first < per_step ? s->total - first : per_step;
    for (int k = 0; k < n; k++) {
      const lab_seed_variant *v = &s->space[s->order[first + k]];
      items[k] =
          (lab_eval_item){.label = v->name, .src = v->source, .len = v->len};
    }
    if (lab_evaluator_run(s->ev, items, n,
                          lab_derive_seed(c->seed, step, 0, 2)) != 0) {
      fprintf(stderr, "kernlab search: out of memory\n");
      exit_code = LAB_EXIT_ENV;
      break;
    }
    /* the first: every candidate of the step meets the same machine */
    for (int k = 0; k < n && !exit_code; k++)
      if (items[k].rc == KL_EENV) {
        fprintf(stderr, "kernlab search: step %d: evaluation: %s\n", step + 1,
                items[k].r.error);
        exit_code = LAB_EXIT_ENV;
      }
    if (exit_code) break;
    memset(comps, 0, sizeof *comps * (size_t)per_step);
    if (lab_score_groups(s->script, items, n, G, s->ev->task,
                         &s->ev->opts.shapes[0], comps, why, sizeof why))
      fprintf(stderr, "kernlab search: step %d: reward: %s\n", step + 1, why);
    for (int k = 0; k < n && !exit_code; k++) {
      const kl_result *r = &items[k].r;
      if (r->correct && r->time_us > 0 && !r->flags &&
          (best < 0 || r->time_us < best)) {
        best = r->time_us;
        snprintf(best_label, sizeof best_label, "%s", items[k].label);
      }
      /* one failed append (a full disk, the file removed) ends the
       * recording: one message, not one per candidate */
      if (!exit_code &&
          lab_record_candidate(s->store, &items[k], &comps[k], s->ev->task,
                               step, (k / G) % c->prompts_per_step, k % G, why,
                               sizeof why) != RES_OK) {
        lab_name_path(s->out, why, sizeof why);
        fprintf(stderr, "kernlab search: %s\n", why);
        exit_code = LAB_EXIT_ENV;
      }
    }
    res_step rs = {0};
    lab_step_stats(items, comps, n, &rs);
    for (int k = 0; k < n; k++)
      rw_components_free(&comps[k]);
    if (exit_code) break;
    rs.step = step;
    rs.kl = rs.loss = rs.entropy = rs.clip_frac = rs.len_mean = NAN;
    rs.lr = rs.grad_norm = NAN;
    rs.best_time_us = best;
    rs.wall_s = lab_now_s() - t0;
    if (res_append_step(s->store, &rs, why, sizeof why) != RES_OK) {
      lab_name_path(s->out, why, sizeof why);
      fprintf(stderr, "kernlab search: %s\n", why);
      exit_code = LAB_EXIT_ENV;
      break;
    }
    char best_s[256] = "-";
    double baseline = s->ev->baseline_us;
    if (best > 0)
      snprintf(best_s, sizeof best_s, "%.1f us%s %s", best,
               baseline > 0 ? "" : " (no baseline)", best_label);
    if (best > 0 && baseline > 0)
      snprintf(best_s, sizeof best_s, "%.1f us (%.2fx baseline speed) %s", best,
               baseline / best, best_label);
    int done = first + n;
    double eta = (lab_now_s() - t0) / done * (s->total - done);
    printf("step %d/%d  evals %d/%d  reward mean %.3f max %.3f  correct "
           "%d/%d  best %s  %.1fs  ETA %.0fs\n",
           step + 1, steps, done, s->total, rs.reward_mean, rs.reward_max,
           (int)lround(rs.correct_frac * n), n, best_s, lab_now_s() - t_step,
           eta);
    fflush(stdout);
  }
  if (!exit_code && lab_interrupted()) { /* during the last step */
    interrupted(s, s->total, best, best_label);
    exit_code = LAB_EXIT_INTERRUPTED;
  }
  free(items), free(comps);
  return exit_code;
}

/* The results file's config attribute: a comment line, then the campaign.
 * An exhaustive search of fewer configurations than the space holds
 * (n_space < n_loaded, --limit) says "partial (...)" first: print_95 in
 * lab/compare.c reads that prefix. Owned by the caller. */
static char *describe_search(const search_args *a, const lab_campaign *c,
                             const char *space, int total, int n_space,
                             int n_loaded) {
  size_t cap = strlen(c->text) + 512 + strlen(space);
  char *text = malloc(cap);
  if (!text) return NULL;
  char partial[128] = "";
  if (!a->random && n_space < n_loaded)
    snprintf(partial, sizeof partial,
             " partial (the first %d of %d configurations, --limit %ld):",
             n_space, n_loaded, a->limit);
  snprintf(text, cap,
           "-- kernlab search %s:%s %d evaluations of %d configurations from "
           "%s, seed %llu\n%s",
           a->random ? "random" : "exhaustive", partial, total, n_space, space,
           (unsigned long long)c->seed, c->text);
  return text;
}

/* The default output of an exhaustive search of the first n_space of
 * n_loaded configurations: the campaign's `exhaustive` file, or with
 * --limit cutting the space, that name with "-limitN" before its ".h5"
 * (the header comment says why). 0, or -1 when it does not fit. */
static int exhaustive_out(const lab_campaign *c, const search_args *a,
                          int n_space, int n_loaded, char *out, size_t cap) {
  if (n_space >= n_loaded) {
    int n = snprintf(out, cap, "%s", c->exhaustive);
    return n < 0 || (size_t)n >= cap ? -1 : 0;
  }
  size_t len = strlen(c->exhaustive);
  if (len > 3 && !strcmp(c->exhaustive + len - 3, ".h5")) len -= 3;
  int n =
      snprintf(out, cap, "%.*s-limit%ld.h5", (int)len, c->exhaustive, a->limit);
  return n < 0 || (size_t)n >= cap ? -1 : 0;
}

int lab_search(int argc, char **argv) {
  search_args a;
  int ex = parse_args(argc, argv, &a);
  if (ex) return ex;
  char why[1024];
  lab_campaign c;
  ex = lab_campaign_load_flags(a.campaign, LAB_CAMPAIGN_NO_POLICY, &c, why,
                               sizeof why);
  if (ex) {
    fprintf(stderr, "kernlab search: %s\n", why);
    return ex;
  }
  char space_path[SEARCH_PATH_MAX];
  const char *src_dir = getenv("KL_SOURCE_DIR");
  if (a.space)
    snprintf(space_path, sizeof space_path, "%s", a.space);
  else if (src_dir)
    snprintf(space_path, sizeof space_path, "%s/lua/search_space.lua", src_dir);
  else
    snprintf(space_path, sizeof space_path, "lua/search_space.lua");

  lab_seed_variant *space = NULL;
  int n_loaded = 0, n_space = 0, *order = NULL;
  char *config_text = NULL;
  rw_script *script = NULL;
  res_file *store = NULL;
  lab_evaluator ev;
  memset(&ev, 0, sizeof ev);
  int exit_code = 0;
#define FAIL(code, ...) LAB_FAIL("search", code, __VA_ARGS__)

  exit_code = load_space(space_path, !a.space, &space, &n_loaded);
  if (exit_code) goto cleanup;
  n_space = n_loaded;
  if (a.limit && a.limit < n_space) n_space = (int)a.limit;
  if (a.list) {
    for (int i = 0; i < n_space; i++)
      printf("%s\n", space[i].name);
    printf("%d configurations in %s\n", n_space, space_path);
    goto cleanup;
  }

  const int per_step = c.prompts_per_step * c.group_size;
  long total =
      a.random ? (a.budget ? a.budget : (long)c.steps * per_step) : n_space;
  /* only the campaign's budget can be past it (--budget is checked where
   * parsed, a space holds at most 65536): name the fields it came from
   * ("a budget of 128000000 is too large" named neither them nor the
   * limit) */
  if (total > 10000000)
    FAIL(LAB_EXIT_USAGE,
         "%s: the campaign's budget, steps x prompts_per_step x group_size = "
         "%d x %d x %d = %ld evaluations, is too large: expected at most "
         "10000000 (--budget N sets another)",
         c.path, c.steps, c.prompts_per_step, c.group_size, total);
  char out[SEARCH_PATH_MAX], exhaustive[SEARCH_PATH_MAX];
  if (a.out)
    snprintf(out, sizeof out, "%s", a.out);
  else if (a.random)
    snprintf(out, sizeof out, "runs/%s-random.h5", c.name);
  else if (exhaustive_out(&c, &a, n_space, n_loaded, out, sizeof out))
    FAIL(LAB_EXIT_USAGE, "the campaign's exhaustive: path too long: %s",
         c.exhaustive);
  snprintf(exhaustive, sizeof exhaustive, "%s",
           !a.random      ? out
           : a.exhaustive ? a.exhaustive
                          : c.exhaustive);
  if (lab_out_path_ok(out,
                      a.out      ? "--out"
                      : a.random ? "the results file"
                                 : "the campaign's exhaustive",
                      why, sizeof why))
    FAIL(LAB_EXIT_USAGE, "%s", why);
  if (access(out, F_OK) == 0)
    FAIL(LAB_EXIT_USAGE,
         "%s already exists: remove it, or pass --out for a new file", out);
  /* its folder made (runs/ in a fresh clone) and a create tried before the
   * baseline is timed (~30 s at 1024^3): a folder that cannot be made or
   * written was said only after it */
  int perr = lab_prepare_out(out, why, sizeof why);
  if (perr != 0) FAIL(lab_out_exit(perr), "%s", why);

  order = malloc(sizeof *order * (size_t)total);
  if (!order || plan(order, (int)total, n_space, a.random,
                     lab_derive_seed(c.seed, -1, 0, 7)) != 0)
    FAIL(LAB_EXIT_ENV, "out of memory for %ld evaluations", total);
  script = rw_load(c.reward, NULL, why, sizeof why);
  if (!script || rw_validate(script, why, sizeof why) != RW_OK)
    FAIL(LAB_EXIT_USAGE, "reward %s: %s", c.reward, why);

  /* an interrupt from here on lets the step in flight finish and be
   * recorded (run_steps reads the flag between steps) */
  /* (and a second removes a new results file, created beside its name:
   * results/store.c) */
  char out_tmp[sizeof out + 32];
  kl_outfile_tmpname(out, out_tmp, sizeof out_tmp);
  lab_interrupt_install("kernlab search",
                        "the evaluations in flight finish and are recorded, "
                        "then the search stops",
                        out_tmp);
  int rc =
      lab_evaluator_start(&ev, &c, per_step, lab_derive_seed(c.seed, -1, 0, 0),
                          NULL, why, sizeof why);
  if (rc) FAIL(rc, "%s", why);

  config_text =
      describe_search(&a, &c, space_path, (int)total, n_space, n_loaded);
  if (!config_text) FAIL(LAB_EXIT_ENV, "out of memory");
  store = lab_results_open(out, 1, config_text, c.reward, script, ev.backend,
                           c.seed, NULL, NULL, &rc, why, sizeof why);
  if (!store) FAIL(rc, "%s", why);

  char of[64] = "";
  if (n_space < n_loaded)
    snprintf(of, sizeof of, "the first %d of %d", n_space, n_loaded);
  else
    snprintf(of, sizeof of, "%d", n_space);
  printf("search %s %s: %s %s, %ld evaluations of %s configurations (%s), "
         "%d per step, reward %s\n",
         a.random ? "random" : "exhaustive", c.name, ev.backend, ev.task, total,
         of, space_path, per_step, c.reward);
  /* a baseline that failed (the naive seed past the campaign's timeout)
   * is -1: said as none, as `kernlab run` says it, not "-1.0 us" */
  char base_s[48] = "none (see the warning above)";
  if (ev.baseline_us >= 0)
    snprintf(base_s, sizeof base_s, "%.1f us", ev.baseline_us);
  printf("baseline (%s): %s%s; results %s\n",
         !strcmp(ev.backend, "gpu") ? "cuBLAS SGEMM" : "naive seed", base_s,
         !strcmp(ev.backend, "cpu-emu") && ev.baseline_us >= 0
             ? " (CPU-emulator time, not GPU)"
             : "",
         out);
  fflush(stdout);

  search_run run = {.c = &c,
                    .ev = &ev,
                    .script = script,
                    .store = store,
                    .out = out,
                    .space = space,
                    .order = order,
                    .total = (int)total,
                    .random = a.random};
  int none = 0;
  exit_code = run_steps(&run, &none);
  int closed = res_close(store, why, sizeof why);
  store = NULL;
  /* Ctrl-C while the baseline was timed (seconds at 1024^3): a file of no
   * evaluation, made by this search (an existing one is refused above),
   * stood at the output's name, and the same command then refused to run
   * until it was removed by hand */
  if (none && unlink(out) == 0)
    printf("interrupted before the first evaluation: nothing recorded; %s "
           "removed\n",
           out);
  else if (none)
    printf("interrupted before the first evaluation: nothing recorded; %s "
           "could not be removed: %s\n",
           out, strerror(errno));
  if (closed != RES_OK && !exit_code) {
    lab_name_path(out, why, sizeof why);
    FAIL(LAB_EXIT_ENV, "%s", why);
  }
  if (exit_code) goto cleanup;
  lab_interrupt_uninstall(); /* all recorded: the comparison may be cut */

  /* The summary, measured with the same evaluator (slot 0). */
  kl_executor exe;
  kl_eval_options opts;
  lab_evaluator_options(&ev, &exe, &opts);
  lab_compare_print(out, exhaustive, c.corpus, &opts, stdout);

cleanup:
  if (store) res_close(store, why, sizeof why);
  lab_evaluator_stop(&ev);
  rw_free(script);
  free(config_text);
  free(order);
  lab_seed_variants_free(space, n_loaded);
  lab_campaign_free(&c);
  lab_interrupt_uninstall();
  return exit_code;
#undef FAIL
}
