/*
 * lab/report_cmd.c — `kernlab report RUN.h5 -o report.html [-n N]`: the
 * command around res_report_html (results/report.c, which draws the page).
 * It parses the arguments, opens the results file (a bad one is a one-line
 * message and exit 2, before any output file is touched), and writes the
 * page to a temporary file next to the target that is renamed into place
 * only when complete, so a failed report never leaves half a page behind.
 * `-o -` writes to stdout.
 *
 * Several files (`kernlab report RUN.h5 RANDOM.h5 EXHAUSTIVE.h5 -o x.html`)
 * make one page: a comparison of all of them first (best time against
 * evaluations, one line per file, named by its path), then the usual page
 * about the first. Every file is opened before anything is written. Files
 * whose times do not compare with the first file's (the first holding
 * candidates; another task or backend, res_comparable) are named on stderr and
 * on the page, and left out of the comparison's plot and speed column.
 */
#include "lab/lab.h"

#include "kernels/kernels.h"
#include "results/results.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char report_synopsis[] =
    "report RUN.h5 [MORE.h5...] -o report.html [-n N]";

/* Writes the page to out_path through a temporary file renamed into place.
 * Returns an exit code; prints one line on failure. */
static int write_page(const res_reader *r, const res_report_opts *o,
                      const char *out_path) {
  char why[1024];
  if (!strcmp(out_path, "-")) {
    if (res_report_html(r, o, stdout, why, sizeof why) != RES_OK) {
      /* a reader that stopped early (`| head`) is not a failure, as for
       * every command's standard output (lab/main.c) */
      if (strstr(why, strerror(EPIPE))) return LAB_EXIT_OK;
      fprintf(stderr, "kernlab report: stdout: %s\n", why);
      return LAB_EXIT_ENV;
    }
    return LAB_EXIT_OK;
  }
  /* checked before anything is built next to it: the rename would fail
   * only at the end, after a temporary file in the folder's parent */
  struct stat st;
  if (stat(out_path, &st) == 0 && S_ISDIR(st.st_mode)) {
    fprintf(stderr,
            "kernlab report: -o %s is a folder; name the HTML file "
            "to write\n",
            out_path);
    return LAB_EXIT_USAGE;
  }
  /* its folder is made when missing (`-o runs/quick.html` before runs/
   * exists), as every command's output folder is; it was exit 2 */
  kl_outfile out;
  int perr = lab_prepare_out(out_path, why, sizeof why);
  if (perr != 0) {
    fprintf(stderr, "kernlab report: -o %s\n", why);
    return lab_out_exit(perr);
  }
  if (kl_outfile_open(&out, out_path, why, sizeof why) != 0) {
    fprintf(stderr, "kernlab report: %s\n", why);
    return LAB_EXIT_USAGE;
  }
  /* a Ctrl-C while the page is built leaves no half page behind */
  lab_interrupt_install("kernlab report", NULL, out.tmp);
  int rc = res_report_html(r, o, out.f, why, sizeof why);
  if (rc != RES_OK) {
    fprintf(stderr, "kernlab report: %s: %s\n", out_path, why);
    kl_outfile_abort(&out);
  } else if (kl_outfile_commit(&out, 0, why, sizeof why) != 0) {
    fprintf(stderr, "kernlab report: %s\n", why);
    rc = RES_EENV;
  }
  lab_interrupt_uninstall();
  return rc == RES_OK ? LAB_EXIT_OK : LAB_EXIT_ENV;
}

int lab_report(int argc, char **argv) {
  enum { MAX_FILES = 64 };
  const char *paths[MAX_FILES], *out = NULL;
  int n = 0;
  res_report_opts o = {.top_n = 50};
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "-o") && i + 1 < argc) {
      out = argv[++i];
    } else if (!strcmp(argv[i], "-n") && i + 1 < argc) {
      char *end;
      long v = strtol(argv[++i], &end, 10);
      if (*end || v <= 0 || v > 1000000)
        return lab_usage("report", "-n wants a positive count, got", argv[i],
                         report_synopsis);
      o.top_n = (int)v;
    } else if (i + 1 == argc &&
               (!strcmp(argv[i], "-o") || !strcmp(argv[i], "-n"))) {
      return lab_usage("report", "missing value after", argv[i],
                       report_synopsis);
    } else if (argv[i][0] == '-' && argv[i][1]) {
      return lab_usage("report", "unknown option", argv[i], report_synopsis);
    } else if (n < MAX_FILES) {
      paths[n++] = argv[i];
    } else {
      return lab_usage("report", "at most 64 results files, got more at",
                       argv[i], report_synopsis);
    }
  }
  if (!n)
    return lab_usage("report", "no results file given", NULL, report_synopsis);
  if (!out)
    return lab_usage("report",
                     "no output given (-o report.html, or -o - for "
                     "stdout)",
                     NULL, report_synopsis);
  /* not one of the inputs, a device, a FIFO, a link or a results file:
   * the page replaces what it names */
  char why[1200];
  if (strcmp(out, "-") &&
      /* replaces an earlier report, not any file (a kernel's source) */
      lab_output_ok(out, paths, n, "<!DOCTYPE html>", 15, why, sizeof why) !=
          0) {
    fprintf(stderr, "kernlab report: -o %s\n", why);
    return LAB_EXIT_USAGE;
  }
  /* Every file opens before the page is started. */
  res_reader *r[MAX_FILES];
  int exit = 0, opened = 0;
  for (; opened < n; opened++)
    if (!(r[opened] = lab_open_run("report", paths[opened], &exit))) break;
  int rc = exit;
  if (opened == n && n > 1) {
    /* Files of another task or backend are named, and the page leaves
     * their times out of its comparison (res_report_html): a 64^3 search
     * made a 256^3 campaign read "speed vs the best file: 5%" without a
     * word (the walkthrough review). */
    const res_reader *const *runs = (const res_reader *const *)r;
    int ref = res_compare_reference(runs, n);
    /* a reference of several tasks is every file's reason: said once */
    int ref_mixed = !res_comparable(runs[ref], paths[ref], runs[ref],
                                    paths[ref], why, sizeof why);
    for (int k = 0; k < n; k++) {
      if ((ref_mixed && k != ref) ||
          res_comparable(runs[ref], paths[ref], runs[k], paths[k], why,
                         sizeof why))
        continue;
      char shown[4 * sizeof why], name[4 * 1024];
      fprintf(stderr, "kernlab report: warning: %s; ",
              lab_printable(why, strlen(why), shown, sizeof shown));
      if (ref_mixed)
        fprintf(stderr, "the page compares no file's times\n");
      else
        fprintf(stderr,
                "the page leaves the times of %s out of the comparison "
                "(its plot and \"speed vs the best file\")\n",
                lab_printable(paths[k], strlen(paths[k]), name, sizeof name));
    }
  }
  if (opened == n) {
    o.title = paths[0];
    o.compare = (const res_reader *const *)r + 1;
    o.compare_names = paths + 1;
    o.n_compare = n - 1;
    rc = write_page(r[0], &o, out);
  }
  for (int i = 0; i < opened; i++)
    res_reader_close(r[i]);
  return rc;
}
