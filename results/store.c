/*
 * results/store.c — the writer: creates a results file with every dataset
 * the schema names, then appends candidates and steps in SWMR mode.
 *
 * Order of one append (what a kill -9 in the middle leaves behind): source
 * bytes, timing samples, reward components, a flush, and last the candidate
 * record with its crc and a second flush. Bytes written before the record and
 * not referenced by any valid record are orphans: harmless, never reused. The
 * reader and a reopening writer count records up to the first bad crc.
 *
 * Not here: reading for inspection (results/reader.c), the crc and types
 * (results/schema.c).
 */
#define _GNU_SOURCE /* F_OFD_SETLK */
#include "results/internal.h"

#include "kernels/kernels.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define CHUNK_CANDIDATES 64
#define CHUNK_SOURCE (64 * 1024)
#define CHUNK_TIMINGS 4096
#define CHUNK_COMP_ROWS 256
#define CHUNK_COMP_COLS 8
#define CHUNK_STEPS 64

typedef struct dedup_entry {
  uint8_t sha[32];
  uint64_t off;
  uint32_t len;
  int used;
  int verified; /* the bytes at off were compared with a source: written by
                 * this writer, or checked on the first reuse (an edited
                 * file's record can carry a sha256 its bytes lack) */
} dedup_entry;

struct res_file {
  hid_t fid;
  hid_t cand, src, tim, comp, cname, steps; /* datasets */
  hid_t cand_t, step_t;
  int lock_fd;         /* on the file itself: its identity (still_there) */
  char path[PATH_MAX]; /* where the file was opened */
  int schema;          /* the file's schema_version: how its record crcs run */
  int noflush;         /* rebuild: no per-append flush */
  int64_t n_cand, n_steps;
  int64_t src_end, tim_end; /* current extents of the heaps */
  int n_comp;
  char (*comp_names)[RES_NAME_LEN];
  dedup_entry *dedup; /* open addressing on the first 8 hash bytes */
  size_t dedup_cap, dedup_n;
};

const char *res__created_override;

/* ---- small helpers --------------------------------------------------------
 */

/* Whether the file is still the one at the path it was opened by. A file
 * removed (or replaced) while written goes on taking records that no one
 * will ever read: every append checks, and the writer stops with a message
 * instead of finishing "successfully" into a deleted file. */
static int still_there(const res_file *f, char *why, size_t whylen) {
  struct stat held, named;
  if (f->lock_fd < 0 || !f->path[0] || fstat(f->lock_fd, &held) != 0)
    return RES_OK; /* nothing to compare with */
  if (stat(f->path, &named) == 0 && named.st_dev == held.st_dev &&
      named.st_ino == held.st_ino)
    return RES_OK;
  snprintf(why, whylen,
           "%s was removed or replaced while this process wrote it: what it "
           "wrote since is in no file",
           f->path);
  return RES_EENV;
}

static int fail(char *why, size_t whylen, const char *what) {
  res__h5_error(why, whylen, what);
  return RES_EENV;
}

static uint64_t sha_key(const uint8_t sha[32]) {
  uint64_t k;
  memcpy(&k, sha, sizeof k);
  return k;
}

static dedup_entry *dedup_find(res_file *f, const uint8_t sha[32]) {
  if (!f->dedup_cap) return NULL;
  size_t i = sha_key(sha) & (f->dedup_cap - 1);
  while (f->dedup[i].used) {
    if (!memcmp(f->dedup[i].sha, sha, 32)) return &f->dedup[i];
    i = (i + 1) & (f->dedup_cap - 1);
  }
  return NULL;
}

static int dedup_add(res_file *f, const uint8_t sha[32], uint64_t off,
                     uint32_t len, int verified) {
  if (dedup_find(f, sha)) return 0;
  if ((f->dedup_n + 1) * 2 > f->dedup_cap) {
    size_t cap = f->dedup_cap ? f->dedup_cap * 2 : 256;
    dedup_entry *old = f->dedup;
    size_t oldcap = f->dedup_cap;
    f->dedup = calloc(cap, sizeof *f->dedup);
    if (!f->dedup) {
      f->dedup = old;
      return -1;
    }
    f->dedup_cap = cap;
    f->dedup_n = 0;
    for (size_t i = 0; i < oldcap; i++)
      if (old[i].used)
        dedup_add(f, old[i].sha, old[i].off, old[i].len, old[i].verified);
    free(old);
  }
  size_t i = sha_key(sha) & (f->dedup_cap - 1);
  while (f->dedup[i].used)
    i = (i + 1) & (f->dedup_cap - 1);
  memcpy(f->dedup[i].sha, sha, 32);
  f->dedup[i].off = off;
  f->dedup[i].len = len;
  f->dedup[i].used = 1;
  f->dedup[i].verified = verified;
  f->dedup_n++;
  return 0;
}

/* Whether the bytes entry d points at (from the file being continued) are
 * source's: 0, and d is marked verified; -1 when they differ or do not
 * read. */
static int reuse_ok(res_file *f, dedup_entry *d, const char *source,
                    size_t len) {
  if (d->used != 1 || d->len != len) return -1;
  char *held = malloc(len ? len : 1);
  int same = held &&
             !res__read_rows(f->src, H5T_NATIVE_UINT8, (int64_t)d->off,
                             (int64_t)len, 0, held) &&
             !memcmp(held, source, len);
  free(held);
  if (!same) return -1;
  d->verified = 1;
  return 0;
}

static void sha256_raw(const void *data, size_t len, uint8_t out[32]) {
  kl_sha256_ctx ctx;
  kl_sha256_init(&ctx);
  kl_sha256_update(&ctx, data, len);
  kl_sha256_final(&ctx, out);
}

static int write_str_attr(hid_t loc, const char *name, const char *s) {
  if (!s) s = "";
  size_t len = strlen(s);
  hid_t t = H5Tcopy(H5T_C_S1);
  H5Tset_size(t, len ? len : 1);
  H5Tset_strpad(t, H5T_STR_NULLPAD);
  H5Tset_cset(t, H5T_CSET_UTF8);
  hid_t sp = H5Screate(H5S_SCALAR);
  hid_t a = H5Acreate2(loc, name, t, sp, H5P_DEFAULT, H5P_DEFAULT);
  herr_t e = a < 0 ? -1 : H5Awrite(a, t, len ? s : "");
  if (a >= 0) H5Aclose(a);
  H5Sclose(sp);
  H5Tclose(t);
  return e < 0 ? -1 : 0;
}

static int write_num_attr(hid_t loc, const char *name, hid_t type,
                          const void *v) {
  hid_t sp = H5Screate(H5S_SCALAR);
  hid_t a = H5Acreate2(loc, name, type, sp, H5P_DEFAULT, H5P_DEFAULT);
  herr_t e = a < 0 ? -1 : H5Awrite(a, type, v);
  if (a >= 0) H5Aclose(a);
  H5Sclose(sp);
  return e < 0 ? -1 : 0;
}

/* An array of n fixed-length (RES_NAME_LEN) strings; a null dataspace when
 * n is 0 (h5py reads it as h5py.Empty). */
static int write_names_attr(hid_t loc, const char *name,
                            const char *const *names, int n) {
  hid_t t = H5Tcopy(H5T_C_S1);
  H5Tset_size(t, RES_NAME_LEN);
  H5Tset_strpad(t, H5T_STR_NULLPAD);
  hsize_t dim = (hsize_t)n;
  hid_t sp = n ? H5Screate_simple(1, &dim, NULL) : H5Screate(H5S_NULL);
  char *buf = calloc(n ? (size_t)n : 1, RES_NAME_LEN);
  for (int i = 0; i < n; i++)
    res_strset(buf + (size_t)i * RES_NAME_LEN, RES_NAME_LEN, names[i]);
  hid_t a = H5Acreate2(loc, name, t, sp, H5P_DEFAULT, H5P_DEFAULT);
  herr_t e = a < 0 ? -1 : (n ? H5Awrite(a, t, buf) : 0);
  if (a >= 0) H5Aclose(a);
  free(buf);
  H5Sclose(sp);
  H5Tclose(t);
  return e < 0 ? -1 : 0;
}

/* A chunked dataset of rank 1 or 2, unlimited along every axis except a
 * fixed second axis when fixed_cols > 0. */
static hid_t create_ds(hid_t fid, const char *name, hid_t type, int rank,
                       hsize_t chunk0, hsize_t chunk1, hsize_t fixed_cols,
                       const void *fill) {
  hsize_t dims[2] = {0, fixed_cols ? fixed_cols : 0};
  hsize_t maxd[2] = {H5S_UNLIMITED, fixed_cols ? fixed_cols : H5S_UNLIMITED};
  hsize_t chunk[2] = {chunk0, chunk1};
  hid_t sp = H5Screate_simple(rank, dims, maxd);
  hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
  H5Pset_chunk(dcpl, rank, chunk);
  if (fill) H5Pset_fill_value(dcpl, type, fill);
  hid_t ds = H5Dcreate2(fid, name, type, sp, H5P_DEFAULT, dcpl, H5P_DEFAULT);
  H5Pclose(dcpl);
  H5Sclose(sp);
  return ds;
}

/* Writes count rows (cols wide for rank 2) at row start, growing the first
 * axis to at least start + count. */
static int write_rows(hid_t ds, hid_t mt, int64_t start, int64_t count,
                      int64_t cols, const void *buf) {
  hid_t fs = H5Dget_space(ds);
  int nd = H5Sget_simple_extent_ndims(fs);
  hsize_t dims[2] = {0, 0};
  if (nd < 1 || nd > 2) { /* res__validate refuses such files first */
    H5Sclose(fs);
    return -1;
  }
  H5Sget_simple_extent_dims(fs, dims, NULL);
  H5Sclose(fs);
  int grow = 0;
  if (dims[0] < (hsize_t)(start + count)) {
    dims[0] = (hsize_t)(start + count);
    grow = 1;
  }
  if (nd == 2 && dims[1] < (hsize_t)cols) {
    dims[1] = (hsize_t)cols;
    grow = 1;
  }
  if (grow && H5Dset_extent(ds, dims) < 0) return -1;
  /* The dataspace must be fetched again after an extent change. */
  fs = H5Dget_space(ds);
  hsize_t st[2] = {(hsize_t)start, 0}, ct[2] = {(hsize_t)count, (hsize_t)cols};
  herr_t e = H5Sselect_hyperslab(fs, H5S_SELECT_SET, st, NULL, ct, NULL);
  hid_t ms = H5Screate_simple(nd, ct, NULL);
  if (e >= 0) e = H5Dwrite(ds, mt, ms, fs, H5P_DEFAULT, buf);
  H5Sclose(ms);
  H5Sclose(fs);
  return e < 0 ? -1 : 0;
}

static hid_t swmr_fapl(void) {
  hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
  H5Pset_libver_bounds(fapl, H5F_LIBVER_LATEST, H5F_LIBVER_LATEST);
  /* Every allocation on a page boundary, and metadata blocks no larger than
   * a page: an object header then never straddles two pages, and a kill -9
   * cannot leave it half rewritten (the kernel copies a write into the page
   * cache page by page and stops between pages on a fatal signal: the
   * crash test found a /steps header torn that way, 1 run in 30). */
  H5Pset_alignment(fapl, 1, 4096);
  H5Pset_meta_block_size(fapl, 4096);
  /* a writer opening a damaged file must fail, not wait for ever */
  H5Pset_metadata_read_attempts(fapl, RES_READ_ATTEMPTS);
  return fapl;
}

/* An open-file-description lock (does not interact with the flock HDF5
 * takes, and is released when the process dies), on the file path names
 * once it is held: a writer that rebuilt the file renames a new one over
 * path, so a lock won on the file path named a moment before would guard
 * nothing (HDF5 would open the new one), and the lock is taken again. New
 * files are locked before they get their name (create_file, res__rebuild),
 * so a second writer never finds one unlocked. */
int res__take_lock(const char *path, int *fd_out, char *why, size_t whylen) {
  for (int attempt = 0; attempt < 8; attempt++) {
    int fd = open(path, O_RDWR | O_CLOEXEC);
    if (fd < 0) {
      snprintf(why, whylen, "%s: cannot open for writing: %s", path,
               strerror(errno));
      return RES_EENV;
    }
    struct flock lk = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
    if (fcntl(fd, F_OFD_SETLK, &lk) < 0) {
      int err = errno;
      close(fd);
      if (err == EAGAIN || err == EACCES)
        snprintf(why, whylen,
                 "%s: another process is writing this results file (another "
                 "kernlab run, eval or search with the same output)",
                 path);
      else
        snprintf(why, whylen, "%s: cannot lock: %s", path, strerror(err));
      return RES_EENV;
    }
    struct stat held, named;
    if (fstat(fd, &held) == 0 && stat(path, &named) == 0 &&
        held.st_dev == named.st_dev && held.st_ino == named.st_ino) {
      *fd_out = fd;
      return RES_OK;
    }
    close(fd); /* replaced meanwhile: lock the file there now */
  }
  snprintf(why, whylen,
           "%s: the file kept being replaced while this writer tried to lock "
           "it (another process rebuilding it?)",
           path);
  return RES_EENV;
}

static void no_atexit(void) {
  (void)H5dont_atexit(); /* before any other HDF5 call, or it has no effect */
}

void res__hdf5_setup(void) {
  static pthread_once_t once = PTHREAD_ONCE_INIT;
  pthread_once(&once, no_atexit);
  H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
}

static void free_file(res_file *f) {
  hid_t *ids[] = {&f->cand, &f->src, &f->tim, &f->comp, &f->cname, &f->steps};
  for (size_t i = 0; i < sizeof ids / sizeof ids[0]; i++)
    if (*ids[i] > 0) H5Dclose(*ids[i]);
  if (f->cand_t > 0) H5Tclose(f->cand_t);
  if (f->step_t > 0) H5Tclose(f->step_t);
  if (f->fid > 0) H5Fclose(f->fid);
  if (f->lock_fd >= 0) close(f->lock_fd);
  free(f->comp_names);
  free(f->dedup);
  free(f);
}

static res_file *new_file(void) {
  res_file *f = calloc(1, sizeof *f);
  if (!f) return NULL;
  f->fid = f->cand = f->src = f->tim = f->comp = f->cname = f->steps = -1;
  f->cand_t = f->step_t = -1;
  f->lock_fd = -1;
  f->schema =
      RES_SCHEMA_VERSION; /* a new file; load_state reads an old one's */
  f->cand_t = res__candidate_type();
  f->step_t = res__step_type();
  return f;
}

static int add_component_name(res_file *f, const char *name) {
  char(*grown)[RES_NAME_LEN] =
      realloc(f->comp_names, (size_t)(f->n_comp + 1) * RES_NAME_LEN);
  if (!grown) return -1;
  f->comp_names = grown;
  res_strset(f->comp_names[f->n_comp], RES_NAME_LEN, name);
  if (write_rows(f->cname, H5T_NATIVE_UINT8, f->n_comp, 1, RES_NAME_LEN,
                 f->comp_names[f->n_comp]) < 0)
    return -1;
  f->n_comp++;
  return 0;
}

/* ---- create ---------------------------------------------------------------
 */

static int create_objects(res_file *f, const res_campaign_meta *m) {
  hid_t root = f->fid;
  char created[32];
  time_t now = time(NULL);
  strftime(created, sizeof created, "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));
  if (res__created_override && res__created_override[0])
    snprintf(created, sizeof created, "%s", res__created_override);
  unsigned maj, min, rel;
  H5get_libversion(&maj, &min, &rel);
  char h5ver[32];
  snprintf(h5ver, sizeof h5ver, "%u.%u.%u", maj, min, rel);
  int32_t schema = RES_SCHEMA_VERSION;
  int n_flags = m->n_flags > RES_MAX_FLAGS ? RES_MAX_FLAGS : m->n_flags;
  if (write_str_attr(root, "kind", RES_KIND) < 0 ||
      write_num_attr(root, "schema_version", H5T_NATIVE_INT32, &schema) < 0 ||
      write_str_attr(root, "created", created) < 0 ||
      write_str_attr(root, "config", m->config) < 0 ||
      write_str_attr(root, "reward_script", m->reward_script) < 0 ||
      write_str_attr(root, "reward_sha256", m->reward_sha256) < 0 ||
      write_str_attr(root, "device", m->device) < 0 ||
      write_str_attr(root, "backend", m->backend) < 0 ||
      write_str_attr(root, "kernlab_version", m->kernlab_version) < 0 ||
      write_str_attr(root, "hdf5_version", h5ver) < 0 ||
      write_str_attr(root, "nvrtc_version", m->nvrtc_version) < 0 ||
      write_str_attr(root, "driver_version", m->driver_version) < 0 ||
      write_num_attr(root, "seed", H5T_NATIVE_UINT64, &m->seed) < 0 ||
      write_names_attr(root, "flag_names", m->flag_names,
                       m->flag_names ? n_flags : 0) < 0 ||
      (m->run_id && write_str_attr(root, "run_id", m->run_id) < 0) ||
      (m->checkpoint_sha256 &&
       write_str_attr(root, "checkpoint_sha256", m->checkpoint_sha256) < 0))
    return -1;
  double nan = NAN;
  f->cand = create_ds(f->fid, RES_DS_CANDIDATES, f->cand_t, 1, CHUNK_CANDIDATES,
                      0, 0, NULL);
  f->src = create_ds(f->fid, RES_DS_SOURCE, H5T_NATIVE_UINT8, 1, CHUNK_SOURCE,
                     0, 0, NULL);
  f->tim = create_ds(f->fid, RES_DS_TIMINGS, H5T_NATIVE_DOUBLE, 1,
                     CHUNK_TIMINGS, 0, 0, NULL);
  f->comp = create_ds(f->fid, RES_DS_COMPONENTS, H5T_NATIVE_DOUBLE, 2,
                      CHUNK_COMP_ROWS, CHUNK_COMP_COLS, 0, &nan);
  f->cname = create_ds(f->fid, RES_DS_COMPONENT_NAMES, H5T_NATIVE_UINT8, 2, 16,
                       RES_NAME_LEN, RES_NAME_LEN, NULL);
  f->steps =
      create_ds(f->fid, RES_DS_STEPS, f->step_t, 1, CHUNK_STEPS, 0, 0, NULL);
  if (f->cand < 0 || f->src < 0 || f->tim < 0 || f->comp < 0 || f->cname < 0 ||
      f->steps < 0)
    return -1;
  int n_comp = m->component_names ? m->n_components : 0;
  if (write_names_attr(f->comp, "names", m->component_names, n_comp) < 0)
    return -1;
  for (int i = 0; i < n_comp; i++)
    if (add_component_name(f, m->component_names[i]) < 0) return -1;
  return 0;
}

static res_file *create_file(const char *path, const res_campaign_meta *meta,
                             int *code, char *why, size_t whylen) {
  static const res_campaign_meta empty;
  if (!meta) meta = &empty;
  char tmp[PATH_MAX + 32];
  kl_outfile_tmpname(path, tmp, sizeof tmp);
  res_file *f = new_file();
  if (!f) {
    snprintf(why, whylen, "%s: out of memory", path);
    *code = RES_EENV;
    return NULL;
  }
  hid_t fapl = swmr_fapl();
  errno = 0;
  f->fid = H5Fcreate(tmp, H5F_ACC_TRUNC, H5P_DEFAULT, fapl);
  int err = errno; /* the open(2) under HDF5's file driver, when it failed */
  H5Pclose(fapl);
  if (f->fid < 0) {
    char what[4200];
    snprintf(what, sizeof what, "%s: cannot create %s%s%s", path, tmp,
             err ? ": " : "", err ? strerror(err) : "");
    *code = fail(why, whylen, what);
    free_file(f);
    unlink(tmp); /* HDF5 may have made it before it failed (a full disk) */
    return NULL;
  }
  /* Every object exists before SWMR starts: the writer cannot add any. */
  if (create_objects(f, meta) < 0 || H5Fstart_swmr_write(f->fid) < 0) {
    char what[4200];
    snprintf(what, sizeof what, "%s: cannot create the schema in %s", path,
             tmp);
    *code = fail(why, whylen, what);
    free_file(f);
    unlink(tmp);
    return NULL;
  }
  /* locked before it has its name: a second writer that finds it at path
   * finds it locked */
  if (res__take_lock(tmp, &f->lock_fd, why, whylen) != RES_OK) {
    *code = RES_EENV;
    free_file(f);
    unlink(tmp);
    return NULL;
  }
  /* link, not rename: a file another process put at path meanwhile (a
   * second run on the same output) is not replaced, and not joined */
  if (link(tmp, path) < 0) {
    int err = errno;
    if (err == EEXIST)
      snprintf(why, whylen,
               "%s: appeared while this file was being created (another "
               "kernlab writing the same output?); not replaced",
               path);
    else
      snprintf(why, whylen, "%s: cannot link %s into place: %s", path, tmp,
               strerror(err));
    *code = err == EEXIST ? RES_EINPUT : RES_EENV;
    free_file(f);
    unlink(tmp);
    return NULL;
  }
  unlink(tmp);
  snprintf(f->path, sizeof f->path, "%s", path);
  return f;
}

/* ---- reopen ---------------------------------------------------------------
 */

/* A dataset of an existing file that does not read: damage (exit 2), not
 * an environment problem. */
static int unreadable(const char *path, char *why, size_t whylen,
                      const char *ds) {
  char what[PATH_MAX + 128];
  snprintf(what, sizeof what,
           "%s: truncated or damaged results file: cannot read %s", path, ds);
  res__h5_error(why, whylen, what);
  return RES_EINPUT;
}

/* Rebuilds the writer's state from an existing file: valid record count,
 * heap ends, component names, the dedup table. */
static int load_state(res_file *f, const char *path, char *why, size_t whylen) {
  static const char *const names[] = {RES_DS_CANDIDATES,      RES_DS_SOURCE,
                                      RES_DS_TIMINGS,         RES_DS_COMPONENTS,
                                      RES_DS_COMPONENT_NAMES, RES_DS_STEPS};
  hid_t *ids[] = {&f->cand, &f->src, &f->tim, &f->comp, &f->cname, &f->steps};
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
    /* hard links only: an external link took this writer's appends into
     * another file (res__validate said so first) */
    *ids[i] = res__open_ds(f->fid, names[i]);
    if (*ids[i] < 0) {
      const char *problem = res__link_problem(f->fid, names[i]);
      snprintf(why, whylen,
               "%s: truncated or damaged results file: /%s of the results "
               "schema is %s",
               path, names[i], problem ? problem : "unreadable");
      return RES_EINPUT;
    }
  }
  int32_t schema = 0;
  hid_t root = H5Gopen2(f->fid, "/", H5P_DEFAULT);
  hid_t at = root >= 0 ? H5Aopen(root, "schema_version", H5P_DEFAULT) : -1;
  hid_t asp = at >= 0 ? H5Aget_space(at) : -1;
  int one = asp >= 0 && H5Sget_simple_extent_npoints(asp) == 1;
  if (asp >= 0) H5Sclose(asp);
  if (!one || H5Aread(at, H5T_NATIVE_INT32, &schema) < 0) schema = 0;
  if (at >= 0) H5Aclose(at);
  if (root >= 0) H5Gclose(root);
  if (schema < 1 || schema > RES_SCHEMA_VERSION) {
    snprintf(why, whylen, "%s: cannot read a supported schema_version", path);
    return RES_EINPUT;
  }
  /* Appends keep the file's own schema: a schema-1 file gets no `error`
   * member (HDF5 drops it on write) and schema-1 crcs. */
  f->schema = schema;
  int64_t n = res__stored_rows(f->cand);
  /* appends go after the declared extents; records are checked against
   * what the heaps hold, as a reader checks them ... */
  int64_t src_held = res__stored_rows(f->src),
          tim_held = res__stored_rows(f->tim);
  /* ... but not past what they hold: an extent edited to 2^40 put each
   * new record's bytes where no reader looks, so the record was dropped
   * as a crash's and the next append overwrote it (the hostile-HDF5
   * review). Every complete record lies within the held rows. */
  f->src_end = res__extent(f->src, 0);
  f->tim_end = res__extent(f->tim, 0);
  if (src_held >= 0 && f->src_end > src_held) f->src_end = src_held;
  if (tim_held >= 0 && f->tim_end > tim_held) f->tim_end = tim_held;
  res_candidate *recs = NULL;
  char what[256];
  int lrc = n < 0 ? -1
                  : res__load_candidates(f->cand, f->cand_t, n, src_held,
                                         tim_held, f->schema, &recs, &f->n_cand,
                                         what, sizeof what);
  if (lrc == -2) { /* the host's trouble, not the file's */
    snprintf(why, whylen, "%s: out of memory for its %lld candidate records",
             path, (long long)n);
    return RES_EENV;
  }
  if (lrc) {
    char field[160];
    if (n >= 0 &&
        res__field_problem(f->cand, f->cand_t, schema, field, sizeof field)) {
      snprintf(why, whylen,
               "%s: damaged results file: /candidates cannot be read: %s", path,
               field);
      return RES_EINPUT;
    }
    return unreadable(path, why, whylen, "/candidates");
  }
  if (what[0]) {
    free(recs);
    snprintf(why, whylen,
             "%s: %s; appending would overwrite them: " RES_DAMAGE_HINT, path,
             what);
    return RES_EINPUT;
  }
  for (int64_t i = 0; i < f->n_cand; i++)
    if (recs[i].src_len)
      dedup_add(f, recs[i].src_sha256, recs[i].src_off, recs[i].src_len, 0);
  free(recs);
  int64_t k = res__stored_rows(f->cname);
  if (k > 0) {
    f->comp_names = malloc((size_t)k * RES_NAME_LEN);
    if (!f->comp_names) {
      snprintf(why, whylen, "%s: out of memory for %lld component names", path,
               (long long)k);
      return RES_EENV;
    }
    if (res__read_rows(f->cname, H5T_NATIVE_UINT8, 0, k, RES_NAME_LEN,
                       f->comp_names))
      return unreadable(path, why, whylen, "/reward_component_names");
    for (int64_t j = 0; j < k; j++)
      f->comp_names[j][RES_NAME_LEN - 1] = 0;
    f->n_comp = (int)k;
  }
  /* A /steps lacking a field of the schema is refused by name: its
   * records read with the field zeroed and fail their crcs, and appends
   * would drop the field */
  char field[160];
  if (res__field_problem(f->steps, f->step_t, schema, field, sizeof field)) {
    snprintf(why, whylen, "%s: damaged results file: /steps cannot be read: %s",
             path, field);
    return RES_EINPUT;
  }
  int64_t ns = res__stored_rows(f->steps);
  res_step *steps = NULL;
  int step_rc = ns < 0 ? -1
                       : res__load_steps(f->steps, f->step_t, ns, &steps,
                                         &f->n_steps, what, sizeof what);
  free(steps); /* only their count is needed */
  if (step_rc == -2) {
    snprintf(why, whylen, "%s: out of memory for its %lld step records", path,
             (long long)ns);
    return RES_EENV;
  }
  if (step_rc) return unreadable(path, why, whylen, "/steps");
  if (what[0]) {
    snprintf(why, whylen,
             "%s: %s; appending would overwrite them: " RES_DAMAGE_HINT, path,
             what);
    return RES_EINPUT;
  }
  /* last, so that what a reader would say comes first */
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
    /* appends extend the first dimension of chunked datasets; a copy
     * rewritten contiguous (h5py's default) reads, but an append to it
     * failed only after the candidate was evaluated (exit 3) */
    hid_t dcpl = H5Dget_create_plist(*ids[i]), sp = H5Dget_space(*ids[i]);
    hsize_t dims[2] = {0, 0}, maxd[2] = {0, 0};
    int grows = dcpl >= 0 && sp >= 0 && H5Pget_layout(dcpl) == H5D_CHUNKED &&
                H5Sget_simple_extent_ndims(sp) >= 1 &&
                H5Sget_simple_extent_ndims(sp) <= 2 &&
                H5Sget_simple_extent_dims(sp, dims, maxd) >= 1 &&
                maxd[0] == H5S_UNLIMITED;
    if (dcpl >= 0) H5Pclose(dcpl);
    if (sp >= 0) H5Sclose(sp);
    if (!grows) {
      snprintf(why, whylen,
               "%s: /%s cannot grow (contiguous storage or a fixed extent): "
               "kernlab appends only to datasets stored in chunks with an "
               "unlimited first dimension, as it makes them",
               path, names[i]);
      return RES_EINPUT;
    }
  }
  return RES_OK;
}

/* held: the lock on path's file when the caller has it already (after a
 * rebuild, which locks its copy before renaming it into place), else -1. */
static res_file *reopen_file(const char *path, int rebuild_ok, int held,
                             int *code, char *why, size_t whylen) {
  res_file *f = new_file();
  if (!f) {
    if (held >= 0) close(held);
    snprintf(why, whylen, "%s: out of memory", path);
    *code = RES_EENV;
    return NULL;
  }
  f->lock_fd = held;
  snprintf(f->path, sizeof f->path, "%s", path);
  if ((*code = res__check_signature(path, why, whylen)) != RES_OK ||
      (held < 0 &&
       (*code = res__take_lock(path, &f->lock_fd, why, whylen)) != RES_OK)) {
    free_file(f);
    return NULL;
  }
  hid_t fapl = swmr_fapl();
  f->fid = H5Fopen(path, H5F_ACC_RDWR | H5F_ACC_SWMR_WRITE, fapl);
  H5Pclose(fapl);
  if (f->fid < 0 && rebuild_ok) {
    /* We hold the writer lock, so a file that will not open for writing
     * but reads is a killed writer's: rebuild it (results/recover.c), then
     * open the clean copy. */
    int lock = -1;
    int rc = res__rebuild(path, &lock, why, whylen);
    free_file(f); /* the lock was on the replaced file */
    if (rc != RES_OK) {
      *code = rc;
      return NULL;
    }
    return reopen_file(path, 0, lock, code, why, whylen);
  }
  if (f->fid < 0) {
    char what[4200];
    snprintf(what, sizeof what, "%s: cannot open for appending", path);
    res__h5_error(why, whylen, what);
    *code = RES_EINPUT;
    free_file(f);
    return NULL;
  }
  if ((*code = res__validate(f->fid, path, why, whylen)) != RES_OK ||
      (*code = load_state(f, path, why, whylen)) != RES_OK) {
    free_file(f);
    return NULL;
  }
  return f;
}

res_file *res_open_append(const char *path, const res_campaign_meta *meta,
                          int *code, char *why, size_t whylen) {
  int dummy;
  if (!code) code = &dummy;
  *code = RES_OK;
  res__hdf5_setup();
  /* A symbolic link is followed: a rebuild or a creation renames a new
   * file into place, which at the link's own path would replace the link
   * and leave its target behind (the results split in two). */
  struct stat st;
  char real[PATH_MAX];
  if (lstat(path, &st) == 0 && S_ISLNK(st.st_mode)) {
    if (!realpath(path, real)) {
      snprintf(why, whylen,
               "%s: a symbolic link whose target cannot be resolved (%s); "
               "name the results file itself",
               path, strerror(errno));
      *code = RES_EINPUT;
      return NULL;
    }
    path = real;
  }
  if (stat(path, &st) == 0) return reopen_file(path, 1, -1, code, why, whylen);
  return create_file(path, meta, code, why, whylen);
}

res_file *res_create(const char *path, const res_campaign_meta *meta, int *code,
                     char *why, size_t whylen) {
  int dummy;
  if (!code) code = &dummy;
  *code = RES_OK;
  res__hdf5_setup();
  struct stat st;
  if (lstat(path, &st) == 0) {
    snprintf(why, whylen, "%s already exists; not replaced", path);
    *code = RES_EINPUT;
    return NULL;
  }
  return create_file(path, meta, code, why, whylen);
}

/* ---- append ---------------------------------------------------------------
 */

/* Strings are NUL-padded to their full width so the crc (and the bytes a
 * reader sees) do not depend on what the caller left after the NUL. */
#define NORMALISE_I64(n)
#define NORMALISE_I32(n)
#define NORMALISE_U64(n)
#define NORMALISE_U32(n)
#define NORMALISE_F64(n)
#define NORMALISE_SHA(n)
#define NORMALISE_BOOL(n) rec.n = rec.n ? 1 : 0;
#define NORMALISE_STR(n)                                                       \
  {                                                                            \
    char tmp_[sizeof rec.n];                                                   \
    memcpy(tmp_, rec.n, sizeof tmp_);                                          \
    tmp_[sizeof tmp_ - 1] = 0;                                                 \
    res_strset(rec.n, sizeof rec.n, tmp_);                                     \
  }
#define NORMALISE_FIELD(name, kind) NORMALISE_##kind(name)

static int has_column(const res_file *f, const char *name) {
  for (int j = 0; j < f->n_comp; j++)
    if (!strncmp(f->comp_names[j], name, RES_NAME_LEN - 1)) return 1;
  return 0;
}

static int column_of(res_file *f, const char *name) {
  for (int j = 0; j < f->n_comp; j++)
    if (!strncmp(f->comp_names[j], name, RES_NAME_LEN - 1)) return j;
  if (add_component_name(f, name) < 0) return -1;
  return f->n_comp - 1;
}

int res_append_candidate(res_file *f, const res_candidate *c,
                         const char *source, size_t source_len,
                         const double *samples, int n_samples,
                         const char *const *comp_names,
                         const double *comp_values, int n_comp, int64_t *id,
                         char *why, size_t whylen) {
  if (still_there(f, why, whylen) != RES_OK) return RES_EENV;
  res_candidate rec = *c;
  RES_CANDIDATE_FIELDS(NORMALISE_FIELD)
  rec.id = f->n_cand;
  if (source_len > UINT32_MAX) {
    snprintf(why, whylen, "candidate source of %zu bytes is too large",
             source_len);
    return RES_EINPUT;
  }
  /* Refused before anything is written: a name past the cap (new names
   * are counted as if all were distinct, which errs only near the cap). */
  if (n_comp > RES_MAX_COMPONENT_NAMES) {
    snprintf(why, whylen, "%d reward components; at most %d", n_comp,
             RES_MAX_COMPONENT_NAMES);
    return RES_EINPUT;
  }
  /* past what a reader accepts (a source the lab rejected as oversize, a
   * policy's runaway sample): kept cut, so the record still reads */
  if (source_len > RES_MAX_SOURCE_BYTES) source_len = RES_MAX_SOURCE_BYTES;
  if (n_samples > RES_MAX_SAMPLES) n_samples = RES_MAX_SAMPLES;
  int fresh = 0;
  for (int i = 0; i < n_comp; i++)
    if (!has_column(f, comp_names[i]) &&
        f->n_comp + ++fresh > RES_MAX_COMPONENT_NAMES) {
      char shown[RES_NAME_LEN];
      res_strset(shown, sizeof shown, comp_names[i]);
      snprintf(why, whylen,
               "reward component '%s' would be name %d; a results file takes "
               "at most %d distinct names (does the formula make a new name "
               "per candidate?)",
               shown, f->n_comp + fresh, RES_MAX_COMPONENT_NAMES);
      return RES_EINPUT;
    }
  /* 1. source bytes, once per distinct hash */
  sha256_raw(source ? source : "", source_len, rec.src_sha256);
  rec.src_len = (uint32_t)source_len;
  dedup_entry *d = source_len ? dedup_find(f, rec.src_sha256) : NULL;
  if (d && !d->verified && reuse_ok(f, d, source, source_len) < 0) {
    /* the bytes there are not this source (an edited record): a record
     * pointing at them would not read; the source is written anew and
     * later duplicates share the new copy */
    d->used = 2;
    d = NULL;
  }
  if (d) {
    rec.src_off = d->off;
  } else {
    rec.src_off = (uint64_t)f->src_end;
    if (source_len) {
      if (write_rows(f->src, H5T_NATIVE_UINT8, f->src_end, (int64_t)source_len,
                     0, source) < 0)
        return fail(why, whylen, "cannot append to /source_bytes");
      f->src_end += (int64_t)source_len;
      dedup_entry *stale = dedup_find(f, rec.src_sha256);
      if (stale) { /* its bytes failed reuse_ok: point it at the new ones */
        stale->off = rec.src_off, stale->len = rec.src_len;
        stale->verified = 1, stale->used = 1;
      } else {
        dedup_add(f, rec.src_sha256, rec.src_off, rec.src_len, 1);
      }
    }
  }
  /* 2. raw timing samples */
  rec.timing_off = (uint64_t)f->tim_end;
  rec.timing_count = n_samples > 0 ? (uint32_t)n_samples : 0;
  if (n_samples > 0) {
    if (write_rows(f->tim, H5T_NATIVE_DOUBLE, f->tim_end, n_samples, 0,
                   samples) < 0)
      return fail(why, whylen, "cannot append to /timings");
    f->tim_end += n_samples;
  }
  /* 3. reward components: the whole row, NaN where this candidate has none
   * (it may overwrite a row a killed writer left half-done). */
  int cols[RES_MAX_COMPONENT_NAMES];
  for (int i = 0; i < n_comp; i++)
    if ((cols[i] = column_of(f, comp_names[i])) < 0)
      return fail(why, whylen, "cannot add a reward component name");
  if (f->n_comp > 0) {
    double *row = malloc((size_t)f->n_comp * sizeof *row);
    if (!row) {
      snprintf(why, whylen, "out of memory");
      return RES_EENV;
    }
    for (int j = 0; j < f->n_comp; j++)
      row[j] = NAN;
    for (int i = 0; i < n_comp; i++)
      row[cols[i]] = comp_values[i];
    int e = write_rows(f->comp, H5T_NATIVE_DOUBLE, rec.id, 1, f->n_comp, row);
    free(row);
    if (e < 0) return fail(why, whylen, "cannot append to /reward_components");
  }
  /* 4. Flush the payload before the record exists: SWMR keeps each
   * dataset coherent but does not order flushes across datasets, so without
   * this the record (and its crc) could reach the file before the /timings
   * extent that covers its samples. */
  if (!f->noflush && H5Fflush(f->fid, H5F_SCOPE_LOCAL) < 0)
    return fail(why, whylen, "cannot flush the results file");
  /* 5. the record, crc last; then one flush makes it durable against a
   * kill of this process. */
  rec.crc = res__candidate_crc(&rec, f->schema);
  if (write_rows(f->cand, f->cand_t, rec.id, 1, 0, &rec) < 0)
    return fail(why, whylen, "cannot append to /candidates");
  if (!f->noflush && H5Fflush(f->fid, H5F_SCOPE_LOCAL) < 0)
    return fail(why, whylen, "cannot flush the results file");
  f->n_cand++;
  if (id) *id = rec.id;
  return RES_OK;
}

int res_append_step(res_file *f, const res_step *s, char *why, size_t whylen) {
  if (still_there(f, why, whylen) != RES_OK) return RES_EENV;
  res_step rec = *s;
  rec.crc = res_step_crc(&rec);
  if (write_rows(f->steps, f->step_t, f->n_steps, 1, 0, &rec) < 0)
    return fail(why, whylen, "cannot append to /steps");
  if (!f->noflush && H5Fflush(f->fid, H5F_SCOPE_LOCAL) < 0)
    return fail(why, whylen, "cannot flush the results file");
  f->n_steps++;
  return RES_OK;
}

void res__set_noflush(res_file *f, int on) {
  f->noflush = on;
}

int64_t res_file_count(const res_file *f) {
  return f ? f->n_cand : 0;
}

int64_t res_file_step_count(const res_file *f) {
  return f ? f->n_steps : 0;
}

int res_close(res_file *f, char *why, size_t whylen) {
  if (!f) return RES_OK;
  int rc = still_there(f, why, whylen);
  if (H5Fflush(f->fid, H5F_SCOPE_LOCAL) < 0 && rc == RES_OK)
    rc = fail(why, whylen, "cannot flush the results file");
  hid_t fid = f->fid;
  f->fid = -1;
  /* free_file closes the datasets first, so the file really closes here. */
  hid_t *ids[] = {&f->cand, &f->src, &f->tim, &f->comp, &f->cname, &f->steps};
  for (size_t i = 0; i < sizeof ids / sizeof ids[0]; i++)
    if (*ids[i] > 0) H5Dclose(*ids[i]), *ids[i] = -1;
  if (H5Fclose(fid) < 0 && rc == RES_OK)
    rc = fail(why, whylen, "cannot close the results file");
  free_file(f);
  return rc;
}
