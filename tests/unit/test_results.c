/*
 * tests/unit/test_results.c — the HDF5 results store: a round trip of every
 * dataset and attribute, source dedup, reward components that grow, reopen
 * and append, the writer lock, each kind of bad input (missing, not HDF5,
 * HDF5 but not ours, newer schema, truncated, unknown id), the error line
 * (schema 2) and a schema-1 file read and appended to, timed_launches
 * (schema 3) and a schema-2 file read and appended to.
 */
#include "kltest.h"
#include "results/internal.h"
#include "results_gen.h"

#include <hdf5.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

static char dir[] = "/tmp/kl_test_results_XXXXXX";

static void path_in(char *out, size_t n, const char *name) {
  snprintf(out, n, "%s/%s", dir, name);
}

static const res_campaign_meta meta = {
    .config = "return { task = 'fp32_256', steps = 3 }\n",
    .reward_script = "lua/reward/default.lua",
    .reward_sha256 =
        "0000000000000000000000000000000000000000000000000000000000000007",
    .device = "cpu-emu (test)",
    .backend = "cpu-emu",
    .kernlab_version = "0.1",
    .nvrtc_version = "13.0",
    .seed = 42,
    .flag_names = gen_flag_names,
    .n_flags = 4,
    .component_names = (const char *const[]){"correctness", "speed"},
    .n_components = 2,
    .run_id = "00000000000000ab",
    .checkpoint_sha256 =
        "5e1f00000000000000000000000000000000000000000000000000000000c0de",
};

/* res_create: a new file only; an existing one is refused and untouched,
 * and no temporary file is left beside it. */
static void test_create_only(void) {
  char path[512], why[512] = "";
  path_in(path, sizeof path, "new.h5");
  int code = -1;
  res_file *f = res_create(path, &meta, &code, why, sizeof why);
  CHECK(f != NULL && code == RES_OK, "res_create: %s", why);
  if (f) {
    CHECK(gen_append(f, 0, why, sizeof why) == RES_OK, "append: %s", why);
    CHECK(res_close(f, why, sizeof why) == RES_OK, "close: %s", why);
  }
  struct stat before, after;
  stat(path, &before);
  f = res_create(path, &meta, &code, why, sizeof why);
  CHECK(f == NULL && code == RES_EINPUT && strstr(why, "already exists"),
        "res_create on an existing file: refused: %d %s", code, why);
  res_close(f, why, sizeof why);
  stat(path, &after);
  CHECK(before.st_ino == after.st_ino && before.st_size == after.st_size &&
            before.st_mtime == after.st_mtime,
        "the existing file is untouched");
  char tmp[600];
  snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
  CHECK(access(tmp, F_OK) != 0, "no temporary file left: %s", tmp);
  res_reader *r = res_open_read(path, &code, why, sizeof why);
  CHECK(r && res_count(r) == 1, "it still reads, one candidate: %s", why);
  if (r) res_reader_close(r);
}

static void test_round_trip(void) {
  char path[512], why[512] = "";
  path_in(path, sizeof path, "rt.h5");
  int code = -1;
  res_file *f = res_open_append(path, &meta, &code, why, sizeof why);
  CHECK(f != NULL, "create: %s", why);
  if (!f) return;
  for (int64_t i = 0; i < 20; i++) {
    int rc = gen_append(f, i, why, sizeof why);
    CHECK(rc == RES_OK, "append %lld: %s", (long long)i, why);
  }
  CHECK(res_file_count(f) == 20, "count %lld", (long long)res_file_count(f));
  /* A second writer is refused while this one holds the file. */
  res_file *g = res_open_append(path, &meta, &code, why, sizeof why);
  CHECK(g == NULL && code == RES_EENV && strstr(why, "another process"),
        "second writer refused: %s", why);
  res_close(g, why, sizeof why);
  CHECK(res_close(f, why, sizeof why) == RES_OK, "close: %s", why);

  res_reader *r = res_open_read(path, &code, why, sizeof why);
  CHECK(r != NULL, "open read: %s", why);
  if (!r) return;
  CHECK(res_count(r) == 20, "20 candidates, got %lld", (long long)res_count(r));
  for (int64_t i = 0; i < res_count(r); i++)
    CHECK(gen_verify(r, i, why, sizeof why), "%s", why);
  CHECK(res_schema_version(r) == RES_SCHEMA_VERSION, "schema version");
  CHECK(res_seed(r) == 42, "seed");
  CHECK(!strcmp(res_attr(r, "kind"), "kernlab-results"), "kind");
  CHECK(!strcmp(res_attr(r, "config"), meta.config), "config text");
  CHECK(!strcmp(res_attr(r, "device"), "cpu-emu (test)"), "device");
  CHECK(!strcmp(res_attr(r, "nvrtc_version"), "13.0"), "nvrtc version");
  CHECK(!strcmp(res_attr(r, "driver_version"), ""), "absent meta is empty");
  CHECK(!strncmp(res_attr(r, "hdf5_version"), "1.", 2), "hdf5 version");
  CHECK(!strcmp(res_attr(r, "no_such_attribute"), ""), "missing attribute");
  CHECK(res_flag_count(r) == 4 &&
            !strcmp(res_flag_name(r, 1), "canary_touched"),
        "flag names");
  CHECK(res_component_count(r) == 3, "3 components, got %d",
        res_component_count(r));
  CHECK(!strcmp(res_component_name(r, 2), "speed_bonus"), "grown component");
  /* Dedup: candidate 3 shares candidate 2's bytes. */
  const res_candidate *c2 = res_get(r, 2), *c3 = res_get(r, 3);
  CHECK(c2->src_off == c3->src_off && c2->src_len == c3->src_len,
        "identical sources stored once");
  CHECK(!memcmp(c2->src_sha256, c3->src_sha256, 32), "same hash");
  CHECK(res_step_count(r) == 2, "2 steps, got %lld",
        (long long)res_step_count(r));
  const res_step *s1 = res_get_step(r, 1);
  CHECK(s1 && s1->step == 1 && s1->best_time_us == 101.0, "step record");
  char *src = NULL;
  size_t len = 0;
  CHECK(res_source(r, 20, &src, &len, why, sizeof why) == RES_EINPUT &&
            strstr(why, "no candidate with id 20"),
        "unknown id: %s", why);
  CHECK(res_get(r, -1) == NULL && res_get(r, 20) == NULL, "out of range");
  res_reader_close(r);

  /* Reopen, append more: ids continue, attributes stay, dedup spans
   * sessions (candidate 23 reuses 22's source, written in this session;
   * candidate 20's source is new). */
  f = res_open_append(path, NULL, &code, why, sizeof why);
  CHECK(f != NULL, "reopen: %s", why);
  if (!f) return;
  CHECK(res_file_count(f) == 20, "reopened count");
  for (int64_t i = 20; i < 24; i++)
    CHECK(gen_append(f, i, why, sizeof why) == RES_OK, "append: %s", why);
  CHECK(res_close(f, why, sizeof why) == RES_OK, "close: %s", why);
  r = res_open_read(path, &code, why, sizeof why);
  CHECK(r && res_count(r) == 24, "24 after reopen");
  if (r) {
    for (int64_t i = 0; i < res_count(r); i++)
      CHECK(gen_verify(r, i, why, sizeof why), "%s", why);
    CHECK(!strcmp(res_attr(r, "config"), meta.config), "config kept");
    res_reader_close(r);
  }
}

static void write_file(const char *path, const void *data, size_t len) {
  FILE *fp = fopen(path, "wb");
  fwrite(data, 1, len, fp);
  fclose(fp);
}

static void expect_input_error(const char *path, const char *needle) {
  char why[512] = "";
  int code = -1;
  res_reader *r = res_open_read(path, &code, why, sizeof why);
  CHECK(r == NULL && code == RES_EINPUT, "%s: rejected as input, got %d", path,
        code);
  CHECK(strstr(why, needle) != NULL, "%s: message '%s' names '%s'", path, why,
        needle);
  CHECK(!strchr(why, '\n'), "one line: %s", why);
  res_reader_close(r);
  /* The writer refuses the same files. */
  res_file *f = res_open_append(path, &meta, &code, why, sizeof why);
  CHECK(f == NULL && code == RES_EINPUT, "%s: writer refuses it (%d): %s", path,
        code, why);
  res_close(f, why, sizeof why);
}

static void test_bad_input(void) {
  char path[512];
  path_in(path, sizeof path, "missing.h5");
  char why[512];
  int code = -1;
  CHECK(res_open_read(path, &code, why, sizeof why) == NULL &&
            code == RES_EINPUT && strstr(why, "No such file"),
        "missing file: %s", why);

  path_in(path, sizeof path, "text.h5");
  write_file(path, "hello, not hdf5\n", 16);
  expect_input_error(path, "not an HDF5 file");

  path_in(path, sizeof path, "empty.h5");
  write_file(path, "", 0);
  expect_input_error(path, "not an HDF5 file");

  /* HDF5, but someone else's. */
  path_in(path, sizeof path, "other.h5");
  hid_t fid = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  H5Fclose(fid);
  expect_input_error(path, "not a kernlab results file");

  /* A newer schema: rewrite the attribute of a valid file. */
  path_in(path, sizeof path, "newer.h5");
  CHECK(gen_file(path, &meta, 1, why, sizeof why) == RES_OK, "%s", why);
  hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
  H5Pset_libver_bounds(fapl, H5F_LIBVER_LATEST, H5F_LIBVER_LATEST);
  fid = H5Fopen(path, H5F_ACC_RDWR, fapl);
  hid_t a = H5Aopen(fid, "schema_version", H5P_DEFAULT);
  int32_t v = 99;
  H5Awrite(a, H5T_NATIVE_INT32, &v);
  H5Aclose(a);
  H5Fclose(fid);
  H5Pclose(fapl);
  expect_input_error(path, "schema version 99");

  /* Truncated: a valid file cut in half. */
  char good[512];
  path_in(good, sizeof good, "good.h5");
  CHECK(gen_file(good, &meta, 30, why, sizeof why) == RES_OK, "%s", why);
  FILE *fp = fopen(good, "rb");
  fseek(fp, 0, SEEK_END);
  long size = ftell(fp);
  fseek(fp, 0, SEEK_SET);
  char *buf = malloc((size_t)size);
  CHECK(fread(buf, 1, (size_t)size, fp) == (size_t)size, "read good file");
  fclose(fp);
  /* cut in half: no record lies before the cut (the full-disk test reads
   * the records a shorter cut leaves) */
  path_in(path, sizeof path, "truncated.h5");
  write_file(path, buf, (size_t)size / 2);
  free(buf);
  expect_input_error(path, "truncated");
}

/* Copies tests/data/NAME (a file an older kernlab wrote) into the test's
 * folder, its path in path. */
static void copy_fixture(const char *name, char *path, size_t len) {
  const char *src = getenv("KL_SOURCE_DIR");
  char from[512], cmd[1200];
  snprintf(from, sizeof from, "%s/tests/data/%s", src ? src : ".", name);
  path_in(path, len, name);
  snprintf(cmd, sizeof cmd, "cp '%s' '%s'", from, path);
  CHECK(system(cmd) == 0, "copy %s", from);
}

/* Schema 2 keeps each candidate's error line; a schema-1 file (written by
 * the kernlab of 2026-11-30 before it did: tests/data/results_v1.h5) still
 * reads, every record valid and its error "", and takes appends in its own
 * schema (no error member, schema-1 record crcs). */
static void test_errors_and_schema_1(void) {
  char path[512], why[512];
  int code;
  path_in(path, sizeof path, "errors.h5");
  res_file *f = res_open_append(path, &meta, &code, why, sizeof why);
  CHECK(f, "create: %s", why);
  if (!f) return;
  res_candidate c;
  gen_candidate(0, &c);
  snprintf(c.error, sizeof c.error, "wrong at 64x64x64: rel_err 0.5");
  CHECK(res_append_candidate(f, &c, "x", 1, NULL, 0, NULL, NULL, 0, NULL, why,
                             sizeof why) == RES_OK,
        "append: %s", why);
  gen_candidate(1, &c);
  memset(c.error, 'e', sizeof c.error); /* no NUL: a string that fills it */
  CHECK(res_append_candidate(f, &c, "y", 1, NULL, 0, NULL, NULL, 0, NULL, why,
                             sizeof why) == RES_OK,
        "append: %s", why);
  res_close(f, why, sizeof why);
  res_reader *r = res_open_read(path, &code, why, sizeof why);
  CHECK(r && res_count(r) == 2 && res_schema_version(r) == RES_SCHEMA_VERSION,
        "reread: %s", r ? "count or schema" : why);
  if (r) {
    CHECK(!strcmp(res_get(r, 0)->error, "wrong at 64x64x64: rel_err 0.5"),
          "error line: '%s'", res_get(r, 0)->error);
    CHECK(strlen(res_get(r, 1)->error) == sizeof c.error - 1,
          "a full error field reads as a C string of %zu bytes",
          sizeof c.error - 1);
    res_reader_close(r);
  }

  copy_fixture("results_v1.h5", path, sizeof path);
  r = res_open_read(path, &code, why, sizeof why);
  CHECK(r && res_schema_version(r) == 1 && res_count(r) == 12,
        "schema-1 file: %s", r ? "schema or count" : why);
  if (r) {
    int empty = 1;
    for (int64_t i = 0; i < res_count(r); i++)
      empty &= res_get(r, i)->error[0] == 0;
    CHECK(empty, "schema-1 records read with an empty error line");
    res_reader_close(r);
  }
  f = res_open_append(path, &meta, &code, why, sizeof why);
  CHECK(f, "append to a schema-1 file: %s", why);
  if (!f) return;
  gen_candidate(12, &c);
  snprintf(c.error, sizeof c.error, "dropped: schema 1 has no error member");
  CHECK(res_append_candidate(f, &c, "z", 1, NULL, 0, NULL, NULL, 0, NULL, why,
                             sizeof why) == RES_OK,
        "append: %s", why);
  res_close(f, why, sizeof why);
  r = res_open_read(path, &code, why, sizeof why);
  CHECK(r && res_schema_version(r) == 1 && res_count(r) == 13 &&
            res_get(r, 12)->error[0] == 0 &&
            !strcmp(res_get(r, 12)->label, "sample-12.cu"),
        "schema-1 file after an append: %s",
        r ? "schema, count or record" : why);
  if (r) res_reader_close(r);
}

/* Schema 3 keeps each candidate's timed_launches; a schema-2 file
 * (written by the kernlab of 2026-12-02 before it did: tests/data/
 * results_v2.h5, three seeds at 64^3) reads with them 0 and takes appends
 * in its own schema (no timed_launches member, schema-2 crcs). */
static void test_timed_launches_and_schema_2(void) {
  char path[512], why[512];
  int code;
  path_in(path, sizeof path, "launches.h5");
  res_file *f = res_open_append(path, &meta, &code, why, sizeof why);
  CHECK(f, "create: %s", why);
  if (!f) return;
  res_candidate c;
  gen_candidate(0, &c);
  c.timed_launches = 37;
  CHECK(res_append_candidate(f, &c, "x", 1, NULL, 0, NULL, NULL, 0, NULL, why,
                             sizeof why) == RES_OK,
        "append: %s", why);
  res_close(f, why, sizeof why);
  res_reader *r = res_open_read(path, &code, why, sizeof why);
  CHECK(r && res_count(r) == 1 && res_get(r, 0)->timed_launches == 37,
        "timed_launches round trip: %s", r ? "count or value" : why);
  if (r) res_reader_close(r);

  copy_fixture("results_v2.h5", path, sizeof path);
  r = res_open_read(path, &code, why, sizeof why);
  CHECK(r && res_schema_version(r) == 2 && res_count(r) == 3,
        "schema-2 file: %s", r ? "schema or count" : why);
  if (r) {
    int zero = 1, timed = 1;
    for (int64_t i = 0; i < res_count(r); i++) {
      zero &= res_get(r, i)->timed_launches == 0;
      timed &= res_get(r, i)->timing_count > 0 && res_get(r, i)->correct;
    }
    CHECK(zero && timed,
          "schema-2 records read whole (timed, correct) with timed_launches "
          "0");
    res_reader_close(r);
  }
  f = res_open_append(path, &meta, &code, why, sizeof why);
  CHECK(f, "append to a schema-2 file: %s", why);
  if (!f) return;
  gen_candidate(3, &c);
  c.timed_launches = 99; /* dropped: schema 2 has no such member */
  snprintf(c.error, sizeof c.error, "kept: schema 2 has the error line");
  CHECK(res_append_candidate(f, &c, "z", 1, NULL, 0, NULL, NULL, 0, NULL, why,
                             sizeof why) == RES_OK,
        "append: %s", why);
  res_close(f, why, sizeof why);
  r = res_open_read(path, &code, why, sizeof why);
  CHECK(r && res_schema_version(r) == 2 && res_count(r) == 4 &&
            res_get(r, 3)->timed_launches == 0 &&
            !strcmp(res_get(r, 3)->error, "kept: schema 2 has the error line"),
        "schema-2 file after an append: %s",
        r ? "schema, count or record" : why);
  if (r) res_reader_close(r);
}

/* A file whose /steps object header is torn (the crash test once left one:
 * a writer killed mid-append). The reader must neither hang (SWMR reads
 * retry a bad header with a doubling sleep: 100 attempts by default) nor
 * lose the candidates: it opens, reads every candidate, and reports no
 * steps. The tear is made here: bytes of the header's checksummed prefix
 * overwritten. */
static void test_torn_steps(void) {
  char path[512], why[512] = "";
  path_in(path, sizeof path, "torn.h5");
  int code = -1;
  int made = gen_file(path, &meta, 20, why, sizeof why);
  CHECK(made == RES_OK, "a file of 20 candidates: %s", why);
  if (made != RES_OK) return;
  hid_t fid = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
  H5O_info_t info;
  haddr_t addr = HADDR_UNDEF;
  if (fid >= 0 && H5Oget_info_by_name2(fid, "steps", &info, H5O_INFO_BASIC,
                                       H5P_DEFAULT) >= 0)
    addr = info.addr;
  if (fid >= 0) H5Fclose(fid);
  CHECK(addr != HADDR_UNDEF, "the steps header's address");
  FILE *fp = fopen(path, "r+b");
  int torn = fp && fseek(fp, (long)addr + 6, SEEK_SET) == 0 &&
             fwrite("\xde\xad\xbe\xef\xde\xad\xbe\xef", 1, 8, fp) == 8;
  if (fp) fclose(fp);
  CHECK(torn, "tearing the steps header at %llu", (unsigned long long)addr);
  res_reader *r = res_open_read(path, &code, why, sizeof why);
  CHECK(r != NULL, "a file with a torn /steps opens: %s", why);
  if (!r) return;
  CHECK(res_count(r) == 20 && res_step_count(r) == 0,
        "every candidate (%lld of 20), no steps (%lld)",
        (long long)res_count(r), (long long)res_step_count(r));
  int ok = 1;
  for (int64_t i = 0; i < res_count(r) && ok; i++)
    ok = gen_verify(r, i, why, sizeof why);
  CHECK(ok, "candidates intact: %s", why);
  res_reader_close(r);
}

/* A results file reached through a symbolic link is appended to at its
 * target, also when the append rebuilds a killed writer's file (a rename
 * over the link's path would replace the link and split the results). */
/* n candidates appended to path by a writer that then dies without
 * closing (a child that exits): the SWMR mark stays, as after a kill. */
static void dead_writer(const char *path, int n) {
  fflush(NULL);
  pid_t kid = fork();
  if (kid == 0) {
    char why[512];
    int code;
    res_file *w = res_open_append(path, &meta, &code, why, sizeof why);
    for (int64_t i = 0; w && i < n; i++)
      gen_append(w, i, why, sizeof why);
    _exit(w ? 0 : 1);
  }
  int st = -1;
  waitpid(kid, &st, 0);
  CHECK(kid > 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0,
        "the writer of %s that dies: status 0x%x", path, st);
}

static void test_symlink(void) {
  char target[512], link[512], dangling[512], why[512] = "";
  path_in(target, sizeof target, "ktarget.h5");
  path_in(link, sizeof link, "klink.h5");
  path_in(dangling, sizeof dangling, "dangling.h5");
  int code = -1;
  dead_writer(target, 6);
  CHECK(symlink("ktarget.h5", link) == 0, "symlink");
  res_file *f = res_open_append(link, &meta, &code, why, sizeof why);
  CHECK(f != NULL, "append through the link: %s", why);
  if (f) {
    CHECK(gen_append(f, 6, why, sizeof why) == RES_OK, "append: %s", why);
    res_close(f, why, sizeof why);
  }
  struct stat ls;
  CHECK(lstat(link, &ls) == 0 && S_ISLNK(ls.st_mode), "the link is a link");
  res_reader *r = res_open_read(target, &code, why, sizeof why);
  CHECK(r && res_count(r) == 7, "the target holds 7 records: %lld",
        r ? (long long)res_count(r) : -1LL);
  /* the rebuild of the killed writer's file keeps its attributes: the
   * run id is what --resume matches checkpoints by */
  CHECK(r && !strcmp(res_attr(r, "run_id"), "00000000000000ab"),
        "the rebuilt file keeps its run_id: '%s'",
        r ? res_attr(r, "run_id") : "");
  /* and the starting checkpoint's hash, which --resume checks */
  CHECK(r && !strcmp(res_attr(r, "checkpoint_sha256"), meta.checkpoint_sha256),
        "the rebuilt file keeps its checkpoint_sha256: '%s'",
        r ? res_attr(r, "checkpoint_sha256") : "");
  res_reader_close(r);
  CHECK(symlink("nowhere.h5", dangling) == 0, "dangling symlink");
  f = res_open_append(dangling, &meta, &code, why, sizeof why);
  CHECK(!f && code == RES_EINPUT && strstr(why, "symbolic link"),
        "a dangling link is refused: %s", why);
  res_close(f, why, sizeof why);
}

/* Flips a byte in the middle of record `row` of dataset (candidates,
 * steps) in the file at path, in place (chunked, uncompressed). */
static int damage_row(const char *path, const char *dataset, int row) {
  /* SWMR read: a killed writer's file refuses a plain read-only open */
  hid_t fid = H5Fopen(path, H5F_ACC_RDONLY | H5F_ACC_SWMR_READ, H5P_DEFAULT);
  hid_t ds = fid >= 0 ? H5Dopen2(fid, dataset, H5P_DEFAULT) : -1;
  hid_t t = ds >= 0 ? H5Dget_type(ds) : -1;
  size_t size = t >= 0 ? H5Tget_size(t) : 0;
  hsize_t coord[1] = {0}, nbytes = 0;
  haddr_t addr = HADDR_UNDEF;
  unsigned mask = 0;
  if (ds >= 0 &&
      H5Dget_chunk_info_by_coord(ds, coord, &mask, &addr, &nbytes) < 0)
    addr = HADDR_UNDEF;
  if (t >= 0) H5Tclose(t);
  if (ds >= 0) H5Dclose(ds);
  if (fid >= 0) H5Fclose(fid);
  if (addr == HADDR_UNDEF || !size) return 0;
  FILE *fp = fopen(path, "r+b");
  long at = (long)(addr + (haddr_t)row * size + size / 2);
  int c = fp && fseek(fp, at, SEEK_SET) == 0 ? fgetc(fp) : EOF;
  int ok =
      c != EOF && fseek(fp, at, SEEK_SET) == 0 && fputc(c ^ 0x5a, fp) != EOF;
  if (fp) fclose(fp);
  return ok;
}

/* An append to path is refused as damaged input, naming the file and
 * saying needle. */
static void expect_append_refused(const char *path, const char *needle) {
  char why[1024] = "";
  int code = -1;
  res_file *f = res_open_append(path, &meta, &code, why, sizeof why);
  CHECK(!f && code == RES_EINPUT && strstr(why, needle) && strstr(why, path),
        "%s: the append is refused saying '%s': %d %s", path, needle, code,
        why);
  res_close(f, why, sizeof why);
}

/* A damaged record with complete ones after it is not what a crash leaves
 * (a writer appends in order: only the last rows can be incomplete). The
 * reader says so and reads the records before it; the writer refuses to
 * append, which would overwrite the complete ones. Damage at the very end
 * is a crash's, and an append replaces it as before. */
static void test_damaged_middle(void) {
  char path[512], why[512] = "", log[512];
  path_in(path, sizeof path, "mid.h5");
  path_in(log, sizeof log, "mid.stderr");
  CHECK(gen_file(path, &meta, 20, why, sizeof why) == RES_OK, "%s", why);
  CHECK(damage_row(path, "candidates", 5), "damaging record 5 of %s", path);
  size_t n_before = 0, n_after = 0;
  char *before = kl_test_read_file(path, &n_before);
  int code = -1;
  fflush(stderr);
  int saved = dup(2);
  FILE *lf = fopen(log, "w");
  if (lf) dup2(fileno(lf), 2);
  res_reader *r = res_open_read(path, &code, why, sizeof why);
  fflush(stderr);
  dup2(saved, 2);
  close(saved);
  if (lf) fclose(lf);
  CHECK(r && res_count(r) == 5, "the 5 records before the damage: %lld",
        r ? (long long)res_count(r) : -1LL);
  res_reader_close(r);
  char text[1024] = "";
  FILE *in = fopen(log, "r");
  size_t got = in ? fread(text, 1, sizeof text - 1, in) : 0;
  text[got] = 0;
  if (in) fclose(in);
  CHECK(strstr(text, "candidate record 5 is damaged and 14 complete records "
                     "follow it") &&
            strstr(text, path),
        "the reader says what it does not read: '%s'", text);
  expect_append_refused(path, "candidate record 5 is damaged and 14 complete "
                              "records follow it; appending would overwrite "
                              "them");
  char *after = kl_test_read_file(path, &n_after);
  CHECK(before && after && n_before == n_after &&
            !memcmp(before, after, n_before),
        "the file's bytes are untouched");
  free(after);

  /* the same in a file whose writer died (it is rebuilt, not reopened in
   * place, on the next append: results/recover.c) */
  path_in(path, sizeof path, "midcrash.h5");
  dead_writer(path, 20);
  CHECK(damage_row(path, "candidates", 5), "damaging record 5 of %s", path);
  free(before);
  before = kl_test_read_file(path, &n_before);
  expect_append_refused(path, "candidate record 5 is damaged and 14 complete "
                              "records follow it; rebuilding this killed "
                              "writer's file to append would drop them");
  after = kl_test_read_file(path, &n_after);
  CHECK(before && after && n_before == n_after &&
            !memcmp(before, after, n_before),
        "the crashed file's bytes are untouched");
  free(before);
  free(after);

  /* the last two records damaged: more than a crash leaves */
  path_in(path, sizeof path, "end2.h5");
  CHECK(gen_file(path, &meta, 20, why, sizeof why) == RES_OK, "%s", why);
  CHECK(damage_row(path, "candidates", 18) &&
            damage_row(path, "candidates", 19),
        "damaging records 18 and 19");
  expect_append_refused(path, "the last 2 candidate records are damaged");

  /* a step record damaged with complete ones after it */
  path_in(path, sizeof path, "steps.h5");
  CHECK(gen_file(path, &meta, 40, why, sizeof why) == RES_OK, "%s", why);
  CHECK(damage_row(path, "steps", 1), "damaging step record 1");
  expect_append_refused(path, "step record 1 is damaged (3 records after "
                              "it, 3 complete)");

  /* the last record damaged: a crash's residue, replaced by the append */
  path_in(path, sizeof path, "end.h5");
  CHECK(gen_file(path, &meta, 20, why, sizeof why) == RES_OK, "%s", why);
  CHECK(damage_row(path, "candidates", 19), "damaging record 19");
  res_file *f = res_open_append(path, &meta, &code, why, sizeof why);
  CHECK(f && res_file_count(f) == 19, "19 complete records: %s", why);
  if (f) {
    CHECK(gen_append(f, 19, why, sizeof why) == RES_OK, "append: %s", why);
    CHECK(res_close(f, why, sizeof why) == RES_OK, "close: %s", why);
  }
  r = res_open_read(path, &code, why, sizeof why);
  int ok = r && res_count(r) == 20;
  for (int64_t i = 0; ok && i < 20; i++)
    ok = gen_verify(r, i, why, sizeof why);
  CHECK(ok, "20 records after replacing the damaged last one: %s", why);
  res_reader_close(r);
}

/* The root group's header damaged: its attributes do not read. That is
 * damage, not someone else's file; and a writer must fail on it, not retry
 * it for ever (HDF5's SWMR retries: the writer's open had no bound). */
static void test_torn_root(void) {
  char path[512], why[512] = "";
  path_in(path, sizeof path, "root.h5");
  CHECK(gen_file(path, &meta, 1, why, sizeof why) == RES_OK, "%s", why);
  hid_t fid = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
  H5O_info_t info;
  haddr_t addr = HADDR_UNDEF;
  if (fid >= 0 &&
      H5Oget_info_by_name2(fid, "/", &info, H5O_INFO_BASIC, H5P_DEFAULT) >= 0)
    addr = info.addr;
  if (fid >= 0) H5Fclose(fid);
  FILE *fp = fopen(path, "r+b");
  int torn = addr != HADDR_UNDEF && fp &&
             fseek(fp, (long)addr + 6, SEEK_SET) == 0 &&
             fwrite("\xde\xad\xbe\xef\xde\xad\xbe\xef", 1, 8, fp) == 8;
  if (fp) fclose(fp);
  CHECK(torn, "tearing the root header at %llu", (unsigned long long)addr);
  expect_input_error(path, "the root group's attributes");
}

/* A full disk (the file-size limit, SIGXFSZ ignored: writes fail with
 * EFBIG), in a child that then exits normally: creating a file fails with
 * the system's message and leaves nothing behind; a writer whose appends
 * and close fail reports it; and the child's exit, which once crashed in
 * HDF5's exit-time cleanup of the file whose close had failed, is clean.
 * (Whether the records before the limit stay readable depends on how far
 * HDF5's failed flush got: with ENOSPC they did in every trial; with EFBIG
 * here the superblock's end-of-file can run past the file's end.) */
static void test_full_disk(void) {
  char path[512], full[512], why[512] = "";
  path_in(path, sizeof path, "full_new.h5");
  path_in(full, sizeof full, "full_append.h5");
  int code = 0;
  res_file *f = res_create(full, &meta, &code, why, sizeof why);
  CHECK(f && gen_append(f, 0, why, sizeof why) == RES_OK &&
            res_close(f, why, sizeof why) == RES_OK,
        "a first record: %s", why);
  struct stat st;
  stat(full, &st);
  fflush(NULL);
  pid_t kid = fork();
  if (kid == 0) {
    signal(SIGXFSZ, SIG_IGN);
    struct rlimit lim;
    getrlimit(RLIMIT_FSIZE, &lim);
    lim.rlim_cur = 2048; /* the soft limit only: raised again below */
    setrlimit(RLIMIT_FSIZE, &lim);
    int bad = 0;
    res_file *g = res_create(path, &meta, &code, why, sizeof why);
    if (g || code != RES_EENV || !strstr(why, "File too large") ||
        strstr(why, "\n")) {
      fprintf(stderr, "create under the limit: %p %d %s\n", (void *)g, code,
              why);
      bad = 1;
    }
    char tmp[600];
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
    if (access(path, F_OK) == 0 || access(tmp, F_OK) == 0) {
      fprintf(stderr, "a failed create left a file\n");
      bad = 1;
    }
    lim.rlim_cur = (rlim_t)st.st_size + 4096;
    setrlimit(RLIMIT_FSIZE, &lim);
    g = res_open_append(full, NULL, &code, why, sizeof why);
    int rc = RES_OK;
    for (int i = 1; g && rc == RES_OK && i < 2000; i++)
      rc = gen_append(g, i, why, sizeof why);
    if (g && rc == RES_OK)
      rc = res_close(g, why, sizeof why);
    else if (g)
      res_close(g, why, sizeof why);
    if (rc == RES_OK) {
      fprintf(stderr, "appends under the limit never failed\n");
      bad = 1;
    }
    fflush(NULL);
#ifdef __SANITIZE_ADDRESS__
    /* HDF5 leaks the buffers of the file whose close failed (2 KB), which
     * LeakSanitizer would report at exit; the plain build checks the exit */
    _exit(bad);
#else
    exit(bad); /* exit, not _exit: the exit-time handlers run */
#endif
  }
  int status = -1;
  waitpid(kid, &status, 0);
  CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0,
        "full disk: the child exits cleanly (status 0x%x)", status);
  res_reader *r = res_open_read(full, &code, why, sizeof why);
  int64_t n = r ? res_count(r) : -1;
  CHECK(r && n >= 1, "full disk: the earlier records read: %s", why);
  if (r) res_reader_close(r);
  /* and a writer continues it (a rebuild from what reads) */
  res_file *w = res_open_append(full, NULL, &code, why, sizeof why);
  CHECK(w && gen_append(w, n, why, sizeof why) == RES_OK &&
            res_close(w, why, sizeof why) == RES_OK,
        "full disk: appending again after the space is back: %s", why);
  r = res_open_read(full, &code, why, sizeof why);
  CHECK(r && res_count(r) == n + 1, "full disk: %lld records after, not %lld",
        r ? (long long)res_count(r) : -1LL, (long long)n + 1);
  if (r) res_reader_close(r);
}

/* A results file removed, or replaced by another, while a writer has it
 * open: the writer's next append and its close fail with a sentence
 * naming the file, instead of writing on into a file no one can read. */
static void test_removed_while_written(void) {
  char path[512], why[512] = "";
  path_in(path, sizeof path, "removed.h5");
  int code = 0;
  res_file *f = res_create(path, &meta, &code, why, sizeof why);
  CHECK(f && gen_append(f, 0, why, sizeof why) == RES_OK, "create: %s", why);
  if (!f) return;
  unlink(path);
  why[0] = 0;
  CHECK(gen_append(f, 1, why, sizeof why) == RES_EENV &&
            strstr(why, "removed or replaced while this process wrote it") &&
            strstr(why, path),
        "an append after the removal fails: %s", why);
  CHECK(res_close(f, why, sizeof why) == RES_EENV && strstr(why, "removed"),
        "and the close: %s", why);
  /* replaced: another file renamed over the name */
  char other[512];
  path_in(other, sizeof other, "removed_other.h5");
  f = res_create(path, &meta, &code, why, sizeof why);
  CHECK(f != NULL, "create again: %s", why);
  res_file *g = res_create(other, &meta, &code, why, sizeof why);
  if (g) res_close(g, why, sizeof why);
  CHECK(rename(other, path) == 0, "rename over it");
  res_step st;
  memset(&st, 0, sizeof st);
  CHECK(f && res_append_step(f, &st, why, sizeof why) == RES_EENV &&
            strstr(why, "replaced"),
        "a step after the replacement fails: %s", why);
  res_close(f, why, sizeof why);
}

/* A file edited with HDF5 tools (h5py) into shapes kernlab never writes:
 * an array where one value belongs, a dataset of another rank, a declared
 * extent of billions of rows with no data. Each is refused or read within
 * bounds; none may crash (ASan watches the unit tests). */
static void hostile_copy(const char *src, const char *dst) {
  char cmd[1200];
  snprintf(cmd, sizeof cmd, "cp '%s' '%s'", src, dst);
  CHECK(system(cmd) == 0, "copy %s", dst);
}

static void array_attr(const char *path, const char *name, hid_t type, int n) {
  hid_t fid = H5Fopen(path, H5F_ACC_RDWR, H5P_DEFAULT);
  H5Adelete(fid, name);
  hsize_t dims[1] = {(hsize_t)n};
  hid_t sp = H5Screate_simple(1, dims, NULL);
  void *buf = calloc((size_t)n, H5Tget_size(type));
  hid_t a = H5Acreate2(fid, name, type, sp, H5P_DEFAULT, H5P_DEFAULT);
  CHECK(a >= 0 && H5Awrite(a, type, buf) >= 0, "array attribute %s", name);
  free(buf);
  H5Aclose(a);
  H5Sclose(sp);
  H5Fclose(fid);
}

/* Control bytes in a record's one-line fields (an edited file) never
 * reach a reader's caller: they read as '?'. The label stays exact. */
static void test_control_bytes(void) {
  char path[512], why[512] = "";
  path_in(path, sizeof path, "controls.h5");
  int code = 0;
  res_file *w = res_create(path, &meta, &code, why, sizeof why);
  res_candidate c;
  gen_candidate(0, &c);
  snprintf(c.status, sizeof c.status, "ok\x1b[2J");
  snprintf(c.error, sizeof c.error, "line\nnext\x07");
  snprintf(c.label, sizeof c.label, "a\x1b]0;x\x07.cu");
  CHECK(w && res_append_candidate(w, &c, "x", 1, NULL, 0, NULL, NULL, 0, NULL,
                                  why, sizeof why) == RES_OK,
        "append: %s", why);
  res_close(w, why, sizeof why);
  res_reader *r = res_open_read(path, &code, why, sizeof why);
  const res_candidate *g = r ? res_get(r, 0) : NULL;
  CHECK(g && !strcmp(g->status, "ok?[2J") && !strcmp(g->error, "line?next?") &&
            !strcmp(g->label, "a\x1b]0;x\x07.cu"),
        "status '%s', error '%s'", g ? g->status : "", g ? g->error : "");
  res_reader_close(r);
}

/* A formula that names a new component per candidate: the file takes
 * RES_MAX_COMPONENT_NAMES, then refuses the candidate before writing any
 * of it; the candidates before stay readable. */
static void test_component_cap(void) {
  char path[512], why[512] = "";
  path_in(path, sizeof path, "names.h5");
  int code = 0;
  res_file *w = res_create(path, &meta, &code, why, sizeof why);
  CHECK(w != NULL, "create: %s", why);
  if (!w) return;
  res_candidate c;
  int rc = RES_OK, i;
  for (i = 0; i <= RES_MAX_COMPONENT_NAMES && rc == RES_OK; i++) {
    gen_candidate(i, &c);
    char name[32];
    snprintf(name, sizeof name, "c%d", i);
    const char *names[1] = {name};
    double v = i;
    rc = res_append_candidate(w, &c, "x", 1, NULL, 0, names, &v, 1, NULL, why,
                              sizeof why);
  }
  int stored = i - 1; /* (meta names a few components already) */
  CHECK(rc == RES_EINPUT && stored > 200 && stored < RES_MAX_COMPONENT_NAMES &&
            strstr(why, "would be name 257") &&
            strstr(why, "at most 256 distinct names"),
        "name 257 refused: rc %d after %d: %s", rc, stored, why);
  /* a known name still goes in */
  gen_candidate(stored, &c);
  const char *old[1] = {"c3"};
  double v = 3;
  CHECK(res_append_candidate(w, &c, "x", 1, NULL, 0, old, &v, 1, NULL, why,
                             sizeof why) == RES_OK,
        "a known name after the cap: %s", why);
  res_close(w, why, sizeof why);
  res_reader *r = res_open_read(path, &code, why, sizeof why);
  CHECK(r && res_count(r) == stored + 1,
        "the file reads with its %d candidates: %s", stored + 1, why);
  res_reader_close(r);
}

static void test_hostile_shapes(void) {
  char base[512], path[512], why[512] = "";
  path_in(base, sizeof base, "shapes.h5");
  CHECK(gen_file(base, &meta, 12, why, sizeof why) == RES_OK, "%s", why);
  int code = 0;
  res_reader *r;

  /* kind as an array of 200 strings, schema_version as 1000 ints */
  hid_t s15 = H5Tcopy(H5T_C_S1);
  H5Tset_size(s15, 15);
  path_in(path, sizeof path, "shapes_kind.h5");
  hostile_copy(base, path);
  array_attr(path, "kind", s15, 200);
  r = res_open_read(path, &code, why, sizeof why);
  CHECK(!r && code == RES_EINPUT, "kind as an array: refused: %s", why);
  res_reader_close(r);
  path_in(path, sizeof path, "shapes_schema.h5");
  hostile_copy(base, path);
  array_attr(path, "schema_version", H5T_STD_I32LE, 1000);
  r = res_open_read(path, &code, why, sizeof why);
  CHECK(!r && code == RES_EINPUT, "schema_version as an array: refused: %s",
        why);
  res_reader_close(r);
  res_file *w = res_open_append(path, NULL, &code, why, sizeof why);
  CHECK(!w, "and no writer appends to it: %s", why);
  res_close(w, why, sizeof why);
  /* seed and config as arrays: the file reads, those read as absent */
  path_in(path, sizeof path, "shapes_seed.h5");
  hostile_copy(base, path);
  array_attr(path, "seed", H5T_STD_U64LE, 1000);
  array_attr(path, "config", s15, 300);
  r = res_open_read(path, &code, why, sizeof why);
  CHECK(r && res_count(r) == 12 && res_seed(r) == 0 &&
            !strcmp(res_attr(r, "config"), ""),
        "seed and config as arrays: read as absent: %s", why);
  res_reader_close(r);
  H5Tclose(s15);

  /* /timings of rank 3 */
  path_in(path, sizeof path, "shapes_rank.h5");
  hostile_copy(base, path);
  hid_t fid = H5Fopen(path, H5F_ACC_RDWR, H5P_DEFAULT);
  H5Ldelete(fid, "timings", H5P_DEFAULT);
  hsize_t d3[3] = {4, 2, 2};
  hid_t sp = H5Screate_simple(3, d3, NULL);
  hid_t ds = H5Dcreate2(fid, "timings", H5T_IEEE_F64LE, sp, H5P_DEFAULT,
                        H5P_DEFAULT, H5P_DEFAULT);
  H5Dclose(ds);
  H5Sclose(sp);
  H5Fclose(fid);
  r = res_open_read(path, &code, why, sizeof why);
  CHECK(!r && code == RES_EINPUT && strstr(why, "/timings") &&
            strstr(why, "rank"),
        "timings of rank 3: refused, named: %s", why);
  res_reader_close(r);

  /* /candidates declared 3e9 rows long, no data behind them: read within
   * what is stored, and appended to where the records end */
  path_in(path, sizeof path, "shapes_extent.h5");
  hostile_copy(base, path);
  fid = H5Fopen(path, H5F_ACC_RDWR, H5P_DEFAULT);
  ds = H5Dopen2(fid, "candidates", H5P_DEFAULT);
  hsize_t big[1] = {3000000000ull};
  CHECK(H5Dset_extent(ds, big) >= 0, "set_extent");
  H5Dclose(ds);
  H5Fclose(fid);
  r = res_open_read(path, &code, why, sizeof why);
  CHECK(r && res_count(r) == 12, "3e9 declared rows: the 12 records: %s", why);
  res_reader_close(r);
}

/* A record whose source or sample offsets sit near 2^64 lies outside the
 * heaps even though offset + length wraps to a small number: it is not
 * complete (it was read as complete, and only its read failed later). */
static void test_wrapping_offsets(void) {
  res_candidate c[2];
  memset(c, 0, sizeof c);
  for (int i = 0; i < 2; i++) {
    c[i].id = i;
    c[i].src_len = 10;
    c[i].src_off = (uint64_t)i * 10;
    c[i].timing_count = 4;
    c[i].timing_off = (uint64_t)i * 4;
  }
  c[1].crc = res__candidate_crc(&c[1], RES_SCHEMA_VERSION);
  c[0].crc = res__candidate_crc(&c[0], RES_SCHEMA_VERSION);
  CHECK(res__valid_prefix(c, 2, 20, 8, RES_SCHEMA_VERSION) == 2,
        "two honest records are complete");
  c[1].src_off = UINT64_MAX - 5; /* + 10 wraps to 4 */
  c[1].crc = res__candidate_crc(&c[1], RES_SCHEMA_VERSION);
  CHECK(res__valid_prefix(c, 2, 20, 8, RES_SCHEMA_VERSION) == 1,
        "a source offset that wraps: not complete");
  c[1].src_off = 10;
  c[1].timing_off = UINT64_MAX - 1; /* + 4 wraps to 2 */
  c[1].crc = res__candidate_crc(&c[1], RES_SCHEMA_VERSION);
  CHECK(res__valid_prefix(c, 2, 20, 8, RES_SCHEMA_VERSION) == 1,
        "a sample offset that wraps: not complete");
}

int main(void) {
  if (!mkdtemp(dir)) return 1;
  /* In a child: after the torn header HDF5 cannot close itself cleanly
   * ("infinite loop closing library"), which would leave its free lists to
   * LeakSanitizer and its state to the tests after this one. */
  fflush(NULL);
  pid_t kid = fork();
  if (kid == 0) {
    test_torn_steps();
    test_torn_root();
    fflush(NULL);
    _exit(kl_test_failures ? 1 : 0);
  }
  int st = -1;
  waitpid(kid, &st, 0);
  CHECK(kid > 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0,
        "the torn-/steps checks (in a child) failed: status 0x%x", st);
  test_round_trip();
  test_create_only();
  test_damaged_middle();
  test_symlink();
  test_bad_input();
  test_errors_and_schema_1();
  test_timed_launches_and_schema_2();
  test_full_disk();
  test_removed_while_written();
  test_hostile_shapes();
  test_control_bytes();
  test_wrapping_offsets();
  test_component_cap();
  char cmd[600];
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  if (!kl_test_failures && !getenv("KL_KEEP") && system(cmd)) return 1;
  return kl_test_done("test_results");
}
