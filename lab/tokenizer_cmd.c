/*
 * lab/tokenizer_cmd.c — `kernlab tokenizer`: trains the policy's byte-level
 * BPE tokenizer on a corpus, and encodes/decodes stdin for debugging.
 *
 *   kernlab tokenizer train [--corpus DIR|FILE...] [--vocab N] --out F.tok
 *       DIR: every regular, non-hidden file in it (not recursive), in name
 *       order. Default corpus: kernels/seeds/ and tests/kernels/honest/
 *       under $KL_SOURCE_DIR, else under the current folder. Prints the
 *       vocabulary reached, bytes per token on the corpus, time and hash.
 *   kernlab tokenizer encode --tok F.tok   stdin bytes -> ids on one line
 *   kernlab tokenizer decode --tok F.tok   stdin ids (whitespace-separated)
 *                                          -> the bytes on stdout
 *   kernlab tokenizer info --tok F.tok [--merges]
 *       vocabulary, hash; --merges lists every merge with its bytes
 *
 * Exit codes: 0, 2 bad usage / bad file / unknown id, 3 I/O or memory.
 */
#include "lab/lab.h"

#include "policy/policy.h"

#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

static const char synopsis[] =
    "usage: kernlab tokenizer train [--corpus DIR|FILE...] [--vocab N] "
    "--out FILE.tok\n"
    "       kernlab tokenizer encode|decode --tok FILE.tok  (reads stdin)\n"
    "       kernlab tokenizer info --tok FILE.tok [--merges]\n";

static int usage(const char *msg, const char *arg) {
  fprintf(stderr, "kernlab tokenizer: %s%s%s\n%s", msg, arg ? " " : "",
          arg ? arg : "", synopsis);
  return LAB_EXIT_USAGE;
}

/* The texts of a corpus: parallel arrays, each text malloc'd. */
typedef struct {
  char **text;
  size_t *len;
  int n, cap;
} corpus;

static void corpus_free(corpus *c) {
  for (int i = 0; i < c->n; i++)
    free(c->text[i]);
  free(c->text);
  free(c->len);
}

/* Reads the whole stream into a malloc'd buffer; NULL when out of memory
 * or on a read error (errno says which). */
static char *read_all(FILE *f, size_t *len) {
  size_t cap = 1 << 16, n = 0;
  char *b = malloc(cap);
  while (b) {
    n += fread(b + n, 1, cap - n, f);
    if (n < cap) break;
    char *nb = realloc(b, cap *= 2);
    if (!nb) free(b);
    b = nb;
  }
  if (b && ferror(f)) {
    free(b);
    b = NULL;
    errno = EIO;
  }
  *len = n;
  return b;
}

/* A corpus file larger than this is not source text (a disk image, a
 * /dev/zero): refused rather than read until memory runs out. */
#define CORPUS_FILE_MAX ((off_t)64 << 20)

static int corpus_add_file(corpus *c, const char *path) {
  /* a folder's file names are anyone's: shown, an escape sequence in one
   * reached the terminal raw */
  char shown[4096];
  lab_printable(path, strlen(path), shown, sizeof shown);
  struct stat st;
  if (stat(path, &st) == 0 &&
      (!S_ISREG(st.st_mode) || st.st_size > CORPUS_FILE_MAX)) {
    fprintf(stderr,
            "kernlab tokenizer: %s: %s; the corpus is source files (or "
            "folders of them), each at most 64 MiB\n",
            shown, S_ISREG(st.st_mode) ? "too large" : "not a regular file");
    return LAB_EXIT_USAGE;
  }
  FILE *f = kl_fopen_regular(path, NULL); /* swapped for a FIFO? no wait */
  if (!f) {
    fprintf(stderr, "kernlab tokenizer: %s: cannot open: %s\n", shown,
            kl_fopen_error(errno));
    return LAB_EXIT_USAGE;
  }
  size_t len;
  char *text = read_all(f, &len);
  fclose(f);
  if (!text) {
    fprintf(stderr, "kernlab tokenizer: %s: cannot read: %s\n", shown,
            strerror(errno));
    return LAB_EXIT_ENV;
  }
  /* read_all's buffer is 64 KiB at least: kept whole, a folder of 100,000
   * one-line files (1 MB of text) took 6.4 GB of address space and ran out
   * of memory under a 4 GB limit; the text keeps only what it holds */
  char *fit = realloc(text, len ? len : 1);
  if (fit) text = fit;
  if (c->n == c->cap) {
    int cap = c->cap ? c->cap * 2 : 64;
    char **t = realloc(c->text, sizeof *t * (size_t)cap);
    if (t) c->text = t;
    size_t *l = realloc(c->len, sizeof *l * (size_t)cap);
    if (l) c->len = l;
    if (!t || !l) {
      free(text);
      fprintf(stderr, "kernlab tokenizer: out of memory\n");
      return LAB_EXIT_ENV;
    }
    c->cap = cap;
  }
  c->text[c->n] = text;
  c->len[c->n++] = len;
  return LAB_EXIT_OK;
}

static int skip_hidden(const struct dirent *e) {
  return e->d_name[0] != '.';
}

/* Adds a file, or every regular non-hidden file of a folder (name order). */
static int corpus_add(corpus *c, const char *path) {
  struct stat st;
  if (stat(path, &st) != 0) {
    fprintf(stderr, "kernlab tokenizer: %s: %s\n", path, strerror(errno));
    return LAB_EXIT_USAGE;
  }
  if (!S_ISDIR(st.st_mode)) return corpus_add_file(c, path);
  struct dirent **names;
  int n = scandir(path, &names, skip_hidden, alphasort);
  if (n < 0) {
    fprintf(stderr, "kernlab tokenizer: %s: cannot list: %s\n", path,
            strerror(errno));
    return LAB_EXIT_USAGE;
  }
  int rc = LAB_EXIT_OK, added = 0;
  for (int i = 0; i < n; i++) {
    char full[4096];
    snprintf(full, sizeof full, "%s/%s", path, names[i]->d_name);
    if (rc == LAB_EXIT_OK && stat(full, &st) == 0 && S_ISREG(st.st_mode)) {
      rc = corpus_add_file(c, full);
      added++;
    }
    free(names[i]);
  }
  free(names);
  if (rc == LAB_EXIT_OK && !added) {
    fprintf(stderr,
            "kernlab tokenizer: %s: no files in this folder, expected "
            "kernel sources\n",
            path);
    rc = LAB_EXIT_USAGE;
  }
  return rc;
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int train(int argc, char **argv) {
  const char *out = NULL;
  long vocab = 1024;
  corpus c = {0};
  int rc = LAB_EXIT_OK, explicit_corpus = 0;
  for (int i = 1; i < argc && rc == LAB_EXIT_OK; i++) {
    if (!strcmp(argv[i], "--corpus")) {
      explicit_corpus = 1;
      if (i + 1 >= argc || !strncmp(argv[i + 1], "--", 2))
        rc = usage("--corpus needs at least one folder or file", NULL);
      while (rc == LAB_EXIT_OK && i + 1 < argc && strncmp(argv[i + 1], "--", 2))
        rc = corpus_add(&c, argv[++i]);
    } else if (!strcmp(argv[i], "--vocab") && i + 1 < argc) {
      char *end;
      vocab = strtol(argv[++i], &end, 10);
      if (*end || vocab < PL_TOK_FIRST_MERGE || vocab > PL_TOK_MAX_VOCAB) {
        fprintf(stderr,
                "kernlab tokenizer: --vocab %s: expected an integer in "
                "%d..%d\n",
                argv[i], PL_TOK_FIRST_MERGE, PL_TOK_MAX_VOCAB);
        rc = LAB_EXIT_USAGE;
      }
    } else if (!strcmp(argv[i], "--out") && i + 1 < argc) {
      out = argv[++i];
    } else {
      rc = usage("unknown or incomplete option", argv[i]);
    }
  }
  if (rc == LAB_EXIT_OK && !out) rc = usage("train needs --out FILE.tok", NULL);
  /* --out replaces only a tokenizer (KLTK): not a corpus file, a results
   * file, a device */
  char owhy[1200];
  if (rc == LAB_EXIT_OK &&
      lab_output_ok(out, NULL, 0, "KLTK", 4, owhy, sizeof owhy) != 0) {
    fprintf(stderr, "kernlab tokenizer: --out %s\n", owhy);
    rc = LAB_EXIT_USAGE;
  }
  /* a missing folder is made, as every command's output folder is;
   * training takes minutes on a large corpus: a folder that cannot be made
   * or take the file is said before */
  int perr = rc == LAB_EXIT_OK ? lab_prepare_out(out, owhy, sizeof owhy) : 0;
  if (perr != 0) {
    fprintf(stderr, "kernlab tokenizer: --out: %s\n", owhy);
    rc = lab_out_exit(perr);
  }
  if (rc == LAB_EXIT_OK && !explicit_corpus) {
    const char *root = getenv("KL_SOURCE_DIR");
    static const char *const sub[] = {"kernels/seeds", "tests/kernels/honest"};
    for (int i = 0; i < 2 && rc == LAB_EXIT_OK; i++) {
      char dir[4096];
      snprintf(dir, sizeof dir, "%s/%s", root ? root : ".", sub[i]);
      rc = corpus_add(&c, dir);
    }
    if (rc != LAB_EXIT_OK)
      fprintf(stderr, "kernlab tokenizer: the default corpus lives in the "
                      "source tree: run from it, set KL_SOURCE_DIR, or pass "
                      "--corpus\n");
  }
  if (rc != LAB_EXIT_OK) {
    corpus_free(&c);
    return rc;
  }

  char why[512];
  pl_tokenizer *t = NULL;
  double t0 = now_s();
  int prc = pl_tok_train(&t, (const char *const *)c.text, c.len, c.n,
                         (int)vocab, why, sizeof why);
  double secs = now_s() - t0;
  /* X.ckpt.tok beside a checkpoint X.ckpt that records another tokenizer
   * is that checkpoint's only copy: replaced, the checkpoint could never
   * be used again (the checkpoint review) */
  size_t ol = strlen(out);
  if (prc == PL_OK && ol > 4 && !strcmp(out + ol - 4, ".tok")) {
    char ckpt[4096];
    snprintf(ckpt, sizeof ckpt, "%.*s", (int)(ol - 4), out);
    pl_ckpt_header h;
    char cwhy[512];
    if (pl_ckpt_peek(ckpt, &h, cwhy, sizeof cwhy) == PL_OK &&
        strcmp(h.tokenizer_sha256, pl_tok_hash(t))) {
      snprintf(why, sizeof why,
               "--out %.150s is the tokenizer of the checkpoint %.150s "
               "(sha256 %.16s...), and the new one differs: replacing it "
               "would leave that checkpoint unusable; write it elsewhere",
               out, ckpt, h.tokenizer_sha256);
      prc = PL_EINPUT;
    }
  }
  if (prc == PL_OK) prc = pl_tok_save(t, out, why, sizeof why);
  if (prc != PL_OK) {
    fprintf(stderr, "kernlab tokenizer: %s\n", why);
    pl_tok_free(t);
    corpus_free(&c);
    return prc == PL_EINPUT ? LAB_EXIT_USAGE : LAB_EXIT_ENV;
  }
  size_t bytes = 0, tokens = 0;
  for (int i = 0; i < c.n && prc == PL_OK; i++) {
    int32_t *ids;
    size_t n_ids;
    prc = pl_tok_encode(t, c.text[i], c.len[i], &ids, &n_ids, why, sizeof why);
    if (prc == PL_OK) free(ids);
    bytes += c.len[i];
    tokens += n_ids;
  }
  if (prc != PL_OK) {
    fprintf(stderr, "kernlab tokenizer: %s\n", why);
  } else {
    printf("%s: vocab %d (asked %ld) from %d files, %zu bytes in %.2f s\n", out,
           pl_tok_vocab_size(t), vocab, c.n, bytes, secs);
    printf("corpus: %zu tokens, %.2f bytes/token\n", tokens,
           tokens ? (double)bytes / (double)tokens : 0.0);
    printf("hash: %s\n", pl_tok_hash(t));
    if (pl_tok_vocab_size(t) < vocab)
      fprintf(stderr,
              "kernlab tokenizer: note: the corpus ran out of pairs that "
              "occur twice at vocab %d\n",
              pl_tok_vocab_size(t));
  }
  pl_tok_free(t);
  corpus_free(&c);
  return prc == PL_OK ? LAB_EXIT_OK : LAB_EXIT_ENV;
}

static int encode(const pl_tokenizer *t) {
  size_t n;
  char *in = read_all(stdin, &n);
  if (!in) {
    fprintf(stderr, "kernlab tokenizer: stdin: %s\n", strerror(errno));
    return LAB_EXIT_ENV;
  }
  int32_t *ids;
  size_t n_ids;
  char why[256];
  int rc = pl_tok_encode(t, in, n, &ids, &n_ids, why, sizeof why);
  free(in);
  if (rc != PL_OK) {
    fprintf(stderr, "kernlab tokenizer: %s\n", why);
    return LAB_EXIT_ENV;
  }
  for (size_t i = 0; i < n_ids; i++)
    printf(i ? " %d" : "%d", (int)ids[i]);
  printf("\n");
  free(ids);
  fprintf(stderr, "%zu bytes -> %zu tokens\n", n, n_ids);
  return LAB_EXIT_OK;
}

static int decode(const pl_tokenizer *t) {
  size_t n;
  char *in = read_all(stdin, &n);
  char *nin = in ? realloc(in, n + 1) : NULL;
  if (!nin) {
    free(in);
    fprintf(stderr, "kernlab tokenizer: stdin: %s\n", strerror(errno));
    return LAB_EXIT_ENV;
  }
  in = nin;
  in[n] = 0;
  int32_t *ids = malloc(sizeof *ids * (n / 2 + 1)); /* "1 " per id at least */
  size_t n_ids = 0;
  int rc = ids ? LAB_EXIT_OK : LAB_EXIT_ENV;
  for (char *p = in; rc == LAB_EXIT_OK;) {
    p += strspn(p, " \t\r\n");
    if (p == in + n) break;
    if (!*p) { /* strtol would stop here and the rest be lost */
      fprintf(stderr,
              "kernlab tokenizer: stdin: byte %zu is a NUL; expected integer "
              "ids separated by white space\n",
              (size_t)(p - in));
      rc = LAB_EXIT_USAGE;
      break;
    }
    char *end;
    errno = 0;
    long v = strtol(p, &end, 10);
    if (end == p || errno || v < INT32_MIN || v > INT32_MAX ||
        (*end && !strchr(" \t\r\n", *end))) {
      int shown = (int)strcspn(p, " \t\r\n");
      fprintf(stderr,
              "kernlab tokenizer: stdin: token %zu ('%.*s') is not an "
              "integer id\n",
              n_ids, shown < 20 ? shown : 20, p);
      rc = LAB_EXIT_USAGE;
      break;
    }
    ids[n_ids++] = (int32_t)v;
    p = end;
  }
  free(in);
  char *out = NULL, why[256];
  size_t out_len;
  if (rc == LAB_EXIT_OK) {
    int prc = pl_tok_decode(t, ids, n_ids, &out, &out_len, why, sizeof why);
    if (prc != PL_OK) {
      fprintf(stderr, "kernlab tokenizer: %s\n", why);
      rc = prc == PL_EINPUT ? LAB_EXIT_USAGE : LAB_EXIT_ENV;
    } else {
      fwrite(out, 1, out_len, stdout);
    }
  } else if (!ids) {
    fprintf(stderr, "kernlab tokenizer: out of memory\n");
  }
  free(out);
  free(ids);
  return rc;
}

/* Prints a token's bytes with C escapes, in quotes. */
static void print_piece(const char *s, size_t n) {
  putchar('"');
  for (size_t i = 0; i < n; i++) {
    unsigned char ch = (unsigned char)s[i];
    if (ch == '\n')
      fputs("\\n", stdout);
    else if (ch == '\t')
      fputs("\\t", stdout);
    else if (ch == '"' || ch == '\\')
      printf("\\%c", ch);
    else if (ch < 32 || ch >= 127)
      printf("\\x%02x", ch);
    else
      putchar(ch);
  }
  putchar('"');
}

static int info(const pl_tokenizer *t, const char *path, int merges) {
  printf("%s: vocab %d (256 bytes, pad %d, bos %d, eos %d, %d merges)\n", path,
         pl_tok_vocab_size(t), PL_TOK_PAD, PL_TOK_BOS, PL_TOK_EOS,
         pl_tok_vocab_size(t) - PL_TOK_FIRST_MERGE);
  printf("hash: %s\n", pl_tok_hash(t));
  for (int id = PL_TOK_FIRST_MERGE; merges && id < pl_tok_vocab_size(t); id++) {
    size_t n;
    const char *s = pl_tok_piece(t, id, &n);
    printf("%6d ", id);
    print_piece(s, n);
    putchar('\n');
  }
  return LAB_EXIT_OK;
}

int lab_tokenizer(int argc, char **argv) {
  if (argc < 2) return usage("missing subcommand", NULL);
  const char *sub = argv[1];
  if (!strcmp(sub, "train")) return train(argc - 1, argv + 1);
  if (strcmp(sub, "encode") && strcmp(sub, "decode") && strcmp(sub, "info"))
    return usage("unknown subcommand", sub);
  const char *path = NULL;
  int merges = 0;
  for (int i = 2; i < argc; i++) {
    if (!strcmp(argv[i], "--tok") && i + 1 < argc)
      path = argv[++i];
    else if (!strcmp(sub, "info") && !strcmp(argv[i], "--merges"))
      merges = 1;
    else
      return usage("unknown or incomplete option", argv[i]);
  }
  if (!path) return usage("missing --tok FILE.tok", NULL);
  pl_tokenizer *t;
  char why[512];
  int prc = pl_tok_load(&t, path, why, sizeof why);
  if (prc != PL_OK) {
    fprintf(stderr, "kernlab tokenizer: %s\n", why);
    return prc == PL_EINPUT ? LAB_EXIT_USAGE : LAB_EXIT_ENV;
  }
  int rc = !strcmp(sub, "encode")   ? encode(t)
           : !strcmp(sub, "decode") ? decode(t)
                                    : info(t, path, merges);
  pl_tok_free(t);
  return rc;
}
