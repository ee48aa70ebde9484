/*
 * tests/unit/test_results_hostile.c — results files crafted to attack their
 * readers and writers (edited with HDF5 tools, not written by kernlab):
 * datasets behind soft and external links (one to a FIFO, which blocked
 * every reader in open(); one to another campaign's file, which took a
 * writer's appends), a compressed dataset declaring millions of rows, heaps
 * declared gigabytes long with nothing stored, bool bytes other than 0/1, a
 * record whose sha256 its bytes lack (the writer's dedup reused them), and
 * the messages for a bad schema_version, a missing dataset, a field of the
 * wrong type and a user block. Each check failed before its fix.
 */
#include "kltest.h"
#include "results/internal.h"
#include "results_gen.h"

#include <hdf5.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static char dir[] = "/tmp/kl_test_results_hostile_XXXXXX";
static char base[512]; /* 12 candidates from results_gen.h */

static const res_campaign_meta meta = {
    .config = "return {}\n",
    .backend = "cpu-emu",
    .flag_names = gen_flag_names,
    .n_flags = 4,
    .component_names = (const char *const[]){"correctness", "speed"},
    .n_components = 2,
};

static void path_in(char *out, size_t n, const char *name) {
  snprintf(out, n, "%s/%s", dir, name);
}

static void copy_base(const char *dst) {
  char cmd[1200];
  snprintf(cmd, sizeof cmd, "cp '%s' '%s'", base, dst);
  CHECK(system(cmd) == 0, "copy %s", dst);
}

static char *slurp(const char *path, size_t *len) {
  FILE *fp = fopen(path, "rb");
  if (!fp) return NULL;
  fseek(fp, 0, SEEK_END);
  *len = (size_t)ftell(fp);
  rewind(fp);
  char *buf = malloc(*len ? *len : 1);
  if (buf && fread(buf, 1, *len, fp) != *len) *len = 0;
  fclose(fp);
  return buf;
}

/* Edits record `row` of /candidates with fn, then fixes its crc: what h5py
 * does to a file. */
static void edit_record(const char *path, int row,
                        void (*fn)(res_candidate *c, void *arg), void *arg) {
  hid_t fid = H5Fopen(path, H5F_ACC_RDWR, H5P_DEFAULT);
  hid_t ds = H5Dopen2(fid, RES_DS_CANDIDATES, H5P_DEFAULT);
  hid_t t = res__candidate_type();
  res_candidate c;
  CHECK(res__read_rows(ds, t, row, 1, 0, &c) == 0, "read record %d", row);
  fn(&c, arg);
  c.crc = res__candidate_crc(&c, RES_SCHEMA_VERSION);
  hid_t fs = H5Dget_space(ds);
  hsize_t st[1] = {(hsize_t)row}, ct[1] = {1};
  H5Sselect_hyperslab(fs, H5S_SELECT_SET, st, NULL, ct, NULL);
  hid_t ms = H5Screate_simple(1, ct, NULL);
  CHECK(H5Dwrite(ds, t, ms, fs, H5P_DEFAULT, &c) >= 0, "write record %d", row);
  H5Sclose(ms);
  H5Sclose(fs);
  H5Tclose(t);
  H5Dclose(ds);
  H5Fclose(fid);
}

static void set_extent(const char *path, const char *name, hsize_t rows) {
  hid_t fid = H5Fopen(path, H5F_ACC_RDWR, H5P_DEFAULT);
  hid_t ds = H5Dopen2(fid, name, H5P_DEFAULT);
  hsize_t dims[1] = {rows};
  CHECK(H5Dset_extent(ds, dims) >= 0, "set_extent /%s", name);
  H5Dclose(ds);
  H5Fclose(fid);
}

/* Replaces the link `name` with a soft link (target starting with '/') or
 * an external link to file:target. */
static void relink(const char *path, const char *name, const char *file,
                   const char *target) {
  hid_t fid = H5Fopen(path, H5F_ACC_RDWR, H5P_DEFAULT);
  H5Ldelete(fid, name, H5P_DEFAULT);
  herr_t e = file ? H5Lcreate_external(file, target, fid, name, H5P_DEFAULT,
                                       H5P_DEFAULT)
                  : H5Lcreate_soft(target, fid, name, H5P_DEFAULT, H5P_DEFAULT);
  CHECK(e >= 0, "link /%s", name);
  H5Fclose(fid);
}

/* The reader and the writer both refuse path, with a message holding both
 * needles. */
static void expect_refused(const char *path, const char *n1, const char *n2) {
  char why[1024] = "";
  int code = 0;
  res_reader *r = res_open_read(path, &code, why, sizeof why);
  CHECK(!r && code == RES_EINPUT && strstr(why, n1) && strstr(why, n2),
        "reader refuses %s naming '%s' and '%s': %s", path, n1, n2, why);
  res_reader_close(r);
  why[0] = 0;
  res_file *w = res_open_append(path, &meta, &code, why, sizeof why);
  CHECK(!w && code == RES_EINPUT && strstr(why, n1) && strstr(why, n2),
        "writer refuses %s naming '%s' and '%s': %s", path, n1, n2, why);
  res_close(w, why, sizeof why);
}

/* /source_bytes as an external link to a FIFO: refused at once. In a child
 * with a watchdog, so that the old behaviour (open() waiting for a writer
 * for ever) fails the test instead of hanging it. */
static void test_fifo_link(void) {
  char path[512], fifo[512];
  path_in(path, sizeof path, "fifo_link.h5");
  path_in(fifo, sizeof fifo, "the_fifo");
  CHECK(mkfifo(fifo, 0600) == 0, "mkfifo");
  copy_base(path);
  relink(path, RES_DS_SOURCE, fifo, "/source_bytes");
  fflush(NULL);
  pid_t kid = fork();
  if (kid == 0) {
    alarm(60); /* a watchdog, not a timing: the fixed code never waits */
    expect_refused(path, "/source_bytes", "external link");
    fflush(NULL);
    _exit(kl_test_failures ? 1 : 0);
  }
  int st = -1;
  waitpid(kid, &st, 0);
  CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0,
        "an external link to a FIFO: refused, not waited on (status 0x%x)", st);
}

/* A writer given a file whose /source_bytes lives in another file appends
 * nothing there: the other file is byte for byte unchanged. */
static void test_victim_link(void) {
  char path[512], victim[512], why[512] = "";
  path_in(path, sizeof path, "linked.h5");
  path_in(victim, sizeof victim, "victim.h5");
  copy_base(path);
  copy_base(victim);
  relink(path, RES_DS_SOURCE, victim, "/source_bytes");
  size_t before_len = 0, after_len = 0;
  char *before = slurp(victim, &before_len);
  int code = 0;
  res_file *w = res_open_append(path, &meta, &code, why, sizeof why);
  CHECK(!w && code == RES_EINPUT && strstr(why, "/source_bytes") &&
            strstr(why, "external link"),
        "writer refuses an external /source_bytes: %s", why);
  if (w) {
    res_candidate c;
    gen_candidate(12, &c);
    res_append_candidate(w, &c, "new source", 10, NULL, 0, NULL, NULL, 0, NULL,
                         why, sizeof why);
    res_close(w, why, sizeof why);
  }
  char *after = slurp(victim, &after_len);
  CHECK(before && after && before_len == after_len &&
            !memcmp(before, after, before_len),
        "the linked-to file is untouched");
  free(before);
  free(after);
  /* soft links too, dangling or not */
  path_in(path, sizeof path, "soft.h5");
  copy_base(path);
  relink(path, RES_DS_TIMINGS, NULL, "/nothing/here");
  expect_refused(path, "/timings", "soft link");
  path_in(path, sizeof path, "soft_loop.h5");
  copy_base(path);
  relink(path, RES_DS_CANDIDATES, NULL, "/candidates");
  expect_refused(path, "/candidates", "soft link");
}

/* /candidates rewritten with gzip and its extent set to 3M rows: the rows
 * with storage are bounded by the allocated chunks, not the extent (the
 * reader allocated and read all 3M). */
static void test_filtered_extent(void) {
  char path[512], why[512] = "";
  path_in(path, sizeof path, "gzip.h5");
  copy_base(path);
  hid_t fid = H5Fopen(path, H5F_ACC_RDWR, H5P_DEFAULT);
  hid_t t = res__candidate_type();
  hid_t ds = H5Dopen2(fid, RES_DS_CANDIDATES, H5P_DEFAULT);
  res_candidate recs[12];
  CHECK(res__read_rows(ds, t, 0, 12, 0, recs) == 0, "read the records");
  H5Dclose(ds);
  H5Ldelete(fid, RES_DS_CANDIDATES, H5P_DEFAULT);
  hsize_t dims[1] = {12}, maxd[1] = {H5S_UNLIMITED}, chunk[1] = {64};
  hid_t sp = H5Screate_simple(1, dims, maxd);
  hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
  H5Pset_chunk(dcpl, 1, chunk);
  H5Pset_deflate(dcpl, 9);
  ds =
      H5Dcreate2(fid, RES_DS_CANDIDATES, t, sp, H5P_DEFAULT, dcpl, H5P_DEFAULT);
  CHECK(ds >= 0 && H5Dwrite(ds, t, H5S_ALL, H5S_ALL, H5P_DEFAULT, recs) >= 0,
        "gzip /candidates");
  hsize_t big[1] = {3000000};
  CHECK(H5Dset_extent(ds, big) >= 0, "extent 3M");
  int64_t rows = res__stored_rows(ds);
  CHECK(rows >= 12 && rows <= 64,
        "a gzip dataset declaring 3M rows holds at most its chunk's: %lld",
        (long long)rows);
  H5Dclose(ds);
  H5Pclose(dcpl);
  H5Sclose(sp);
  H5Tclose(t);
  H5Fclose(fid);
  int code = 0;
  res_reader *r = res_open_read(path, &code, why, sizeof why);
  CHECK(r && res_count(r) == 12, "its 12 records read: %s", why);
  res_reader_close(r);
}

static void claim_heaps(res_candidate *c, void *arg) {
  int which = *(int *)arg;
  if (which == 0) {
    c->src_off = 0;
    c->src_len = 3u * (1u << 30) - 1;
  } else {
    c->timing_off = 0;
    c->timing_count = 300000000;
  }
}

/* A heap resized to gigabytes with nothing written, and a record over all
 * of it: the record is damaged (what is stored does not reach), not read
 * as gigabytes of fill values. */
static void test_heap_declared(void) {
  char path[512], why[512] = "";
  for (int which = 0; which < 2; which++) {
    path_in(path, sizeof path, which ? "tim_huge.h5" : "src_huge.h5");
    copy_base(path);
    set_extent(path, which ? RES_DS_TIMINGS : RES_DS_SOURCE,
               which ? 300000000ull : 3ull << 30);
    edit_record(path, 0, claim_heaps, &which);
    int code = 0;
    res_reader *r = res_open_read(path, &code, why, sizeof why);
    /* no record left to read: refused, naming the damage */
    CHECK(!r && code == RES_EINPUT && strstr(why, "record 0 is damaged") &&
              strstr(why, "no record before it can be read"),
          "%s declared, not stored: record 0 is damaged: %s",
          which ? "/timings" : "/source_bytes",
          r ? res__reader_damage(r) : why);
    res_reader_close(r);
  }
}

static void odd_bools(res_candidate *c, void *arg) {
  (void)arg;
  c->correct = 7;
  c->compiled = 200;
}

/* A bool byte of 7 reads as 1 (top counted "208 correct" of 4). */
static void test_bools(void) {
  char path[512], why[512] = "";
  path_in(path, sizeof path, "bools.h5");
  copy_base(path);
  edit_record(path, 1, odd_bools, NULL);
  int code = 0;
  res_reader *r = res_open_read(path, &code, why, sizeof why);
  const res_candidate *c = r ? res_get(r, 1) : NULL;
  CHECK(r && res_count(r) == 12 && c && c->correct == 1 && c->compiled == 1,
        "bool bytes 7 and 200 read as 1: %d %d %s", c ? c->correct : -1,
        c ? c->compiled : -1, why);
  res_reader_close(r);
}

static void point_at_1(res_candidate *c, void *arg) {
  const res_candidate *one = arg;
  c->src_off = one->src_off;
  c->src_len = one->src_len;
}

/* Record 0 keeps its sha256 but points at record 1's bytes. A writer
 * appending record 0's source again must not reuse those bytes: the new
 * record reads, with its own source. */
static void test_dedup_poison(void) {
  char path[512], why[512] = "";
  path_in(path, sizeof path, "poison.h5");
  copy_base(path);
  int code = 0;
  res_reader *r = res_open_read(path, &code, why, sizeof why);
  res_candidate one = *res_get(r, 1);
  res_reader_close(r);
  edit_record(path, 0, point_at_1, &one);
  res_file *w = res_open_append(path, &meta, &code, why, sizeof why);
  CHECK(w, "reopen: %s", why);
  if (!w) return;
  char src[2048];
  size_t len = gen_source(0, src, sizeof src);
  res_candidate c;
  gen_candidate(12, &c);
  int64_t id = -1;
  for (int k = 0; k < 2; k++) /* the second one dedups against the first */
    CHECK(res_append_candidate(w, &c, src, len, NULL, 0, NULL, NULL, 0, &id,
                               why, sizeof why) == RES_OK,
          "append: %s", why);
  CHECK(res_close(w, why, sizeof why) == RES_OK, "close: %s", why);
  r = res_open_read(path, &code, why, sizeof why);
  for (int64_t i = 12; r && i < 14; i++) {
    char *got = NULL;
    size_t got_len = 0;
    int rc = res_source(r, i, &got, &got_len, why, sizeof why);
    CHECK(rc == RES_OK && got_len == len && !memcmp(got, src, len),
          "appended record %lld reads its own source: %s", (long long)i, why);
    free(got);
  }
  res_reader_close(r);
}

static void schema_attr(const char *path, hid_t type, const void *v) {
  hid_t fid = H5Fopen(path, H5F_ACC_RDWR, H5P_DEFAULT);
  H5Adelete(fid, "schema_version");
  if (v) {
    hid_t sp = H5Screate(H5S_SCALAR);
    hid_t a =
        H5Acreate2(fid, "schema_version", type, sp, H5P_DEFAULT, H5P_DEFAULT);
    CHECK(a >= 0 && H5Awrite(a, type, v) >= 0, "schema_version attribute");
    H5Aclose(a);
    H5Sclose(sp);
  }
  H5Fclose(fid);
}

/* /candidates with its label as a variable-length string (h5py's str). */
static void vlen_label(const char *path) {
  hid_t fid = H5Fopen(path, H5F_ACC_RDWR, H5P_DEFAULT);
  H5Ldelete(fid, RES_DS_CANDIDATES, H5P_DEFAULT);
  hid_t t = H5Tcreate(H5T_COMPOUND, sizeof(int64_t) + sizeof(char *));
  H5Tinsert(t, "id", 0, H5T_NATIVE_INT64);
  hid_t s = H5Tcopy(H5T_C_S1);
  H5Tset_size(s, H5T_VARIABLE);
  H5Tinsert(t, "label", sizeof(int64_t), s);
  struct {
    int64_t id;
    const char *label;
  } rec = {0, "x.cu"};
  hsize_t dims[1] = {1};
  hid_t sp = H5Screate_simple(1, dims, NULL);
  hid_t ds = H5Dcreate2(fid, RES_DS_CANDIDATES, t, sp, H5P_DEFAULT, H5P_DEFAULT,
                        H5P_DEFAULT);
  CHECK(ds >= 0 && H5Dwrite(ds, t, H5S_ALL, H5S_ALL, H5P_DEFAULT, &rec) >= 0,
        "vlen label");
  H5Dclose(ds);
  H5Sclose(sp);
  H5Tclose(s);
  H5Tclose(t);
  H5Fclose(fid);
}

static void test_messages(void) {
  char path[512], why[512] = "";
  int code = 0;
  path_in(path, sizeof path, "msg.h5");
  /* no schema_version: not "no kind" */
  copy_base(path);
  schema_attr(path, 0, NULL);
  expect_refused(path, "schema_version", "no schema_version");
  /* zero and negative: not "a newer kernlab wrote it" */
  int32_t neg = -7;
  copy_base(path);
  schema_attr(path, H5T_NATIVE_INT32, &neg);
  res_reader *r = res_open_read(path, &code, why, sizeof why);
  CHECK(!r && strstr(why, "-7") && !strstr(why, "newer"),
        "schema_version -7: %s", why);
  res_reader_close(r);
  /* 2^32 + 2 as int64: its value, not 2147483647 */
  int64_t big = (1ll << 32) + 2;
  copy_base(path);
  schema_attr(path, H5T_NATIVE_INT64, &big);
  r = res_open_read(path, &code, why, sizeof why);
  CHECK(!r && strstr(why, "4294967298"), "schema_version 2^32+2: %s", why);
  res_reader_close(r);
  /* a missing dataset is named */
  path_in(path, sizeof path, "msg_missing.h5");
  copy_base(path);
  hid_t fid = H5Fopen(path, H5F_ACC_RDWR, H5P_DEFAULT);
  H5Ldelete(fid, RES_DS_TIMINGS, H5P_DEFAULT);
  H5Fclose(fid);
  expect_refused(path, "/timings", "missing");
  /* a field of the wrong type is named */
  path_in(path, sizeof path, "msg_vlen.h5");
  copy_base(path);
  vlen_label(path);
  expect_refused(path, "`label`", "variable-length string");
  /* an HDF5 file with a 512-byte user block is HDF5 */
  path_in(path, sizeof path, "userblock.h5");
  hid_t fcpl = H5Pcreate(H5P_FILE_CREATE);
  H5Pset_userblock(fcpl, 512);
  fid = H5Fcreate(path, H5F_ACC_TRUNC, fcpl, H5P_DEFAULT);
  H5Pclose(fcpl);
  H5Fclose(fid);
  r = res_open_read(path, &code, why, sizeof why);
  CHECK(!r && !strstr(why, "not an HDF5 file") &&
            strstr(why, "not a kernlab results file"),
        "a user block: an HDF5 file, not ours: %s", why);
  res_reader_close(r);
}

/* C1 controls (U+009B is CSI) and a raw 0x9b byte in one-line fields read
 * as '?', like C0 controls. */
static void test_c1_controls(void) {
  char path[512], why[512] = "";
  path_in(path, sizeof path, "c1.h5");
  int code = 0;
  res_file *w = res_create(path, &meta, &code, why, sizeof why);
  res_candidate c;
  gen_candidate(0, &c);
  snprintf(c.status, sizeof c.status,
           "ok\xc2\x9b"
           "2J");
  snprintf(c.error, sizeof c.error,
           "a\x9b"
           "b \xc2\xa0 \xc3\xa9");
  CHECK(w && res_append_candidate(w, &c, "x", 1, NULL, 0, NULL, NULL, 0, NULL,
                                  why, sizeof why) == RES_OK,
        "append: %s", why);
  res_close(w, why, sizeof why);
  res_reader *r = res_open_read(path, &code, why, sizeof why);
  const res_candidate *g = r ? res_get(r, 0) : NULL;
  CHECK(g && !strcmp(g->status, "ok??2J") &&
            !strcmp(g->error, "a?b \xc2\xa0 \xc3\xa9"),
        "C1 as '?', other UTF-8 kept: status '%s', error '%s'",
        g ? g->status : "", g ? g->error : "");
  res_reader_close(r);
}

int main(void) {
  if (!mkdtemp(dir)) return 1;
  char why[512] = "";
  path_in(base, sizeof base, "base.h5");
  CHECK(gen_file(base, &meta, 12, why, sizeof why) == RES_OK, "base: %s", why);
  H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
  test_fifo_link();
  test_victim_link();
  test_filtered_extent();
  test_heap_declared();
  test_bools();
  test_dedup_poison();
  test_messages();
  test_c1_controls();
  char cmd[600];
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  if (!kl_test_failures && !getenv("KL_KEEP") && system(cmd)) return 1;
  return kl_test_done("test_results_hostile");
}
