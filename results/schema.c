/*
 * results/schema.c — the HDF5 compound types of /candidates and /steps,
 * generated from the field lists in results/internal.h, the record crc32,
 * and small HDF5 helpers shared by the writer and the reader.
 *
 * The memory type is also the file type: every field is a fixed-size
 * native little-endian number, a fixed-length string or a byte array, which
 * SWMR can append and h5py reads as a numpy structured array.
 */
#include "results/internal.h"

#include "kernels/kernels.h"

#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* ---- crc32 (IEEE 802.3, reflected, as zlib's crc32) ---------------------- */

static uint32_t crc_table[256];

static void crc_init(void) {
  if (crc_table[1]) return;
  for (uint32_t i = 0; i < 256; i++) {
    uint32_t c = i;
    for (int k = 0; k < 8; k++)
      c = (c & 1) ? 0xedb88320u ^ (c >> 1) : c >> 1;
    crc_table[i] = c;
  }
}

static uint32_t crc_update(uint32_t crc, const void *data, size_t len) {
  const uint8_t *p = data;
  crc = ~crc;
  while (len--)
    crc = crc_table[(crc ^ *p++) & 0xff] ^ (crc >> 8);
  return ~crc;
}

/* Each field's bytes in declaration order: no struct padding is hashed. */
#define CRC_FIELD(name, kind) crc = crc_update(crc, &r->name, sizeof r->name);

int res__field_since(const char *name) {
  return !strcmp(name, "error") ? 2 : !strcmp(name, "timed_launches") ? 3 : 1;
}

uint32_t res__candidate_crc(const res_candidate *r, int schema) {
  crc_init();
  uint32_t crc = 0;
#define CRC_FIELD_IN(name, kind)                                               \
  if (schema >= res__field_since(#name))                                       \
    crc = crc_update(crc, &r->name, sizeof r->name);
  RES_CANDIDATE_FIELDS(CRC_FIELD_IN)
#undef CRC_FIELD_IN
  return crc;
}

uint32_t res_candidate_crc(const res_candidate *r) {
  return res__candidate_crc(r, RES_SCHEMA_VERSION);
}

uint32_t res_step_crc(const res_step *r) {
  crc_init();
  uint32_t crc = 0;
  RES_STEP_FIELDS(CRC_FIELD)
  return crc;
}

/* Record i is complete: crc matches, id is its row, and its source and
 * samples lie inside the heaps' extents. */
_Static_assert(KL_MAX_SOURCE_BYTES <= RES_MAX_SOURCE_BYTES &&
                   KL_MAX_TIMING_SAMPLES <= RES_MAX_SAMPLES,
               "a results file must take what the lab makes");

static int record_ok(const res_candidate *c, int64_t i, int64_t src_bytes,
                     int64_t n_samples, int schema) {
  return c->crc == res__candidate_crc(c, schema) && c->id == i &&
         /* what the lab writes at most: a compressed heap of zeros made a
          * record of 1.2e9 source bytes (or 3e8 samples) read whole */
         c->src_len <= RES_MAX_SOURCE_BYTES &&
         c->timing_count <= RES_MAX_SAMPLES &&
         /* as differences: an offset near 2^64 would wrap a sum */
         src_bytes >= 0 && n_samples >= 0 &&
         c->src_off <= (uint64_t)src_bytes &&
         c->src_len <= (uint64_t)src_bytes - c->src_off &&
         c->timing_off <= (uint64_t)n_samples &&
         c->timing_count <= (uint64_t)n_samples - c->timing_off;
}

int64_t res__valid_prefix(const res_candidate *recs, int64_t n,
                          int64_t src_bytes, int64_t n_samples, int schema) {
  int64_t i = 0;
  while (i < n && record_ok(&recs[i], i, src_bytes, n_samples, schema))
    i++;
  return i;
}

/* Rows read at a time, and the rows past the first damaged record that are
 * still read to count the complete ones among them: a compressed heap of
 * zeros declares millions of rows in a megabyte, and reading them all at
 * once took gigabytes before the first record was checked (the
 * hostile-HDF5 review; /steps too, in the report review: 20M zero rows in
 * 2.9 MB of gzip took 2.7 GB). */
#define LOAD_BATCH 4096
#define DAMAGE_SCAN_MAX ((int64_t)1 << 20)

/* What load_prefix found. */
typedef struct prefix_scan {
  void *rows;    /* malloc'd, at least the `valid` leading rows; NULL if n 0 */
  int64_t valid; /* leading rows that pass the check */
  int64_t after; /* rows past the first failing one that pass it */
  int64_t seen;  /* rows looked at: n, unless the scan stopped early */
} prefix_scan;

/* Reads the n rows of ds (records of `size` bytes, memory type `type`) in
 * batches of LOAD_BATCH, and keeps the leading rows that pass ok(row, its
 * index, ctx). Past the first that fails, rows are read into one scratch
 * batch only to count those that pass, for at most DAMAGE_SCAN_MAX rows:
 * memory is the prefix plus a batch, whatever the extent declares.
 * Returns 0, -1 when a read fails, -2 out of memory (nothing kept). */
static int load_prefix(hid_t ds, hid_t type, int64_t n, size_t size,
                       int (*ok)(const void *row, int64_t i, const void *ctx),
                       const void *ctx, prefix_scan *out) {
  char *rows = NULL, *scratch = NULL;
  int64_t valid = 0, after = 0, off = 0;
  int rc = 0;
  for (int64_t m; off < n; off += m) {
    m = n - off < LOAD_BATCH ? n - off : LOAD_BATCH;
    char *into;
    if (valid == off) { /* every record so far complete: keep them */
      char *g = realloc(rows, (size_t)(off + m) * size);
      if (!g) {
        rc = -2;
        break;
      }
      rows = g, into = rows + (size_t)off * size;
    } else {
      if (off - valid > DAMAGE_SCAN_MAX) break;
      if (!scratch && !(scratch = malloc(LOAD_BATCH * size))) {
        rc = -2;
        break;
      }
      into = scratch;
    }
    /* zeroed: a member the file's type lacks (a schema-1 file has no
     * `error`; an edited /steps may lack any) is left as the buffer held
     * it, and then fails the crc instead of hashing stale memory */
    memset(into, 0, (size_t)m * size);
    if (res__read_rows(ds, type, off, m, 0, into)) {
      rc = -1;
      break;
    }
    for (int64_t j = 0; j < m; j++) {
      int good = ok(into + (size_t)j * size, off + j, ctx);
      if (good && valid == off + j)
        valid++;
      else if (off + j > valid)
        after += good;
    }
  }
  free(scratch);
  if (rc) {
    free(rows);
    return rc;
  }
  *out = (prefix_scan){rows, valid, after, off < n ? off : n};
  return 0;
}

/* The heaps' held sizes and the file's schema, for candidate_ok. */
typedef struct candidate_ctx {
  int64_t src_bytes, n_samples;
  int schema;
} candidate_ctx;

static int candidate_ok(const void *row, int64_t i, const void *ctx) {
  const candidate_ctx *c = ctx;
  return record_ok(row, i, c->src_bytes, c->n_samples, c->schema);
}

int res__load_candidates(hid_t ds, hid_t type, int64_t n, int64_t src_bytes,
                         int64_t n_samples, int schema, res_candidate **out,
                         int64_t *prefix, char *what, size_t whatlen) {
  what[0] = 0;
  candidate_ctx ctx = {src_bytes, n_samples, schema};
  prefix_scan s;
  int rc =
      load_prefix(ds, type, n, sizeof(res_candidate), candidate_ok, &ctx, &s);
  if (rc) return rc;
  const char *more = s.seen < n ? "at least " : "";
  if (s.after > 0)
    snprintf(what, whatlen,
             "candidate record %lld is damaged and %s%lld complete records "
             "follow it",
             (long long)s.valid, more, (long long)s.after);
  else if (n - s.valid > 1)
    snprintf(what, whatlen,
             "the last %lld candidate records are damaged (a writer killed "
             "mid-append leaves at most one)",
             (long long)(n - s.valid));
  *out = s.rows;
  *prefix = s.valid;
  return 0;
}

/* Step record i is complete: crc matches and it is step i, as the writers
 * append them (run and search number steps from 0, one record each, and
 * --resume continues at the count). A record moved or copied to another
 * row kept a good crc and was read as that row's step. */
static int step_ok(const void *row, int64_t i, const void *ctx) {
  (void)ctx;
  const res_step *s = row;
  return s->crc == res_step_crc(s) && s->step == i;
}

int res__load_steps(hid_t ds, hid_t type, int64_t n, res_step **out,
                    int64_t *prefix, char *what, size_t whatlen) {
  what[0] = 0;
  prefix_scan s;
  int rc = load_prefix(ds, type, n, sizeof(res_step), step_ok, NULL, &s);
  if (rc) return rc;
  if (s.after > 0 || n - s.valid > 1) {
    /* the complete records after it are counted among those read, which
     * stop DAMAGE_SCAN_MAX rows on: say so when they did */
    char read[64] = "";
    if (s.seen < n)
      snprintf(read, sizeof read, " of the %lld read",
               (long long)(s.seen - s.valid - 1));
    snprintf(what, whatlen,
             "step record %lld is damaged (%lld records after it, %lld "
             "complete%s)",
             (long long)s.valid, (long long)(n - s.valid - 1),
             (long long)s.after, read);
  }
  *out = s.rows;
  *prefix = s.valid;
  return 0;
}

void res_strset(char *dst, size_t n, const char *s) {
  memset(dst, 0, n);
  if (s) {
    size_t len = strnlen(s, n - 1);
    memcpy(dst, s, len);
  }
}

/* ---- compound types ------------------------------------------------------ */

static hid_t bool_type(void) {
  hid_t t = H5Tenum_create(H5T_NATIVE_INT8);
  int8_t v = 0;
  H5Tenum_insert(t, "FALSE", &v);
  v = 1;
  H5Tenum_insert(t, "TRUE", &v);
  return t;
}

static void insert(hid_t t, const char *name, size_t off, size_t size,
                   char kind) {
  hid_t ft = -1;
  int owned = 1;
  switch (kind) {
  case 'q':
    ft = H5T_NATIVE_INT64, owned = 0;
    break;
  case 'i':
    ft = H5T_NATIVE_INT32, owned = 0;
    break;
  case 'Q':
    ft = H5T_NATIVE_UINT64, owned = 0;
    break;
  case 'I':
    ft = H5T_NATIVE_UINT32, owned = 0;
    break;
  case 'd':
    ft = H5T_NATIVE_DOUBLE, owned = 0;
    break;
  case 'b':
    ft = bool_type();
    break;
  case 's':
    ft = H5Tcopy(H5T_C_S1);
    H5Tset_size(ft, size);
    H5Tset_strpad(ft, H5T_STR_NULLPAD);
    break;
  case 'h': {
    hsize_t n = 32;
    ft = H5Tarray_create2(H5T_NATIVE_UINT8, 1, &n);
    break;
  }
  }
  H5Tinsert(t, name, off, ft);
  if (owned) H5Tclose(ft);
}

#define KIND_I64 'q'
#define KIND_I32 'i'
#define KIND_U64 'Q'
#define KIND_U32 'I'
#define KIND_F64 'd'
#define KIND_BOOL 'b'
#define KIND_STR 's'
#define KIND_SHA 'h'
#define INSERT_FIELD(name, kind)                                               \
  insert(t, #name, offsetof(REC, name), sizeof(((REC *)0)->name), KIND_##kind);

hid_t res__candidate_type(void) {
#define REC res_candidate
  hid_t t = H5Tcreate(H5T_COMPOUND, sizeof(REC));
  RES_CANDIDATE_FIELDS(INSERT_FIELD)
  insert(t, "crc", offsetof(REC, crc), sizeof(uint32_t), 'I');
  return t;
#undef REC
}

hid_t res__step_type(void) {
#define REC res_step
  hid_t t = H5Tcreate(H5T_COMPOUND, sizeof(REC));
  RES_STEP_FIELDS(INSERT_FIELD)
  insert(t, "crc", offsetof(REC, crc), sizeof(uint32_t), 'I');
  return t;
#undef REC
}

/* ---- helpers ------------------------------------------------------------- */

/* Where HDF5 looks for its signature: offset 0, then 512, 1024, 2048, ...
 * (a file with a user block, as h5jam makes, starts its superblock after
 * it). Returns the offset, or -1 when there is none. */
static int64_t signature_offset(FILE *fp) {
  static const unsigned char sig[8] = {0x89, 'H',  'D',  'F',
                                       '\r', '\n', 0x1a, '\n'};
  for (int64_t off = 0; off <= ((int64_t)1 << 40); off = off ? off * 2 : 512) {
    unsigned char head[8];
    if (fseeko(fp, (off_t)off, SEEK_SET) != 0 ||
        fread(head, 1, sizeof head, fp) != sizeof head)
      return -1;
    if (!memcmp(head, sig, sizeof sig)) return off;
  }
  return -1;
}

int res__check_signature(const char *path, char *why, size_t whylen) {
  struct stat st;
  /* a FIFO or a device would block the open below, or read for ever */
  if (stat(path, &st) == 0 && !S_ISREG(st.st_mode)) {
    snprintf(why, whylen, "%s: %s, not a kernlab results file", path,
             S_ISDIR(st.st_mode) ? "a folder" : "not a regular file");
    return RES_EINPUT;
  }
  FILE *fp = kl_fopen_regular(path, NULL); /* swapped for a FIFO? no wait */
  if (!fp) {
    snprintf(why, whylen, "%s: cannot open: %s", path, kl_fopen_error(errno));
    return RES_EINPUT;
  }
  int64_t off = signature_offset(fp);
  fclose(fp);
  if (off < 0) {
    snprintf(why, whylen,
             "%s: not an HDF5 file (no HDF5 signature at offset 0 or after a "
             "user block); expected a kernlab results file",
             path);
    return RES_EINPUT;
  }
  return RES_OK;
}

/* ---- links --------------------------------------------------------------- */

/* An external link met while opening a dataset: refused (a results file
 * holds its own data; following one opened any file the link names, a
 * FIFO with no writer blocked for ever, and a writer appended into
 * another campaign's file). */
static herr_t refuse_elink(const char *parent_file, const char *parent_group,
                           const char *child_file, const char *child_object,
                           unsigned *acc_flags, hid_t fapl, void *data) {
  (void)parent_file, (void)parent_group, (void)child_file, (void)child_object;
  (void)acc_flags, (void)fapl, (void)data;
  return -1;
}

/* A dataset's data must be in the file: external storage (h5py's
 * external=[(path, offset, size)], H5Pset_external) reads whatever file it
 * names, a FIFO (for ever), /dev/zero (gigabytes) or /etc/passwd (shown
 * by `show --source` when its sha256 is known: the hostile-HDF5 review
 * found all three); a virtual dataset maps other files too. */
static const char *storage_problem(hid_t fid, const char *name) {
  hid_t ds = -1;
  H5E_BEGIN_TRY {
    ds = H5Dopen2(fid, name, H5P_DEFAULT);
  }
  H5E_END_TRY;
  if (ds < 0) return NULL; /* not a dataset: the opener says so */
  hid_t dcpl = H5Dget_create_plist(ds);
  const char *problem = NULL;
  if (dcpl < 0)
    problem = "unreadable (its creation properties do not read)";
  else if (H5Pget_external_count(dcpl) != 0)
    problem = "stored outside the results file (external storage)";
  else if (H5Pget_layout(dcpl) == H5D_VIRTUAL)
    problem = "a virtual dataset (mapped from other files)";
  if (dcpl >= 0) H5Pclose(dcpl);
  H5Dclose(ds);
  return problem;
}

const char *res__link_problem(hid_t fid, const char *name) {
  htri_t there = -1;
  H5L_info_t info;
  herr_t e = -1;
  H5E_BEGIN_TRY {
    there = H5Lexists(fid, name, H5P_DEFAULT);
    if (there > 0) e = H5Lget_info(fid, name, &info, H5P_DEFAULT);
  }
  H5E_END_TRY;
  if (there == 0) return "missing";
  if (there < 0 || e < 0) return "unreadable (its link does not read)";
  switch (info.type) {
  case H5L_TYPE_HARD:
    return storage_problem(fid, name);
  case H5L_TYPE_SOFT:
    return "a soft link (to another object of the file)";
  case H5L_TYPE_EXTERNAL:
    return "an external link (to another file)";
  default:
    return "a user-defined link";
  }
}

int res__check_links(hid_t fid, const char *path, char *why, size_t whylen) {
  static const char *const names[] = {RES_DS_CANDIDATES,      RES_DS_SOURCE,
                                      RES_DS_TIMINGS,         RES_DS_COMPONENTS,
                                      RES_DS_COMPONENT_NAMES, RES_DS_STEPS};
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
    const char *problem = res__link_problem(fid, names[i]);
    if (problem && strcmp(problem, "missing")) {
      snprintf(why, whylen,
               "%s: /%s is %s; a results file holds its own datasets, so "
               "kernlab neither reads nor writes through a link or outside "
               "the file",
               path, names[i], problem);
      return RES_EINPUT;
    }
  }
  return RES_OK;
}

hid_t res__open_ds(hid_t fid, const char *name) {
  if (res__link_problem(fid, name)) return -1;
  hid_t dapl = H5Pcreate(H5P_DATASET_ACCESS);
  if (dapl < 0) return -1;
  hid_t ds = -1;
  if (H5Pset_elink_cb(dapl, refuse_elink, NULL) >= 0) {
    H5E_BEGIN_TRY {
      ds = H5Dopen2(fid, name, dapl);
    }
    H5E_END_TRY;
  }
  H5Pclose(dapl);
  return ds;
}

/* The schema's datasets have rank 1 or 2; a file edited to hold another
 * rank is refused before any dims array is filled. */
int64_t res__extent(hid_t ds, int axis) {
  hid_t sp = H5Dget_space(ds);
  if (sp < 0) return -1;
  hsize_t dims[2] = {0, 0};
  int nd = H5Sget_simple_extent_ndims(sp);
  if (nd >= 1 && nd <= 2) nd = H5Sget_simple_extent_dims(sp, dims, NULL);
  H5Sclose(sp);
  if (nd < 1 || nd > 2 || axis >= nd) return -1;
  return (int64_t)dims[axis];
}

/* The rows covered by the chunks that are allocated, or -1 when they
 * cannot be listed. Rows past the last allocated chunk, and rows of a
 * chunk that is not allocated, read as the fill value, which no record
 * passes: a prefix of complete records ends within the first
 * n_chunks * chunk rows. */
static int64_t chunk_rows_bound(hid_t ds, hid_t dcpl) {
  hsize_t chunk[2] = {0, 0}, n_chunks = 0;
  int rank =
      H5Pget_layout(dcpl) == H5D_CHUNKED ? H5Pget_chunk(dcpl, 2, chunk) : -1;
  if (rank < 1 || rank > 2 || chunk[0] == 0) return -1;
  hid_t sp = H5Dget_space(ds);
  herr_t e = sp >= 0 ? H5Dget_num_chunks(ds, sp, &n_chunks) : -1;
  if (sp >= 0) H5Sclose(sp);
  if (e < 0) return -1;
  /* a rank-2 dataset's chunks also tile the columns: counting every chunk
   * as a new band of rows overcounts, which only loosens the bound */
  if (n_chunks > (hsize_t)INT64_MAX / chunk[0]) return INT64_MAX;
  return (int64_t)(n_chunks * chunk[0]);
}

/* Deflate's best case is about 1032:1; a filtered dataset holds no more
 * rows than its stored bytes at that ratio (with room for shuffle and
 * fletcher32), whatever extent it declares. */
#define RES_MAX_FILTER_RATIO 1100

int64_t res__stored_rows(hid_t ds) {
  int64_t rows = res__extent(ds, 0);
  if (rows <= 0) return rows;
  int64_t cols = res__extent(ds, 1); /* -1: rank 1 */
  hid_t t = H5Dget_type(ds);
  size_t size = t >= 0 ? H5Tget_size(t) : 0;
  if (t >= 0) H5Tclose(t);
  uint64_t row = (uint64_t)size * (uint64_t)(cols > 0 ? cols : 1);
  if (!row) return rows;
  hid_t dcpl = H5Dget_create_plist(ds);
  if (dcpl < 0) return -1;
  int filters = H5Pget_nfilters(dcpl);
  int64_t by_chunks = chunk_rows_bound(ds, dcpl);
  H5Pclose(dcpl);
  uint64_t stored = H5Dget_storage_size(ds);
  uint64_t can;
  if (filters == 0) {
    can = (stored + row - 1) / row;
  } else {
    /* a filtered (compressed: h5repack -f GZIP) dataset stores less than
     * its rows: its allocated chunks and the best ratio bound them (an
     * extent of 10M rows over a few kB of gzip was allocated in full) */
    if (filters < 0 || by_chunks < 0) return -1;
    can = stored > UINT64_MAX / RES_MAX_FILTER_RATIO
              ? UINT64_MAX
              : (stored * RES_MAX_FILTER_RATIO + row - 1) / row;
  }
  if (by_chunks >= 0 && (uint64_t)by_chunks < can) can = (uint64_t)by_chunks;
  return (uint64_t)rows > can ? (int64_t)can : rows;
}

static const char *class_name(H5T_class_t c) {
  switch (c) {
  case H5T_INTEGER:
    return "an integer";
  case H5T_FLOAT:
    return "a float";
  case H5T_STRING:
    return "a string";
  case H5T_ENUM:
    return "an enum (bool)";
  case H5T_ARRAY:
    return "an array";
  case H5T_COMPOUND:
    return "a compound";
  case H5T_VLEN:
    return "a variable-length sequence";
  default:
    return "of another kind";
  }
}

int res__field_problem(hid_t ds, hid_t mt, int schema, char *out, size_t n) {
  out[0] = 0;
  hid_t ft = H5Dget_type(ds);
  if (ft < 0 || H5Tget_class(ft) != H5T_COMPOUND) {
    snprintf(out, n, "its element type is not a compound record");
    if (ft >= 0) H5Tclose(ft);
    return -1;
  }
  /* first a field HDF5 cannot convert (what fails a read), then a missing
   * one (which reads, and fails the records' crc) */
  int members = H5Tget_nmembers(mt);
  for (int pass = 0; pass < 2 && !out[0]; pass++)
    for (int i = 0; i < members && !out[0]; i++) {
      char *name = H5Tget_member_name(mt, (unsigned)i);
      if (!name) continue;
      int idx = H5Tget_member_index(ft, name);
      if (idx < 0) {
        if (pass == 1 && schema >= res__field_since(name))
          snprintf(out, n, "its records have no field `%s`", name);
      } else if (pass == 0) {
        hid_t fm = H5Tget_member_type(ft, (unsigned)idx);
        hid_t mm = H5Tget_member_type(mt, (unsigned)i);
        H5T_cdata_t *cdata = NULL;
        H5T_conv_t conv = NULL;
        H5E_BEGIN_TRY {
          conv = H5Tfind(fm, mm, &cdata);
        }
        H5E_END_TRY;
        int vlen = fm >= 0 && H5Tget_class(fm) == H5T_STRING &&
                   H5Tis_variable_str(fm) > 0;
        char have[64];
        if (vlen)
          snprintf(have, sizeof have, "a variable-length string");
        else
          snprintf(have, sizeof have, "%s of %zu bytes",
                   class_name(H5Tget_class(fm)), H5Tget_size(fm));
        if (!conv || vlen)
          snprintf(out, n,
                   "field `%s` is %s in the file, which does not convert to "
                   "the schema's type, %s of %zu bytes",
                   name, have, class_name(H5Tget_class(mm)), H5Tget_size(mm));
        if (fm >= 0) H5Tclose(fm);
        if (mm >= 0) H5Tclose(mm);
      }
      H5free_memory(name);
    }
  H5Tclose(ft);
  return out[0] ? -1 : 0;
}

int res__read_rows(hid_t ds, hid_t mt, int64_t start, int64_t count,
                   int64_t cols, void *buf) {
  if (count == 0) return 0;
  hid_t fs = H5Dget_space(ds);
  if (fs < 0) return -1;
  int nd = H5Sget_simple_extent_ndims(fs);
  /* rows of a rank-1 dataset, or rows of cols of a rank-2 one: anything
   * else would select nothing (leaving buf unread) or overrun st and ct */
  if (nd != (cols > 0 ? 2 : 1)) {
    H5Sclose(fs);
    return -1;
  }
  hsize_t st[2] = {(hsize_t)start, 0}, ct[2] = {(hsize_t)count, (hsize_t)cols};
  herr_t e = H5Sselect_hyperslab(fs, H5S_SELECT_SET, st, NULL, ct, NULL);
  hid_t ms = H5Screate_simple(nd, ct, NULL);
  if (e >= 0) e = H5Dread(ds, mt, ms, fs, H5P_DEFAULT, buf);
  H5Sclose(ms);
  H5Sclose(fs);
  return e < 0 ? -1 : 0;
}

static herr_t innermost(unsigned n, const H5E_error2_t *err, void *data) {
  (void)n;
  /* The walk goes from the innermost frame outwards; keep the first. */
  const char **desc = data;
  if (!*desc && err->desc && err->desc[0]) *desc = err->desc;
  return 0;
}

/* HDF5's file driver describes a failed read or write in one long line
 * with a newline in it ("file write failed: time = ..., errno = 28, error
 * message = 'No space left on device', buf = 0x..."): what the user needs
 * is the system's message, so that is what is kept. */
void res__h5_error(char *why, size_t whylen, const char *prefix) {
  const char *desc = NULL;
  H5Ewalk2(H5E_DEFAULT, H5E_WALK_UPWARD, innermost, &desc);
  const char *msg = desc ? strstr(desc, "error message = '") : NULL;
  if (msg) {
    msg += strlen("error message = '");
    const char *end = strchr(msg, '\'');
    int head = (int)strcspn(desc, ":,\n"); /* "file write failed" */
    snprintf(why, whylen, "%s: %.*s: %.*s", prefix, head, desc,
             end ? (int)(end - msg) : (int)strcspn(msg, "\n"), msg);
    return;
  }
  snprintf(why, whylen, "%s%s%s", prefix, desc ? ": " : "", desc ? desc : "");
}
