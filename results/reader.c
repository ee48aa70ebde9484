/*
 * results/reader.c — opens a results file read-only and loads its records
 * for the inspection commands: every valid candidate, the reward component
 * matrix, the steps, the flag and component names. Sources and timing
 * samples are read on demand.
 *
 * Opening is SWMR read first (a file being written, or left by a killed
 * writer, still carries the "open for write" mark and only opens this way),
 * then plain read-only (for files that are not in the latest format). The
 * reader holds everything small in memory: a campaign of 100k candidates
 * is ~60 MB of records, which is fine for a command-line tool.
 */
#include "results/internal.h"

#include "kernels/kernels.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

typedef struct attr_cache {
  char name[64];
  char *value;
} attr_cache;

struct res_reader {
  hid_t fid, src, tim;
  char path[4096];
  res_candidate *recs;
  int64_t n;
  char damage[256]; /* res__load_candidates' phrase, "" when none */
  res_step *steps;
  int64_t n_steps;
  double *comp;      /* (rows that hold a value, k) */
  int64_t *comp_row; /* (comp_rows): candidate i's row of comp, or -1 */
  int64_t comp_rows; /* candidates 0.. the matrix has rows for */
  int k;
  char (*comp_names)[RES_NAME_LEN];
  char (*flag_names)[RES_NAME_LEN];
  int n_flags;
  int schema;
  uint64_t seed;
  attr_cache attrs[32];
  int n_attrs;
};

/* Reads a string attribute of the root (fixed or variable length) into a
 * malloc'd string; NULL when absent or not a string. */
/* One value, not an array: H5Aread writes every element of the attribute
 * into a buffer sized for one (an array written by h5py overran it). */
static int one_value(hid_t a) {
  hid_t sp = H5Aget_space(a);
  int one = sp >= 0 && H5Sget_simple_extent_npoints(sp) == 1;
  if (sp >= 0) H5Sclose(sp);
  return one;
}

static char *read_str_attr(hid_t fid, const char *name) {
  if (H5Aexists(fid, name) <= 0) return NULL;
  hid_t a = H5Aopen(fid, name, H5P_DEFAULT);
  if (a < 0) return NULL;
  hid_t t = H5Aget_type(a);
  char *out = NULL;
  if (H5Tget_class(t) == H5T_STRING && one_value(a)) {
    if (H5Tis_variable_str(t) > 0) {
      char *v = NULL;
      hid_t mt = H5Tcopy(H5T_C_S1);
      H5Tset_size(mt, H5T_VARIABLE);
      /* HDF5 converts no string between character sets, and h5py writes
       * str attributes as variable-length UTF-8: read in the file's */
      H5Tset_cset(mt, H5Tget_cset(t));
      if (H5Aread(a, mt, &v) >= 0 && v) {
        out = strdup(v);
        H5free_memory(v);
      }
      H5Tclose(mt);
    } else {
      size_t size = H5Tget_size(t);
      out = calloc(1, size + 1);
      if (out && H5Aread(a, t, out) < 0) {
        free(out);
        out = NULL;
      }
    }
  }
  H5Tclose(t);
  H5Aclose(a);
  return out;
}

static int read_int_attr(hid_t fid, const char *name, hid_t mt, void *v) {
  if (H5Aexists(fid, name) <= 0) return -1;
  hid_t a = H5Aopen(fid, name, H5P_DEFAULT);
  if (a < 0) return -1;
  hid_t t = H5Aget_type(a);
  int ok = t >= 0 && H5Tget_class(t) == H5T_INTEGER && one_value(a);
  if (t >= 0) H5Tclose(t);
  herr_t e = ok ? H5Aread(a, mt, v) : -1;
  H5Aclose(a);
  return e < 0 ? -1 : 0;
}

/* Each dataset of the schema has its rank and kind of element; a file
 * edited otherwise is damaged, said before anything reads it. */
static const char *bad_shape(hid_t fid) {
  static const struct {
    const char *name;
    int rank;
    H5T_class_t cls;
  } want[] = {{RES_DS_CANDIDATES, 1, H5T_COMPOUND},
              {RES_DS_SOURCE, 1, H5T_INTEGER},
              {RES_DS_TIMINGS, 1, H5T_FLOAT},
              {RES_DS_COMPONENTS, 2, H5T_FLOAT},
              {RES_DS_COMPONENT_NAMES, 2, H5T_INTEGER},
              {RES_DS_STEPS, 1, H5T_COMPOUND}};
  for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
    hid_t ds = res__open_ds(fid, want[i].name);
    if (ds < 0) continue; /* missing: load() says so (or /steps' rule) */
    hid_t sp = H5Dget_space(ds), t = H5Dget_type(ds);
    int ok = sp >= 0 && t >= 0 &&
             H5Sget_simple_extent_ndims(sp) == want[i].rank &&
             H5Tget_class(t) == want[i].cls;
    if (ok && !strcmp(want[i].name, RES_DS_COMPONENT_NAMES)) {
      hsize_t dims[2] = {0, 0};
      H5Sget_simple_extent_dims(sp, dims, NULL);
      ok = dims[1] == RES_NAME_LEN;
    }
    if (sp >= 0) H5Sclose(sp);
    if (t >= 0) H5Tclose(t);
    H5Dclose(ds);
    if (!ok) return want[i].name;
  }
  return NULL;
}

/* What is wrong with the root's schema_version attribute, as a phrase
 * (into out), or "" when it holds one integer; the value in *v. */
static void schema_problem(hid_t fid, int64_t *v, char *out, size_t n) {
  out[0] = 0;
  *v = 0;
  htri_t there = H5Aexists(fid, "schema_version");
  if (there <= 0) {
    snprintf(out, n, "it has no schema_version attribute");
    return;
  }
  hid_t a = H5Aopen(fid, "schema_version", H5P_DEFAULT);
  hid_t t = a >= 0 ? H5Aget_type(a) : -1;
  if (t < 0 || H5Tget_class(t) != H5T_INTEGER || !one_value(a)) {
    snprintf(out, n, "its schema_version attribute is not one integer");
  } else if (H5Tget_sign(t) == H5T_SGN_NONE) {
    uint64_t u = 0;
    if (H5Aread(a, H5T_NATIVE_UINT64, &u) < 0)
      snprintf(out, n, "its schema_version attribute does not read");
    *v = u > INT64_MAX ? INT64_MAX : (int64_t)u;
  } else if (H5Aread(a, H5T_NATIVE_INT64, v) < 0) {
    snprintf(out, n, "its schema_version attribute does not read");
  }
  if (t >= 0) H5Tclose(t);
  if (a >= 0) H5Aclose(a);
}

static int load_names(hid_t loc, const char *attr, char (**out)[RES_NAME_LEN],
                      int *n, int64_t *count);

int res__validate(hid_t fid, const char *path, char *why, size_t whylen) {
  char *kind = read_str_attr(fid, "kind");
  int ok = kind && !strcmp(kind, RES_KIND);
  free(kind);
  /* H5Aexists < 0: the root's header did not read, which is damage, not
   * another program's file */
  if (H5Aexists(fid, "kind") < 0 || H5Aexists(fid, "schema_version") < 0) {
    snprintf(why, whylen,
             "%s: truncated or damaged results file: the root group's "
             "attributes (kind, schema_version) cannot be read",
             path);
    return RES_EINPUT;
  }
  if (!ok) {
    snprintf(why, whylen,
             "%s: an HDF5 file but not a kernlab results file (no kind = "
             "\"%s\" attribute)",
             path, RES_KIND);
    return RES_EINPUT;
  }
  int64_t schema = 0;
  char problem[96];
  schema_problem(fid, &schema, problem, sizeof problem);
  if (problem[0]) {
    snprintf(why, whylen,
             "%s: damaged results file: kind is \"%s\" but %s (versions 1 "
             "to %d are read)",
             path, RES_KIND, problem, RES_SCHEMA_VERSION);
    return RES_EINPUT;
  }
  if (schema < 1) {
    snprintf(why, whylen,
             "%s: damaged results file: schema_version %lld is not a version "
             "(they start at 1; this kernlab reads 1 to %d)",
             path, (long long)schema, RES_SCHEMA_VERSION);
    return RES_EINPUT;
  }
  if (schema > RES_SCHEMA_VERSION) {
    snprintf(why, whylen,
             "%s: results schema version %lld; this kernlab reads versions 1 "
             "to %d (a newer kernlab wrote it)",
             path, (long long)schema, RES_SCHEMA_VERSION);
    return RES_EINPUT;
  }
  int links = res__check_links(fid, path, why, whylen);
  if (links != RES_OK) return links;
  const char *ds = bad_shape(fid);
  if (ds) {
    snprintf(why, whylen,
             "%s: truncated or damaged results file: /%s has the wrong rank "
             "or element type for the results schema",
             path, ds);
    return RES_EINPUT;
  }
  /* More component names than the writer ever makes: every row holds
   * every column, so 16M names in a 1.3 MB file took 2 GB to read (the
   * hostile-HDF5 review). Here, for the reader and the writer both. */
  hid_t cname = res__open_ds(fid, RES_DS_COMPONENT_NAMES);
  int64_t k = cname >= 0 ? res__stored_rows(cname) : 0;
  if (cname >= 0) H5Dclose(cname);
  if (k > RES_MAX_COMPONENT_NAMES) {
    snprintf(why, whylen,
             "%s: damaged results file: /reward_component_names holds %lld "
             "names; at most %d",
             path, (long long)k, RES_MAX_COMPONENT_NAMES);
    return RES_EINPUT;
  }
  /* checked here, for the writer too: an append once went into a file no
   * reader could open for its flag_names (an integer array) */
  char(*names)[RES_NAME_LEN] = NULL;
  int n_names = 0;
  int64_t count = 0;
  int bad = load_names(fid, "flag_names", &names, &n_names, &count);
  free(names);
  if (bad == -2) {
    snprintf(why, whylen,
             "%s: damaged results file: the flag_names attribute holds %lld "
             "names; at most %d (one per bit of a candidate's flags)",
             path, (long long)count, RES_MAX_FLAGS);
    return RES_EINPUT;
  }
  if (bad) {
    snprintf(why, whylen,
             "%s: damaged results file: the flag_names attribute is not a "
             "list of names",
             path);
    return RES_EINPUT;
  }
  return RES_OK;
}

/* Reads the string array attribute attr of loc (fixed or variable
 * length) into *out (malloc'd, RES_NAME_LEN a name; NULL when absent or
 * empty) and *n. Returns 0, -1 when it is not a list of names, -2 when it
 * holds more than RES_MAX_FLAGS (*count_out says how many): names are flag
 * names, one per bit of a candidate's flags, and the writer stores at most
 * that many. Checked before anything is allocated: 20M one-byte names
 * took 3.8 GB as 64-byte ones (the report review). res__validate and
 * load() both read flag_names here. */
static int load_names(hid_t loc, const char *attr, char (**out)[RES_NAME_LEN],
                      int *n, int64_t *count_out) {
  *out = NULL;
  *n = 0;
  *count_out = 0;
  if (H5Aexists(loc, attr) <= 0) return 0;
  hid_t a = H5Aopen(loc, attr, H5P_DEFAULT);
  hid_t sp = H5Aget_space(a);
  hssize_t count = H5Sget_simple_extent_npoints(sp);
  if (count > RES_MAX_FLAGS) {
    *count_out = (int64_t)count;
    H5Sclose(sp);
    H5Aclose(a);
    return -2;
  }
  int rc = 0;
  hid_t ft = H5Aget_type(a);
  int is_str = ft >= 0 && H5Tget_class(ft) == H5T_STRING;
  int vlen = is_str && H5Tis_variable_str(ft) > 0;
  if (H5Sget_simple_extent_type(sp) == H5S_SIMPLE && count > 0 && !is_str) {
    rc = -1; /* names are strings */
  } else if (H5Sget_simple_extent_type(sp) == H5S_SIMPLE && count > 0 && vlen) {
    /* variable-length strings, as h5py writes a list of str: each is
     * copied (cut to the name length) */
    char **v = calloc((size_t)count, sizeof *v);
    hid_t mt = H5Tcopy(H5T_C_S1);
    H5Tset_size(mt, H5T_VARIABLE);
    H5Tset_cset(mt, H5Tget_cset(ft));
    *out = calloc((size_t)count, RES_NAME_LEN);
    if (!v || !*out || H5Aread(a, mt, v) < 0) {
      rc = -1;
    } else {
      for (hssize_t i = 0; i < count; i++) {
        snprintf((*out)[i], RES_NAME_LEN, "%s", v[i] ? v[i] : "");
        if (v[i]) H5free_memory(v[i]);
      }
      *n = (int)count;
    }
    free(v);
    H5Tclose(mt);
  } else if (H5Sget_simple_extent_type(sp) == H5S_SIMPLE && count > 0) {
    hid_t mt = H5Tcopy(H5T_C_S1);
    H5Tset_size(mt, RES_NAME_LEN);
    H5Tset_strpad(mt, H5T_STR_NULLTERM);
    *out = calloc((size_t)count, RES_NAME_LEN);
    if (!*out || H5Aread(a, mt, *out) < 0)
      rc = -1;
    else
      *n = (int)count;
    H5Tclose(mt);
  }
  if (ft >= 0) H5Tclose(ft);
  H5Sclose(sp);
  H5Aclose(a);
  return rc;
}

void res_reader_close(res_reader *r) {
  if (!r) return;
  if (r->src > 0) H5Dclose(r->src);
  if (r->tim > 0) H5Dclose(r->tim);
  if (r->fid > 0) H5Fclose(r->fid);
  free(r->recs);
  free(r->steps);
  free(r->comp);
  free(r->comp_row);
  free(r->comp_names);
  free(r->flag_names);
  for (int i = 0; i < r->n_attrs; i++)
    free(r->attrs[i].value);
  free(r);
}

static int damaged(res_reader *r, const char *what, char *why, size_t whylen) {
  char prefix[4400];
  snprintf(prefix, sizeof prefix, "%s: truncated or damaged results file: %s",
           r->path, what);
  res__h5_error(why, whylen, prefix);
  return RES_EINPUT;
}

/* Control characters of a one-line field become '?': C0, DEL, C1
 * (U+0080..U+009F, which terminals also obey: U+009B is CSI), and bytes
 * that are not UTF-8 (a lone 0x9b is CSI to an 8-bit terminal). */
static void no_controls(char *s) {
  while (*s) {
    unsigned char c = (unsigned char)*s;
    size_t n = c < 0x80 ? 1 : res_utf8_char(s, strnlen(s, 4));
    int c1 = n == 2 && c == 0xC2 && (unsigned char)s[1] < 0xA0;
    if (!n || c1 || c < 0x20 || c == 0x7f) {
      for (size_t i = 0; i < (n ? n : 1); i++)
        s[i] = '?';
      n = n ? n : 1;
    }
    s += n;
  }
}

/* The name of the first dataset of the schema (/steps aside) that does
 * not open, with what is wrong with it, into out. */
static void missing_phrase(res_reader *r, hid_t cand, hid_t comp, hid_t cname,
                           char *out, size_t n) {
  const char *name = cand < 0     ? RES_DS_CANDIDATES
                     : comp < 0   ? RES_DS_COMPONENTS
                     : cname < 0  ? RES_DS_COMPONENT_NAMES
                     : r->src < 0 ? RES_DS_SOURCE
                                  : RES_DS_TIMINGS;
  const char *problem = res__link_problem(r->fid, name);
  snprintf(out, n, "/%s of the results schema is %s", name,
           problem ? problem : "unreadable");
}

/* Rows of /reward_components read at a time: at most 256 columns (the
 * names' cap), so 2 MB of scratch. */
#define COMP_BATCH 1024

/* Whether cell v holds no value: NaN (what the writer stores where a
 * candidate lacks a component, and its fill value), or the dataset's fill
 * value, which is what cells of chunks never written read as (0 for a
 * matrix h5py made): HDF5 itself does not tell those from written ones. */
static int comp_empty(double v, const double *fill) {
  return isnan(v) || (fill && !memcmp(&v, fill, sizeof v));
}

/* Reads /reward_components (comp) for candidates 0..r->n - 1 into r->comp,
 * keeping only the rows that hold a value (r->comp_row[i]: candidate i's
 * row there, or -1). The file's extent says nothing of what it holds: one
 * declared (1M, 256) with no chunk written took 4.8 GB, half of it a
 * second full copy (the report review). The rows' count by stored bytes
 * (res__stored_rows) does not serve here: the matrix widens as names come,
 * so a row's early columns fill fewer bytes than its width, and rows with
 * no value may come before rows with one. What is kept is bounded by the
 * rows that hold values; what is read is one batch at a time. The matrix
 * may be narrower than the name list (a kill between adding a name and
 * widening the matrix) or wider (an edit): the columns it has of the
 * first k are read, the rest are NaN. Returns 0, -1 when a read fails, -2
 * out of memory. */
static int load_components(res_reader *r, hid_t comp) {
  int64_t rows = res__extent(comp, 0), cols = res__extent(comp, 1);
  if (rows < 0 || cols < 0) return -1;
  if (rows > r->n) rows = r->n;
  if (cols > r->k) cols = r->k;
  /* nothing written: no row holds a value, and nothing need be read */
  if (rows == 0 || cols == 0 || H5Dget_storage_size(comp) == 0) return 0;
  double fill_value = 0, *fill = NULL;
  hid_t dcpl = H5Dget_create_plist(comp);
  H5D_fill_value_t defined = H5D_FILL_VALUE_UNDEFINED;
  if (dcpl >= 0 && H5Pfill_value_defined(dcpl, &defined) >= 0 &&
      defined != H5D_FILL_VALUE_UNDEFINED &&
      H5Pget_fill_value(dcpl, H5T_NATIVE_DOUBLE, &fill_value) >= 0)
    fill = &fill_value;
  if (dcpl >= 0) H5Pclose(dcpl);
  r->comp_row = malloc((size_t)rows * sizeof *r->comp_row);
  double *batch = malloc((size_t)COMP_BATCH * (size_t)cols * sizeof *batch);
  int rc = r->comp_row && batch ? 0 : -2;
  int64_t kept = 0, cap = 0;
  for (int64_t off = 0, m; !rc && off < rows; off += m) {
    m = rows - off < COMP_BATCH ? rows - off : COMP_BATCH;
    if (res__read_rows(comp, H5T_NATIVE_DOUBLE, off, m, cols, batch)) {
      rc = -1;
      break;
    }
    for (int64_t i = 0; i < m && !rc; i++) {
      const double *v = batch + i * cols; /* (cols) */
      int64_t j = 0;
      while (j < cols && comp_empty(v[j], fill))
        j++;
      r->comp_row[off + i] = -1;
      if (j == cols) continue;
      if (kept == cap) {
        cap = cap ? 2 * cap : 64;
        double *g = realloc(r->comp, (size_t)cap * (size_t)r->k * sizeof *g);
        if (!g) {
          rc = -2;
          break;
        }
        r->comp = g;
      }
      double *row = r->comp + kept * r->k; /* (k) */
      for (j = 0; j < r->k; j++)
        row[j] = j < cols && !comp_empty(v[j], fill) ? v[j] : NAN;
      r->comp_row[off + i] = kept++;
    }
  }
  free(batch);
  if (!rc) r->comp_rows = rows;
  return rc;
}

static int load(res_reader *r, char *why, size_t whylen) {
  hid_t cand = res__open_ds(r->fid, RES_DS_CANDIDATES);
  /* A kill can tear the step records' object header (seen once in the
   * crash test); the candidates are what matters, so a damaged /steps
   * costs the step records, said on stderr, and nothing else. */
  hid_t steps = res__open_ds(r->fid, RES_DS_STEPS);
  hid_t comp = res__open_ds(r->fid, RES_DS_COMPONENTS);
  hid_t cname = res__open_ds(r->fid, RES_DS_COMPONENT_NAMES);
  r->src = res__open_ds(r->fid, RES_DS_SOURCE);
  r->tim = res__open_ds(r->fid, RES_DS_TIMINGS);
  int rc = RES_OK;
  hid_t ct = res__candidate_type(), st = res__step_type();
  if (cand < 0 || comp < 0 || cname < 0 || r->src < 0 || r->tim < 0) {
    char what[160];
    missing_phrase(r, cand, comp, cname, what, sizeof what);
    rc = damaged(r, what, why, whylen);
    goto done;
  }
  int32_t schema = 0;
  read_int_attr(r->fid, "schema_version", H5T_NATIVE_INT32, &schema);
  r->schema = schema;
  int64_t n = res__stored_rows(cand);
  /* what the heaps hold, not the extents they declare (an extent can be
   * edited to gigabytes with no data: a record over it would be read as
   * gigabytes of fill values) */
  int64_t src_bytes = res__stored_rows(r->src),
          samples = res__stored_rows(r->tim);
  int lrc = n < 0 ? -1
                  : res__load_candidates(cand, ct, n, src_bytes, samples,
                                         schema, &r->recs, &r->n, r->damage,
                                         sizeof r->damage);
  if (lrc) {
    char what[200], field[160];
    if (lrc == -1 && n >= 0 &&
        res__field_problem(cand, ct, schema, field, sizeof field) < 0) {
      snprintf(why, whylen,
               "%s: damaged results file: /candidates cannot be read: %s",
               r->path, field);
      rc = RES_EINPUT;
      goto done;
    }
    snprintf(what, sizeof what, "cannot read /candidates%s",
             n < 0       ? " (its extent does not read)"
             : lrc == -2 ? " (out of memory)"
                         : "");
    rc = damaged(r, what, why, whylen);
    goto done;
  }
  /* Damage before every record leaves nothing to read: refused, so that
   * top, report and export do not exit 0 with an empty table (a warning
   * above it scrolls by, and a script sees only the exit status). */
  if (r->damage[0] && r->n == 0) {
    snprintf(why, whylen,
             "%s: damaged results file: %s; no record before it can be read. "
             "A crash leaves damage only in the last record: this file was "
             "changed after it was written",
             r->path, r->damage);
    rc = RES_EINPUT;
    goto done;
  }
  if (r->damage[0])
    fprintf(stderr,
            "kernlab: warning: %s: %s; only the %lld records before it are "
            "read. A crash leaves damage only in the last record: this file "
            "was changed after it was written\n",
            r->path, r->damage, (long long)r->n);
  /* Fixed strings may fill their field (NUL-padded, not NUL-terminated,
   * in HDF5): every reader treats them as C strings. */
  for (int64_t i = 0; i < r->n; i++) {
    res_candidate *c = &r->recs[i];
    c->task[sizeof c->task - 1] = c->label[sizeof c->label - 1] = 0;
    c->backend[sizeof c->backend - 1] = c->status[sizeof c->status - 1] = 0;
    c->reward_sha256[sizeof c->reward_sha256 - 1] = 0;
    c->error[sizeof c->error - 1] = 0;
    /* bools as the lab writes them (an edited byte of 7 counted 7 correct
     * kernels); after the crc, which covers the bytes as stored */
    c->compiled = c->compiled != 0;
    c->correct = c->correct != 0;
    /* the lab writes these as one line of text; control bytes in them
     * come from an edited file and would reach a terminal as escape
     * sequences (the label is kept exact: the tables filter it) */
    no_controls(c->task);
    no_controls(c->backend);
    no_controls(c->status);
    no_controls(c->reward_sha256);
    no_controls(c->error);
  }
  /* A /steps whose records lack a field of the schema (edited with other
   * tools) is damaged as a torn one is: it costs the step records, named,
   * and nothing else. Candidates lacking a field read with it zeroed and
   * fail their crcs; a field's name says more than "record 0 is
   * damaged". */
  int64_t ns = steps < 0 ? 0 : res__stored_rows(steps);
  char step_field[160] = "", step_damage[200] = "";
  int step_rc =
      steps < 0 || ns < 0 ? -1
      : res__field_problem(steps, st, schema, step_field, sizeof step_field) < 0
          ? -1
          : res__load_steps(steps, st, ns, &r->steps, &r->n_steps, step_damage,
                            sizeof step_damage);
  if (step_rc == -2) {
    rc = damaged(r, "out of memory for the step records", why, whylen);
    goto done;
  }
  if (step_rc) {
    char how[200];
    if (step_field[0])
      snprintf(how, sizeof how, " (%s)", step_field);
    else
      snprintf(how, sizeof how,
               ", as a writer killed mid-append can leave them");
    fprintf(stderr,
            "kernlab: warning: %s: the step records (/steps) are damaged%s; "
            "they are not read, every candidate is\n",
            r->path, how);
    r->n_steps = 0;
  }
  if (step_damage[0]) {
    if (!r->damage[0]) snprintf(r->damage, sizeof r->damage, "%s", step_damage);
    fprintf(stderr,
            "kernlab: warning: %s: %s; only the %lld step records before it "
            "are read. A crash leaves damage only in the last record: this "
            "file was changed after it was written\n",
            r->path, step_damage, (long long)r->n_steps);
  }
  int64_t k = res__stored_rows(cname);
  if (k > 0) {
    r->comp_names = malloc((size_t)k * RES_NAME_LEN);
    if (!r->comp_names || res__read_rows(cname, H5T_NATIVE_UINT8, 0, k,
                                         RES_NAME_LEN, r->comp_names)) {
      rc = damaged(r, "cannot read /reward_component_names", why, whylen);
      goto done;
    }
    for (int64_t j = 0; j < k; j++) {
      r->comp_names[j][RES_NAME_LEN - 1] = 0;
      no_controls(r->comp_names[j]);
    }
    r->k = (int)k;
  }
  int comp_rc = r->k > 0 ? load_components(r, comp) : 0;
  if (comp_rc) {
    rc = damaged(r,
                 comp_rc == -2 ? "out of memory for /reward_components"
                               : "cannot read /reward_components",
                 why, whylen);
    goto done;
  }
  int64_t n_names = 0; /* res__validate refused more than RES_MAX_FLAGS */
  if (load_names(r->fid, "flag_names", &r->flag_names, &r->n_flags, &n_names) <
      0)
    rc = damaged(r, "cannot read the flag_names attribute", why, whylen);
  for (int j = 0; j < r->n_flags; j++)
    no_controls(r->flag_names[j]);
  read_int_attr(r->fid, "seed", H5T_NATIVE_UINT64, &r->seed);
done:
  H5Tclose(ct);
  H5Tclose(st);
  if (cand >= 0) H5Dclose(cand);
  if (steps >= 0) H5Dclose(steps);
  if (comp >= 0) H5Dclose(comp);
  if (cname >= 0) H5Dclose(cname);
  return rc;
}

/* The end of file a version 2 or 3 superblock at offset 0 records (the
 * format kernlab writes), or 0 when it cannot be read. HDF5 refuses a file
 * shorter than that ("truncated file"). */
static uint64_t recorded_eof(const char *path) {
  unsigned char sb[48];
  FILE *fp = fopen(path, "rb");
  if (!fp) return 0;
  size_t got = fread(sb, 1, sizeof sb, fp);
  fclose(fp);
  /* signature (8), version, sizes of offsets and lengths, flags, then the
   * base address, the extension's address and the end of file */
  int offsets = got >= 12 ? sb[9] : 0;
  if (got < 12 || (sb[8] != 2 && sb[8] != 3) ||
      (offsets != 4 && offsets != 8) || got < 12 + 3 * (size_t)offsets)
    return 0;
  uint64_t eof = 0;
  for (int i = offsets - 1; i >= 0; i--)
    eof = eof << 8 | sb[12 + 2 * offsets + i];
  return eof;
}

/* A file whose writer's last flush failed part-way (a full disk, a
 * file-size limit) can end before the end its superblock records, and
 * HDF5 then refuses to open it, though the records written before are all
 * there. Such a file is read through a copy padded with zeros to the
 * recorded end, in TMPDIR (removed at once; HDF5 keeps it open); the
 * records are validated as always, so one that lay in the missing tail is
 * not read. Returns the file id, or -1 with *missing 0 when this is not
 * the file's problem. */
static hid_t open_padded(const char *path, hid_t fapl, uint64_t *missing) {
  *missing = 0;
  struct stat st;
  uint64_t eof = recorded_eof(path);
  if (stat(path, &st) != 0 || eof <= (uint64_t)st.st_size ||
      eof - (uint64_t)st.st_size > ((uint64_t)1 << 30))
    return -1;
  const char *dir = getenv("TMPDIR");
  char tmp[4200];
  snprintf(tmp, sizeof tmp, "%s/kernlab-padded-XXXXXX",
           dir && dir[0] ? dir : "/tmp");
  int out = mkstemp(tmp);
  if (out < 0) return -1;
  FILE *in = fopen(path, "rb");
  char buf[1 << 16];
  size_t n;
  int ok = in != NULL;
  while (ok && (n = fread(buf, 1, sizeof buf, in)) > 0)
    ok = write(out, buf, n) == (ssize_t)n;
  if (in) fclose(in);
  ok = ok && ftruncate(out, (off_t)eof) == 0;
  close(out);
  hid_t fid = ok ? H5Fopen(tmp, H5F_ACC_RDONLY | H5F_ACC_SWMR_READ, fapl) : -1;
  if (ok && fid < 0) fid = H5Fopen(tmp, H5F_ACC_RDONLY, H5P_DEFAULT);
  unlink(tmp);
  if (fid >= 0) *missing = eof - (uint64_t)st.st_size;
  return fid;
}

res_reader *res_open_read(const char *path, int *code, char *why,
                          size_t whylen) {
  int dummy;
  if (!code) code = &dummy;
  res__hdf5_setup();
  struct stat st;
  if (stat(path, &st) != 0) {
    snprintf(why, whylen, "%s: %s", path, strerror(errno));
    *code = RES_EINPUT;
    return NULL;
  }
  if (S_ISDIR(st.st_mode)) {
    snprintf(why, whylen, "%s: is a directory, expected a results file", path);
    *code = RES_EINPUT;
    return NULL;
  }
  if ((*code = res__check_signature(path, why, whylen)) != RES_OK) return NULL;
  res_reader *r = calloc(1, sizeof *r);
  if (!r) {
    snprintf(why, whylen, "%s: out of memory", path);
    *code = RES_EENV;
    return NULL;
  }
  r->fid = r->src = r->tim = -1;
  snprintf(r->path, sizeof r->path, "%s", path);
  /* SWMR reads retry a metadata read that fails its checksum or lies past
   * the end of the file, for a writer that may still be writing it, and
   * HDF5 doubles its sleep between attempts: the default 100 attempts on a
   * header a killed writer tore is a wait without end (the crash test hung
   * so). 16 attempts wait well under a millisecond in all, ample for a live
   * writer's write of one header. */
  hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
  if (fapl >= 0) H5Pset_metadata_read_attempts(fapl, RES_READ_ATTEMPTS);
  r->fid = H5Fopen(path, H5F_ACC_RDONLY | H5F_ACC_SWMR_READ,
                   fapl >= 0 ? fapl : H5P_DEFAULT);
  if (r->fid < 0) r->fid = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
  uint64_t missing = 0;
  if (r->fid < 0)
    r->fid = open_padded(path, fapl >= 0 ? fapl : H5P_DEFAULT, &missing);
  if (fapl >= 0) H5Pclose(fapl);
  if (r->fid < 0) {
    *code = damaged(r, "HDF5 cannot open it", why, whylen);
    res_reader_close(r);
    return NULL;
  }
  if ((*code = res__validate(r->fid, path, why, whylen)) != RES_OK ||
      (*code = load(r, why, whylen)) != RES_OK) {
    res_reader_close(r);
    return NULL;
  }
  if (missing && r->n == 0) { /* nothing to save: the file is just cut */
    char what[200];
    snprintf(what, sizeof what,
             "it ends %llu bytes short of the end HDF5 recorded, and no "
             "record before that reads",
             (unsigned long long)missing);
    *code = damaged(r, what, why, whylen);
    res_reader_close(r);
    return NULL;
  }
  if (missing) {
    fprintf(stderr,
            "kernlab: warning: %s: the file ends %llu bytes short of the end "
            "HDF5 recorded (its writer's last write failed: a full disk?); "
            "the %lld records before that are read (a writer continuing it "
            "rebuilds it from them)\n",
            path, (unsigned long long)missing, (long long)r->n);
  }
  return r;
}

int64_t res_count(const res_reader *r) {
  return r->n;
}

const res_candidate *res_get(const res_reader *r, int64_t id) {
  return id >= 0 && id < r->n ? &r->recs[id] : NULL;
}

const char *res_attr(const res_reader *r, const char *name) {
  res_reader *w = (res_reader *)r; /* the cache is not observable state */
  for (int i = 0; i < w->n_attrs; i++)
    if (!strcmp(w->attrs[i].name, name))
      return w->attrs[i].value ? w->attrs[i].value : "";
  if (w->n_attrs == (int)(sizeof w->attrs / sizeof w->attrs[0])) return "";
  attr_cache *a = &w->attrs[w->n_attrs++];
  snprintf(a->name, sizeof a->name, "%s", name);
  a->value = read_str_attr(w->fid, name);
  return a->value ? a->value : "";
}

int res_schema_version(const res_reader *r) {
  return r->schema;
}

uint64_t res_seed(const res_reader *r) {
  return r->seed;
}

int res_flag_count(const res_reader *r) {
  return r->n_flags;
}

const char *res_flag_name(const res_reader *r, int bit) {
  return bit >= 0 && bit < r->n_flags ? r->flag_names[bit] : NULL;
}

int res_component_count(const res_reader *r) {
  return r->k;
}

const char *res_component_name(const res_reader *r, int j) {
  return j >= 0 && j < r->k ? r->comp_names[j] : NULL;
}

const double *res_components(const res_reader *r, int64_t id) {
  if (id < 0 || id >= r->comp_rows || r->comp_row[id] < 0) return NULL;
  return r->comp + r->comp_row[id] * r->k;
}

int res_source(const res_reader *r, int64_t id, char **src, size_t *len,
               char *why, size_t whylen) {
  *src = NULL;
  *len = 0;
  const res_candidate *c = res_get(r, id);
  if (!c) {
    snprintf(why, whylen, "%s: no candidate with id %lld (ids 0 to %lld)",
             r->path, (long long)id, (long long)r->n - 1);
    return RES_EINPUT;
  }
  char *buf = malloc((size_t)c->src_len + 1);
  if (!buf) {
    snprintf(why, whylen, "out of memory");
    return RES_EENV;
  }
  if (c->src_len &&
      res__read_rows(r->src, H5T_NATIVE_UINT8, (int64_t)c->src_off,
                     (int64_t)c->src_len, 0, buf)) {
    free(buf);
    return damaged((res_reader *)r, "cannot read /source_bytes", why, whylen);
  }
  buf[c->src_len] = 0;
  kl_sha256_ctx ctx;
  uint8_t sha[32];
  kl_sha256_init(&ctx);
  kl_sha256_update(&ctx, buf, c->src_len);
  kl_sha256_final(&ctx, sha);
  if (memcmp(sha, c->src_sha256, 32)) {
    free(buf);
    snprintf(why, whylen,
             "%s: candidate %lld: source bytes do not match src_sha256",
             r->path, (long long)id);
    return RES_EINPUT;
  }
  *src = buf;
  *len = c->src_len;
  return RES_OK;
}

int res_timings(const res_reader *r, int64_t id, double **samples, int *n,
                char *why, size_t whylen) {
  *samples = NULL;
  *n = 0;
  const res_candidate *c = res_get(r, id);
  if (!c) {
    snprintf(why, whylen, "%s: no candidate with id %lld", r->path,
             (long long)id);
    return RES_EINPUT;
  }
  if (!c->timing_count) return RES_OK;
  double *buf = malloc(c->timing_count * sizeof *buf);
  if (!buf || res__read_rows(r->tim, H5T_NATIVE_DOUBLE, (int64_t)c->timing_off,
                             c->timing_count, 0, buf)) {
    free(buf);
    return damaged((res_reader *)r, "cannot read /timings", why, whylen);
  }
  *samples = buf;
  *n = (int)c->timing_count;
  return RES_OK;
}

int64_t res_step_count(const res_reader *r) {
  return r->n_steps;
}

const res_step *res_get_step(const res_reader *r, int64_t i) {
  return i >= 0 && i < r->n_steps ? &r->steps[i] : NULL;
}

const char *res__reader_damage(const res_reader *r) {
  return r->damage;
}
