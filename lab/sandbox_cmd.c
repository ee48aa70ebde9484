/*
 * lab/sandbox_cmd.c — `kernlab sandbox --explain [--pfc]`: prints the
 * sandbox profiles, the readable form of what confines candidate code.
 */
#include "lab/lab.h"

#include "sandbox/sandbox.h"

#include <string.h>

int lab_sandbox(int argc, char **argv) {
  int explain = 0, pfc = 0;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--explain"))
      explain = 1;
    else if (!strcmp(argv[i], "--pfc"))
      pfc = 1;
    else {
      fprintf(stderr, "kernlab sandbox: unknown option '%s'\n", argv[i]);
      return LAB_EXIT_USAGE;
    }
  }
  if (!explain) {
    fprintf(stderr, "usage: kernlab sandbox --explain [--pfc]\n");
    return LAB_EXIT_USAGE;
  }
  return sbx_explain(stdout, pfc) == 0 ? LAB_EXIT_OK : LAB_EXIT_ENV;
}
