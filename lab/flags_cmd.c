/*
 * lab/flags_cmd.c — `kernlab flags`: prints the anti-cheat flag table
 * (name, kind, what raises it, the hack it answers), or runs the static
 * scanner on files.
 *
 *   kernlab flags                  the table, aligned for a terminal
 *   kernlab flags --json           one JSON object per flag
 *   kernlab flags --scan FILE...   the static flags each file raises, one
 *                                  name per line (prefixed "FILE: " when
 *                                  there are several files); the scanner's
 *                                  detail line goes to stderr
 *   kernlab flags --json --scan FILE...
 *                                  one JSON object per file: file, flags
 *                                  (an array of names), detail
 *
 * Exit codes: 0, or 2 for bad usage or an unreadable file.
 */
#include "lab/lab.h"

#include "kernels/kernels.h"

#include <stdlib.h>
#include <string.h>

static void print_table(FILE *f) {
  size_t n;
  const kl_flag_info *t = kl_flag_table(&n);
  fprintf(f, "%-30s %-8s %s\n", "flag", "kind", "raised by / answers");
  for (size_t i = 0; i < n; i++) {
    fprintf(f, "%-30s %-8s %s\n", t[i].name, t[i].kind, t[i].description);
    fprintf(f, "%-30s %-8s hack: %s\n", "", "", t[i].hack);
  }
  fprintf(f,
          "\nStatic flags come from the scanner (kernels/scan.c), dynamic "
          "ones from the\nevaluation's runs. A flag never changes `correct`; "
          "the reward script decides\nthe penalty.\n");
}

static void print_json(FILE *f) {
  size_t n;
  const kl_flag_info *t = kl_flag_table(&n);
  for (size_t i = 0; i < n; i++) {
    fprintf(f, "{\"name\":");
    lab_json_string(f, t[i].name);
    fprintf(f, ",\"bit\":%d,\"kind\":", t[i].bit);
    lab_json_string(f, t[i].kind);
    fprintf(f, ",\"description\":");
    lab_json_string(f, t[i].description);
    fprintf(f, ",\"hack\":");
    lab_json_string(f, t[i].hack);
    fprintf(f, "}\n");
  }
}

/* The detail line quotes the source (a banned include, an asm line), so it
 * goes through lab_printable: a hostile file cannot write escape sequences
 * to the terminal. JSON escapes on its own (invalid bytes become U+FFFD). */
static int scan_files(int nfiles, char **files, int json) {
  int rc = LAB_EXIT_OK;
  for (int i = 0; i < nfiles; i++) {
    char *src = NULL, why[512], detail[1024], shown[1024], name[512];
    size_t len = 0;
    if (kl_source_load(files[i], &src, &len, why, sizeof why) != KL_OK) {
      fprintf(stderr, "kernlab flags: %s\n", why);
      rc = LAB_EXIT_USAGE;
      continue;
    }
    kl_flags fl = kl_scan(src, len, detail, sizeof detail);
    free(src);
    if (json) {
      printf("{\"file\":");
      lab_json_string(stdout, files[i]);
      printf(",\"flags\":[");
      for (int bit = 0, k = 0; bit < 64; bit++)
        if (fl & KL_FLAG(bit)) {
          printf(k++ ? "," : "");
          lab_json_string(stdout, kl_flag_name(bit));
        }
      printf("],\"detail\":");
      lab_json_string(stdout, fl ? detail : "");
      printf("}\n");
      continue;
    }
    lab_printable(files[i], strlen(files[i]), name, sizeof name);
    for (int bit = 0; bit < 64; bit++) {
      if (!(fl & KL_FLAG(bit))) continue;
      if (nfiles > 1) printf("%s: ", name);
      printf("%s\n", kl_flag_name(bit));
    }
    if (fl)
      fprintf(stderr, "%s: %s\n", name,
              lab_printable(detail, strlen(detail), shown, sizeof shown));
  }
  return rc;
}

/* `--json` may come before or after `--scan`; every other argument after
 * `--scan` is a file (a file named --json is ./--json). */
int lab_flags(int argc, char **argv) {
  int json = 0, scan = 0, nfiles = 0;
  char **files = calloc((size_t)argc, sizeof *files);
  if (!files) {
    fprintf(stderr, "kernlab flags: out of memory\n");
    return LAB_EXIT_ENV;
  }
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--json")) {
      json = 1;
    } else if (!strcmp(argv[i], "--scan")) {
      scan = 1;
    } else if (scan) {
      files[nfiles++] = argv[i];
    } else {
      fprintf(stderr,
              "kernlab flags: unknown option '%s' (usage: kernlab flags "
              "[--json] [--scan FILE.cu...])\n",
              argv[i]);
      free(files);
      return LAB_EXIT_USAGE;
    }
  }
  int rc = LAB_EXIT_OK;
  if (scan && !nfiles) {
    fprintf(stderr, "usage: kernlab flags [--json] --scan FILE.cu...\n");
    rc = LAB_EXIT_USAGE;
  } else if (scan) {
    rc = scan_files(nfiles, files, json);
  } else if (json) {
    print_json(stdout);
  } else {
    print_table(stdout);
  }
  free(files);
  return rc;
}
