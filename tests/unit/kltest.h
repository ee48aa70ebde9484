/*
 * tests/unit/kltest.h — the smallest test harness that does the job: CHECK
 * records a failure with file:line and a message and carries on, so one run
 * shows every broken expectation; kl_test_done() prints the count and gives
 * the exit status ctest reads.
 */
#ifndef KL_TEST_H
#define KL_TEST_H
#include <stdio.h>
#include <stdlib.h>

static int kl_test_failures = 0;
static int kl_test_checks = 0;

#define CHECK(cond, ...)                                                       \
  do {                                                                         \
    kl_test_checks++;                                                          \
    if (!(cond)) {                                                             \
      kl_test_failures++;                                                      \
      fprintf(stderr, "%s:%d: CHECK(%s) failed: ", __FILE__, __LINE__, #cond); \
      fprintf(stderr, __VA_ARGS__);                                            \
      fputc('\n', stderr);                                                     \
    }                                                                          \
  } while (0)

/* The whole file at path, malloc'd and NUL-terminated; NULL when it cannot
 * be read. */
static inline char *kl_test_read_file(const char *path, size_t *len) {
  FILE *fp = fopen(path, "rb");
  if (!fp) return NULL;
  fseek(fp, 0, SEEK_END);
  long size = ftell(fp);
  fseek(fp, 0, SEEK_SET);
  char *buf = size >= 0 ? (char *)malloc((size_t)size + 1) : NULL;
  if (buf && fread(buf, 1, (size_t)size, fp) != (size_t)size) {
    free(buf);
    buf = NULL;
  }
  fclose(fp);
  if (buf) buf[size] = 0;
  *len = buf ? (size_t)size : 0;
  return buf;
}

static inline int kl_test_done(const char *name) {
  printf("%s: %d checks, %d failed\n", name, kl_test_checks, kl_test_failures);
  return kl_test_failures ? 1 : 0;
}
#endif
