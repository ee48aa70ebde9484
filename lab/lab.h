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

/* Writes s as a JSON string literal (with quotes) to f. */
void lab_json_string(FILE *f, const char *s);

#endif
