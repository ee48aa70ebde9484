/*
 * lab/prime_cmd.c — `kernlab prime`: supervised priming of the policy on the
 * kernel corpus.
 *
 *   kernlab prime [--corpus DIR] [--out CKPT] [--force] [--steps N]
 *                 [--tok FILE.tok] [--size tiny|small] [--batch B] [--seq T]
 *                 [--lr X]
 *                 [--seed S] [--policy-device cpu|gpu|auto]
 *                 [--policy-dtype fp32|bf16] [--policy-matmul RUN.h5]
 *
 * Every *.cu file of the corpus (default runs/corpus/train, written by
 * `kernlab corpus`) that passes the source checks becomes one document,
 * with its comments removed unless --keep-comments (the seeds' prose would
 * otherwise be most of what a small model learns):
 * <|bos|> the prompt header (lab_prompt_header) the kernel <|eos|>. The
 * documents are packed into one token stream and the model is trained on
 * random windows of seq+1 tokens (next-token cross-entropy on every
 * position), AdamW with warm-up and cosine decay. Without --tok a byte-level
 * BPE tokenizer (vocab 1024) is trained on the corpus and saved as
 * CKPT.tok. An existing CKPT is refused unless --force (it may be a
 * campaign's trained policy). The checkpoint (with optimiser state) is
 * written at the end and
 * every 100 steps; it records the tokenizer's hash. An interrupt (Ctrl-C,
 * SIGTERM; lab/interrupt.c) saves the checkpoint after the step in flight
 * and stops with exit 130; a second stops at once.
 *
 * Sizes: `small` (the default: d 192, 4 layers, 4 heads, seq 1024) primes
 * in about three minutes on two cores (300 steps); `tiny` (d 64, 2 layers,
 * seq 256) is for tests.
 *
 * --policy-device (lab/policy_device.h): cpu (the default) trains on the
 * CPU; gpu trains through the policy's CUDA runtime and exits 3 with the
 * reason when no device answers; auto takes the device when there is one.
 * --policy-dtype bf16 (device only; lab_policy_dtype_resolve): bf16 GEMM
 * operands with fp32 master weights (policy/cuda/pcuda.h); the checkpoint
 * holds the fp32 master, as always.
 * --policy-matmul RUN.h5 (lab/policy_matmul.c): the policy's GEMMs through
 * the best correct, unflagged kernel of a results file, checked against
 * the default path first (exit 2 when it disagrees); on the CPU that is the
 * emulator, slow, for tests with a tiny model.
 */
#include "lab/lab.h"
#include "lab/policy_device.h"

#include "sandbox/sandbox.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

const char *lab_prompt_header(void) {
  return "// task: C = A * B, fp32, row-major; A is MxK, B is KxN\n"
         "// target: 4096x4096x4096 on an H200 (sm_90); correct for every "
         "M, N, K >= 1\n";
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* The kernel without its comments and blank lines: the corpus kernels
 * explain themselves in long prose, which a small model would otherwise
 * spend most of its capacity on. String literals are kept as they are. */
static size_t strip_comments(char *s, size_t n) {
  size_t o = 0;
  for (size_t i = 0; i < n;) {
    if (s[i] == '/' && i + 1 < n && s[i + 1] == '/') {
      while (i < n && s[i] != '\n')
        i++;
    } else if (s[i] == '/' && i + 1 < n && s[i + 1] == '*') {
      i += 2;
      while (i + 1 < n && !(s[i] == '*' && s[i + 1] == '/'))
        i++;
      i = i + 2 <= n ? i + 2 : n;
    } else if (s[i] == '"') {
      s[o++] = s[i++];
      while (i < n && s[i] != '"' && s[i] != '\n') {
        if (s[i] == '\\' && i + 1 < n) s[o++] = s[i++];
        s[o++] = s[i++];
      }
      if (i < n && s[i] == '"') s[o++] = s[i++];
    } else {
      s[o++] = s[i++];
    }
  }
  /* Drop trailing blanks and lines left empty. */
  size_t w = 0, line = 0;
  for (size_t i = 0; i < o; i++) {
    s[w++] = s[i];
    if (s[i] == '\n') {
      size_t j = w - 1;
      while (j > line && (s[j - 1] == ' ' || s[j - 1] == '\t'))
        j--;
      w = j == line ? line : j + 1;
      if (w > line) s[w - 1] = '\n';
      line = w;
    }
  }
  s[w] = 0;
  return w;
}

typedef struct corpus_docs {
  char **text;
  size_t *len;
  int n;
} corpus_docs;

static int cmp_str(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Reads every valid *.cu of dir (sorted, so runs are reproducible). */
static int read_corpus(const char *dir, int strip, corpus_docs *docs, char *why,
                       size_t whylen) {
  DIR *d = opendir(dir);
  if (!d) {
    snprintf(why, whylen, "%s: cannot open the corpus folder: %s", dir,
             strerror(errno));
    return -1;
  }
  char **names = NULL;
  int n = 0, cap = 0;
  for (struct dirent *e; (e = readdir(d));) {
    size_t l = strlen(e->d_name);
    if (l < 4 || strcmp(e->d_name + l - 3, ".cu")) continue;
    if (n == cap) {
      cap = cap ? 2 * cap : 64;
      char **nn = realloc(names, sizeof(char *) * (size_t)cap);
      if (!nn) break;
      names = nn;
    }
    names[n++] = strdup(e->d_name);
  }
  closedir(d);
  if (n) qsort(names, (size_t)n, sizeof(char *), cmp_str);
  docs->text = calloc((size_t)(n ? n : 1), sizeof(char *));
  docs->len = calloc((size_t)(n ? n : 1), sizeof(size_t));
  docs->n = 0;
  int skipped = 0;
  for (int i = 0; i < n; i++) {
    char path[2048], w[600];
    snprintf(path, sizeof path, "%s/%s", dir, names[i]);
    char *src = NULL;
    size_t len;
    if (kl_source_load(path, &src, &len, w, sizeof w) != KL_OK ||
        kl_source_validate(src, len, w, sizeof w) != KL_OK) {
      /* the names are the folder's, anyone's: an escape sequence in one
       * reached the terminal raw (retitled it, could rewrite the screen) */
      char shown_path[sizeof path], shown_why[sizeof w];
      fprintf(stderr, "kernlab prime: skipping %s: %s\n",
              lab_printable(path, strlen(path), shown_path, sizeof shown_path),
              lab_printable(w, strlen(w), shown_why, sizeof shown_why));
      free(src);
      skipped++;
      continue;
    }
    if (strip) len = strip_comments(src, len);
    docs->text[docs->n] = src;
    docs->len[docs->n] = len;
    docs->n++;
    free(names[i]);
    names[i] = NULL;
  }
  for (int i = 0; i < n; i++)
    free(names[i]);
  free(names);
  if (docs->n == 0) {
    snprintf(why, whylen,
             "%s: no valid kernels (%d .cu files, %d rejected by the source "
             "checks); expected the output of `kernlab corpus`",
             dir, n, skipped);
    free(docs->text);
    free(docs->len);
    docs->text = NULL;
    docs->len = NULL;
    return -1;
  }
  return 0;
}

/* What an option that takes a value expects ("" for a path), or NULL for
 * anything else: a usage error names the value and what was expected, or
 * the option as unknown ('bad or missing value for --steps' said neither). */
static const char *prime_expects(const char *a) {
  static const char *const valued[][2] = {
      {"--corpus", ""},
      {"--out", ""},
      {"--tok", ""},
      {"--policy-matmul", ""},
      {"--size", "tiny or small"},
      {"--steps", "a whole number from 1 to 10000000"},
      {"--batch", "a whole number from 1 to 65536"},
      {"--seq", "a whole number from 2 to 65536"},
      /* a float: 1e-300 would be 0 and train nothing without a word, and
       * AdamW's steps are lr-sized, so past 1 it only diverges */
      {"--lr", "a number in [1e-8, 1]"},
      {"--seed", "a whole number from 1 to 2^64-1"},
      {"--policy-device", "cpu, gpu or auto"},
      {"--policy-dtype", "fp32 or bf16"}};
  for (size_t k = 0; k < sizeof valued / sizeof valued[0]; k++)
    if (!strcmp(a, valued[k][0])) return valued[k][1];
  return NULL;
}

int lab_prime(int argc, char **argv) {
  const char *corpus = "runs/corpus/train", *out = "runs/policy.ckpt";
  const char *tok_path = NULL, *size = "small", *policy_matmul = NULL;
  int steps = 300, batch = 0, seq = 0, keep_comments = 0, force = 0;
  const char *bad = NULL, *bad_val = NULL; /* what a usage error names */
  int policy_device = LAB_POLICY_CPU, policy_dtype = PCUDA_DTYPE_FP32;
  float lr = 0;
  uint64_t seed = 1;
  long num;
  double real;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(a, "--keep-comments")) {
      keep_comments = 1;
      continue;
    }
    if (!strcmp(a, "--force")) {
      force = 1;
      continue;
    }
    bad = a, bad_val = val;
    if (!val) goto usage;
    if (!strcmp(a, "--corpus"))
      corpus = val;
    else if (!strcmp(a, "--out"))
      out = val;
    else if (!strcmp(a, "--tok"))
      tok_path = val;
    else if (!strcmp(a, "--size"))
      size = val;
    else if (!strcmp(a, "--steps") && !lab_arg_long(val, 1, 10000000, &num))
      steps = (int)num;
    else if (!strcmp(a, "--batch") && !lab_arg_long(val, 1, 65536, &num))
      batch = (int)num;
    else if (!strcmp(a, "--seq") && !lab_arg_long(val, 2, 65536, &num))
      seq = (int)num;
    else if (!strcmp(a, "--lr") && !lab_arg_double(val, 1e-8, 1, &real))
      lr = (float)real;
    else if (!strcmp(a, "--seed") && !lab_arg_u64(val, 1, &seed))
      ;
    else if (!strcmp(a, "--policy-device") && lab_policy_device_parse(val) >= 0)
      policy_device = lab_policy_device_parse(val);
    else if (!strcmp(a, "--policy-dtype") && lab_policy_dtype_parse(val) >= 0)
      policy_dtype = lab_policy_dtype_parse(val);
    else if (!strcmp(a, "--policy-matmul"))
      policy_matmul = val;
    else
      goto usage;
    i++;
  }
  pl_config cfg;
  if (!strcmp(size, "tiny")) {
    cfg = (pl_config){0, 64, 2, 4, pl_default_ff(64), 2048};
    if (!batch) batch = 4;
    if (!seq) seq = 256;
  } else if (!strcmp(size, "small")) {
    cfg = (pl_config){0, 192, 4, 4, pl_default_ff(192), 2048};
    if (!batch) batch = 4;
    if (!seq) seq = 1024;
  } else {
    bad = "--size", bad_val = size;
    goto usage;
  }
  bad = NULL;
  /* refused, not cut to fit without a word */
  if (seq >= cfg.max_seq) {
    fprintf(stderr,
            "kernlab prime: --seq %d: past the model's context: expected at "
            "most %d (the model's max_seq is %d)\n",
            seq, cfg.max_seq - 1, cfg.max_seq);
    return LAB_EXIT_USAGE;
  }

  char why[1024];
  /* prime replaces an earlier checkpoint (and its tokenizer) at --out,
   * nothing else: not a results file, a device, a FIFO, a folder. The
   * names made from --out (X.tok, each one's .tmp.PID) take PATH_MAX,
   * which lab_out_path_ok keeps them under: in 1100 bytes, a long --out
   * put the tokenizer at X.ckpt.tok cut short, a name of the folders
   * above it, and left the checkpoint without its tokenizer. */
  char tok_target[PATH_MAX];
  int bad_out = lab_output_ok(out, NULL, 0, "KLCK", 4, why, sizeof why) != 0;
  /* the length first: X.tok cut at PATH_MAX is a folder's name above it,
   * which the check after this said was the --out */
  if (!bad_out && lab_out_path_ok(out, "--out", why, sizeof why) != 0) {
    fprintf(stderr, "kernlab prime: %s\n", why);
    return LAB_EXIT_USAGE;
  }
  snprintf(tok_target, sizeof tok_target, "%s.tok", out);
  if (bad_out ||
      lab_output_ok(tok_target, NULL, 0, "KLTK", 4, why, sizeof why) != 0) {
    fprintf(stderr, "kernlab prime: --out %s\n", why);
    return LAB_EXIT_USAGE;
  }
  /* An existing checkpoint is kept unless asked: it may be hours of
   * priming, or a campaign's GRPO-trained policy (run, search and eval
   * --out protect their files too; the walkthrough review found a second
   * prime replacing the first without a word). */
  struct stat st_out;
  if (!force && stat(out, &st_out) == 0) {
    fprintf(stderr,
            "kernlab prime: --out %s exists; --force replaces it (and its "
            "tokenizer %s)\n",
            out, tok_target);
    return LAB_EXIT_USAGE;
  }
  /* a missing folder is made (`--out runs/policy.ckpt` before runs/
   * exists), as every command's output folder is; one that cannot be made
   * or written is said before the training, not after it (the checkpoint
   * review: every step ran, then exit 3) */
  int perr = lab_prepare_out(out, why, sizeof why);
  if (perr != 0) {
    fprintf(stderr, "kernlab prime: --out %s\n", why);
    return lab_out_exit(perr);
  }
  pcuda_ctx *dev = NULL;
  int ex =
      lab_policy_open(policy_device, policy_dtype, policy_matmul != NULL,
                      "kernlab prime", &dev, &policy_dtype, why, sizeof why);
  if (ex != LAB_EXIT_OK) {
    fprintf(stderr, "kernlab prime: %s\n", why);
    return ex;
  }
  corpus_docs docs = {0};
  if (read_corpus(corpus, !keep_comments, &docs, why, sizeof why) != 0) {
    fprintf(stderr, "kernlab prime: %s\n", why);
    return LAB_EXIT_USAGE;
  }
  /* The tokenizer: given, or trained here on the corpus. */
  pl_tokenizer *tok = NULL;
  char tok_out[PATH_MAX];
  char tok_tmp[PATH_MAX] = ""; /* the new tokenizer until its checkpoint is */
  int tok_pending = 0;         /* trained here, not saved yet */
  if (tok_path) {
    if (pl_tok_load(&tok, tok_path, why, sizeof why) != PL_OK) {
      fprintf(stderr, "kernlab prime: %s\n", why);
      return LAB_EXIT_USAGE;
    }
    /* a copy goes beside the checkpoint as well, as a trained one does:
     * an earlier X.ckpt.tok left there paired the new checkpoint with a
     * tokenizer not its own, which run and generate then refused (the
     * checkpoint review) */
    snprintf(tok_out, sizeof tok_out, "%s.tok", out);
    kl_outfile_tmpname(tok_out, tok_tmp, sizeof tok_tmp);
    tok_pending = 1;
  } else {
    if (pl_tok_train(&tok, (const char *const *)docs.text, docs.len, docs.n,
                     1024, why, sizeof why) != PL_OK) {
      fprintf(stderr, "kernlab prime: tokenizer: %s\n", why);
      return LAB_EXIT_USAGE;
    }
    /* saved with the first checkpoint, not now: an earlier checkpoint at
     * --out keeps its own tokenizer until a new checkpoint replaces it */
    snprintf(tok_out, sizeof tok_out, "%s.tok", out);
    kl_outfile_tmpname(tok_out, tok_tmp, sizeof tok_tmp);
    tok_pending = 1;
    tok_path = tok_out;
  }
  cfg.vocab = pl_tok_vocab_size(tok);

  /* One token stream: <|bos|> header kernel <|eos|>, document after
   * document. */
  const char *header = lab_prompt_header();
  size_t cap = 0, n_tokens = 0;
  int32_t *stream = NULL;
  for (int d = 0; d < docs.n; d++) {
    size_t hl = strlen(header), tl = docs.len[d];
    char *text = malloc(hl + tl + 1);
    if (!text) {
      fprintf(stderr, "kernlab prime: out of memory encoding the corpus\n");
      return LAB_EXIT_ENV;
    }
    memcpy(text, header, hl);
    memcpy(text + hl, docs.text[d], tl);
    int32_t *ids;
    size_t n_ids;
    int rc = pl_tok_encode(tok, text, hl + tl, &ids, &n_ids, why, sizeof why);
    free(text);
    if (rc != PL_OK) {
      fprintf(stderr, "kernlab prime: encode: %s\n", why);
      return LAB_EXIT_ENV;
    }
    if (n_tokens + n_ids + 2 > cap) {
      cap = (n_tokens + n_ids + 2) * 2;
      int32_t *ns = realloc(stream, sizeof(int32_t) * cap);
      if (!ns) {
        fprintf(stderr,
                "kernlab prime: out of memory for the corpus's token stream "
                "(%zu tokens)\n",
                cap);
        return LAB_EXIT_ENV;
      }
      stream = ns;
    }
    stream[n_tokens++] = PL_TOK_BOS;
    memcpy(stream + n_tokens, ids, sizeof(int32_t) * n_ids);
    n_tokens += n_ids;
    stream[n_tokens++] = PL_TOK_EOS;
    free(ids);
  }
  if (n_tokens < (size_t)seq + 2) seq = (int)n_tokens - 2;
  if (seq < 2) {
    fprintf(stderr, "kernlab prime: %s: the corpus is too small (%zu tokens)\n",
            corpus, n_tokens);
    return LAB_EXIT_USAGE;
  }

  pl_set_num_threads(2);
  pl_model m;
  if (pl_model_init(&m, &cfg, seed, why, sizeof why) != PL_OK) {
    fprintf(stderr, "kernlab prime: model: %s\n", why);
    return LAB_EXIT_ENV;
  }
  pl_adamw_config oc = pl_adamw_defaults();
  /* 2e-3 by default, measured with tests/bench/policy_prime_quality.py
   * (64 samples at T 1, min-p 0.1, correct on cpu-emu) on the ~18K-token
   * default corpus, 300 steps of the small model: 3e-4 stopped at loss
   * 0.48 and nothing compiled; 1e-3 reached loss 0.025 and 58% correct
   * (once lua/corpus.lua named per family, 3% before); 2e-3 reached loss
   * 0.014 and 70-77% correct. */
  oc.lr = lr > 0 ? lr : 2e-3f;
  oc.total_steps = steps;
  oc.warmup_steps = steps / 10;
  pl_adamw opt;
  if (pl_adamw_init(&opt, &m, &oc, why, sizeof why) != PL_OK) {
    fprintf(stderr, "kernlab prime: optimiser: %s\n", why);
    return LAB_EXIT_ENV;
  }
  lab_policy pol;
  if (lab_policy_init(&pol, dev, policy_dtype, &m, &opt, NULL, why,
                      sizeof why)) {
    fprintf(stderr, "kernlab prime: policy device: %s\n", why);
    return LAB_EXIT_ENV;
  }
  /* From here on every exit goes through done: (the leaks a process
   * about to exit has do not matter, but the ASan build runs this). */
  int exit_code = LAB_EXIT_OK;
  int32_t *x = NULL, *y = NULL;
  lab_matmul *mm = NULL;
  /* A step's activations must fit, said now as run says a campaign's:
   * --batch 65536 --seq 2047 (~1 TB) failed its first forward's
   * allocation and was reported as a loss of nan, exit 3. */
  double need = 0, room = 0;
  if (lab_policy_batch_room(&pol, batch, seq, &need, &room, why, sizeof why)) {
    fprintf(stderr, "kernlab prime: policy device: %s\n", why);
    exit_code = LAB_EXIT_ENV;
    goto done;
  }
  if (room > 0 && need > room) {
    fprintf(stderr,
            "kernlab prime: a step of --batch %d windows of --seq %d tokens "
            "needs ~%.3g GB of activations, more than %s %.3g GB; use a "
            "smaller --batch or --seq\n",
            batch, seq, need / 1e9,
            pol.ctx ? "the free memory of the policy's device,"
                    : "this machine's memory,",
            room / 1e9);
    exit_code = LAB_EXIT_USAGE;
    goto done;
  }
  if (policy_matmul) {
    kl_emu_set_launcher(sbx_host_compile_launcher());
    ex = lab_policy_matmul_open(policy_matmul, pol.ctx, &cfg, batch * seq, &mm,
                                why, sizeof why);
    if (ex != LAB_EXIT_OK) {
      fprintf(stderr, "kernlab prime: %s\n", why);
      exit_code = ex;
      goto done;
    }
    fprintf(stderr, "kernlab prime: policy GEMMs through %s\n",
            lab_policy_matmul_describe(mm));
  }
  fprintf(stderr,
          "kernlab prime: %d kernels from %s, %zu tokens (vocab %d, %s); "
          "model d %d, %d layers, %d heads, %zu parameters; %d steps of "
          "%dx%d tokens\n",
          docs.n, corpus, n_tokens, cfg.vocab, tok_path, cfg.d_model,
          cfg.n_layers, cfg.n_heads, m.num_params, steps, batch, seq);

  x = malloc(sizeof(int32_t) * (size_t)batch * seq);
  y = malloc(sizeof(int32_t) * (size_t)batch * seq);
  if (!x || !y) {
    fprintf(stderr, "kernlab prime: out of memory\n");
    exit_code = LAB_EXIT_ENV;
    goto done;
  }
  uint64_t rng = seed * 0x9e3779b97f4a7c15ull + 1;
  double t0 = now_s();
  float first = -1, last = -1;
  pl_ckpt_header h;
  memset(&h, 0, sizeof h);
  h.config = cfg;
  h.rope_theta = 10000.0f;
  h.norm_eps = 1e-5f;
  snprintf(h.tokenizer_sha256, sizeof h.tokenizer_sha256, "%s",
           pl_tok_hash(tok));
  int tty = isatty(2);
  kl_outfile_sweep(out); /* what a killed prime left half-written */
  kl_outfile_sweep(tok_target);
  char ckpt_tmp[PATH_MAX]; /* what pl_ckpt_save writes before its rename */
  kl_outfile_tmpname(out, ckpt_tmp, sizeof ckpt_tmp);
  lab_interrupt_install("kernlab prime",
                        "the checkpoint is saved after this step, then "
                        "priming stops",
                        ckpt_tmp);
  if (tok_pending) lab_interrupt_also_remove(tok_tmp);
  int stopped = 0, saved = 0;
  struct stat mine; /* the checkpoint this prime saved last */
  for (int step = 0; step < steps && !stopped; step++) {
    for (int b = 0; b < batch; b++) {
      rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
      size_t start = (size_t)(rng % (n_tokens - (size_t)seq - 1));
      memcpy(x + (size_t)b * seq, stream + start, sizeof(int32_t) * seq);
      memcpy(y + (size_t)b * seq, stream + start + 1, sizeof(int32_t) * seq);
    }
    const float *losses;
    float loss = lab_policy_forward(&pol, 0, x, y, batch, seq, &losses);
    if (!isfinite(loss)) {
      fprintf(stderr, "kernlab prime: step %d: the loss is %f; stopping\n",
              step, loss);
      exit_code = LAB_EXIT_ENV;
      goto done;
    }
    lab_policy_zero_grad(&pol);
    lab_policy_backward(&pol, NULL);
    float norm = lab_policy_step(&pol);
    if (first < 0) first = loss;
    last = loss;
    double el = now_s() - t0;
    double tps = (double)(step + 1) * batch * seq / el;
    if (tty || step % 10 == 0 || step == steps - 1)
      fprintf(stderr,
              "%sstep %d/%d  loss %.4f  grad %.3g  lr %.2e  %.0f tok/s  ETA "
              "%.0f s%s",
              tty ? "\r" : "", step + 1, steps, loss, norm,
              pl_adamw_lr_at(&oc, step), tps,
              el / (step + 1) * (steps - step - 1), tty ? "   " : "\n");
    stopped = lab_interrupted() != 0;
    if ((step + 1) % 100 == 0 || step == steps - 1 || stopped) {
      h.step = (uint64_t)step + 1;
      h.opt_step = (uint64_t)opt.step;
      /* A tokenizer trained here goes beside the checkpoint that uses it:
       * written first (under its temporary name), renamed into place only
       * once the checkpoint is, so a failed save (a full disk, a kill)
       * never leaves the earlier checkpoint with a tokenizer not its own. */
      /* After this prime's first save the checkpoint at --out is its
       * own: another file there means a second prime writes the same
       * output (each would pair its checkpoint with the other's
       * tokenizer); this one stops rather than replace it again. */
      struct stat now;
      if (saved && (stat(out, &now) != 0 || now.st_dev != mine.st_dev ||
                    now.st_ino != mine.st_ino)) {
        fprintf(stderr,
                "\nkernlab prime: %s was replaced by another process since "
                "this prime saved it (two primes writing one --out?); "
                "stopping without replacing it again\n",
                out);
        exit_code = LAB_EXIT_ENV;
        goto done;
      }
      /* The checkpoint and its tokenizer are renamed into place as a
       * pair: a second Ctrl-C (or a TERM) between the two renames stopped
       * at once and its handler removed the new tokenizer, leaving the
       * new checkpoint beside the old one (the checkpoint review). A
       * stop asked meanwhile waits until both are in place. */
      lab_interrupt_hold(1);
      int save_failed = lab_policy_sync(&pol, why, sizeof why) != PL_OK ||
                        (tok_pending &&
                         pl_tok_save(tok, tok_tmp, why, sizeof why) != PL_OK) ||
                        pl_ckpt_save(out, &h, m.params_memory, m.num_params,
                                     opt.m, opt.v, why, sizeof why) != PL_OK;
      int rename_err = 0; /* the tokenizer's rename: its errno */
      if (!save_failed && tok_pending && rename(tok_tmp, tok_out) != 0)
        rename_err = errno;
      lab_interrupt_hold(0);
      if (save_failed) {
        fprintf(stderr, "\nkernlab prime: %s\n", why);
        exit_code = LAB_EXIT_ENV;
        goto done;
      }
      if (rename_err) {
        /* the checkpoint is saved: its tokenizer stays where it is (the
         * only copy), and the message says where */
        fprintf(stderr,
                "\nkernlab prime: %s: cannot rename %s into place: %s; the "
                "checkpoint %s is saved and its tokenizer is %s (use --tok, "
                "or rename it)\n",
                tok_out, tok_tmp, strerror(rename_err), out, tok_tmp);
        tok_pending = 0; /* kept, not removed at done: */
        exit_code = LAB_EXIT_ENV;
        goto done;
      }
      tok_pending = 0;
      saved = stat(out, &mine) == 0;
    }
  }
  if (tty) fputc('\n', stderr);
  if (stopped) {
    printf("interrupted: primed %llu of %d steps, loss %.4f -> %.4f; "
           "checkpoint %s, tokenizer %s\n",
           (unsigned long long)h.step, steps, first, last, out, tok_path);
    exit_code = LAB_EXIT_INTERRUPTED;
  } else {
    printf("primed: %d steps, loss %.4f -> %.4f; checkpoint %s, tokenizer "
           "%s\n",
           steps, first, last, out, tok_path);
  }
done:
  lab_interrupt_uninstall();
  if (tok_pending) unlink(tok_tmp); /* never paired with a checkpoint */
  if (mm) {
    char line[512];
    lab_policy_matmul_report(mm, line, sizeof line);
    fprintf(stderr, "kernlab prime: --policy-matmul: %s\n", line);
    lab_policy_matmul_close(mm);
  }
  lab_policy_close(&pol);
  pl_adamw_free(&opt);
  pl_model_free(&m);
  pl_tok_free(tok);
  for (int d = 0; d < docs.n; d++)
    free(docs.text[d]);
  free(docs.text);
  free(docs.len);
  free(stream);
  free(x);
  free(y);
  return exit_code;
usage:
  if (bad && !prime_expects(bad))
    fprintf(stderr, "kernlab prime: unknown option %s\n", bad);
  else if (bad && !bad_val)
    fprintf(stderr, "kernlab prime: missing value for %s%s%s%s\n", bad,
            *prime_expects(bad) ? " (expected " : "", prime_expects(bad),
            *prime_expects(bad) ? ")" : "");
  else if (bad)
    fprintf(stderr, "kernlab prime: %s %s: expected %s\n", bad, bad_val,
            prime_expects(bad));
  fprintf(stderr, "usage: kernlab prime [--corpus DIR] [--out CKPT] [--force] "
                  "[--steps N] "
                  "[--tok FILE.tok] [--size tiny|small] [--batch B] [--seq T] "
                  "[--lr X] [--seed S] [--keep-comments] "
                  "[--policy-device cpu|gpu|auto] [--policy-dtype fp32|bf16] "
                  "[--policy-matmul RUN.h5]\n");
  return LAB_EXIT_USAGE;
}
