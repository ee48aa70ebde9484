/*
 * kernels/ptxas.c — reads the resource report that `--ptxas-options=-v`
 * leaves in the NVRTC program log, for the entry function `matmul`.
 *
 * The format, as NVRTC 13.0 prints it for sm_90:
 *
 *   ptxas info    : Compiling entry function 'matmul' for 'sm_90'
 *   ptxas info    : Function properties for matmul
 *   ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes ...
 *   ptxas info    : Used 32 registers, used 1 barriers, 4096 bytes smem
 *   ptxas info    : Compile time = 25.343 ms
 *
 * ptxas leaves out the "N bytes smem" part when the kernel has no static
 * shared memory, so a "Used" line without it means 0 bytes. Lines for other
 * entries and for non-inlined device functions are skipped. The parser looks
 * for phrases inside a line rather than fixed columns, so small spacing
 * changes between toolkit versions do not break it.
 *
 * What it deliberately does not do: read cmem/gmem figures, compile times or
 * warnings, or anything not attributed to `matmul`. On a GPU,
 * cuFuncGetAttribute is the authoritative source; this is for CPU-only runs.
 */
#include "kernels/kernels.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

/* The integer that ends just before `phrase` in line ("4096 bytes smem"),
 * or -1 when the phrase or the number is absent. */
static int kl_number_before(const char *line, const char *phrase) {
  const char *p = strstr(line, phrase);
  if (!p) return -1;
  while (p > line && p[-1] == ' ')
    p--;
  const char *end = p;
  while (p > line && isdigit((unsigned char)p[-1]))
    p--;
  if (p == end || end - p > 9) return -1;
  return atoi(p);
}

/* The integer that starts just after `phrase` in line ("Used 32"), or -1. */
static int kl_number_after(const char *line, const char *phrase) {
  const char *p = strstr(line, phrase);
  if (!p) return -1;
  p += strlen(phrase);
  while (*p == ' ')
    p++;
  const char *start = p;
  while (isdigit((unsigned char)*p))
    p++;
  if (p == start || p - start > 9) return -1;
  return atoi(start);
}

/* Copies the name between the first pair of single quotes after `phrase`
 * (or the rest of the word after it, for "Function properties for X") into
 * name. Returns 1 if the phrase was found. */
static int kl_name_after(const char *line, const char *phrase, char *name,
                         size_t namelen) {
  const char *p = strstr(line, phrase);
  if (!p) return 0;
  p += strlen(phrase);
  while (*p == ' ')
    p++;
  char stop = ' ';
  if (*p == '\'') {
    stop = '\'';
    p++;
  }
  size_t n = 0;
  while (p[n] && p[n] != stop && n + 1 < namelen)
    n++;
  memcpy(name, p, n);
  name[n] = '\0';
  return 1;
}

/* Parses `ptxas info` lines for the entry `matmul` into *out. Fields not
 * found are -1 (smem_bytes is 0 when the "Used" line has no smem part).
 * Returns 1 if at least the register count was found, else 0. */
int kl_ptxas_parse(const char *log, kl_resources *out) {
  out->regs = out->spill_stores = out->spill_loads = -1;
  out->smem_bytes = out->stack_bytes = out->barriers = -1;
  if (!log) return 0;
  int in_entry = 0;    /* inside the "Compiling entry function 'matmul'" */
  int props_match = 1; /* last "Function properties for" names matmul */
  char line[1024], name[256];
  for (const char *p = log; *p;) {
    size_t n = strcspn(p, "\r\n");
    size_t keep = n < sizeof line - 1 ? n : sizeof line - 1;
    memcpy(line, p, keep);
    line[keep] = '\0';
    p += n;
    while (*p == '\r' || *p == '\n')
      p++;

    if (kl_name_after(line, "Compiling entry function", name, sizeof name)) {
      in_entry = strcmp(name, "matmul") == 0;
      props_match = 1;
      continue;
    }
    if (!in_entry) continue;
    if (kl_name_after(line, "Function properties for", name, sizeof name)) {
      props_match = strcmp(name, "matmul") == 0;
      continue;
    }
    if (strstr(line, "bytes stack frame") && props_match) {
      out->stack_bytes = kl_number_before(line, "bytes stack frame");
      out->spill_stores = kl_number_before(line, "bytes spill stores");
      out->spill_loads = kl_number_before(line, "bytes spill loads");
      continue;
    }
    int regs = kl_number_after(line, "Used");
    if (regs >= 0 && strstr(line, "registers")) {
      out->regs = regs;
      out->barriers = kl_number_after(line, "used");
      if (out->barriers >= 0 && !strstr(line, "barriers")) out->barriers = -1;
      int smem = kl_number_before(line, "bytes smem");
      out->smem_bytes = smem >= 0 ? smem : 0;
    }
  }
  return out->regs >= 0;
}
