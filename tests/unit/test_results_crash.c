/*
 * tests/unit/test_results_crash.c — kill -9 a results writer at random
 * points and check what survives.
 *
 * Each run starts a writer (this executable re-executed with --writer, so
 * the writer is a fresh process as in a campaign) that appends synthetic
 * candidates (tests/unit/results_gen.h) as fast as it can and reports each
 * completed append's id over a pipe. The parent SIGKILLs it after a random
 * delay, then checks: the file opens with the reader; it holds at least
 * every acknowledged candidate and at most one more (the append in flight);
 * every record, source, timing sample, component and step it holds is
 * exactly what was appended. Most runs continue the file the previous,
 * killed run left (so reopening after a crash is tested too); every sixth
 * starts a fresh file with a delay of a few milliseconds, to land kills
 * during creation.
 *
 * usage: test_results_crash [--runs N] [--keep DIR]
 *   --keep DIR: copy each killed file to DIR/crash_NN.h5 and its
 *   acknowledged count to DIR/crash_NN.acked (for tests/python/).
 *   KL_CRASH_SEED fixes the random delays (the seed used is printed).
 */
#include "kltest.h"
#include "results_gen.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static const res_campaign_meta meta = {
    .config = "crash test campaign\n",
    .device = "none",
    .backend = "cpu-emu",
    .flag_names = gen_flag_names,
    .n_flags = 4,
    .component_names = (const char *const[]){"correctness", "speed"},
    .n_components = 2,
};

/* The writer: append until killed, acknowledging each id on fd 3. */
/* The writer's first word on the pipe, before it opens the file. */
#define WRITER_STARTED ((int64_t)-2)

static int writer_main(const char *path) {
  char why[512];
  int code;
  const int64_t started = WRITER_STARTED;
  if (write(3, &started, sizeof started) != sizeof started) return 12;
  res_file *f = res_open_append(path, &meta, &code, why, sizeof why);
  if (!f) {
    fprintf(stderr, "writer: %s\n", why);
    return 10;
  }
  /* Like a resumed campaign: write the step records a kill cut off. */
  for (int64_t s = res_file_step_count(f); s < res_file_count(f) / 8; s++) {
    res_step st;
    gen_step(s, &st);
    if (res_append_step(f, &st, why, sizeof why) != RES_OK) {
      fprintf(stderr, "writer: %s\n", why);
      return 11;
    }
  }
  for (int64_t i = res_file_count(f); i < 1000000; i++) {
    if (gen_append(f, i, why, sizeof why) != RES_OK) {
      fprintf(stderr, "writer: %s\n", why);
      return 11;
    }
    if (write(3, &i, sizeof i) != sizeof i) return 12;
  }
  res_close(f, why, sizeof why);
  return 0;
}

static uint64_t rng_state;
static uint64_t rng(void) {
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 7;
  rng_state ^= rng_state << 17;
  return rng_state;
}

static int copy_file(const char *from, const char *to) {
  FILE *in = fopen(from, "rb"), *out = fopen(to, "wb");
  if (!in || !out) {
    if (in) fclose(in);
    if (out) fclose(out);
    return -1;
  }
  char buf[65536];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, in)) > 0)
    fwrite(buf, 1, n, out);
  fclose(in);
  return fclose(out);
}

/* One run: start, kill, verify. Returns the number of acknowledged
 * appends. */
static int64_t one_run(const char *self, const char *path, int run,
                       long delay_us, int64_t before, int64_t *steps_before,
                       const char *keep) {
  int fds[2];
  if (pipe(fds) < 0) return -1;
  pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    if (dup2(fds[1], 3) < 0) _exit(13);
    /* /proc/self/exe, not the path: a rebuild may replace the file. */
    execl("/proc/self/exe", self, "--writer", path, (char *)NULL);
    fprintf(stderr, "test_results_crash: exec %s: %s\n", self, strerror(errno));
    _exit(14);
  }
  close(fds[1]);
  /* The delay counts from the writer's start, which it says before it
   * opens the file: on a loaded machine exec and loading HDF5 took longer
   * than most delays, and those runs killed a writer that had not begun
   * (tests/python/ then found too few files kept). */
  struct pollfd pf = {fds[0], POLLIN, 0};
  int64_t first = 0;
  if (poll(&pf, 1, 30000) == 1 &&
      read(fds[0], &first, sizeof first) == sizeof first)
    CHECK(first == WRITER_STARTED, "run %d: the writer's first word is %lld",
          run, (long long)first);
  struct timespec ts = {delay_us / 1000000, (delay_us % 1000000) * 1000};
  nanosleep(&ts, NULL);
  kill(pid, SIGKILL);
  int status = 0;
  waitpid(pid, &status, 0);
  CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL,
        "run %d: writer was killed, not exited (status %d)", run, status);
  int64_t acked = -1, id;
  while (read(fds[0], &id, sizeof id) == sizeof id)
    acked = id;
  close(fds[0]);

  struct stat st;
  if (stat(path, &st) != 0) {
    CHECK(acked == -1, "run %d: no file, yet %lld acknowledged", run,
          (long long)acked);
    return 0;
  }
  if (keep) {
    char dst[1024];
    snprintf(dst, sizeof dst, "%s/crash_%02d.h5", keep, run);
    CHECK(copy_file(path, dst) == 0, "copy to %s", dst);
    snprintf(dst, sizeof dst, "%s/crash_%02d.acked", keep, run);
    FILE *fp = fopen(dst, "w");
    if (fp) fprintf(fp, "%lld\n", (long long)(acked + 1)), fclose(fp);
  }
  char why[512] = "";
  int code;
  res_reader *r = res_open_read(path, &code, why, sizeof why);
  CHECK(r != NULL, "run %d (killed after %ld us, %lld acked): file opens: %s",
        run, delay_us, (long long)(acked + 1), why);
  if (!r) return acked + 1;
  /* Nothing earlier is lost; at most the append in flight is extra. */
  int64_t n = res_count(r), lo = acked + 1 > before ? acked + 1 : before;
  CHECK(n >= lo && n <= lo + 1,
        "run %d: held %lld before, %lld acknowledged, now holds %lld", run,
        (long long)before, (long long)(acked + 1), (long long)n);
  int bad = 0;
  for (int64_t i = 0; i < n && !bad; i++)
    if (!gen_verify(r, i, why, sizeof why)) bad = 1;
  CHECK(!bad, "run %d: record intact: %s", run, why);
  /* Steps: every step of an acknowledged candidate; a step the previous
   * kill cut off is only restored once this writer got past its start. */
  int64_t want_steps = acked >= 0 ? (acked + 1) / 8 : *steps_before;
  CHECK(res_step_count(r) >= want_steps && res_step_count(r) <= n / 8 + 1,
        "run %d: %lld steps, expected %lld", run, (long long)res_step_count(r),
        (long long)want_steps);
  *steps_before = res_step_count(r);
  int64_t bad_step = -1;
  for (int64_t s = 0; s < res_step_count(r) && bad_step < 0; s++) {
    res_step want;
    gen_step(s, &want);
    want.crc = res_step_crc(&want);
    const res_step *got = res_get_step(r, s); /* crc covers every field */
    if (got->step != s || got->crc != want.crc) bad_step = s;
  }
  CHECK(bad_step < 0, "run %d: step %lld intact", run, (long long)bad_step);
  res_reader_close(r);
  return n;
}

int main(int argc, char **argv) {
  if (argc == 3 && !strcmp(argv[1], "--writer")) return writer_main(argv[2]);
  int runs = 24;
  const char *keep = NULL;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--runs") && i + 1 < argc)
      runs = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--keep") && i + 1 < argc)
      keep = argv[++i];
  }
  const char *seed_env = getenv("KL_CRASH_SEED");
  uint64_t seed = seed_env ? strtoull(seed_env, NULL, 10)
                           : (uint64_t)time(NULL) ^ (uint64_t)getpid() << 20;
  if (!seed) seed = 1;
  rng_state = seed;
  printf("test_results_crash: KL_CRASH_SEED=%llu, %d runs\n",
         (unsigned long long)seed, runs);

  char dir[] = "/tmp/kl_test_crash_XXXXXX";
  if (!mkdtemp(dir)) return 1;
  char path[256];
  snprintf(path, sizeof path, "%s/run.h5", dir);
  char self[4096];
  ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0) return 1;
  self[n] = 0;

  int64_t total = 0, prev = 0, prev_steps = 0;
  for (int run = 0; run < runs; run++) {
    long delay_us;
    if (run % 6 == 0) {
      unlink(path); /* a fresh file; kill it young */
      delay_us = (long)(rng() % 8000);
    } else {
      delay_us = 2000 + (long)(rng() % 150000);
    }
    if (run % 6 == 0) prev_steps = 0;
    int64_t held = one_run(self, path, run, delay_us, run % 6 ? prev : 0,
                           &prev_steps, keep);
    prev = held;
    printf("  run %2d: killed after %6ld us, file holds %lld candidates\n", run,
           delay_us, (long long)held);
    total += held;
  }
  CHECK(total > 0, "some appends happened");
  char cmd[400];
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  if (system(cmd)) return 1;
  return kl_test_done("test_results_crash");
}
