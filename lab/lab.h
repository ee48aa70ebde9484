/*
 * lab/lab.h — the `kernlab` command: subcommands and their shared helpers.
 *
 * lab/ is the top of the dependency graph (lab -> kernels). Each subcommand
 * is a function `int lab_<name>(int argc, char **argv)` returning the exit
 * code from DESIGN.md: 0 ran, 2 bad usage or bad input file, 3 environment
 * problem.
 */
#ifndef LAB_LAB_H
#define LAB_LAB_H

#include <stdio.h>

enum { LAB_EXIT_OK = 0, LAB_EXIT_USAGE = 2, LAB_EXIT_ENV = 3 };

/* kernlab eval FILE.cu... [--backend auto|cpu-emu|gpu] [--shape MxNxK]...
 *                         [--seed S] [--threads N] [--timeout S] [--json]
 * --timeout: wall deadline in seconds for one candidate's runs (120). */
int lab_eval(int argc, char **argv);

/* kernlab sandbox --explain [--pfc] */
int lab_sandbox(int argc, char **argv);

/* kernlab flags [--json] | --scan FILE.cu... (lab/flags_cmd.c) */
int lab_flags(int argc, char **argv);

/* Results files (lab/results_cmd.c); each reads RUN.h5 and exits 2 for a
 * bad file or an unknown id:
 *   kernlab top RUN.h5 [-n N] [--by time|reward]
 *   kernlab show RUN.h5 ID [--source|--ptx|--stats]
 *   kernlab diff RUN.h5 ID1 ID2
 *   kernlab export RUN.h5 --format csv|jsonl [-o FILE] [--source] */
int lab_top(int argc, char **argv);
int lab_show(int argc, char **argv);
int lab_diff(int argc, char **argv);
int lab_export(int argc, char **argv);

/* Writes s as a JSON string literal (with quotes) to f. */
void lab_json_string(FILE *f, const char *s);

#endif
