/*
 * policy/checkpoint.c — the checkpoint file: a 256-byte header (magic, version,
 * the model config, the tokenizer's sha256, the training step), the
 * parameters, optionally AdamW's m and v, and a sha256 trailer over all of
 * it. The byte layout is in policy.h. Writes are atomic (temporary file,
 * fsync, rename); reads check every field and say which one is wrong and in
 * which file.
 *
 * It deliberately knows nothing of the model's code: the config and the
 * parameter count are all it needs, so a checkpoint can be checked (and its
 * parameters loaded) without building a model. Every number is written byte
 * by byte in little-endian order, so files move between machines.
 */
#include "policy/policy.h"

#include "kernels/kernels.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define TRAILER_BYTES 32
/* Files above this are checksummed before the load allocates (see
 * pl_ckpt_load). */
#define PREHASH_BYTES (256ull << 20)
#define CHUNK_FLOATS 16384 /* 64 KiB of fp32 per buffered write or read */

/* ---- little-endian encoding ---------------------------------------------- */

static void put_u32(uint8_t *p, uint32_t x) {
  for (int i = 0; i < 4; i++)
    p[i] = (uint8_t)(x >> (8 * i));
}
static void put_u64(uint8_t *p, uint64_t x) {
  for (int i = 0; i < 8; i++)
    p[i] = (uint8_t)(x >> (8 * i));
}
static void put_f32(uint8_t *p, float f) {
  uint32_t x;
  memcpy(&x, &f, 4);
  put_u32(p, x);
}
static uint32_t get_u32(const uint8_t *p) {
  uint32_t x = 0;
  for (int i = 0; i < 4; i++)
    x |= (uint32_t)p[i] << (8 * i);
  return x;
}
static uint64_t get_u64(const uint8_t *p) {
  uint64_t x = 0;
  for (int i = 0; i < 8; i++)
    x |= (uint64_t)p[i] << (8 * i);
  return x;
}
static float get_f32(const uint8_t *p) {
  uint32_t x = get_u32(p);
  float f;
  memcpy(&f, &x, 4);
  return f;
}

/* Header field offsets (policy.h has the table). */
enum {
  OFF_MAGIC = 0,
  OFF_VERSION = 4,
  OFF_HEADER_BYTES = 8,
  OFF_FLAGS = 12,
  OFF_VOCAB = 16,
  OFF_D_MODEL = 20,
  OFF_N_LAYERS = 24,
  OFF_N_HEADS = 28,
  OFF_D_FF = 32,
  OFF_MAX_SEQ = 36,
  OFF_ROPE_THETA = 40,
  OFF_NORM_EPS = 44,
  OFF_STEP = 48,
  OFF_N_PARAMS = 56,
  OFF_OPT_STEP = 64,
  OFF_TOKENIZER = 72,
  OFF_RUN_ID = 136,
  OFF_RESERVED = 144,
};

/* ---- the config ---------------------------------------------------------- */

/* Checks the config fields; names the first bad one. `where` prefixes the
 * message (the file name, or "checkpoint header"). */
static int check_config(const pl_config *c, const char *where, char *why,
                        size_t whylen) {
  struct {
    const char *name;
    int32_t v;
  } f[] = {{"vocab", c->vocab},       {"d_model", c->d_model},
           {"n_layers", c->n_layers}, {"n_heads", c->n_heads},
           {"d_ff", c->d_ff},         {"max_seq", c->max_seq}};
  for (size_t i = 0; i < sizeof f / sizeof f[0]; i++)
    if (f[i].v < 1 || f[i].v > PL_CKPT_MAX_DIM)
      return pl_fail(why, whylen, PL_EINPUT,
                     "%s: header field %s = %d, expected 1..%d", where,
                     f[i].name, (int)f[i].v, PL_CKPT_MAX_DIM);
  if (c->n_layers > PL_CKPT_MAX_LAYERS)
    return pl_fail(why, whylen, PL_EINPUT,
                   "%s: header field n_layers = %d, expected 1..%d (a step's "
                   "time grows with it: 100,000 layers of width 2 took "
                   "minutes a step)",
                   where, (int)c->n_layers, PL_CKPT_MAX_LAYERS);
  if (c->max_seq > PL_CKPT_MAX_SEQ)
    return pl_fail(why, whylen, PL_EINPUT,
                   "%s: header field max_seq = %d, expected 1..%d (the RoPE "
                   "tables and KV cache grow with it)",
                   where, (int)c->max_seq, PL_CKPT_MAX_SEQ);
  if (c->d_model % c->n_heads != 0)
    return pl_fail(why, whylen, PL_EINPUT,
                   "%s: header field n_heads = %d does not divide d_model = %d",
                   where, (int)c->n_heads, (int)c->d_model);
  if ((c->d_model / c->n_heads) % 2 != 0)
    return pl_fail(
        why, whylen, PL_EINPUT,
        "%s: header fields d_model = %d, n_heads = %d give an odd head "
        "size %d; RoPE needs an even one",
        where, (int)c->d_model, (int)c->n_heads,
        (int)(c->d_model / c->n_heads));
  if (pl_config_param_count(c) == 0)
    return pl_fail(
        why, whylen, PL_EINPUT,
        "%s: the config (vocab %d, d_model %d, n_layers %d, d_ff %d) "
        "has more than %llu parameters",
        where, (int)c->vocab, (int)c->d_model, (int)c->n_layers, (int)c->d_ff,
        (unsigned long long)PL_CKPT_MAX_PARAMS);
  return PL_OK;
}

uint64_t pl_config_param_count(const pl_config *c) {
  if (!c) return 0;
  int32_t dims[] = {c->vocab,   c->d_model, c->n_layers,
                    c->n_heads, c->d_ff,    c->max_seq};
  for (size_t i = 0; i < sizeof dims / sizeof dims[0]; i++)
    if (dims[i] < 1 || dims[i] > PL_CKPT_MAX_DIM) return 0;
  if (c->d_model % c->n_heads || (c->d_model / c->n_heads) % 2) return 0;
  /* Every factor is below 2^24, so each product below fits in 64 bits;
   * the sum is checked term by term against the cap. */
  uint64_t V = (uint64_t)c->vocab, C = (uint64_t)c->d_model;
  uint64_t L = (uint64_t)c->n_layers, F = (uint64_t)c->d_ff;
  uint64_t per_layer = 2 * C + 4 * C * C + 3 * C * F;
  if (per_layer > PL_CKPT_MAX_PARAMS || V * C > PL_CKPT_MAX_PARAMS) return 0;
  uint64_t n = V * C + L * per_layer + C; /* <= 2^32 + 2^24 * 2^32 + 2^24 */
  return n > PL_CKPT_MAX_PARAMS ? 0 : n;
}

/* Which tensor (in pl_params order) flat parameter i belongs to, and its
 * layer (-1 for wte and rms_final): for messages about a bad value. */
static const char *tensor_of(const pl_config *c, uint64_t i, int *layer) {
  uint64_t V = (uint64_t)c->vocab, C = (uint64_t)c->d_model;
  uint64_t L = (uint64_t)c->n_layers, F = (uint64_t)c->d_ff;
  struct {
    const char *name;
    uint64_t per_layer; /* 0: not stacked */
    uint64_t size;
  } t[] = {{"wte", 0, V * C}, {"rms_att", C, 0},  {"wqkv", 3 * C * C, 0},
           {"wo", C * C, 0},  {"rms_ffn", C, 0},  {"w13", 2 * F * C, 0},
           {"w2", C * F, 0},  {"rms_final", 0, C}};
  for (size_t k = 0; k < sizeof t / sizeof t[0]; k++) {
    uint64_t size = t[k].per_layer ? t[k].per_layer * L : t[k].size;
    if (i < size) {
      *layer = t[k].per_layer ? (int)(i / t[k].per_layer) : -1;
      return t[k].name;
    }
    i -= size;
  }
  *layer = -1;
  return "?";
}

static int is_hex64(const char *s) {
  for (int i = 0; i < 64; i++)
    if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
      return 0;
  return 1;
}

/* The header fields that do not depend on the file's framing. */
static int check_fields(const pl_ckpt_header *h, const char *where, char *why,
                        size_t whylen) {
  int rc = check_config(&h->config, where, why, whylen);
  if (rc) return rc;
  /* The model computes with RoPE theta 10000 and RMSNorm eps 1e-5 (model.c,
   * layers_internal.h), whatever a header says: another value would be
   * accepted, ignored, and saved again beside weights trained without it
   * (the checkpoint review). Exactly those, until the model reads them. */
  if (h->rope_theta != 10000.0f)
    return pl_fail(why, whylen, PL_EINPUT,
                   "%s: header field rope_theta = %g, expected 10000 (the "
                   "model's RoPE base)",
                   where, (double)h->rope_theta);
  if (h->norm_eps != 1e-5f)
    return pl_fail(why, whylen, PL_EINPUT,
                   "%s: header field norm_eps = %g, expected 1e-05 (the "
                   "model's RMSNorm epsilon)",
                   where, (double)h->norm_eps);
  if (strnlen(h->tokenizer_sha256, 65) != 64 || !is_hex64(h->tokenizer_sha256))
    return pl_fail(why, whylen, PL_EINPUT,
                   "%s: header field tokenizer_sha256 = \"%.64s\", expected 64 "
                   "lowercase hex characters",
                   where, h->tokenizer_sha256);
  return PL_OK;
}

/* Finds the first non-finite value (or negative, for v) of an array. */
static int check_values(const pl_config *c, const float *a, uint64_t n,
                        const char *what, int nonneg, const char *where,
                        char *why, size_t whylen) {
  for (uint64_t i = 0; i < n; i++)
    if (!isfinite(a[i]) || (nonneg && a[i] < 0.0f)) {
      int layer;
      const char *t = tensor_of(c, i, &layer);
      char lay[32] = "";
      if (layer >= 0) snprintf(lay, sizeof lay, ", layer %d", layer);
      return pl_fail(why, whylen, PL_EINPUT,
                     "%s: %s[%llu] (%s%s) is %g; expected a finite%s value",
                     where, what, (unsigned long long)i, t, lay, (double)a[i],
                     nonneg ? " non-negative" : "");
    }
  return PL_OK;
}

int pl_ckpt_values_finite(const pl_config *c, const float *params, size_t n,
                          const float *m, const float *v, const char *where,
                          char *why, size_t whylen) {
  int rc;
  if ((rc = check_values(c, params, n, "params", 0, where, why, whylen)) ||
      (m && (rc = check_values(c, m, n, "m", 0, where, why, whylen))) ||
      (v && (rc = check_values(c, v, n, "v", 1, where, why, whylen))))
    return rc;
  return PL_OK;
}

/* ---- save ---------------------------------------------------------------- */

/* Buffered, hashing writer over one FILE. */
typedef struct {
  FILE *f;
  kl_sha256_ctx sha;
  int err;
} writer;

static void w_bytes(writer *w, const void *p, size_t len) {
  if (w->err) return;
  kl_sha256_update(&w->sha, p, len);
  if (fwrite(p, 1, len, w->f) != len) w->err = errno ? errno : EIO;
}

static void w_floats(writer *w, const float *a, uint64_t n, uint8_t *buf) {
  for (uint64_t off = 0; off < n && !w->err; off += CHUNK_FLOATS) {
    size_t k = n - off < CHUNK_FLOATS ? (size_t)(n - off) : CHUNK_FLOATS;
    for (size_t j = 0; j < k; j++)
      put_f32(buf + 4 * j, a[off + j]);
    w_bytes(w, buf, 4 * k);
  }
}

static void encode_header(const pl_ckpt_header *h, uint64_t n, uint32_t flags,
                          uint8_t b[PL_CKPT_HEADER_BYTES]) {
  memset(b, 0, PL_CKPT_HEADER_BYTES);
  memcpy(b + OFF_MAGIC, PL_CKPT_MAGIC, 4);
  put_u32(b + OFF_VERSION, PL_CKPT_VERSION);
  put_u32(b + OFF_HEADER_BYTES, PL_CKPT_HEADER_BYTES);
  put_u32(b + OFF_FLAGS, flags);
  put_u32(b + OFF_VOCAB, (uint32_t)h->config.vocab);
  put_u32(b + OFF_D_MODEL, (uint32_t)h->config.d_model);
  put_u32(b + OFF_N_LAYERS, (uint32_t)h->config.n_layers);
  put_u32(b + OFF_N_HEADS, (uint32_t)h->config.n_heads);
  put_u32(b + OFF_D_FF, (uint32_t)h->config.d_ff);
  put_u32(b + OFF_MAX_SEQ, (uint32_t)h->config.max_seq);
  put_f32(b + OFF_ROPE_THETA, h->rope_theta);
  put_f32(b + OFF_NORM_EPS, h->norm_eps);
  put_u64(b + OFF_STEP, h->step);
  put_u64(b + OFF_N_PARAMS, n);
  put_u64(b + OFF_OPT_STEP, (flags & PL_CKPT_FLAG_OPTIMISER) ? h->opt_step : 0);
  memcpy(b + OFF_TOKENIZER, h->tokenizer_sha256, 64);
  put_u64(b + OFF_RUN_ID, h->run_id);
}

int pl_ckpt_save(const char *path, const pl_ckpt_header *h, const float *params,
                 size_t n, const float *m, const float *v, char *why,
                 size_t whylen) {
  if (!path || !h || !params)
    return pl_fail(why, whylen, PL_EINPUT, "checkpoint save: NULL argument");
  int rc = check_fields(h, path, why, whylen);
  if (rc) return rc;
  uint64_t want = pl_config_param_count(&h->config);
  if ((uint64_t)n != want)
    return pl_fail(why, whylen, PL_EINPUT,
                   "%s: %zu parameters given, the config has %llu", path, n,
                   (unsigned long long)want);
  if (!m != !v)
    return pl_fail(why, whylen, PL_EINPUT,
                   "%s: optimiser state needs both m and v (got %s only)", path,
                   m ? "m" : "v");
  /* A diverged model must not replace a good checkpoint. */
  if ((rc = pl_ckpt_values_finite(&h->config, params, n, m, v, path, why,
                                  whylen)))
    return rc;

  uint32_t flags = m ? PL_CKPT_FLAG_OPTIMISER : 0;
  uint8_t header[PL_CKPT_HEADER_BYTES];
  encode_header(h, want, flags, header);

  /* the rename below would replace a device, a FIFO or a folder's link */
  struct stat st;
  if (lstat(path, &st) == 0 && !S_ISREG(st.st_mode))
    return pl_fail(why, whylen, PL_EINPUT,
                   "%s: exists and is not a regular file; a checkpoint "
                   "replaces only a file",
                   path);
  uint8_t *buf = malloc(4 * CHUNK_FLOATS);
  if (!buf) return pl_fail(why, whylen, PL_EENV, "%s: out of memory", path);
  /* written beside path and renamed, durably: a kill or a power cut
   * leaves the previous checkpoint, never a torn one */
  kl_outfile out;
  char err[1400];
  if (kl_outfile_open(&out, path, err, sizeof err) != 0) {
    free(buf);
    return pl_fail(why, whylen, PL_EENV, "%s", err);
  }
  writer w;
  memset(&w, 0, sizeof w);
  w.f = out.f;
  kl_sha256_init(&w.sha);
  w_bytes(&w, header, sizeof header);
  w_floats(&w, params, want, buf);
  if (m) {
    w_floats(&w, m, want, buf);
    w_floats(&w, v, want, buf);
  }
  free(buf);
  uint8_t digest[TRAILER_BYTES];
  kl_sha256_final(&w.sha, digest);
  if (!w.err && fwrite(digest, 1, sizeof digest, w.f) != sizeof digest)
    w.err = errno ? errno : EIO;
  if (w.err) {
    kl_outfile_abort(&out);
    return pl_fail(why, whylen, PL_EENV, "%s: cannot write checkpoint: %s",
                   path, strerror(w.err));
  }
  if (kl_outfile_commit(&out, 1, err, sizeof err) != 0)
    return pl_fail(why, whylen, PL_EENV, "%s (a checkpoint)", err);
  return PL_OK;
}

/* ---- load ---------------------------------------------------------------- */

static void hex32(const uint8_t d[32], char out[65]) {
  for (int i = 0; i < 32; i++)
    snprintf(out + 2 * i, 3, "%02x", d[i]);
}

/* The magic as text for a message: printable bytes as is, others as \xNN. */
static void show_bytes(const uint8_t *p, int n, char *out, size_t outlen) {
  size_t k = 0;
  for (int i = 0; i < n && k + 5 < outlen; i++)
    k += (size_t)snprintf(
        out + k, outlen - k,
        (p[i] >= 32 && p[i] < 127 && p[i] != '"') ? "%c" : "\\x%02x", p[i]);
  out[k] = '\0';
}

/* Reads n floats into dst (or only hashes them when dst is NULL). */
static int r_floats(FILE *f, kl_sha256_ctx *sha, float *dst, uint64_t n,
                    uint8_t *buf) {
  for (uint64_t off = 0; off < n; off += CHUNK_FLOATS) {
    size_t k = n - off < CHUNK_FLOATS ? (size_t)(n - off) : CHUNK_FLOATS;
    if (fread(buf, 4, k, f) != k) return -1;
    kl_sha256_update(sha, buf, 4 * k);
    if (dst)
      for (size_t j = 0; j < k; j++)
        dst[off + j] = get_f32(buf + 4 * j);
  }
  return 0;
}

/* Checks the framing fields (magic, version, size, flags) of a raw header
 * and decodes it into *h. n_bytes: the file size. */
static int parse_header(const uint8_t *b, const char *path, uint64_t n_bytes,
                        pl_ckpt_header *h, char *why, size_t whylen) {
  if (memcmp(b + OFF_MAGIC, PL_CKPT_MAGIC, 4) != 0) {
    char got[32];
    show_bytes(b + OFF_MAGIC, 4, got, sizeof got);
    return pl_fail(why, whylen, PL_EINPUT,
                   "%s: bad magic \"%s\", expected \"%s\" (not a kernlab "
                   "checkpoint)",
                   path, got, PL_CKPT_MAGIC);
  }
  uint32_t version = get_u32(b + OFF_VERSION);
  if (version > PL_CKPT_VERSION)
    return pl_fail(why, whylen, PL_EINPUT,
                   "%s: version %u is newer than this build reads (%d); use a "
                   "newer kernlab",
                   path, version, PL_CKPT_VERSION);
  if (version < 1)
    return pl_fail(why, whylen, PL_EINPUT, "%s: version 0 is not a version",
                   path);
  uint32_t hb = get_u32(b + OFF_HEADER_BYTES);
  if (hb != PL_CKPT_HEADER_BYTES)
    return pl_fail(why, whylen, PL_EINPUT,
                   "%s: header field header_bytes = %u, expected %d", path, hb,
                   PL_CKPT_HEADER_BYTES);
  uint32_t flags = get_u32(b + OFF_FLAGS);
  if (flags & ~PL_CKPT_FLAG_OPTIMISER)
    return pl_fail(why, whylen, PL_EINPUT,
                   "%s: header field flags = 0x%x has unknown bits (version 1 "
                   "knows 0x1, optimiser state)",
                   path, flags);
  uint64_t n = get_u64(b + OFF_N_PARAMS);
  if (n < 1 || n > PL_CKPT_MAX_PARAMS)
    return pl_fail(why, whylen, PL_EINPUT,
                   "%s: header field n_params = %llu, expected 1..%llu", path,
                   (unsigned long long)n,
                   (unsigned long long)PL_CKPT_MAX_PARAMS);
  int opt = (flags & PL_CKPT_FLAG_OPTIMISER) != 0;
  uint64_t want = PL_CKPT_HEADER_BYTES + 4 * n * (opt ? 3 : 1) + TRAILER_BYTES;
  if (n_bytes != want)
    return pl_fail(why, whylen, PL_EINPUT,
                   "%s: %s: the header promises %llu bytes (n_params %llu, %s "
                   "optimiser state), the file has %llu",
                   path, n_bytes < want ? "truncated" : "trailing bytes",
                   (unsigned long long)want, (unsigned long long)n,
                   opt ? "with" : "without", (unsigned long long)n_bytes);

  memset(h, 0, sizeof *h);
  h->config.vocab = (int32_t)get_u32(b + OFF_VOCAB);
  h->config.d_model = (int32_t)get_u32(b + OFF_D_MODEL);
  h->config.n_layers = (int32_t)get_u32(b + OFF_N_LAYERS);
  h->config.n_heads = (int32_t)get_u32(b + OFF_N_HEADS);
  h->config.d_ff = (int32_t)get_u32(b + OFF_D_FF);
  h->config.max_seq = (int32_t)get_u32(b + OFF_MAX_SEQ);
  h->rope_theta = get_f32(b + OFF_ROPE_THETA);
  h->norm_eps = get_f32(b + OFF_NORM_EPS);
  h->step = get_u64(b + OFF_STEP);
  h->n_params = n;
  h->opt_step = get_u64(b + OFF_OPT_STEP);
  h->flags = flags;
  memcpy(h->tokenizer_sha256, b + OFF_TOKENIZER, 64);
  h->run_id = get_u64(b + OFF_RUN_ID);
  h->tokenizer_sha256[64] = '\0';
  return PL_OK;
}

/* The fields checked once the checksum has vouched for the bytes: what a
 * buggy writer (not a bad disk) could get wrong. */
static int check_parsed(const uint8_t *b, const pl_ckpt_header *h,
                        const char *path, char *why, size_t whylen) {
  if (memchr(h->tokenizer_sha256, '\0', 64))
    return pl_fail(
        why, whylen, PL_EINPUT,
        "%s: header field tokenizer_sha256 holds a NUL byte, expected "
        "64 lowercase hex characters",
        path);
  int rc = check_fields(h, path, why, whylen);
  if (rc) return rc;
  uint64_t want = pl_config_param_count(&h->config);
  if (h->n_params != want)
    return pl_fail(
        why, whylen, PL_EINPUT,
        "%s: header field n_params = %llu, but the config (vocab %d, "
        "d_model %d, n_layers %d, d_ff %d) has %llu parameters",
        path, (unsigned long long)h->n_params, (int)h->config.vocab,
        (int)h->config.d_model, (int)h->config.n_layers, (int)h->config.d_ff,
        (unsigned long long)want);
  if (h->opt_step > PL_CKPT_MAX_OPT_STEP || h->step > PL_CKPT_MAX_OPT_STEP)
    return pl_fail(why, whylen, PL_EINPUT,
                   "%s: header field %s = %llu, expected at most 2^53", path,
                   h->step > PL_CKPT_MAX_OPT_STEP ? "step" : "opt_step",
                   (unsigned long long)(h->step > PL_CKPT_MAX_OPT_STEP
                                            ? h->step
                                            : h->opt_step));
  if (!(h->flags & PL_CKPT_FLAG_OPTIMISER) && h->opt_step != 0)
    return pl_fail(why, whylen, PL_EINPUT,
                   "%s: header field opt_step = %llu without optimiser state, "
                   "expected 0",
                   path, (unsigned long long)h->opt_step);
  for (int i = OFF_RESERVED; i < PL_CKPT_HEADER_BYTES; i++)
    if (b[i] != 0)
      return pl_fail(why, whylen, PL_EINPUT,
                     "%s: reserved header byte %d is 0x%02x, expected 0 in "
                     "version %d",
                     path, i, b[i], PL_CKPT_VERSION);
  return PL_OK;
}

/* The checkpoint file for reading (kl_fopen_regular: a FIFO would block
 * fopen); NULL with *rc and why when it cannot be. */
static FILE *open_ckpt(const char *path, int *rc, char *why, size_t whylen) {
  FILE *f = kl_fopen_regular(path, NULL);
  int err = errno; /* the file's fault (exit 2), or the machine's (3) */
  if (!f)
    *rc = pl_fail(why, whylen,
                  err == ENOENT || err == EINVAL || err == EISDIR ||
                          err == ELOOP || err == ENOTDIR || err == ENAMETOOLONG
                      ? PL_EINPUT
                      : PL_EENV,
                  "%s: cannot open checkpoint: %s", path, kl_fopen_error(err));
  return f;
}

int pl_ckpt_peek(const char *path, pl_ckpt_header *out, char *why,
                 size_t whylen) {
  int rc;
  FILE *f = open_ckpt(path, &rc, why, whylen);
  if (!f) return rc;
  struct stat st;
  uint8_t hb[PL_CKPT_HEADER_BYTES] = {0};
  int ok = fstat(fileno(f), &st) == 0 && S_ISREG(st.st_mode) &&
           fread(hb, 1, sizeof hb, f) == sizeof hb;
  fclose(f);
  if (!ok)
    return pl_fail(why, whylen, PL_EINPUT,
                   "%s: not a checkpoint (no whole header)", path);
  return parse_header(hb, path, (uint64_t)st.st_size, out, why, whylen);
}

static int checksum_mismatch(const uint8_t trailer[TRAILER_BYTES],
                             const uint8_t digest[TRAILER_BYTES],
                             const char *path, char *why, size_t whylen) {
  char want_hex[65], got_hex[65];
  hex32(trailer, want_hex);
  hex32(digest, got_hex);
  return pl_fail(why, whylen, PL_EINPUT,
                 "%s: checksum mismatch: the trailer says sha256 %.16s..., the "
                 "contents hash to %.16s... (file corrupt)",
                 path, want_hex, got_hex);
}

/* Hashes the header hb and the n_floats values after it in f, reads the
 * trailer and compares: PL_OK (f then back at the first value) or the
 * failure said as the load says it. Allocates nothing but a chunk. */
static int trailer_matches(FILE *f, const uint8_t *hb, uint64_t n_floats,
                           const char *path, char *why, size_t whylen) {
  uint8_t *buf = malloc(4 * CHUNK_FLOATS);
  if (!buf) return pl_fail(why, whylen, PL_EENV, "%s: out of memory", path);
  kl_sha256_ctx sha;
  kl_sha256_init(&sha);
  kl_sha256_update(&sha, hb, PL_CKPT_HEADER_BYTES);
  uint8_t trailer[TRAILER_BYTES], digest[TRAILER_BYTES];
  int short_read = r_floats(f, &sha, NULL, n_floats, buf) != 0 ||
                   fread(trailer, 1, sizeof trailer, f) != sizeof trailer;
  free(buf);
  if (short_read)
    return pl_fail(why, whylen, PL_EENV,
                   "%s: read failed (file changed while loading?)", path);
  kl_sha256_final(&sha, digest);
  if (memcmp(trailer, digest, sizeof digest) != 0)
    return checksum_mismatch(trailer, digest, path, why, whylen);
  if (fseek(f, PL_CKPT_HEADER_BYTES, SEEK_SET) != 0)
    return pl_fail(why, whylen, PL_EENV, "%s: seek: %s", path, strerror(errno));
  return PL_OK;
}

int pl_ckpt_load(const char *path, pl_ckpt_header *out, float **params,
                 float **m, float **v, char *why, size_t whylen) {
  if (!path || !out || !params)
    return pl_fail(why, whylen, PL_EINPUT, "checkpoint load: NULL argument");
  *params = NULL;
  if (m) *m = NULL;
  if (v) *v = NULL;
  int rc;
  FILE *f = open_ckpt(path, &rc, why, whylen);
  if (!f) return rc;
  struct stat st;
  if (fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode)) {
    fclose(f);
    return pl_fail(why, whylen, PL_EINPUT, "%s: not a regular file", path);
  }
  /* A short file is reported as not-a-checkpoint when its first bytes are
   * not the magic, as truncated when they are. */
  uint8_t hb[PL_CKPT_HEADER_BYTES] = {0};
  size_t got = fread(hb, 1, sizeof hb, f);
  if (got < sizeof hb && !(got >= 4 && memcmp(hb, PL_CKPT_MAGIC, 4) != 0)) {
    fclose(f);
    return pl_fail(why, whylen, PL_EINPUT,
                   "%s: truncated: %zu bytes, shorter than the %d-byte header",
                   path, got, PL_CKPT_HEADER_BYTES);
  }
  if (got < sizeof hb) st.st_size = (off_t)got; /* parse_header: bad magic */
  pl_ckpt_header h;
  rc = parse_header(hb, path, (uint64_t)st.st_size, &h, why, whylen);
  if (rc) {
    fclose(f);
    return rc;
  }

  /* The size matches n_params, so allocations below are bounded by the
   * file's own size; and n_params must be what the config holds before
   * anything is allocated: a sparse file of 3 GiB (4 KB on disk) whose
   * header described 139,200 parameters took 3 GB before its checksum
   * failed (the checkpoint review). */
  if ((rc = check_config(&h.config, path, why, whylen)) ||
      (pl_config_param_count(&h.config) != h.n_params &&
       (rc = pl_fail(why, whylen, PL_EINPUT,
                     "%s: header field n_params = %llu, but the config "
                     "(vocab %d, d_model %d, n_layers %d, d_ff %d) has %llu "
                     "parameters",
                     path, (unsigned long long)h.n_params, (int)h.config.vocab,
                     (int)h.config.d_model, (int)h.config.n_layers,
                     (int)h.config.d_ff,
                     (unsigned long long)pl_config_param_count(&h.config))))) {
    fclose(f);
    return rc;
  }
  int opt = (h.flags & PL_CKPT_FLAG_OPTIMISER) != 0;
  uint64_t n = h.n_params;
  /* A big file is hashed whole before anything is allocated. The size
   * bounds the allocations, but a sparse file costs nothing on disk: one
   * of 16 GB whose header held a consistent config of 4e9 parameters made
   * this load take 16 GB (48 with AdamW's moments) before its checksum
   * failed (the policy-inputs review). A real checkpoint that big is read
   * twice; the small policy's is far below PREHASH_BYTES. */
  if ((uint64_t)st.st_size > PREHASH_BYTES &&
      (rc = trailer_matches(f, hb, opt ? 3 * n : n, path, why, whylen))) {
    fclose(f);
    return rc;
  }
  float *p = malloc(4 * n);
  float *pm = (opt && m) ? malloc(4 * n) : NULL;
  float *pv = (opt && v) ? malloc(4 * n) : NULL;
  uint8_t *buf = malloc(4 * CHUNK_FLOATS);
  int short_read = 0;
  if (!p || !buf || (opt && m && !pm) || (opt && v && !pv)) {
    rc = pl_fail(why, whylen, PL_EENV, "%s: out of memory for %llu parameters",
                 path, (unsigned long long)n);
    goto done;
  }
  kl_sha256_ctx sha;
  kl_sha256_init(&sha);
  kl_sha256_update(&sha, hb, sizeof hb);
  short_read = r_floats(f, &sha, p, n, buf) != 0;
  if (opt && !short_read)
    short_read = r_floats(f, &sha, pm, n, buf) != 0 ||
                 r_floats(f, &sha, pv, n, buf) != 0;
  uint8_t trailer[TRAILER_BYTES], digest[TRAILER_BYTES];
  if (!short_read && fread(trailer, 1, sizeof trailer, f) != sizeof trailer)
    short_read = 1;
  if (short_read) {
    /* The size was right a moment ago: someone is rewriting the file. */
    rc = pl_fail(why, whylen, PL_EENV,
                 "%s: read failed (file changed while "
                 "loading?)",
                 path);
    goto done;
  }
  kl_sha256_final(&sha, digest);
  if (memcmp(trailer, digest, sizeof digest) != 0) {
    rc = checksum_mismatch(trailer, digest, path, why, whylen);
    goto done;
  }
  if ((rc = check_parsed(hb, &h, path, why, whylen))) goto done;
  if ((rc = check_values(&h.config, p, n, "params", 0, path, why, whylen)) ||
      (pm &&
       (rc = check_values(&h.config, pm, n, "m", 0, path, why, whylen))) ||
      (pv && (rc = check_values(&h.config, pv, n, "v", 1, path, why, whylen))))
    goto done;

done:
  fclose(f);
  free(buf);
  if (rc) {
    free(p);
    free(pm);
    free(pv);
    return rc;
  }
  hex32(digest, h.sha256);
  *out = h;
  *params = p;
  if (m) *m = pm;
  if (v) *v = pv;
  return PL_OK;
}

int pl_ckpt_check_tokenizer(const pl_ckpt_header *h, const char *sha256_hex,
                            char *why, size_t whylen) {
  if (!h || !sha256_hex)
    return pl_fail(why, whylen, PL_EINPUT, "tokenizer check: NULL argument");
  if (strlen(sha256_hex) != 64 || !is_hex64(sha256_hex))
    return pl_fail(why, whylen, PL_EINPUT,
                   "tokenizer check: \"%s\" is not a sha256 (64 lowercase hex "
                   "characters)",
                   sha256_hex);
  if (memcmp(h->tokenizer_sha256, sha256_hex, 64) != 0)
    return pl_fail(
        why, whylen, PL_EINPUT,
        "tokenizer mismatch: the checkpoint was trained with tokenizer "
        "sha256 %.64s, the tokenizer given has sha256 %.64s; its token "
        "ids would mean different text. Use the tokenizer file the "
        "checkpoint was saved with, or prime a new checkpoint",
        h->tokenizer_sha256, sha256_hex);
  return PL_OK;
}
