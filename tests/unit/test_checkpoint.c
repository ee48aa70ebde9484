/*
 * tests/unit/test_checkpoint.c — policy/checkpoint.c: bit-exact round trips
 * (with and without AdamW state), the byte layout frozen at its offsets,
 * atomic writes (no temporary file left, a failed or refused save leaves the
 * old file intact), and one test per corruption the loader must explain:
 * each edits a good file (re-sealing the checksum where the point is a bad
 * field rather than a bad disk) and checks the message names the file and
 * the field. It does not test the model.
 */
#include "policy/policy.h"
#include "kernels/kernels.h"
#include "kltest.h"

#include <dirent.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

static char why[1024];
static char dir[64];
static const char *TOK =
    "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

static pl_ckpt_header small_header(void) {
  pl_ckpt_header h;
  memset(&h, 0, sizeof h);
  h.config = (pl_config){.vocab = 17,
                         .d_model = 8,
                         .n_layers = 2,
                         .n_heads = 2,
                         .d_ff = 12,
                         .max_seq = 16};
  h.rope_theta = 10000.0f;
  h.norm_eps = 1e-5f;
  memcpy(h.tokenizer_sha256, TOK, 65);
  h.step = 1234;
  h.opt_step = 1000;
  return h;
}

/* Arbitrary finite bit patterns, -0.0 and subnormals included. */
static float *filled(size_t n, uint32_t seed, int nonneg) {
  float *a = malloc(n * sizeof *a);
  uint32_t x = seed;
  for (size_t i = 0; i < n; i++) {
    x = x * 1664525u + 1013904223u;
    uint32_t bits = x;
    if (((bits >> 23) & 0xff) == 0xff) bits &= ~(1u << 30); /* no inf/nan */
    if (nonneg) bits &= 0x7fffffffu;
    memcpy(&a[i], &bits, 4);
  }
  a[0] = -0.0f;
  uint32_t sub = 1;
  memcpy(&a[1], &sub, 4);
  return a;
}

static char *path_in(const char *name) {
  static char p[4][256];
  static int k;
  char *out = p[k++ % 4];
  snprintf(out, 256, "%s/%s", dir, name);
  return out;
}

static long file_size(const char *path) {
  struct stat st;
  return stat(path, &st) == 0 ? (long)st.st_size : -1;
}

static uint8_t *slurp(const char *path, long *len) {
  size_t n = 0;
  uint8_t *b = (uint8_t *)kl_test_read_file(path, &n);
  *len = b ? (long)n : -1;
  return b;
}

static void spit(const char *path, const uint8_t *b, long len) {
  FILE *f = fopen(path, "wb");
  fwrite(b, 1, (size_t)len, f);
  fclose(f);
}

/* Recomputes the trailer, so the file passes the checksum again. */
static void reseal(uint8_t *b, long len) {
  kl_sha256_ctx c;
  kl_sha256_init(&c);
  kl_sha256_update(&c, b, (size_t)len - 32);
  kl_sha256_final(&c, b + len - 32);
}

static void put32(uint8_t *p, uint32_t x) {
  for (int i = 0; i < 4; i++)
    p[i] = (uint8_t)(x >> (8 * i));
}

static int count_temp_files(void) {
  DIR *d = opendir(dir);
  int n = 0;
  struct dirent *e;
  while ((e = readdir(d)))
    if (strstr(e->d_name, ".tmp.")) n++;
  closedir(d);
  return n;
}

/* Loads path and checks it fails with rc and a message holding each of the
 * given fragments (and the file name). */
static void expect_fail(const char *path, int rc, const char *a, const char *b,
                        const char *label) {
  pl_ckpt_header h;
  float *p = (float *)1, *m = (float *)1, *v = (float *)1;
  why[0] = '\0';
  int got = pl_ckpt_load(path, &h, &p, &m, &v, why, sizeof why);
  CHECK(got == rc, "%s: rc %d, want %d (%s)", label, got, rc, why);
  CHECK(!p && !m && !v, "%s: nothing handed out on failure", label);
  CHECK(strstr(why, path) != NULL, "%s: message names the file: %s", label,
        why);
  CHECK(strstr(why, a) != NULL, "%s: message has \"%s\": %s", label, a, why);
  if (b)
    CHECK(strstr(why, b) != NULL, "%s: message has \"%s\": %s", label, b, why);
}

static void test_param_count(void) {
  pl_ckpt_header h = small_header();
  /* wte 17*8 + rms 2*8 + wqkv 2*3*64 + wo 2*64 + rms 2*8 + w13 2*2*12*8 +
   * w2 2*8*12 + rmsf 8 */
  uint64_t want = 136 + 16 + 384 + 128 + 16 + 384 + 192 + 8;
  CHECK(pl_config_param_count(&h.config) == want, "count %llu, want %llu",
        (unsigned long long)pl_config_param_count(&h.config),
        (unsigned long long)want);
  pl_config c = h.config;
  c.n_layers = 0;
  CHECK(pl_config_param_count(&c) == 0, "zero layers counts 0");
  c = h.config;
  c.n_heads = 3;
  CHECK(pl_config_param_count(&c) == 0, "heads not dividing counts 0");
  c = h.config;
  c.d_model = 1 << 20;
  c.n_heads = 1 << 10;
  CHECK(pl_config_param_count(&c) == 0, "absurd config counts 0");
  /* The default model: d=256, 4 layers; F = 8*256/3 ~ 672. */
  c = (pl_config){.vocab = 4096,
                  .d_model = 256,
                  .n_layers = 4,
                  .n_heads = 8,
                  .d_ff = 672,
                  .max_seq = 1024};
  CHECK(pl_config_param_count(&c) ==
            4096ull * 256 + 4 * (2 * 256 + 4 * 256 * 256 + 3 * 256 * 672) + 256,
        "default-size count");
}

/* The contract with policy/model.c: the checkpoint's count of the flat
 * parameter array is the sum of the model's tensor sizes, in its order. */
static void test_agrees_with_model(void) {
  pl_config cs[3] = {small_header().config,
                     {.vocab = 4096,
                      .d_model = 256,
                      .n_layers = 4,
                      .n_heads = 8,
                      .d_ff = pl_default_ff(256),
                      .max_seq = 1024},
                     {.vocab = 300,
                      .d_model = 64,
                      .n_layers = 3,
                      .n_heads = 4,
                      .d_ff = 96,
                      .max_seq = 64}};
  for (int i = 0; i < 3; i++) {
    size_t sizes[PL_NUM_PARAM_TENSORS], total = 0;
    pl_param_sizes(&cs[i], sizes);
    for (int t = 0; t < PL_NUM_PARAM_TENSORS; t++)
      total += sizes[t];
    CHECK(pl_config_param_count(&cs[i]) == total,
          "config %d: checkpoint counts %llu, the model %zu", i,
          (unsigned long long)pl_config_param_count(&cs[i]), total);
  }
}

static void test_round_trip(void) {
  pl_ckpt_header h = small_header();
  h.run_id = 0x0123456789abcdefull;
  size_t n = (size_t)pl_config_param_count(&h.config);
  float *p = filled(n, 1, 0), *m = filled(n, 2, 0), *v = filled(n, 3, 1);
  const char *path = path_in("a.ckpt");
  CHECK(pl_ckpt_save(path, &h, p, n, m, v, why, sizeof why) == PL_OK, "%s",
        why);
  CHECK(count_temp_files() == 0, "no temporary file after a save");
  CHECK(file_size(path) == 256 + 3 * 4 * (long)n + 32, "file size %ld",
        file_size(path));

  pl_ckpt_header g;
  float *p2, *m2, *v2;
  CHECK(pl_ckpt_load(path, &g, &p2, &m2, &v2, why, sizeof why) == PL_OK, "%s",
        why);
  CHECK(p2 && m2 && v2, "arrays handed out");
  if (p2 && m2 && v2) {
    CHECK(memcmp(p, p2, n * 4) == 0, "params bit-exact");
    CHECK(memcmp(m, m2, n * 4) == 0, "m bit-exact");
    CHECK(memcmp(v, v2, n * 4) == 0, "v bit-exact");
  }
  CHECK(memcmp(&g.config, &h.config, sizeof h.config) == 0, "config");
  CHECK(g.step == 1234 && g.opt_step == 1000 && g.n_params == n &&
            g.flags == PL_CKPT_FLAG_OPTIMISER,
        "step %llu opt_step %llu flags %u", (unsigned long long)g.step,
        (unsigned long long)g.opt_step, g.flags);
  CHECK(g.rope_theta == 10000.0f && g.norm_eps == 1e-5f, "theta, eps");
  CHECK(strcmp(g.tokenizer_sha256, TOK) == 0, "tokenizer hash");
  CHECK(g.run_id == 0x0123456789abcdefull, "run_id %llx",
        (unsigned long long)g.run_id);
  free(p2);
  free(m2);
  free(v2);

  /* The header alone: the same fields, and a short or foreign file is
   * refused. */
  pl_ckpt_header pk;
  CHECK(pl_ckpt_peek(path, &pk, why, sizeof why) == PL_OK &&
            pk.run_id == g.run_id && pk.step == g.step &&
            pk.n_params == g.n_params,
        "peek: %s", why);
  CHECK(pl_ckpt_peek("/nonexistent/x.ckpt", &pk, why, sizeof why) ==
                PL_EINPUT &&
            strstr(why, "x.ckpt"),
        "peek of a missing file: %s", why);
  CHECK(pl_ckpt_peek(__FILE__, &pk, why, sizeof why) == PL_EINPUT,
        "peek of a file that is no checkpoint: %s", why);

  /* Skipping m and v at load time. */
  CHECK(pl_ckpt_load(path, &g, &p2, NULL, NULL, why, sizeof why) == PL_OK, "%s",
        why);
  free(p2);

  /* Without optimiser state: m and v come back NULL, opt_step 0. */
  const char *path2 = path_in("b.ckpt");
  CHECK(pl_ckpt_save(path2, &h, p, n, NULL, NULL, why, sizeof why) == PL_OK,
        "%s", why);
  CHECK(file_size(path2) == 256 + 4 * (long)n + 32, "size without state");
  CHECK(pl_ckpt_load(path2, &g, &p2, &m2, &v2, why, sizeof why) == PL_OK, "%s",
        why);
  CHECK(!m2 && !v2 && g.flags == 0 && g.opt_step == 0, "no state");
  CHECK(p2 && memcmp(p, p2, n * 4) == 0, "params bit-exact without state");
  free(p2);

  /* The layout, frozen: a few fields at their offsets, the trailer. */
  long len;
  uint8_t *b = slurp(path, &len);
  CHECK(memcmp(b, "KLCK", 4) == 0 && b[4] == 1 && b[8] == 0 && b[9] == 1,
        "magic, version 1, header_bytes 256");
  CHECK(b[12] == 1 && b[16] == 17 && b[20] == 8 && b[24] == 2 && b[28] == 2 &&
            b[32] == 12 && b[36] == 16,
        "flags and config at 12..36");
  CHECK(b[48] == (1234 & 0xff) && b[49] == (1234 >> 8) && b[56] == (n & 0xff),
        "step at 48, n_params at 56");
  CHECK(memcmp(b + 72, TOK, 64) == 0, "tokenizer hash at 72");
  CHECK(b[136] == 0xef && b[143] == 0x01, "run_id at 136, little-endian");
  float f0;
  memcpy(&f0, b + 256 + 8, 4); /* params[2], little-endian host */
  CHECK(memcmp(&f0, &p[2], 4) == 0, "params start at 256");
  uint8_t d[32];
  kl_sha256_ctx c;
  kl_sha256_init(&c);
  kl_sha256_update(&c, b, (size_t)len - 32);
  kl_sha256_final(&c, d);
  CHECK(memcmp(d, b + len - 32, 32) == 0, "trailer is sha256 of the rest");
  free(b);
  free(p);
  free(m);
  free(v);
}

/* Edits a copy of a good file, optionally reseals, and expects a failure. */
typedef void (*edit_fn)(uint8_t *b, long *len);

static void corrupt(edit_fn edit, int do_reseal, int rc, const char *a,
                    const char *b2, const char *label) {
  long len;
  uint8_t *b = slurp(path_in("a.ckpt"), &len);
  b = realloc(b, (size_t)len + 64);
  edit(b, &len);
  if (do_reseal) reseal(b, len);
  const char *path = path_in("bad.ckpt");
  spit(path, b, len);
  expect_fail(path, rc, a, b2, label);
  free(b);
}

static void e_magic(uint8_t *b, long *len) {
  (void)len;
  memcpy(b, "GPT2", 4);
}
static void e_version(uint8_t *b, long *len) {
  (void)len;
  put32(b + 4, 2);
}
static void e_version0(uint8_t *b, long *len) {
  (void)len;
  put32(b + 4, 0);
}
static void e_header_bytes(uint8_t *b, long *len) {
  (void)len;
  put32(b + 8, 1024);
}
static void e_flags(uint8_t *b, long *len) {
  (void)len;
  b[12] |= 4;
}
static void e_cut1(uint8_t *b, long *len) {
  (void)b;
  *len -= 1;
}
static void e_cut_header(uint8_t *b, long *len) {
  (void)b;
  *len = 100;
}
static void e_trailing(uint8_t *b, long *len) {
  b[*len] = 0;
  *len += 1;
}
static void e_param_bit(uint8_t *b, long *len) {
  (void)len;
  b[300] ^= 0x10;
}
static void e_trailer_bit(uint8_t *b, long *len) {
  b[*len - 1] ^= 1;
}
static void e_header_bit(uint8_t *b, long *len) {
  (void)len;
  b[48] ^= 1; /* the step: only the checksum can tell */
}
static void e_n_params_size(uint8_t *b, long *len) {
  (void)len;
  put32(b + 56, 1000000); /* n_params no longer matches the file size */
}
static void e_d_ff(uint8_t *b, long *len) {
  (void)len;
  put32(b + 32, 16); /* config now counts more params than stored */
}
static void e_layers0(uint8_t *b, long *len) {
  (void)len;
  put32(b + 24, 0);
}
static void e_heads3(uint8_t *b, long *len) {
  (void)len;
  put32(b + 28, 3);
}
static void e_heads8(uint8_t *b, long *len) {
  (void)len;
  put32(b + 28, 8); /* head size 1: odd */
}
static void e_vocab_absurd(uint8_t *b, long *len) {
  (void)len;
  put32(b + 16, 0x7fffffff);
}
static void e_vocab_negative(uint8_t *b, long *len) {
  (void)len;
  put32(b + 16, 0xffffffffu);
}
static void e_theta_nan(uint8_t *b, long *len) {
  (void)len;
  put32(b + 40, 0x7fc00000u);
}
static void e_eps_zero(uint8_t *b, long *len) {
  (void)len;
  put32(b + 44, 0);
}
static void e_theta_other(uint8_t *b, long *len) {
  (void)len;
  put32(b + 40, 0x48f42400u); /* 500000.0f: accepted, then ignored */
}
static void e_eps_other(uint8_t *b, long *len) {
  (void)len;
  put32(b + 44, 0x3f000000u); /* 0.5f */
}
static void e_layers_many(uint8_t *b, long *len) {
  (void)len;
  put32(b + 24, 2000);
}
static void e_tokenizer(uint8_t *b, long *len) {
  (void)len;
  b[72 + 10] = 'G';
}
static void e_reserved(uint8_t *b, long *len) {
  (void)len;
  b[200] = 7;
}
static void e_nan_param(uint8_t *b, long *len) {
  (void)len;
  /* params[17*8 + 3] is rms_att, layer 0, element 3 */
  put32(b + 256 + 4 * (17 * 8 + 3), 0x7fc00000u);
}
static void e_neg_v(uint8_t *b, long *len) {
  /* v's last element: just before the trailer */
  b[*len - 32 - 1] |= 0x80;
}
static void e_max_seq_huge(uint8_t *b, long *len) {
  (void)len;
  put32(b + 36, 1u << 24); /* within PL_CKPT_MAX_DIM: 3 GB of RoPE tables */
}
static void e_opt_step_huge(uint8_t *b, long *len) {
  (void)len;
  put32(b + 64, 0xffffffffu); /* opt_step 2^64 - 1: -1 as AdamW's int64 t */
  put32(b + 68, 0xffffffffu);
}
static void e_opt_step_without_state(uint8_t *b, long *len) {
  /* drop the optimiser flag and m, v; keep opt_step nonzero */
  long n = (*len - 256 - 32) / 12;
  b[12] = 0;
  *len = 256 + 4 * n + 32;
}

static void test_corruption(void) {
  corrupt(e_magic, 0, PL_EINPUT, "bad magic \"GPT2\"", "KLCK", "magic");
  corrupt(e_version, 0, PL_EINPUT, "version 2 is newer", NULL, "version");
  corrupt(e_version0, 0, PL_EINPUT, "version 0", NULL, "version 0");
  corrupt(e_header_bytes, 0, PL_EINPUT, "header_bytes = 1024", NULL,
          "header_bytes");
  corrupt(e_flags, 0, PL_EINPUT, "flags = 0x5", "unknown bits", "flags");
  corrupt(e_cut1, 0, PL_EINPUT, "truncated", "with optimiser state",
          "cut one byte");
  corrupt(e_cut_header, 0, PL_EINPUT, "truncated: 100 bytes", "header",
          "cut in the header");
  corrupt(e_trailing, 0, PL_EINPUT, "trailing bytes", NULL, "trailing");
  corrupt(e_param_bit, 0, PL_EINPUT, "checksum mismatch", NULL, "param bit");
  corrupt(e_trailer_bit, 0, PL_EINPUT, "checksum mismatch", NULL,
          "trailer bit");
  corrupt(e_header_bit, 0, PL_EINPUT, "checksum mismatch", NULL, "header bit");
  corrupt(e_n_params_size, 0, PL_EINPUT, "truncated", "n_params 1000000",
          "n_params vs size");
  corrupt(e_d_ff, 1, PL_EINPUT, "n_params = 1264", "has 1456 parameters",
          "n_params vs config");
  corrupt(e_layers0, 1, PL_EINPUT, "n_layers = 0", NULL, "zero layers");
  /* not resealed: the config's count is checked before anything is
   * allocated or hashed (a sparse file claiming gigabytes took 3 GB
   * before its checksum failed) */
  corrupt(e_d_ff, 0, PL_EINPUT, "n_params = 1264", "has 1456 parameters",
          "config count before the checksum");
  corrupt(e_layers_many, 1, PL_EINPUT, "n_layers = 2000", "expected 1..1024",
          "too many layers");
  corrupt(e_theta_other, 1, PL_EINPUT, "rope_theta = 500000", "expected 10000",
          "theta the model ignores");
  corrupt(e_eps_other, 1, PL_EINPUT, "norm_eps = 0.5", "expected 1e-05",
          "eps the model ignores");
  corrupt(e_heads3, 1, PL_EINPUT, "n_heads = 3 does not divide d_model = 8",
          NULL, "heads not dividing");
  corrupt(e_heads8, 1, PL_EINPUT, "odd head size 1", NULL, "odd head size");
  corrupt(e_vocab_absurd, 1, PL_EINPUT, "vocab = 2147483647", "expected 1..",
          "absurd vocab");
  corrupt(e_vocab_negative, 1, PL_EINPUT, "vocab = -1", NULL, "negative vocab");
  corrupt(e_theta_nan, 1, PL_EINPUT, "rope_theta = nan", NULL, "theta");
  corrupt(e_eps_zero, 1, PL_EINPUT, "norm_eps = 0", NULL, "eps");
  corrupt(e_tokenizer, 1, PL_EINPUT, "tokenizer_sha256", "hex", "tokenizer");
  corrupt(e_reserved, 1, PL_EINPUT, "reserved header byte 200", NULL,
          "reserved");
  corrupt(e_nan_param, 1, PL_EINPUT, "params[139] (rms_att, layer 0) is nan",
          NULL, "nan param");
  corrupt(e_neg_v, 1, PL_EINPUT, "v[1263] (rms_final) is -", "non-negative",
          "negative v");
  corrupt(e_max_seq_huge, 1, PL_EINPUT, "max_seq = 16777216",
          "expected 1..65536", "max_seq past the cap");
  corrupt(e_opt_step_huge, 1, PL_EINPUT, "opt_step = 18446744073709551615",
          "at most 2^53", "opt_step past 2^53");
  corrupt(e_opt_step_without_state, 1, PL_EINPUT, "opt_step = 1000",
          "without optimiser state", "opt_step");

  /* Files that are not checkpoints at all. */
  spit(path_in("empty.ckpt"), (const uint8_t *)"", 0);
  expect_fail(path_in("empty.ckpt"), PL_EINPUT, "truncated: 0 bytes", NULL,
              "empty file");
  spit(path_in("text.ckpt"), (const uint8_t *)"hello\n", 6);
  expect_fail(path_in("text.ckpt"), PL_EINPUT, "bad magic \"hell\"", NULL,
              "short text file");
  expect_fail(path_in("missing.ckpt"), PL_EINPUT, "cannot open", NULL,
              "missing file");
  expect_fail(dir, PL_EINPUT, "not a regular file", NULL, "a folder");
}

/* A sparse file whose header holds a consistent config of 102M parameters
 * (410 MB, a few KB on disk) and a trailer of zeros: the checksum fails
 * before the 410 MB are allocated and filled (a big file is hashed first),
 * so the process's peak memory does not grow by them. */
static void test_sparse_big(void) {
  long len;
  uint8_t *b = slurp(path_in("a.ckpt"), &len);
  CHECK(b && len > PL_CKPT_HEADER_BYTES, "a.ckpt readable");
  if (!b) return;
  pl_config c = small_header().config;
  c.vocab = 1024, c.d_model = 1024, c.n_heads = 8, c.d_ff = 2816;
  c.n_layers = 8;
  uint64_t n = pl_config_param_count(&c);
  CHECK(n > 100000000ull, "the config counts %llu parameters",
        (unsigned long long)n);
  put32(b + 16, (uint32_t)c.vocab), put32(b + 20, (uint32_t)c.d_model);
  put32(b + 24, (uint32_t)c.n_layers), put32(b + 28, (uint32_t)c.n_heads);
  put32(b + 32, (uint32_t)c.d_ff);
  b[12] = 0; /* no optimiser state */
  for (int i = 0; i < 8; i++) {
    b[56 + i] = (uint8_t)(n >> (8 * i)); /* n_params */
    b[64 + i] = 0;                       /* opt_step */
  }
  const char *path = path_in("sparse.ckpt");
  spit(path, b, PL_CKPT_HEADER_BYTES);
  free(b);
  CHECK(truncate(path, (off_t)(PL_CKPT_HEADER_BYTES + 4 * n + 32)) == 0,
        "truncate");
  struct rusage before, after;
  getrusage(RUSAGE_SELF, &before);
  expect_fail(path, PL_EINPUT, "checksum mismatch", NULL, "sparse 410 MB");
  getrusage(RUSAGE_SELF, &after);
  long grew_mb = (after.ru_maxrss - before.ru_maxrss) / 1024;
  CHECK(grew_mb < 64, "the peak memory grew by %ld MB loading it", grew_mb);
  unlink(path);
}

static void test_save_validation(void) {
  pl_ckpt_header h = small_header();
  size_t n = (size_t)pl_config_param_count(&h.config);
  float *p = filled(n, 4, 0), *m = filled(n, 5, 0), *v = filled(n, 6, 1);
  const char *path = path_in("c.ckpt");
  pl_ckpt_header e = h;
  e.config.n_layers = 0;
  CHECK(pl_ckpt_save(path, &e, p, n, NULL, NULL, why, sizeof why) ==
                PL_EINPUT &&
            strstr(why, "n_layers = 0"),
        "save: zero layers: %s", why);
  e = h;
  e.config.n_heads = 3;
  CHECK(pl_ckpt_save(path, &e, p, n, NULL, NULL, why, sizeof why) ==
                PL_EINPUT &&
            strstr(why, "does not divide"),
        "save: heads: %s", why);
  e = h;
  e.config.d_model = 1 << 20;
  e.config.n_heads = 2;
  CHECK(pl_ckpt_save(path, &e, p, n, NULL, NULL, why, sizeof why) ==
                PL_EINPUT &&
            strstr(why, "more than"),
        "save: absurd size: %s", why);
  e = h;
  e.tokenizer_sha256[0] = '\0';
  CHECK(pl_ckpt_save(path, &e, p, n, NULL, NULL, why, sizeof why) ==
                PL_EINPUT &&
            strstr(why, "tokenizer_sha256"),
        "save: empty tokenizer hash: %s", why);
  CHECK(pl_ckpt_save(path, &h, p, n - 1, NULL, NULL, why, sizeof why) ==
                PL_EINPUT &&
            strstr(why, "parameters given"),
        "save: n mismatch: %s", why);
  CHECK(pl_ckpt_save(path, &h, p, n, m, NULL, why, sizeof why) == PL_EINPUT &&
            strstr(why, "both m and v"),
        "save: m without v: %s", why);
  CHECK(file_size(path) == -1, "refused saves write nothing");

  /* A good file, then a diverged model: refused, old file intact. */
  CHECK(pl_ckpt_save(path, &h, p, n, m, v, why, sizeof why) == PL_OK, "%s",
        why);
  long len0;
  uint8_t *before = slurp(path, &len0);
  float keep = p[7];
  p[7] = NAN;
  CHECK(pl_ckpt_save(path, &h, p, n, m, v, why, sizeof why) == PL_EINPUT &&
            strstr(why, "params[7] (wte) is nan"),
        "save: NaN refused: %s", why);
  p[7] = keep;
  v[n - 1] = -1.0f;
  CHECK(pl_ckpt_save(path, &h, p, n, m, v, why, sizeof why) == PL_EINPUT &&
            strstr(why, "v["),
        "save: negative v refused: %s", why);
  long len1;
  uint8_t *after = slurp(path, &len1);
  CHECK(len0 == len1 && memcmp(before, after, (size_t)len0) == 0,
        "old checkpoint intact after refused saves");
  free(before);
  free(after);

  /* I/O failure at rename: the target is a non-empty folder. */
  const char *sub = path_in("sub");
  mkdir(sub, 0755);
  char inner[300];
  snprintf(inner, sizeof inner, "%s/x", sub);
  spit(inner, (const uint8_t *)"x", 1);
  v[n - 1] = 1.0f;
  CHECK(pl_ckpt_save(sub, &h, p, n, m, v, why, sizeof why) == PL_EINPUT &&
            strstr(why, sub) && strstr(why, "not a regular file"),
        "save over a folder is refused before anything is written: %s", why);
  CHECK(count_temp_files() == 0, "no temporary file after a failed save");
  /* A folder that does not exist: cannot create the temporary file. */
  CHECK(pl_ckpt_save(path_in("nope/d.ckpt"), &h, p, n, NULL, NULL, why,
                     sizeof why) == PL_EENV &&
            strstr(why, "cannot create"),
        "save into a missing folder: %s", why);
  unlink(inner);
  rmdir(sub);
  free(p);
  free(m);
  free(v);
}

static void test_tokenizer_check(void) {
  pl_ckpt_header h = small_header();
  CHECK(pl_ckpt_check_tokenizer(&h, TOK, why, sizeof why) == PL_OK, "%s", why);
  const char *other =
      "fedcba9876543210fedcba9876543210fedcba9876543210fedcba9876543210";
  CHECK(pl_ckpt_check_tokenizer(&h, other, why, sizeof why) == PL_EINPUT &&
            strstr(why, TOK) && strstr(why, other) &&
            strstr(why, "tokenizer mismatch"),
        "mismatch names both hashes: %s", why);
  CHECK(pl_ckpt_check_tokenizer(&h, "abc", why, sizeof why) == PL_EINPUT &&
            strstr(why, "not a sha256"),
        "bad hash: %s", why);
}

static void remove_dir(void) {
  DIR *d = opendir(dir);
  struct dirent *e;
  char p[512];
  while ((e = readdir(d))) {
    if (e->d_name[0] == '.') continue;
    snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
    unlink(p);
  }
  closedir(d);
  rmdir(dir);
}

int main(void) {
  snprintf(dir, sizeof dir, "/tmp/kl_ckpt_XXXXXX");
  if (!mkdtemp(dir)) {
    perror("mkdtemp");
    return 1;
  }
  test_param_count();
  test_agrees_with_model();
  test_round_trip();
  test_corruption();
  test_sparse_big();
  test_save_validation();
  test_tokenizer_check();
  remove_dir();
  return kl_test_done("test_checkpoint");
}
