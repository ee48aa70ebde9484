/*
 * lab/main.c — entry point of the `kernlab` command: dispatches subcommands
 * and prints help.
 */
#include "lab/lab.h"

#include "sandbox/sandbox.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char usage[] =
    "kernlab — a kernel-autotuning lab for CUDA matmul kernels\n"
    "\n"
    "usage: kernlab <command> [options]\n"
    "\n"
    "commands:\n"
    "  eval FILE.cu... [--backend auto|cpu-emu|gpu] [--shape MxNxK]...\n"
    "                  [--seed S] [--threads N] [--jobs|-j N] [--timeout S]\n"
    "                  [--compile-timeout S] [--max-speedup X]\n"
    "                  [--reward F.lua] [--out RUN.h5] [--json]\n"
    "      compile, check and time candidate kernels; prints a table, or one\n"
    "      JSON object per candidate with --json. The first --shape is the\n"
    "      timed target (default 256x256x256); every kernel is also checked\n"
    "      on 1x1x1, 127x129x65, 64x64x64, 33x17x200 and 200x5x33.\n"
    "      Every compile and run happens in sandboxed workers (kernlab\n"
    "      sandbox --explain); --jobs candidates at a time (default: cores).\n"
    "  sandbox --explain [--pfc]\n"
    "      print every sandbox profile: allowed syscalls and why, what traps,\n"
    "      rlimits; --pfc adds the compiled seccomp filter\n"
    "  flags [--json] [--scan FILE.cu...]\n"
    "      print the anti-cheat flag table (name, static/dynamic, what raises\n"
    "      it, the hack it answers); --scan prints the static flags a file\n"
    "      raises, one per line (--json: one object per file)\n"
    "  top RUN.h5 [-n N] [--by time|reward]\n"
    "      the best candidates of a results file: fastest correct kernels\n"
    "      (default) or highest reward; smem is static + dynamic shared\n"
    "      memory per block in bytes, as in eval's table\n"
    "  show RUN.h5 ID [--source|--ptx|--stats]\n"
    "      one candidate: metrics, flags, reward components, resources and\n"
    "      source; --source the source only, --stats its timing samples,\n"
    "      --ptx its PTX (the source compiled again by NVRTC for compute_90)\n"
    "  diff RUN.h5 ID1 ID2\n"
    "      metric deltas and a line diff of two candidates' sources\n"
    "  export RUN.h5 --format csv|jsonl [-o FILE] [--source]\n"
    "      every candidate as CSV or JSON lines (--source: with its text,\n"
    "      byte for byte in jsonl; in csv a last, quoted column)\n"
    "  report RUN.h5 [MORE.h5...] -o report.html [-n N]\n"
    "      one self-contained HTML page (no network, no scripts): SVG plots\n"
    "      of reward, correct fraction and best time per step, the time\n"
    "      histogram, reward components, and the N fastest correct kernels\n"
    "      (default 50) with their sources; with several files, first a plot\n"
    "      of best time against evaluations, one line per file\n"
    "  rescore RUN.h5 --reward F.lua [--json] [-n N]\n"
    "      re-apply a reward formula to stored metrics (nothing compiled or\n"
    "      run, the file not modified): rank correlation, top N before and\n"
    "      after, how GRPO group advantages move\n"
    "  tokenizer train [--corpus DIR|FILE...] [--vocab N] --out FILE.tok\n"
    "      train the policy's byte-level BPE tokenizer (default corpus:\n"
    "      kernels/seeds/ and tests/kernels/honest/, vocab 1024)\n"
    "  tokenizer encode|decode|info --tok FILE.tok [--merges]\n"
    "      bytes on stdin -> ids, ids on stdin -> bytes, or the vocabulary\n"
    "      (info --merges: with every merge rule)\n"
    "  generate --ckpt F [--tok F.tok] --prompt TEXT [-n G] [--max-tokens N]\n"
    "      [--temperature T] [--top-p P] [--min-p M] [--seed S] [--no-bos]\n"
    "      [--policy-device cpu|gpu|auto] [--policy-dtype fp32|bf16]\n"
    "      [--policy-matmul RUN.h5]\n"
    "      sample G completions of TEXT from a checkpoint (KV cache); the\n"
    "      tokenizer defaults to F.tok, where prime saves it; --no-bos: the\n"
    "      prompt without the begin-of-sequence token\n"
    "  corpus [--script lua/corpus.lua] [--out DIR] [--shape MxNxK] [--jobs "
    "N]\n"
    "      build the priming corpus: seed variants from the Lua script,\n"
    "      each verified on cpu-emu; fast configurations held out (the\n"
    "      script names them, or the fastest share as measured); --jobs\n"
    "      variants at a time (default: cores)\n"
    "  prime [--corpus DIR] [--out CKPT] [--steps N] [--size tiny|small]\n"
    "      [--tok FILE.tok] [--batch B] [--seq T] [--lr X] [--seed S]\n"
    "      [--keep-comments] [--force]\n"
    "      prime the policy on the corpus (next-token SFT, AdamW); trains a\n"
    "      tokenizer (CKPT.tok) unless --tok is given; an existing CKPT is\n"
    "      kept unless --force\n"
    "  run [CAMPAIGN.lua] [--out RUN.h5] [--resume]\n"
    "      a GRPO campaign (default lua/campaigns/quick.lua): sample kernels\n"
    "      from the policy, evaluate and score them, update the policy; one\n"
    "      line per step; results in RUN.h5 (default runs/NAME.h5), policy\n"
    "      in RUN.ckpt; --resume continues a killed campaign\n"
    "  prime, run and generate also take --policy-device cpu|gpu|auto,\n"
    "      --policy-dtype fp32|bf16 (bf16 GEMMs on a device) and\n"
    "      --policy-matmul RUN.h5 (a campaign's best kernel behind the GEMMs)\n"
    "  search random|exhaustive CAMPAIGN.lua [--out FILE.h5] [--budget N]\n"
    "      [--exhaustive FILE.h5] [--space FILE.lua] [--limit N] [--list]\n"
    "      the search baselines: evaluate (seed, #define) configurations of\n"
    "      lua/search_space.lua as the campaign evaluates its samples; random\n"
    "      (the campaign's budget, seeded) or every configuration; results in\n"
    "      runs/NAME-random.h5 / the campaign's `exhaustive` file; ends with\n"
    "      the evaluations needed to reach 95% of the exhaustive best;\n"
    "      exhaustive --limit N sweeps the first N (a partial sweep, no\n"
    "      baseline), by default into that file's name with -limitN\n"
    "  help            this text\n"
    "\n"
    "exit codes: 0 ran (whatever the kernels did), 2 bad usage, a bad input\n"
    "  file or an output path that cannot be (a file where a folder should\n"
    "  be), 3 environment problem (missing NVRTC/compiler, no GPU for\n"
    "  --backend gpu, an output the system refuses: permissions, full disk)\n"
    "\n"
    "The candidate contract: kernels/abi.h. Seeds: kernels/seeds/.\n";

/* The commands: dispatch and `CMD --help` read the same table. own_help:
 * the command prints its own, longer synopsis for --help. */
static const struct command {
  const char *name;
  int (*fn)(int argc, char **argv);
  int own_help;
} commands[] = {
    {"eval", lab_eval, 0},         {"corpus", lab_corpus, 0},
    {"prime", lab_prime, 0},       {"run", lab_run, 1},
    {"search", lab_search, 0},     {"sandbox", lab_sandbox, 0},
    {"top", lab_top, 0},           {"show", lab_show, 0},
    {"diff", lab_diff, 0},         {"export", lab_export, 0},
    {"rescore", lab_rescore, 0},   {"report", lab_report, 0},
    {"flags", lab_flags, 0},       {"tokenizer", lab_tokenizer, 0},
    {"generate", lab_generate, 0},
};

/* `kernlab CMD --help` (-h): CMD's entries of the usage text above (a line
 * "  CMD ..." and the more-indented lines under it), on stdout. Returns
 * 0 when the text has no entry for CMD. */
static int command_help(const char *cmd) {
  size_t n = strlen(cmd);
  int found = 0, in = 0;
  for (const char *line = usage; *line;) {
    const char *end = strchr(line, '\n');
    size_t len = end ? (size_t)(end - line) : strlen(line);
    int entry = len > 2 && line[0] == ' ' && line[1] == ' ' && line[2] != ' ';
    if (entry) { /* "  run [..." and "  prime, run and generate also take" */
      char head[80];
      snprintf(head, sizeof head, "%.*s", (int)(len < 79 ? len : 79), line);
      char *also = strstr(head, " also take");
      if (also) *also = 0;
      int named = 0; /* cmd as a whole word of the "also take" list */
      for (char *w = also ? strstr(head, cmd) : NULL; w && !named;
           w = strstr(w + 1, cmd))
        named = w[-1] == ' ' && (w[n] == ',' || w[n] == ' ' || !w[n]);
      in = (len >= n + 2 && !strncmp(line + 2, cmd, n) &&
            (line[n + 2] == ' ' || line[n + 2] == ',')) ||
           named;
    } else if (len < 4 || line[0] != ' ')
      in = 0;
    if (in) {
      if (!found++) fputs("usage: kernlab\n", stdout);
      fwrite(line, 1, len, stdout);
      fputc('\n', stdout);
    }
    line += len + (end != NULL);
  }
  return found;
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fputs(usage, stderr);
    return LAB_EXIT_USAGE;
  }
  const char *cmd = argv[1];
  /* A worker that dies mid-message must cost its candidate, not the lab:
   * writes to its pipe then fail with EPIPE instead of killing us. Workers
   * get the default disposition back (posix_spawn SETSIGDEF). */
  signal(SIGPIPE, SIG_IGN);
  /* A worker: this same executable re-exec'd by the sandbox. */
  if (!strcmp(cmd, "__worker")) return sbx_worker_main(argc - 1, argv + 1);
  /* A file size limit (ulimit -f, a batch system's RLIMIT_FSIZE) must be
   * an error the command reports, not a signal that kills it: a write past
   * it then fails with EFBIG, which the writers report as they report a
   * full disk (exit 3 naming the file, what was recorded kept). By
   * default SIGXFSZ killed the lab mid-write without a word ("File size
   * limit exceeded" from the shell, exit 153). Workers keep the default,
   * set after the branch above (their limits are the sandbox's). */
  signal(SIGXFSZ, SIG_IGN);
  if (!strcmp(cmd, "help") || !strcmp(cmd, "--help") || !strcmp(cmd, "-h")) {
    fputs(usage, stdout);
    return LAB_EXIT_OK;
  }
  const struct command *c = NULL;
  for (size_t k = 0; k < sizeof commands / sizeof commands[0] && !c; k++)
    if (!strcmp(commands[k].name, cmd)) c = &commands[k];
  if (c && !c->own_help && argc == 3 &&
      (!strcmp(argv[2], "--help") || !strcmp(argv[2], "-h")) &&
      command_help(cmd))
    return LAB_EXIT_OK;
  int rc = c ? c->fn(argc - 1, argv + 1) : -1;
  if (rc < 0) {
    fprintf(stderr, "kernlab: unknown command '%s' (see kernlab --help)\n",
            cmd);
    return LAB_EXIT_USAGE;
  }
  /* what a command printed must have arrived: a full disk behind stdout is
   * an environment problem, not a success. A pipe whose reader stopped
   * early (`kernlab top RUN.h5 | head`) is not: SIGPIPE, ignored for the
   * workers' sake, would have ended the command quietly. */
  int err = kl_stream_errno(stdout);
  struct stat st;
  int to_pipe = fstat(STDOUT_FILENO, &st) == 0 && S_ISFIFO(st.st_mode);
  /* on a pipe an unknown cause (EIO: the errno is gone) is taken as the
   * reader having stopped, like EPIPE */
  if (err && !(to_pipe && (err == EPIPE || err == EIO))) {
    fprintf(stderr, "kernlab %s: writing standard output failed: %s\n", cmd,
            strerror(err));
    if (rc == LAB_EXIT_OK) rc = LAB_EXIT_ENV;
  }
  return rc;
}
