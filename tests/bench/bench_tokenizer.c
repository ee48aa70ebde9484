/*
 * tests/bench/bench_tokenizer.c — BPE training's memory and time
 * (policy/tokenizer_train.c), each against a baseline measured in the same
 * run:
 *   memory: the peak resident size of a child that builds the corpus and
 *           trains, less that of a child that only builds it (the
 *           baseline), per corpus byte: policy/tokenizer_train.c states
 *           about 7.5 for training;
 *   time:   training against encoding the same corpus with the tokenizer
 *           just trained (the baseline: one pass of the merges over every
 *           chunk).
 * Two corpora of --mb MiB (default 8): random bytes (the worst case for
 * stored pairs and word lists) and the repository's kernels repeated
 * (code, what the lab trains on). Vocabulary --vocab (default 4096).
 *
 * usage: bench_tokenizer [--mb N] [--vocab V] [SOURCE_DIR]
 */
#include "policy/policy.h"

#include "bench_util.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef KL_DEFAULT_SOURCE_DIR
#define KL_DEFAULT_SOURCE_DIR "."
#endif

/* Appends every .cu file of dir to *buf (cap grown), up to limit bytes. */
static void add_folder(const char *dir, char **buf, size_t *len, size_t *cap) {
  DIR *d = opendir(dir);
  struct dirent *e;
  while (d && (e = readdir(d))) {
    size_t n = strlen(e->d_name);
    if (n < 3 || strcmp(e->d_name + n - 3, ".cu")) continue;
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
    FILE *f = fopen(path, "rb");
    if (!f) continue;
    char chunk[65536];
    size_t got;
    while ((got = fread(chunk, 1, sizeof chunk, f)) > 0) {
      if (*len + got > *cap) {
        *cap = (*len + got) * 2;
        *buf = realloc(*buf, *cap);
        if (!*buf) exit(1);
      }
      memcpy(*buf + *len, chunk, got);
      *len += got;
    }
    fclose(f);
  }
  if (d) closedir(d);
}

/* The corpus: n bytes of random (seed == NULL) or of `seed` repeated. */
static char *make_corpus(size_t n, const char *seed, size_t seed_len) {
  char *text = malloc(n);
  if (!text) return NULL;
  uint32_t s = 12345;
  for (size_t i = 0; i < n; i++) {
    s = s * 1664525u + 1013904223u;
    text[i] = seed ? seed[i % seed_len] : (char)(s >> 24);
  }
  return text;
}

/* The peak resident size of a child that builds the corpus and, when
 * train, trains on it; its wall time in *secs. The parent holds no corpus
 * when it forks (a child's peak starts from its parent's size). -1 when
 * the child failed. */
static long long child_peak(size_t n, const char *seed, size_t seed_len,
                            int vocab, int train, double *secs) {
  double t0 = bench_now_s();
  pid_t kid = fork();
  if (kid == 0) {
    char *text = make_corpus(n, seed, seed_len);
    if (!text) _exit(1);
    int rc = 0;
    if (train) {
      pl_tokenizer *t = NULL;
      char why[256];
      const char *texts[1] = {text};
      size_t lens[1] = {n};
      rc = pl_tok_train(&t, texts, lens, 1, vocab, why, sizeof why);
      if (rc) fprintf(stderr, "bench_tokenizer: %s\n", why);
      pl_tok_free(t);
    }
    _exit(rc ? 1 : 0);
  }
  int st = 0;
  struct rusage ru;
  if (kid < 0 || wait4(kid, &st, 0, &ru) != kid || !WIFEXITED(st) ||
      WEXITSTATUS(st) != 0)
    return -1;
  *secs = bench_now_s() - t0;
  return (long long)ru.ru_maxrss * 1024;
}

/* Memory: before any training in this process, whose peak the children
 * would start from. */
static void bench_memory(const char *name, size_t n, const char *seed,
                         size_t seed_len, int vocab) {
  double s_hold = 0, s_train = 0;
  long long hold = child_peak(n, seed, seed_len, vocab, 0, &s_hold);
  long long train = child_peak(n, seed, seed_len, vocab, 1, &s_train);
  if (hold < 0 || train < 0) {
    printf("%-8s  failed\n", name);
    return;
  }
  printf("%-8s  %5.1f MiB  train peak %7.1f MiB  baseline (building the "
         "corpus only) %7.1f MiB  extra %5.2f x the corpus\n",
         name, n / 1048576.0, train / 1048576.0, hold / 1048576.0,
         (double)(train - hold) / (double)n);
}

/* Time: training against encoding the corpus with what it trained. */
static void bench_time(const char *name, size_t n, const char *seed,
                       size_t seed_len, int vocab) {
  char *text = make_corpus(n, seed, seed_len);
  pl_tokenizer *t = NULL;
  char why[256];
  const char *texts[1] = {text};
  size_t lens[1] = {n};
  double t0 = bench_now_s();
  if (!text || pl_tok_train(&t, texts, lens, 1, vocab, why, sizeof why)) {
    printf("%-8s  failed\n", name);
    free(text);
    return;
  }
  double train_s = bench_now_s() - t0;
  int32_t *ids = NULL;
  size_t n_ids = 0;
  t0 = bench_now_s();
  int rc = pl_tok_encode(t, text, n, &ids, &n_ids, why, sizeof why);
  double enc_s = bench_now_s() - t0;
  free(ids);
  pl_tok_free(t);
  free(text);
  if (rc != PL_OK) {
    printf("%-8s  encode failed: %s\n", name, why);
    return;
  }
  printf("%-8s  train %6.2f s  baseline (encoding it) %6.2f s  %5.1f x "
         "baseline\n",
         name, train_s, enc_s, enc_s > 0 ? train_s / enc_s : 0.0);
}

int main(int argc, char **argv) {
  int mb = 8, vocab = 4096;
  const char *src = KL_DEFAULT_SOURCE_DIR;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--mb") && i + 1 < argc)
      mb = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--vocab") && i + 1 < argc)
      vocab = atoi(argv[++i]);
    else
      src = argv[i];
  }
  if (mb < 1 || vocab <= PL_TOK_FIRST_MERGE || vocab > PL_TOK_MAX_VOCAB) {
    fprintf(stderr, "usage: bench_tokenizer [--mb N] [--vocab V] [SRC]\n");
    return 2;
  }
  size_t n = (size_t)mb << 20;
  printf("bench_tokenizer: pl_tok_train at vocab %d on %d MiB, in a child "
         "each (peak RSS from wait4)\n",
         vocab, mb);
  char *code = NULL;
  size_t len = 0, cap = 0;
  char dir[4200];
  const char *sub[] = {"kernels/seeds", "tests/kernels/honest",
                       "tests/kernels/broken"};
  for (int i = 0; i < 3; i++) {
    snprintf(dir, sizeof dir, "%s/%s", src, sub[i]);
    add_folder(dir, &code, &len, &cap);
  }
  bench_memory("random", n, NULL, 0, vocab);
  if (len) bench_memory("code", n, code, len, vocab);
  bench_time("random", n, NULL, 0, vocab);
  if (len) bench_time("code", n, code, len, vocab);
  if (!len)
    printf("code      no kernels under %s (pass the source folder)\n", src);
  free(code);
  return 0;
}
