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

static int scan_files(int nfiles, char **files) {
  int rc = LAB_EXIT_OK;
  for (int i = 0; i < nfiles; i++) {
    char *src = NULL, why[512], detail[1024];
    size_t len = 0;
    if (kl_source_load(files[i], &src, &len, why, sizeof why) != KL_OK) {
      fprintf(stderr, "kernlab flags: %s\n", why);
      rc = LAB_EXIT_USAGE;
      continue;
    }
    kl_flags fl = kl_scan(src, len, detail, sizeof detail);
    free(src);
    for (int bit = 0; bit < 64; bit++) {
      if (!(fl & KL_FLAG(bit))) continue;
      if (nfiles > 1) printf("%s: ", files[i]);
      printf("%s\n", kl_flag_name(bit));
    }
    if (fl) fprintf(stderr, "%s: %s\n", files[i], detail);
  }
  return rc;
}

int lab_flags(int argc, char **argv) {
  int json = 0;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--json")) {
      json = 1;
    } else if (!strcmp(argv[i], "--scan")) {
      if (i + 1 >= argc) {
        fprintf(stderr, "usage: kernlab flags --scan FILE.cu...\n");
        return LAB_EXIT_USAGE;
      }
      return scan_files(argc - i - 1, argv + i + 1);
    } else {
      fprintf(stderr,
              "kernlab flags: unknown option '%s' (usage: kernlab flags "
              "[--json] | --scan FILE.cu...)\n",
              argv[i]);
      return LAB_EXIT_USAGE;
    }
  }
  if (json)
    print_json(stdout);
  else
    print_table(stdout);
  return LAB_EXIT_OK;
}
