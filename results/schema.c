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
#include <stdio.h>
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

uint32_t res__candidate_crc(const res_candidate *r, int schema) {
  crc_init();
  uint32_t crc = 0;
#define CRC_FIELD_IN(name, kind)                                               \
  if (schema >= 2 || strcmp(#name, "error"))                                   \
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
static int record_ok(const res_candidate *c, int64_t i, int64_t src_bytes,
                     int64_t n_samples, int schema) {
  return c->crc == res__candidate_crc(c, schema) && c->id == i &&
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

int res__damage(const res_candidate *recs, int64_t n, int64_t prefix,
                int64_t src_bytes, int64_t n_samples, int schema, char *what,
                size_t whatlen) {
  int64_t after = 0;
  for (int64_t i = prefix + 1; i < n; i++)
    after += record_ok(&recs[i], i, src_bytes, n_samples, schema);
  if (after > 0)
    snprintf(what, whatlen,
             "candidate record %lld is damaged and %lld complete records "
             "follow it",
             (long long)prefix, (long long)after);
  else if (n - prefix > 1)
    snprintf(what, whatlen,
             "the last %lld candidate records are damaged (a writer killed "
             "mid-append leaves at most one)",
             (long long)(n - prefix));
  else
    return 0;
  return -1;
}

int64_t res__step_prefix(const res_step *steps, int64_t ns, char *what,
                         size_t whatlen) {
  int64_t n = 0, later = 0;
  while (n < ns && steps[n].crc == res_step_crc(&steps[n]))
    n++;
  for (int64_t i = n + 1; i < ns; i++)
    later += steps[i].crc == res_step_crc(&steps[i]);
  what[0] = 0;
  if (later > 0 || ns - n > 1)
    snprintf(what, whatlen,
             "step record %lld is damaged (%lld records after it, %lld "
             "complete)",
             (long long)n, (long long)(ns - n - 1), (long long)later);
  return n;
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

int res__check_signature(const char *path, char *why, size_t whylen) {
  static const unsigned char sig[8] = {0x89, 'H',  'D',  'F',
                                       '\r', '\n', 0x1a, '\n'};
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
  unsigned char head[8];
  size_t got = fread(head, 1, sizeof head, fp);
  fclose(fp);
  if (got != sizeof head || memcmp(head, sig, sizeof sig)) {
    snprintf(why, whylen,
             "%s: not an HDF5 file (no HDF5 signature at offset 0); expected "
             "a kernlab results file",
             path);
    return RES_EINPUT;
  }
  return RES_OK;
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

int64_t res__stored_rows(hid_t ds) {
  int64_t rows = res__extent(ds, 0);
  if (rows <= 0) return rows;
  int64_t cols = res__extent(ds, 1); /* -1: rank 1 */
  hid_t t = H5Dget_type(ds);
  size_t size = t >= 0 ? H5Tget_size(t) : 0;
  if (t >= 0) H5Tclose(t);
  uint64_t row = (uint64_t)size * (uint64_t)(cols > 0 ? cols : 1);
  /* a filtered (compressed: h5repack -f GZIP) dataset stores less than its
   * rows; its extent is taken as it is */
  hid_t dcpl = H5Dget_create_plist(ds);
  int filters = dcpl >= 0 ? H5Pget_nfilters(dcpl) : 1;
  if (dcpl >= 0) H5Pclose(dcpl);
  if (filters != 0) return rows;
  uint64_t stored = H5Dget_storage_size(ds);
  if (!row) return rows;
  uint64_t can = (stored + row - 1) / row;
  return (uint64_t)rows > can ? (int64_t)can : rows;
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
