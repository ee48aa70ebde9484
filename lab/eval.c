/*
 * lab/eval.c — `kernlab eval`: evaluates candidate files and prints a table
 * (or JSON lines) of what each did.
 *
 * Every file gets a row, whatever happened to it; an invalid file makes the
 * exit code 2 but does not stop the others. An environment problem (no
 * NVRTC for the GPU backend, no host compiler, no device for --backend gpu)
 * stops at once with exit 3. The baseline (the naive seed at the target
 * shape, same backend, same protocol) is timed once per invocation, before
 * the candidates, and reported with each.
 */
#include "lab/lab.h"

#include "kernels/kernels.h"
#include "sandbox/sandbox.h"

#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void lab_json_string_n(FILE *f, const char *s, size_t n) {
  fputc('"', f);
  const unsigned char *end = (const unsigned char *)s + n;
  for (const unsigned char *p = (const unsigned char *)s; p < end; p++) {
    switch (*p) {
    case '"':
      fputs("\\\"", f);
      break;
    case '\\':
      fputs("\\\\", f);
      break;
    case '\n':
      fputs("\\n", f);
      break;
    case '\r':
      fputs("\\r", f);
      break;
    case '\t':
      fputs("\\t", f);
      break;
    default:
      if (*p < 0x20) {
        fprintf(f, "\\u%04x", *p);
      } else if (*p >= 0x80) { /* JSON is UTF-8: other bytes become U+FFFD */
        size_t len =
            res_utf8_char((const char *)p, end - p < 4 ? (size_t)(end - p) : 4);
        if (!len) {
          fputs("\\ufffd", f);
        } else {
          fwrite(p, 1, len, f);
          p += len - 1;
        }
      } else {
        fputc(*p, f);
      }
    }
  }
  fputc('"', f);
}

void lab_json_string(FILE *f, const char *s) {
  lab_json_string_n(f, s, strlen(s));
}

/* null for "not measured" (negative) and for NaN/inf, which JSON has no
 * word for (an error is +inf when a kernel wrote inf: kl_compare) */
static void json_number(FILE *f, const char *key, double v) {
  if (v < 0 || !isfinite(v))
    fprintf(f, ",\"%s\":null", key);
  else
    fprintf(f, ",\"%s\":%.6g", key, v);
}

/* An integer measurement (registers, bytes): null when negative, which is
 * what the compile reports where it did not happen (invalid input, a
 * compile error) */
static void json_int(FILE *f, const char *key, int v) {
  if (v < 0)
    fprintf(f, ",\"%s\":null", key);
  else
    fprintf(f, ",\"%s\":%d", key, v);
}

static void print_json(FILE *f, const kl_result *r, const rw_components *rw) {
  fputs("{\"file\":", f);
  lab_json_string(f, r->file);
  fputs(",\"backend\":", f);
  lab_json_string(f, r->backend);
  char device[160]; /* whose times these are: a row read alone says */
  fputs(",\"device\":", f);
  lab_json_string(f, kl_backend_device(r->backend, device, sizeof device));
  fprintf(f, ",\"compiled\":%s,\"correct\":%s", r->compiled ? "true" : "false",
          r->correct ? "true" : "false");
  fputs(",\"status\":", f);
  lab_json_string(f, r->status);
  fputs(",\"error\":", f);
  lab_json_string(f, r->error);
  json_number(f, "max_rel_err", r->n_checks ? r->max_rel_err : -1);
  json_number(f, "max_abs_err", r->n_checks ? r->max_abs_err : -1);
  json_number(f, "time_us", r->time_us);
  json_number(f, "time_min_us", r->time_min_us);
  json_number(f, "time_max_us", r->time_max_us);
  json_number(f, "time_p20_us", r->time_p20_us);
  json_number(f, "time_p80_us", r->time_p80_us);
  json_number(f, "cv", r->time_cv);
  fputs(",\"timer\":", f);
  lab_json_string(f, r->timer);
  if (r->timer_note[0]) { /* CUDA events stood in for CUPTI: why */
    fputs(",\"timer_note\":", f);
    lab_json_string(f, r->timer_note);
  }
  fprintf(f, ",\"samples\":%d,\"timed_launches\":%d", r->samples,
          r->timed_launches);
  fputs(",\"time_kind\":", f);
  lab_json_string(f, r->backend);
  json_number(f, "gflops", r->gflops);
  json_number(f, "baseline_us", r->baseline_us);
  json_number(f, "speedup_vs_baseline",
              r->time_us > 0 && r->baseline_us > 0 ? r->baseline_us / r->time_us
                                                   : -1);
  /* On a GPU the baseline is cuBLAS: this is "percent of cuBLAS". */
  json_number(f, "percent_of_baseline",
              r->time_us > 0 && r->baseline_us > 0
                  ? 100.0 * r->baseline_us / r->time_us
                  : -1);
  json_int(f, "regs", r->res.regs);
  json_int(f, "spill_stores", r->res.spill_stores);
  json_int(f, "spill_loads", r->res.spill_loads);
  json_int(f, "smem_bytes", r->res.smem_bytes);
  json_int(f, "stack_bytes", r->res.stack_bytes);
  if (r->has_launch)
    fprintf(f,
            ",\"launch\":{\"block_x\":%d,\"block_y\":%d,\"tile_rows\":%d,"
            "\"tile_cols\":%d,\"dyn_smem_bytes\":%d}",
            r->launch.block_x, r->launch.block_y, r->launch.tile_rows,
            r->launch.tile_cols, r->launch.dyn_smem_bytes);
  else
    fputs(",\"launch\":null", f);
  const char *names[64];
  int nf = lab_flag_names(r->flags, names, 64);
  fputs(",\"flags\":[", f);
  for (int i = 0; i < nf; i++) {
    if (i) fputc(',', f);
    lab_json_string(f, names[i]);
  }
  fputs("],\"flag_detail\":", f);
  lab_json_string(f, r->flag_detail);
  fprintf(f, ",\"seed\":%llu", (unsigned long long)r->seed);
  if (rw) {
    fputs(",\"reward\":", f);
    rw_components_json(f, rw);
  }
  fprintf(f, ",\"sandbox\":\"%s\"",
          r->confinement == 2   ? "seccomp+rlimits+namespaces"
          : r->confinement == 1 ? "seccomp+rlimits"
                                : "none");
  if (r->compile_ms < 0) /* no compile ran: an unreadable or invalid file */
    fputs(",\"compile_ms\":null", f);
  else
    fprintf(f, ",\"compile_ms\":%.3f", r->compile_ms);
  fprintf(f, ",\"cache_hit\":%s", r->cache_hit ? "true" : "false");
  fputs(",\"sha256\":", f);
  lab_json_string(f, r->sha256);
  fputs(",\"shapes\":[", f);
  for (int i = 0; i < r->n_checks; i++) {
    const kl_shape_check *c = &r->checks[i];
    fprintf(f, "%s{\"M\":%d,\"N\":%d,\"K\":%d,\"pass\":%s", i ? "," : "",
            c->shape.M, c->shape.N, c->shape.K, c->pass ? "true" : "false");
    json_number(f, "rel_err", c->rel_err);
    json_number(f, "max_abs_err", c->max_abs_err);
    fprintf(f, ",\"unwritten\":%ld,\"nonfinite\":%ld,\"over_tol\":%ld}",
            c->unwritten, c->nonfinite, c->over_tol);
  }
  fputs("]}\n", f);
  fflush(f);
}

static void print_table_header(FILE *f) {
  fprintf(f, "%-34s %-14s %-7s %9s %12s %9s %8s %5s %6s\n", "file", "status",
          "correct", "rel_err", "time_us", "GFLOP/s", "x naive", "regs",
          "smem");
}

static void print_row(FILE *f, const kl_result *r, const rw_components *rw) {
  const char *name = strrchr(r->file, '/');
  name = name ? name + 1 : r->file;
  char rel[16] = "-", t[24] = "-", gf[16] = "-", sp[16] = "-", regs[16] = "-",
       smem[16] = "-";
  if (r->n_checks) snprintf(rel, sizeof rel, "%.1e", r->max_rel_err);
  if (r->time_us > 0) snprintf(t, sizeof t, "%.1f", r->time_us);
  if (r->gflops > 0) snprintf(gf, sizeof gf, "%.2f", r->gflops);
  if (r->time_us > 0 && r->baseline_us > 0)
    snprintf(sp, sizeof sp, "%.2f", r->baseline_us / r->time_us);
  if (r->res.regs >= 0) snprintf(regs, sizeof regs, "%d", r->res.regs);
  /* static + dynamic (KL_LAUNCH's), as top's column */
  if (r->res.smem_bytes >= 0 && r->has_launch)
    snprintf(smem, sizeof smem, "%d",
             r->res.smem_bytes + r->launch.dyn_smem_bytes);
  char shown[4 * 34 + 1], status[4 * 14 + 1];
  fprintf(f, "%s %s %-7s %9s %12s %9s %8s %5s %6s\n",
          lab_cell(name, strlen(name), 34, shown, sizeof shown),
          lab_cell(r->status, sizeof r->status, 14, status, sizeof status),
          r->correct ? "yes" : "no", rel, t, gf, sp, regs, smem);
  if (r->error[0]) fprintf(f, "    %s\n", r->error);
  if (r->flags) {
    char buf[2048]; /* every flag's name, with room to spare */
    kl_flags_format(r->flags, ",", buf, sizeof buf);
    fprintf(f, "    flags: %s\n", buf);
  }
  if (rw) {
    fprintf(f, "    reward %.4g =", rw->total);
    for (int i = 0; i < rw->n; i++)
      fprintf(f, " %s%s %.4g", i ? "+ " : "", rw->items[i].name,
              rw->items[i].value);
    fputc('\n', f);
  }
  fflush(f);
}

int lab_arg_shape(const char *s, kl_shape *out) {
  /* strtol, not sscanf's %d: 4294967297 must be refused, not wrap to 1 */
  long v[3];
  const char *p = s;
  for (int i = 0; i < 3; i++) {
    char *end;
    errno = 0;
    if (!(*p >= '0' && *p <= '9')) return -1; /* no sign, no blank */
    v[i] = strtol(p, &end, 10);
    if (errno || end == p || v[i] < 1 || v[i] > (1L << 28)) return -1;
    if (i < 2 && *end != 'x') return -1;
    if (i == 2 && *end) return -1;
    p = end + 1;
  }
  out->M = (int)v[0], out->N = (int)v[1], out->K = (int)v[2];
  if ((long long)out->M * out->N > (1LL << 28) ||
      (long long)out->M * out->K > (1LL << 28) ||
      (long long)out->K * out->N > (1LL << 28))
    return -1;
  return 0;
}

static int usage_error(const char *msg, const char *arg) {
  fprintf(stderr, "kernlab eval: %s%s%s\n", msg, arg ? ": " : "",
          arg ? arg : "");
  fprintf(
      stderr,
      "usage: kernlab eval FILE.cu... [--backend auto|cpu-emu|gpu] "
      "[--shape MxNxK]... [--seed S] [--threads N] [--jobs N] [--timeout S] "
      "[--compile-timeout S] [--max-speedup X] [--reward F.lua] [--out RUN.h5] "
      "[--json]\n");
  return LAB_EXIT_USAGE;
}

/* Whether the results file at path may take candidates of task (target
 * shape target): 0 when there is no file (or none this check can read:
 * res_open_append then says what is wrong with it) or when its candidates
 * are all of task; else LAB_EXIT_USAGE, having said why. A file holds one
 * task, as `kernlab run --resume` judges it (lab/run_resume.c): a 64^3 eval
 * appended to a 256^3 campaign's file was ranked first by `top` (16x less
 * work, not a faster kernel) and made the campaign's --resume refuse the
 * file (the walkthrough review). Checked before anything is evaluated or
 * written: opening the file to append may rebuild it. */
static int out_task_ok(const char *path, const char *task, kl_shape target) {
  if (access(path, F_OK) != 0) return 0;
  int code = 0;
  char why[600];
  res_reader *r = res_open_read(path, &code, why, sizeof why);
  if (!r) return 0;
  enum { MAX_SHOWN = 4 };
  res_task_count held[MAX_SHOWN];
  int n = res_tasks(r, held, MAX_SHOWN);
  res_reader_close(r);
  char want[RES_TASK_LEN];
  res_task_canonical(task, want, sizeof want);
  if (n == 0 || (n == 1 && !strcmp(held[0].task, want))) return 0;
  /* the shapes as --shape takes them: the task names past "fp32_" */
  const char *shape[MAX_SHOWN];
  for (int k = 0; k < n && k < MAX_SHOWN; k++) {
    const char *us = strchr(held[k].task, '_');
    shape[k] = us ? us + 1 : held[k].task;
  }
  /* a hostile file's task names reach the terminal printable only */
  char shown[4 * 1024],
      held_at[4 * (4 * RES_TASK_LEN + 48) + 16] = "", one[4 * RES_TASK_LEN];
  if (n == 1) {
    snprintf(held_at, sizeof held_at, "its %lld candidates are timed at %s",
             (long long)held[0].count,
             lab_printable(shape[0], strlen(shape[0]), one, sizeof one));
  } else {
    snprintf(held_at, sizeof held_at,
             "its candidates are timed at several shapes already:");
    for (int k = 0; k < n && k < MAX_SHOWN; k++) {
      size_t used = strlen(held_at);
      snprintf(held_at + used, sizeof held_at - used, "%s %s (%lld)",
               k ? "," : "",
               lab_printable(shape[k], strlen(shape[k]), one, sizeof one),
               (long long)held[k].count);
    }
    if (n > MAX_SHOWN)
      strncat(held_at, ", ...", sizeof held_at - strlen(held_at) - 1);
  }
  fprintf(stderr,
          "kernlab eval: --out %s: %s, where this evaluation's target shape "
          "(the first --shape) is %dx%dx%d: a results file holds one task, "
          "or `top` ranks times of different shapes as one list; give --out "
          "a new file",
          lab_printable(path, strlen(path), shown, sizeof shown), held_at,
          target.M, target.N, target.K);
  if (n == 1)
    fprintf(stderr, ", or evaluate at --shape %s",
            lab_printable(shape[0], strlen(shape[0]), one, sizeof one));
  fprintf(stderr, ". Nothing was evaluated; the file is unchanged.\n");
  return LAB_EXIT_USAGE;
}

/* ---- parallel evaluation: one thread per sandbox slot ---- */

typedef struct eval_item {
  const char *file;
  char *src; /* the text evaluated (for --out), owned; NULL: not loadable */
  size_t len;
  kl_result r;
  int rc;
  int done;
} eval_item;

typedef struct eval_pool {
  eval_item *items;
  int n;
  int next; /* atomic: the next item to take */
  int stop; /* atomic: an environment problem ends the batch */
  const kl_eval_options *opts;
  const char *backend;
  sbx_limits limits;
  pthread_mutex_t mu;
  pthread_cond_t cv;
} eval_pool;

/* Reads the item's file into it->src. A file that cannot be read (missing,
 * empty, too large, a folder) gets its invalid_input result at once, done,
 * its error naming the file. Returns 1 if the text was read. */
static int load_item(eval_item *it, const char *backend, uint64_t seed) {
  char why[600];
  it->rc = kl_source_load(it->file, &it->src, &it->len, why, sizeof why);
  if (it->rc == KL_OK) return 1;
  kl_result *r = &it->r;
  memset(r, 0, sizeof *r);
  snprintf(r->file, sizeof r->file, "%s", it->file);
  snprintf(r->backend, sizeof r->backend, "%s", backend);
  snprintf(r->status, sizeof r->status, "invalid_input");
  snprintf(r->error, sizeof r->error, "%s", why);
  /* nothing measured: -1 in every field eval_impl starts at -1 */
  r->time_us = r->time_min_us = r->time_max_us = -1;
  r->time_p20_us = r->time_p80_us = r->time_cv = -1;
  r->gflops = r->baseline_us = r->compile_ms = -1;
  r->res = (kl_resources){-1, -1, -1, -1, -1, -1};
  r->seed = seed;
  it->done = 1;
  return 0;
}

static void *eval_thread(void *arg) {
  eval_pool *p = arg;
  sbx_slot *slot = sbx_slot_new(&p->limits);
  kl_executor ex;
  kl_eval_options opts = *p->opts;
  if (slot) {
    sbx_slot_executor(slot, &ex);
    opts.exec = &ex;
  }
  for (;;) {
    if (__atomic_load_n(&p->stop, __ATOMIC_RELAXED)) break;
    int i = __atomic_fetch_add(&p->next, 1, __ATOMIC_RELAXED);
    if (i >= p->n) break;
    eval_item *it = &p->items[i];
    if (it->done) continue; /* not loadable: its result is made */
    if (!slot) {
      memset(&it->r, 0, sizeof it->r);
      snprintf(it->r.file, sizeof it->r.file, "%s", it->file);
      snprintf(it->r.status, sizeof it->r.status, "sandbox_error");
      snprintf(it->r.error, sizeof it->r.error, "out of memory for a slot");
      it->rc = KL_EENV;
    } else {
      it->rc = kl_eval_source(it->file, it->src, it->len, &opts, &it->r);
    }
    if (it->rc == KL_EENV) __atomic_store_n(&p->stop, 1, __ATOMIC_RELAXED);
    pthread_mutex_lock(&p->mu);
    it->done = 1;
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
  }
  sbx_slot_free(slot);
  return NULL;
}

/* The command; files has room for argc names and is the caller's. */
static int eval_files(int argc, char **argv, const char **files) {
  kl_eval_options opts;
  kl_eval_defaults(&opts);
  int json = 0, nfiles = 0, jobs = 0;
  double compile_timeout = 60;
  const char *reward_path = NULL, *out_path = NULL;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    const char *val = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(a, "--json")) {
      json = 1;
    } else if (!strcmp(a, "--backend")) {
      if (!val) return usage_error("--backend needs a value", NULL);
      opts.backend = val;
      i++;
    } else if (!strcmp(a, "--shape")) {
      if (!val) return usage_error("--shape needs MxNxK", NULL);
      if (opts.n_shapes >= KL_MAX_SHAPES - 5)
        return usage_error("too many --shape options", val);
      if (lab_arg_shape(val, &opts.shapes[opts.n_shapes]) != 0)
        return usage_error("--shape expects MxNxK with sizes >= 1 and each "
                           "matrix under 2^28 elements",
                           val);
      opts.n_shapes++;
      i++;
    } else if (!strcmp(a, "--seed")) {
      if (!val) return usage_error("--seed needs a number", NULL);
      if (lab_arg_u64(val, 1, &opts.seed))
        return usage_error("--seed expects a positive integer", val);
      i++;
    } else if (!strcmp(a, "--threads")) {
      long v;
      if (lab_arg_long(val, 1, 4096, &v))
        return usage_error("--threads expects a count from 1 to 4096", val);
      opts.threads = (int)v;
      i++;
    } else if (!strcmp(a, "--jobs") || !strcmp(a, "-j")) {
      long v;
      if (lab_arg_long(val, 1, 1024, &v))
        return usage_error("--jobs expects a count from 1 to 1024", val);
      jobs = (int)v;
      i++;
    } else if (!strcmp(a, "--reward")) {
      if (!val) return usage_error("--reward needs a Lua file", NULL);
      reward_path = val;
      i++;
    } else if (!strcmp(a, "--out")) {
      if (!val || !val[0])
        return usage_error("--out needs a results file", NULL);
      out_path = val;
      i++;
    } else if (!strcmp(a, "--max-speedup")) {
      double v;
      if (lab_arg_double(val, 1, 1e9, &v) || v == 1)
        return usage_error("--max-speedup expects a finite factor > 1", val);
      opts.max_speedup = v;
      i++;
    } else if (!strcmp(a, "--compile-timeout")) {
      double v;
      if (lab_arg_double(val, 0, 86400, &v) || v == 0)
        return usage_error("--compile-timeout expects seconds > 0, at most "
                           "86400",
                           val);
      compile_timeout = v;
      i++;
    } else if (!strcmp(a, "--timeout")) {
      double v;
      if (lab_arg_double(val, 0, 86400, &v) || v == 0)
        return usage_error("--timeout expects seconds > 0, at most 86400", val);
      opts.run_deadline_s = v;
      i++;
    } else if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
      usage_error("help", NULL);
      return LAB_EXIT_OK;
    } else if (a[0] == '-' && a[1] == '-') {
      return usage_error("unknown option", a);
    } else {
      files[nfiles++] = a;
    }
  }
  if (nfiles == 0) return usage_error("no input files", NULL);

  char backend[16], why[768];
  /* A bad reward script or results file is found before any compile. */
  rw_script *script = NULL;
  if (reward_path) {
    script = rw_load(reward_path, NULL, why, sizeof why);
    if (!script || rw_validate(script, why, sizeof why) != RW_OK) {
      fprintf(stderr, "kernlab eval: --reward %s: %s\n", reward_path, why);
      rw_free(script);
      return LAB_EXIT_USAGE;
    }
  }
  int rc = kl_backend_resolve(opts.backend, backend, sizeof backend, why,
                              sizeof why);
  if (rc != KL_OK) {
    fprintf(stderr, "kernlab eval: %s%s\n",
            rc == KL_EENV ? "--backend gpu: " : "", why);
    return rc == KL_EENV ? LAB_EXIT_ENV : LAB_EXIT_USAGE;
  }
  if (why[0]) fprintf(stderr, "kernlab: %s\n", why);
  opts.backend = backend; /* resolved once, before any thread starts */
  if (kl_nvrtc_load(why, sizeof why) != KL_OK)
    fprintf(stderr,
            "kernlab: warning: %s; cpu-emu runs without sm_90 resource "
            "figures\n",
            why);
  if (!opts.seed) {
    /* One seed for the whole invocation, so that --seed replays it all. */
    FILE *ur = fopen("/dev/urandom", "rb");
    if (ur) {
      if (fread(&opts.seed, sizeof opts.seed, 1, ur) != 1) opts.seed = 0;
      fclose(ur);
    }
    opts.seed &= 0xffffffffffffull;
    if (!opts.seed) opts.seed = (unsigned long long)getpid() * 2654435761u;
  }
  /* Inputs first: a file that cannot be read is reported without a
   * baseline timed for it (kernlab eval nonexist.cu timed 256^3 first) */
  eval_pool pool;
  memset(&pool, 0, sizeof pool);
  pool.items = calloc((size_t)nfiles, sizeof(eval_item));
  if (!pool.items) {
    rw_free(script);
    return LAB_EXIT_ENV;
  }
  int loaded = 0;
  for (int i = 0; i < nfiles; i++) {
    pool.items[i].file = files[i];
    loaded += load_item(&pool.items[i], backend, opts.seed);
  }
  /* Slots share the cores: each emulated run gets its share of threads, so
   * parallel candidates do not time each other's contention. */
  int cores = (int)sysconf(_SC_NPROCESSORS_ONLN);
  if (cores < 1) cores = 1;
  if (jobs <= 0) jobs = cores;
  if (jobs > nfiles) jobs = nfiles;
  if (!opts.threads) opts.threads = cores / jobs > 0 ? cores / jobs : 1;
  /* Every compile and run goes through the sandbox. */
  kl_emu_set_launcher(sbx_host_compile_launcher());
  kl_emu_set_compile_deadline(compile_timeout); /* NVRTC's and the host's */
  /* Ctrl-C: nothing in flight is worth finishing (each candidate's row is
   * written when it is done): stop at once, killing the host compiles in
   * flight, and removing a new results file being made beside its name */
  char out_tmp[1200] = "";
  if (out_path) kl_outfile_tmpname(out_path, out_tmp, sizeof out_tmp);
  lab_interrupt_install("kernlab eval", NULL, out_path ? out_tmp : NULL);

  kl_shape target = opts.n_shapes ? opts.shapes[0] : (kl_shape){256, 256, 256};
  char task[32];
  snprintf(task, sizeof task, "fp32_%dx%dx%d", target.M, target.N, target.K);
  res_file *store = NULL;
  int store_failed = 0; /* an append failed: no more are tried */
  if (out_path && out_task_ok(out_path, task, target) != 0) {
    lab_interrupt_uninstall();
    rw_free(script);
    for (int i = 0; i < nfiles; i++)
      free(pool.items[i].src);
    free(pool.items);
    return LAB_EXIT_USAGE;
  }
  /* a new file's folder is made (`--out runs/mine.h5` in a fresh clone),
   * as every command's output folder is; it was refused, exit 3 */
  int perr = out_path && access(out_path, F_OK) != 0
                 ? lab_prepare_out(out_path, why, sizeof why)
                 : 0;
  if (perr != 0) {
    fprintf(stderr, "kernlab eval: --out %s\n", why);
    lab_interrupt_uninstall();
    rw_free(script);
    for (int i = 0; i < nfiles; i++)
      free(pool.items[i].src);
    free(pool.items);
    return lab_out_exit(perr);
  }
  if (out_path) {
    const char *flag_names[64];
    for (int b = 0; b < 64; b++) {
      const char *n = kl_flag_name(b);
      flag_names[b] = n ? n : "";
    }
    char device[160];
    res_campaign_meta meta = {
        .config = "kernlab eval",
        .reward_script = reward_path,
        .reward_sha256 = script ? rw_sha256(script) : NULL,
        .device = kl_backend_device(backend, device, sizeof device),
        .backend = backend,
        .kernlab_version = "0.1",
        .nvrtc_version = kl_nvrtc_version(),
        .seed = opts.seed,
        .flag_names = flag_names,
        .n_flags = 64};
    int code = 0;
    store = res_open_append(out_path, &meta, &code, why, sizeof why);
    if (!store) {
      lab_name_path(out_path, why, sizeof why);
      fprintf(stderr, "kernlab eval: --out %s\n", why);
      rw_free(script);
      for (int i = 0; i < nfiles; i++)
        free(pool.items[i].src);
      free(pool.items);
      return code == RES_EENV ? LAB_EXIT_ENV : LAB_EXIT_USAGE;
    }
  }
  double baseline = -1;
  if (loaded) {
    sbx_limits bl = {compile_timeout, 60, 0};
    sbx_slot *slot = sbx_slot_new(&bl);
    kl_executor ex;
    kl_eval_options bopts = opts;
    if (slot) {
      sbx_slot_executor(slot, &ex);
      bopts.exec = &ex;
      /* The baseline: cuBLAS SGEMM on a GPU, the naive seed on cpu-emu. */
      baseline =
          !strcmp(backend, "gpu")
              ? kl_gpu_cublas_time_us(target, &bopts, NULL, why, sizeof why)
              : kl_eval_baseline(target, &bopts, why, sizeof why);
    }
    sbx_slot_free(slot);
    if (baseline < 0) fprintf(stderr, "kernlab: warning: %s\n", why);
  }
  opts.baseline_us = baseline; /* for the plausibility check */
  if (!json) {
    char base[32] = "none"; /* not timed: no file could be read */
    if (baseline >= 0) snprintf(base, sizeof base, "%.1f us", baseline);
    printf("backend: %s   target: %dx%dx%d   seed: %llu (replay with --seed)\n",
           backend, target.M, target.N, target.K,
           (unsigned long long)opts.seed);
    if (!strcmp(backend, "cpu-emu")) {
      printf("times are CPU-emulator wall times (cpu-emu), not GPU times; "
             "baseline = naive seed: %s\n",
             base);
      /* Side-by-side candidates share the memory system and the clock
       * boost the baseline had to itself: their 'x naive' reads low (GPU
       * runs take a lock and are timed one at a time). */
      if (jobs > 1)
        printf("note: %d candidates ran side by side (--jobs %d, %d "
               "thread%s each), the baseline alone: 'x naive' may read low; "
               "--jobs 1 times each alone\n",
               jobs, jobs, opts.threads, opts.threads == 1 ? "" : "s");
    } else {
      printf("GPU times (CUPTI kernel time, L2 flushed); baseline = cuBLAS "
             "SGEMM: %s\n",
             base);
    }
    print_table_header(stdout);
  }

  pool.n = nfiles;
  pool.opts = &opts;
  pool.backend = backend;
  pool.limits = (sbx_limits){compile_timeout, 60, 0};
  pthread_mutex_init(&pool.mu, NULL);
  pthread_cond_init(&pool.cv, NULL);
  pthread_t *tids = calloc((size_t)jobs, sizeof(pthread_t));
  int started = 0;
  for (int i = 0; tids && i < jobs; i++)
    if (pthread_create(&tids[i], NULL, eval_thread, &pool) == 0) started++;
  if (started == 0) eval_thread(&pool); /* no threads: do it here */

  /* Print in input order as results arrive. */
  int exit_code = LAB_EXIT_OK, said_degraded = 0;
  /* The header promised CUPTI kernel times before any worker had tried
   * CUPTI: a run timed by CUDA events instead says so under the table
   * (an event pair also times the launch's overhead on the device; the
   * first reason given) */
  char events_why[96] = "";
  int n_events = 0;
  for (int i = 0; i < nfiles; i++) {
    eval_item *it = &pool.items[i];
    pthread_mutex_lock(&pool.mu);
    /* stop and next are the threads' atomics, written outside mu: read
     * as such (a plain read raced with them) */
    while (!it->done && !(__atomic_load_n(&pool.stop, __ATOMIC_RELAXED) &&
                          i >= __atomic_load_n(&pool.next, __ATOMIC_RELAXED)))
      pthread_cond_wait(&pool.cv, &pool.mu);
    int done = it->done;
    pthread_mutex_unlock(&pool.mu);
    if (!done) break; /* the batch stopped before this file */
    kl_result *r = &it->r;
    r->baseline_us = baseline;
    if (r->confinement == 1 && !said_degraded) {
      fprintf(stderr, "kernlab: note: user/network namespaces are not "
                      "available here; runs are confined by seccomp and "
                      "rlimits only\n");
      said_degraded = 1;
    }
    rw_components rwc, *rwp = NULL;
    memset(&rwc, 0, sizeof rwc);
    if (script) {
      const char *names[64];
      rw_candidate c;
      lab_rw_candidate(r, (long)it->len, names, 64, &c);
      rw_context ctx = {task, "fp32", target.M, target.N, target.K, &c, 1};
      if (rw_score(script, &c, &ctx, &rwc, why, sizeof why) == RW_OK)
        rwp = &rwc;
      else
        fprintf(stderr, "kernlab eval: %s: reward: %s\n", it->file, why);
    }
    if (json)
      print_json(stdout, r, rwp);
    else
      print_row(stdout, r, rwp);
    if (!strcmp(r->timer, "events")) {
      n_events++;
      if (!events_why[0])
        snprintf(events_why, sizeof events_why, "%s", r->timer_note);
    }
    if (store) {
      res_candidate rc_;
      lab_res_candidate(r, rwp, task, &rc_);
      const char *cn[RW_MAX_COMPONENTS];
      double cv[RW_MAX_COMPONENTS];
      int ncomp = rwp ? rwp->n : 0;
      for (int k = 0; k < ncomp; k++) {
        cn[k] = rwp->items[k].name;
        cv[k] = rwp->items[k].value;
      }
      int64_t id;
      /* after a failed append (a full disk, the file removed) the rest
       * are not tried: one message, not one per candidate */
      if (!store_failed &&
          res_append_candidate(store, &rc_, it->src ? it->src : "",
                               it->src ? it->len : 0, r->sample_us, r->samples,
                               cn, cv, ncomp, &id, why, sizeof why) != 0) {
        lab_name_path(out_path, why, sizeof why);
        fprintf(stderr,
                "kernlab eval: --out %s; the candidates evaluated after it "
                "are not recorded\n",
                why);
        exit_code = LAB_EXIT_ENV;
        store_failed = 1;
      }
    }
    rw_components_free(&rwc);
    if (it->rc == KL_EINPUT) {
      /* a file that could not be read has its name in the error already
       * ("kernlab eval: empty.cu: empty.cu: empty file" otherwise) */
      if (json && !it->src)
        fprintf(stderr, "kernlab eval: %s\n", r->error);
      else if (json)
        fprintf(stderr, "kernlab eval: %s: %s\n", it->file, r->error);
      if (exit_code == LAB_EXIT_OK) exit_code = LAB_EXIT_USAGE;
    } else if (it->rc == KL_EENV) {
      fprintf(stderr, "kernlab eval: %s\n", r->error);
      exit_code = LAB_EXIT_ENV;
      break;
    }
  }
  for (int i = 0; i < started; i++)
    pthread_join(tids[i], NULL);
  for (int i = 0; i < nfiles; i++)
    free(pool.items[i].src);
  if (n_events)
    fprintf(json ? stderr : stdout,
            "%snote: %d candidate%s timed by CUDA events, not CUPTI (%s): "
            "an event pair adds the launch's overhead on the device\n",
            json ? "kernlab eval: " : "", n_events,
            n_events == 1 ? " was" : "s were",
            events_why[0] ? events_why : "no reason given");
  if (store && res_close(store, why, sizeof why) != 0 && !store_failed) {
    lab_name_path(out_path, why, sizeof why);
    fprintf(stderr, "kernlab eval: --out %s\n", why);
    exit_code = LAB_EXIT_ENV;
  }
  lab_interrupt_uninstall();
  rw_free(script);
  free(tids);
  pthread_mutex_destroy(&pool.mu);
  pthread_cond_destroy(&pool.cv);
  free(pool.items);
  if (getenv("KERNLAB_REPORT_FDS")) {
    /* For the sandbox tests: descriptors still open at the end. */
    int n = 0;
    DIR *d = opendir("/proc/self/fd");
    for (struct dirent *e; d && (e = readdir(d));)
      n += e->d_name[0] != '.';
    if (d) closedir(d);
    fprintf(stderr, "kernlab: open descriptors at exit: %d\n", n - 1);
  }
  return exit_code;
}

int lab_eval(int argc, char **argv) {
  const char **files = calloc((size_t)argc, sizeof(char *));
  if (!files) return LAB_EXIT_ENV;
  int rc = eval_files(argc, argv, files);
  free(files);
  return rc;
}
