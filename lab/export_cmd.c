/*
 * lab/export_cmd.c — `kernlab export RUN.h5 --format csv|jsonl [-o FILE]
 * [--source]`: every candidate of a results file as one CSV row or JSON
 * line, for tools outside kernlab (a spreadsheet, pandas, jq). Apart from
 * top and show (lab/results_cmd.c) because it is the one results command
 * that writes a file, and the one whose cells a spreadsheet may read as
 * formulas: its field encodings live here together.
 *
 * Read-only on the results file, as the other results commands (SWMR
 * read); -o is written beside its name and renamed into place, so a
 * failed or interrupted export leaves no partial file. A measurement that
 * measured nothing (NaN, or a negative "not measured" time) is an empty
 * cell or null, never 0 or -1.
 */
#include "lab/lab.h"

#include "results/results.h"

#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static const char export_synopsis[] =
    "export RUN.h5 --format csv|jsonl [-o FILE] [--source]";

/* --source adds each candidate's text in both formats: the "source" field
 * of a JSON line, byte for byte (NUL bytes too: check it against
 * src_sha256), or a last CSV column "source", one quoted cell per kernel
 * (RFC 4180: its lines and quotes stay in the cell, as csv readers and
 * spreadsheets read them) with csv_field's changes for a spreadsheet's
 * sake: control bytes but tab and line ends, and bytes that are not
 * UTF-8, as U+FFFD, and a leading apostrophe before = + - @. It was
 * refused with csv (the walkthrough review), though the help offered it
 * for both; a kernel's text in a spreadsheet beside its times is what a
 * CSV export with --source is for. */

/* One text cell. A cell starting with = + - @ (or a tab or CR) is a
 * formula to a spreadsheet (=HYPERLINK(...) from an edited label): it gets a
 * leading apostrophe, as OWASP's CSV-injection advice says. Bytes that are
 * not UTF-8, and control characters but the line ends and tab (a NUL
 * too: the cell is len bytes), become U+FFFD, as the JSONL export writes
 * them. */
static void csv_field_n(FILE *f, const char *s, size_t len) {
  int formula = len && s[0] && strchr("=+-@\t\r", s[0]);
  int quote = 0;
  for (size_t i = 0; i < len && !quote; i++)
    quote = s[i] == ',' || s[i] == '"' || s[i] == '\n' || s[i] == '\r';
  if (quote) fputc('"', f);
  if (formula) fputc('\'', f);
  for (size_t i = 0; i < len;) {
    size_t n = (unsigned char)s[i] < 0x80
                   ? 1
                   : res_utf8_char(s + i, len - i < 4 ? len - i : 4);
    unsigned char c0 = (unsigned char)s[i], c1 = (unsigned char)s[i + (n > 1)];
    /* control bytes other than the line ends and tab (ESC, BEL, DEL) and
     * C1 controls (U+0080..U+009F; U+009B is CSI): a terminal obeys them,
     * and a spreadsheet has no use for them */
    int control = (n == 1 && ((c0 < 0x20 && (!c0 || !strchr("\n\r\t", c0))) ||
                              c0 == 0x7f)) ||
                  (n == 2 && c0 == 0xC2 && c1 < 0xA0);
    if (!n || control) {
      fputs("\xEF\xBF\xBD", f);
      i += n ? n : 1;
      continue;
    }
    if (s[i] == '"') fputc('"', f);
    fwrite(s + i, 1, n, f);
    i += n;
  }
  if (quote) fputc('"', f);
}

static void csv_field(FILE *f, const char *s) {
  csv_field_n(f, s, strlen(s));
}

/* A double for export: NaN (and -1 for "not measured" times, errors and
 * compile times) as missing. */
static void put_num(FILE *f, int json, double v, int none_if_negative) {
  if (isnan(v) || isinf(v) || (none_if_negative && v < 0))
    fputs(json ? "null" : "", f);
  else
    fprintf(f, "%.17g", v);
}

typedef struct col {
  const char *name;
  /* s string, i integer, n measured integer (negative = none), d double,
   * t measurement (negative = none), b bool */
  char kind;
  size_t off;
} col;

#define COL(name, kind)                                                        \
  { #name, kind, offsetof(res_candidate, name) }
static const col cols[] = {
    COL(id, 'q'),
    COL(step, 'q'),
    COL(group, 'i'),
    COL(sample, 'i'),
    COL(task, 's'),
    COL(label, 's'),
    COL(backend, 's'),
    COL(status, 's'),
    COL(compiled, 'b'),
    COL(correct, 'b'),
    COL(max_rel_err, 't'),
    COL(max_abs_err, 't'),
    COL(time_us, 't'),
    COL(time_min_us, 't'),
    COL(time_max_us, 't'),
    COL(baseline_us, 't'),
    COL(gflops, 't'),
    COL(reward, 'd'),
    COL(regs, 'n'),
    COL(smem_bytes, 'n'),
    COL(spill_bytes, 'n'),
    COL(stack_bytes, 'n'),
    COL(block_x, 'n'),
    COL(block_y, 'n'),
    COL(tile_rows, 'n'),
    COL(tile_cols, 'n'),
    COL(dyn_smem_bytes, 'n'),
    COL(shape_m, 'i'),
    COL(shape_n, 'i'),
    COL(shape_k, 'i'),
    COL(seed, 'Q'),
    COL(compile_ms, 't'),
    COL(wall_unix, 'd'),
    COL(reward_sha256, 's'),
    COL(src_len, 'I'),
    COL(timing_count, 'I'),
    COL(error, 's'),
    COL(timed_launches, 'i'),
};
#undef COL

static void put_col(FILE *f, int json, const res_candidate *c, const col *k) {
  const char *p = (const char *)c + k->off;
  switch (k->kind) {
  case 's':
    if (json)
      lab_json_string(f, p);
    else
      csv_field(f, p);
    break;
  case 'b':
    fputs(*(const uint8_t *)p ? (json ? "true" : "1") : (json ? "false" : "0"),
          f);
    break;
  case 'q':
    fprintf(f, "%lld", (long long)*(const int64_t *)p);
    break;
  case 'Q':
    fprintf(f, "%llu", (unsigned long long)*(const uint64_t *)p);
    break;
  case 'i':
    fprintf(f, "%d", *(const int32_t *)p);
    break;
  case 'I':
    fprintf(f, "%u", *(const uint32_t *)p);
    break;
  case 'n':
    if (*(const int32_t *)p < 0)
      fputs(json ? "null" : "", f);
    else
      fprintf(f, "%d", *(const int32_t *)p);
    break;
  case 'd':
    put_num(f, json, *(const double *)p, 0);
    break;
  case 't':
    put_num(f, json, *(const double *)p, 1);
    break;
  }
}

static int export_rows(FILE *f, const res_reader *r, int json,
                       int with_source) {
  size_t ncols = sizeof cols / sizeof cols[0];
  int k = res_component_count(r);
  if (!json) {
    for (size_t i = 0; i < ncols; i++)
      fprintf(f, "%s,", cols[i].name);
    fputs("flags,flag_bits,src_sha256", f);
    for (int j = 0; j < k; j++) {
      char name[96];
      snprintf(name, sizeof name, "reward.%s", res_component_name(r, j));
      fputc(',', f);
      csv_field(f, name);
    }
    if (with_source) fputs(",source", f);
    fputc('\n', f);
  }
  for (int64_t id = 0; id < res_count(r); id++) {
    const res_candidate *c = res_get(r, id);
    char sha[65], fl[1024];
    lab_sha_hex(c->src_sha256, sha);
    const double *comp = res_components(r, id);
    /* read first: a source that cannot be read leaves no half row */
    char *src = NULL;
    size_t src_len = 0;
    if (with_source) {
      char why[1024];
      if (res_source(r, id, &src, &src_len, why, sizeof why) != RES_OK) {
        fprintf(stderr, "kernlab export: %s\n", why);
        return LAB_EXIT_USAGE;
      }
    }
    if (json) fputc('{', f);
    for (size_t i = 0; i < ncols; i++) {
      if (json) fprintf(f, "%s\"%s\":", i ? "," : "", cols[i].name);
      put_col(f, json, c, &cols[i]);
      if (!json) fputc(',', f);
    }
    if (json) {
      fputs(",\"flags\":[", f);
      int first = 1;
      for (int b = 0; b < 64; b++) {
        if (!(c->flags >> b & 1)) continue;
        char tmp[32];
        const char *name = res_flag_name(r, b);
        if (!name) snprintf(tmp, sizeof tmp, "bit%d", b), name = tmp;
        fputs(first ? "" : ",", f);
        lab_json_string(f, name);
        first = 0;
      }
      fprintf(
          f,
          "],\"flag_bits\":%llu,\"src_sha256\":\"%s\",\"reward_components\":{",
          (unsigned long long)c->flags, sha);
      first = 1;
      for (int j = 0; j < k; j++) {
        if (!comp || isnan(comp[j])) continue;
        fputs(first ? "" : ",", f);
        lab_json_string(f, res_component_name(r, j));
        fputc(':', f);
        put_num(f, 1, comp[j], 0);
        first = 0;
      }
      fputc('}', f);
      if (with_source) {
        fputs(",\"source\":", f);
        lab_json_string_n(f, src, src_len); /* all of it, NUL bytes too */
      }
      fputs("}\n", f);
    } else {
      lab_flag_list(r, c->flags, "|", fl, sizeof fl);
      csv_field(f, c->flags ? fl : "");
      fprintf(f, ",%llu,%s", (unsigned long long)c->flags, sha);
      for (int j = 0; j < k; j++) {
        fputc(',', f);
        put_num(f, 0, comp ? comp[j] : NAN, 0);
      }
      if (with_source) {
        fputc(',', f);
        csv_field_n(f, src, src_len); /* quoted: its lines stay in one cell */
      }
      fputc('\n', f);
    }
    free(src);
  }
  return LAB_EXIT_OK;
}

int lab_export(int argc, char **argv) {
  const char *path = NULL, *format = NULL, *out = NULL;
  int with_source = 0;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--format") && i + 1 < argc) {
      format = argv[++i];
    } else if (!strncmp(argv[i], "--format=", 9)) {
      format = argv[i] + 9;
    } else if (!strcmp(argv[i], "-o") && i + 1 < argc) {
      out = argv[++i];
    } else if (!strcmp(argv[i], "--source")) {
      with_source = 1;
    } else if (i + 1 == argc &&
               (!strcmp(argv[i], "--format") || !strcmp(argv[i], "-o"))) {
      return lab_usage("export", "missing value after", argv[i],
                       export_synopsis);
    } else if (argv[i][0] == '-') {
      return lab_usage("export", "unknown option", argv[i], export_synopsis);
    } else if (!path) {
      path = argv[i];
    } else {
      return lab_usage("export", "unexpected argument", argv[i],
                       export_synopsis);
    }
  }
  if (!path)
    return lab_usage("export", "no results file given", NULL, export_synopsis);
  if (!format || (strcmp(format, "csv") && strcmp(format, "jsonl")))
    return lab_usage("export", "--format wants csv or jsonl, got",
                     format ? format : "nothing", export_synopsis);
  if (out && !strcmp(out, "-")) out = NULL; /* -o -: stdout, as report */
  char why[1200];
  /* replaces an earlier export of that format, not any file (a source) */
  int jsonl = !strcmp(format, "jsonl");
  if (out && strcmp(out, "-") &&
      lab_output_ok(out, &path, 1, jsonl ? "{\"id\":" : "id,", jsonl ? 6 : 3,
                    why, sizeof why) != 0) {
    fprintf(stderr, "kernlab export: -o %s\n", why);
    return LAB_EXIT_USAGE;
  }
  int exit = 0;
  res_reader *r = lab_open_run("export", path, &exit);
  if (!r) return exit;
  /* -o: written beside its name and renamed into place when complete, so
   * a failed or interrupted export leaves no partial file (and an earlier
   * one intact) */
  FILE *f = stdout;
  kl_outfile of;
  if (out) {
    char why2[1400];
    /* its folder is made when missing, as every command's output folder
     * is; it was exit 2 */
    int perr = lab_prepare_out(out, why2, sizeof why2);
    if (perr != 0) {
      fprintf(stderr, "kernlab export: -o %s\n", why2);
      res_reader_close(r);
      return lab_out_exit(perr);
    }
    if (kl_outfile_open(&of, out, why2, sizeof why2) != 0) {
      fprintf(stderr, "kernlab export: %s\n", why2);
      res_reader_close(r);
      return LAB_EXIT_USAGE;
    }
    lab_interrupt_install("kernlab export", NULL, of.tmp);
    f = of.f;
  }
  int rc = export_rows(f, r, !strcmp(format, "jsonl"), with_source);
  /* (standard output is checked for every command in lab/main.c) */
  if (out) {
    char why2[1400];
    if (rc != LAB_EXIT_OK) {
      kl_outfile_abort(&of);
    } else if (kl_outfile_commit(&of, 0, why2, sizeof why2) != 0) {
      fprintf(stderr, "kernlab export: %s\n", why2);
      rc = LAB_EXIT_ENV;
    }
    lab_interrupt_uninstall();
  }
  res_reader_close(r);
  return rc;
}
