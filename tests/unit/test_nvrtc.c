/*
 * tests/unit/test_nvrtc.c — the NVRTC path without a GPU: compile results
 * (resources, the kl_launch constant, error summaries), the on-disk cache
 * (hits, identical bytes, corrupt entries are misses), the ptxas log
 * parser on canned text, and the ELF reader on hostile input (truncated and
 * bit-flipped cubins, a hand-built image).
 *
 * The cache lives in a fresh folder made for this run (under
 * $KERNLAB_CACHE when set), so the first compile of each text is a miss.
 * Without NVRTC the compile checks are skipped with a note and the parser,
 * cache and hand-built ELF checks still run. It does not time anything
 * (tests/bench/bench_compile.c does).
 */
#include "kernels/kernels.h"
#include "kltest.h"

#include <dirent.h>
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char kl_tmpdir[4096];

/* ---- kernels under test ---------------------------------------------------
 */

/* 2-array tiled kernel; KL_LAUNCH is its only reference to kl_launch. */
static const char *kl_src_tiled =
    "#define TS 16\n"
    "KL_LAUNCH(16, 16, 16, 16, 2 * 32 * 33 * sizeof(float));\n"
    "extern \"C\" __global__ void matmul(const float* A, const float* B,\n"
    "    float* C, int M, int N, int K) {\n"
    "  extern __shared__ float sm[];\n"
    "  float* As = sm; float* Bs = sm + 32 * 33;\n"
    "  int tx = threadIdx.x, ty = threadIdx.y;\n"
    "  int row = blockIdx.y * TS + ty, col = blockIdx.x * TS + tx;\n"
    "  float acc = 0.0f;\n"
    "  for (int k0 = 0; k0 < K; k0 += TS) {\n"
    "    As[ty * 33 + tx] = (row < M && k0 + tx < K) ? A[row * K + k0 + tx] "
    ": 0.f;\n"
    "    Bs[ty * 33 + tx] = (k0 + ty < K && col < N) ? B[(k0 + ty) * N + col] "
    ": 0.f;\n"
    "    __syncthreads();\n"
    "    for (int k = 0; k < TS; k++) acc += As[ty * 33 + k] * Bs[k * 33 + "
    "tx];\n"
    "    __syncthreads();\n"
    "  }\n"
    "  if (row < M && col < N) C[row * N + col] = acc;\n"
    "}\n";

/* Static shared memory: 1024 floats = 4096 bytes. */
static const char *kl_src_smem =
    "KL_LAUNCH(256, 1, 16, 16, 0);\n"
    "extern \"C\" __global__ void matmul(const float* A, const float* B,\n"
    "    float* C, int M, int N, int K) {\n"
    "  __shared__ float s[1024];\n"
    "  for (int i = threadIdx.x; i < 1024; i += 256) s[i] = A[i];\n"
    "  __syncthreads();\n"
    "  C[threadIdx.x] = s[1023 - threadIdx.x] + B[0];\n"
    "}\n";

/* No shared memory: ptxas omits the smem part of the "Used" line. */
static const char *kl_src_plain =
    "KL_LAUNCH(8, 4, 4, 8, 0);\n"
    "extern \"C\" __global__ void matmul(const float* A, const float* B,\n"
    "    float* C, int M, int N, int K) {\n"
    "  int i = blockIdx.x * 32 + threadIdx.y * 8 + threadIdx.x;\n"
    "  if (i < M * N) C[i] = A[i] * B[i] + (float)K;\n"
    "}\n";

/* The kernel reads its own geometry: kl_launch is used, not only declared. */
static const char *kl_src_uses_launch =
    "KL_LAUNCH(32, 2, 2, 32, 128);\n"
    "extern \"C\" __global__ void matmul(const float* A, const float* B,\n"
    "    float* C, int M, int N, int K) {\n"
    "  int i = blockIdx.x * kl_launch.block_x + threadIdx.x;\n"
    "  if (i < N) C[i] = A[i] + B[i] + K + M;\n"
    "}\n";

static const char *kl_src_includes =
    "#include <cuda_fp16.h>\n"
    "#include <cuda_bf16.h>\n"
    "#include <mma.h>\n"
    "KL_LAUNCH(32, 1, 1, 32, 0);\n"
    "extern \"C\" __global__ void matmul(const float* A, const float* B,\n"
    "    float* C, int M, int N, int K) {\n"
    "  __half h = __float2half(A[threadIdx.x]);\n"
    "  __nv_bfloat16 b = __float2bfloat16(B[threadIdx.x]);\n"
    "  C[threadIdx.x] = __half2float(h) + __bfloat162float(b) + M + N + K;\n"
    "}\n";

/* cooperative_groups.h reaches into libcu++ (<cuda/std/type_traits>, which
 * CUDA 13 keeps under include/cccl): the compile needs that folder too. */
static const char *kl_src_coop =
    "#include <cooperative_groups.h>\n"
    "#include <cooperative_groups/reduce.h>\n"
    "namespace cg = cooperative_groups;\n"
    "KL_LAUNCH(64, 1, 1, 64, 0);\n"
    "extern \"C\" __global__ void matmul(const float* A, const float* B,\n"
    "    float* C, int M, int N, int K) {\n"
    "  cg::thread_block block = cg::this_thread_block();\n"
    "  cg::thread_block_tile<32> warp = cg::tiled_partition<32>(block);\n"
    "  float v = A[block.thread_rank()] + warp.shfl_down(B[0], 16);\n"
    "  block.sync();\n"
    "  C[block.thread_rank()] = cg::reduce(warp, v, cg::plus<float>());\n"
    "}\n";

static const char *kl_src_broken =
    "KL_LAUNCH(16, 16, 16, 16, 0);\n"
    "extern \"C\" __global__ void matmul(const float* A, const float* B,\n"
    "    float* C, int M, int N, int K) {\n"
    "  C[0] = undeclared_a + A[0];\n"
    "  C[1] = undeclared_b;\n"
    "  C[2] = undeclared_c;\n"
    "  C[3] = undeclared_d;\n"
    "}\n";

/* ---- helpers --------------------------------------------------------------
 */

static uint64_t kl_rng = 0x9e3779b97f4a7c15ull;
static uint64_t kl_rand(void) {
  kl_rng ^= kl_rng << 13;
  kl_rng ^= kl_rng >> 7;
  kl_rng ^= kl_rng << 17;
  return kl_rng;
}

static int kl_compile(const char *src, int use_cache, kl_compiled *c, char *why,
                      size_t whylen) {
  return kl_nvrtc_compile(src, strlen(src), "sm_90", use_cache, c, why, whylen);
}

/* Flips one byte at the middle of file path. Returns 1 on success. */
static int kl_flip_byte(const char *path) {
  FILE *f = fopen(path, "r+b");
  if (!f) return 0;
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, n / 2, SEEK_SET);
  int ch = fgetc(f);
  fseek(f, n / 2, SEEK_SET);
  fputc(ch ^ 0x40, f);
  fclose(f);
  return 1;
}

static long kl_file_size(const char *path) {
  struct stat st;
  return stat(path, &st) == 0 ? (long)st.st_size : -1;
}

/* A private cache folder for this run, set before the cache's first use. */
static void kl_fresh_cache(void) {
  const char *parent = getenv("KERNLAB_CACHE");
  if (parent && *parent) mkdir(parent, 0755);
  snprintf(kl_tmpdir, sizeof kl_tmpdir, "%s/test_nvrtc.XXXXXX",
           parent && *parent ? parent : "/tmp");
  if (!mkdtemp(kl_tmpdir)) snprintf(kl_tmpdir, sizeof kl_tmpdir, "/tmp");
  setenv("KERNLAB_CACHE", kl_tmpdir, 1);
}

static void kl_remove_cache(void) {
  DIR *d = opendir(kl_tmpdir);
  if (!d || strcmp(kl_tmpdir, "/tmp") == 0) {
    if (d) closedir(d);
    return;
  }
  struct dirent *e;
  char p[4400];
  while ((e = readdir(d)) != NULL) {
    if (e->d_name[0] == '.') continue;
    snprintf(p, sizeof p, "%s/%s", kl_tmpdir, e->d_name);
    unlink(p);
  }
  closedir(d);
  rmdir(kl_tmpdir);
}

/* ---- ptxas parser on canned logs ----------------------------------------- */

static void kl_test_ptxas(void) {
  kl_resources r;
  const char *log1 =
      "ptxas info    : 20 bytes gmem\n"
      "ptxas info    : Compiling entry function '_Z5otherPf' for 'sm_90'\n"
      "ptxas info    : Function properties for _Z5otherPf\n"
      "ptxas         .     8 bytes stack frame, 4 bytes spill stores, 4 "
      "bytes spill loads\n"
      "ptxas info    : Used 10 registers, used 1 barriers, 32 bytes smem\n"
      "ptxas info    : Compile time = 3.368 ms\n"
      "ptxas info    : Compiling entry function 'matmul' for 'sm_90'\n"
      "ptxas info    : Function properties for matmul\n"
      "ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 "
      "bytes spill loads\n"
      "ptxas info    : Used 12 registers, used 0 barriers\n"
      "ptxas info    : Compile time = 2.443 ms\n";
  CHECK(kl_ptxas_parse(log1, &r) == 1, "log1 parse");
  CHECK(r.regs == 12, "regs %d", r.regs);
  CHECK(r.barriers == 0, "barriers %d", r.barriers);
  CHECK(r.smem_bytes == 0, "no smem part means 0, got %d", r.smem_bytes);
  CHECK(r.stack_bytes == 0 && r.spill_stores == 0 && r.spill_loads == 0,
        "stack %d spills %d/%d", r.stack_bytes, r.spill_stores, r.spill_loads);

  const char *log2 =
      "ptxas info    : Compiling entry function 'matmul' for 'sm_90'\r\n"
      "ptxas info    : Function properties for matmul\r\n"
      "    24 bytes stack frame, 16 bytes spill stores, 12 bytes spill "
      "loads\r\n"
      "ptxas info    : Function properties for _Z6helperv\r\n"
      "    96 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\r\n"
      "ptxas info    : Used 94 registers, used 1 barriers, 8192 bytes smem\r\n";
  CHECK(kl_ptxas_parse(log2, &r) == 1, "log2 parse");
  CHECK(r.regs == 94 && r.barriers == 1 && r.smem_bytes == 8192,
        "regs %d barriers %d smem %d", r.regs, r.barriers, r.smem_bytes);
  CHECK(r.stack_bytes == 24 && r.spill_stores == 16 && r.spill_loads == 12,
        "helper's stack frame must not win: stack %d spills %d/%d",
        r.stack_bytes, r.spill_stores, r.spill_loads);

  /* An older format: no barrier count, cmem listed. */
  const char *log3 =
      "ptxas info    : Compiling entry function 'matmul' for 'sm_80'\n"
      "ptxas info    : Used 32 registers, 4096 bytes smem, 380 bytes "
      "cmem[0]\n";
  CHECK(kl_ptxas_parse(log3, &r) == 1, "log3 parse");
  CHECK(r.regs == 32 && r.barriers == -1 && r.smem_bytes == 4096 &&
            r.stack_bytes == -1 && r.spill_loads == -1,
        "regs %d barriers %d smem %d stack %d", r.regs, r.barriers,
        r.smem_bytes, r.stack_bytes);

  CHECK(kl_ptxas_parse("", &r) == 0 && r.regs == -1 && r.smem_bytes == -1,
        "empty log");
  CHECK(kl_ptxas_parse(NULL, &r) == 0, "NULL log");
  CHECK(kl_ptxas_parse("ptxas info    : Compiling entry function 'matmul2' "
                       "for 'sm_90'\nptxas info    : Used 5 registers\n",
                       &r) == 0,
        "another entry's registers are not matmul's");
}

/* ---- cache ----------------------------------------------------------------
 */

static void kl_test_cache(void) {
  const char *key = "0123456789abcdef0123456789abcdef0123456789abcdef01234567"
                    "89abcdef";
  uint8_t *d;
  size_t n;
  CHECK(kl_cache_get(key, ".t", &d, &n) == 0, "empty cache misses");
  CHECK(kl_cache_put(key, ".t", "hello cache", 11) == 1, "put");
  CHECK(kl_cache_get(key, ".t", &d, &n) == 1 && n == 11 &&
            memcmp(d, "hello cache", 11) == 0,
        "round trip");
  if (d) free(d);
  CHECK(kl_cache_put(key, ".empty", "", 0) == 1, "put empty");
  CHECK(kl_cache_get(key, ".empty", &d, &n) == 1 && n == 0, "empty payload");
  free(d);

  char path[4352];
  kl_cache_path(key, ".t", path, sizeof path);
  CHECK(strncmp(path, kl_tmpdir, strlen(kl_tmpdir)) == 0, "path %s in %s", path,
        kl_tmpdir);
  CHECK(strcmp(kl_cache_dir(), kl_tmpdir) == 0, "dir %s", kl_cache_dir());
  long size = kl_file_size(path);
  CHECK(size == 44 + 11, "header + payload, got %ld", size);

  /* Truncated by one byte: a miss. */
  CHECK(truncate(path, size - 1) == 0, "truncate");
  CHECK(kl_cache_get(key, ".t", &d, &n) == 0 && d == NULL, "truncated");
  /* Rewritten, then one payload byte flipped: a miss. */
  kl_cache_put(key, ".t", "hello cache", 11);
  FILE *f = fopen(path, "r+b");
  if (f) {
    fseek(f, 44 + 3, SEEK_SET);
    fputc('L', f);
    fclose(f);
  }
  CHECK(kl_cache_get(key, ".t", &d, &n) == 0, "flipped payload byte");
  /* Rewritten, then extra bytes appended: a miss. */
  kl_cache_put(key, ".t", "hello cache", 11);
  f = fopen(path, "ab");
  if (f) {
    fputs("junk", f);
    fclose(f);
  }
  CHECK(kl_cache_get(key, ".t", &d, &n) == 0, "appended bytes");
  CHECK(kl_cache_put("../escape", ".t", "x", 1) == 0, "no '..' names");
  CHECK(kl_cache_put("a/b", ".t", "x", 1) == 0, "no '/' names");
}

/* ---- ELF reader -----------------------------------------------------------
 */

/* Calls kl_elf_symbol on an exact-size heap copy (so ASan sees any overread)
 * and checks the contract: KL_OK points inside the copy, errors explain. */
static int kl_elf_probe(const uint8_t *img, size_t len, const char *name) {
  uint8_t *copy = malloc(len ? len : 1);
  if (!copy) return -1;
  memcpy(copy, img, len);
  const void *data = (const void *)1;
  size_t dlen = 99;
  char why[200] = "";
  int rc = kl_elf_symbol(copy, len, name, &data, &dlen, why, sizeof why);
  int ok = 1;
  if (rc == KL_OK) {
    const uint8_t *p = data;
    ok = p >= copy && p <= copy + len && dlen <= (size_t)(copy + len - p);
  } else {
    ok = rc == KL_EINPUT && why[0] != '\0' && data == NULL && dlen == 0;
  }
  /* the load-time-code check reads the same image (a cubin runs nothing
   * at load: OK, or an error that explains) */
  why[0] = 0;
  int lrc = kl_elf_load_time_code(copy, len, why, sizeof why);
  if (lrc != KL_OK && (lrc != KL_EINPUT || !why[0])) ok = 0;
  free(copy);
  return ok ? rc : -1;
}

/* name must be found in the intact image; other is a second symbol. */
static void kl_elf_fuzz(const uint8_t *cubin, size_t size, const char *name,
                        const char *other) {
  int bad = 0, ok_full = 0;
  /* Every truncation length. */
  for (size_t len = 0; len <= size; len++) {
    int rc = kl_elf_probe(cubin, len, name);
    if (rc < 0) bad++;
    if (len == size && rc == KL_OK) ok_full = 1;
  }
  CHECK(bad == 0, "%d truncations broke the contract", bad);
  CHECK(ok_full, "the whole cubin still reads");

  /* Random byte flips, biased towards the headers and tables. */
  uint8_t *m = malloc(size);
  bad = 0;
  int found = 0;
  for (int iter = 0; iter < 20000 && m; iter++) {
    memcpy(m, cubin, size);
    int flips = 1 + (int)(kl_rand() % 8);
    for (int f = 0; f < flips; f++) {
      size_t pos = (kl_rand() & 1) ? kl_rand() % (size < 1024 ? size : 1024)
                                   : kl_rand() % size;
      if (kl_rand() % 4 == 0)
        pos = size - 1 - kl_rand() % (size < 1600 ? size : 1600);
      m[pos] = (kl_rand() % 3 == 0) ? 0xff : (uint8_t)kl_rand();
    }
    size_t len = (kl_rand() % 5 == 0) ? kl_rand() % (size + 1) : size;
    int rc = kl_elf_probe(m, len, (iter & 1) ? name : other);
    if (rc < 0) bad++;
    if (rc == KL_OK) found++;
  }
  free(m);
  CHECK(bad == 0, "%d mutations broke the contract", bad);
  printf("elf fuzz: %zu truncations, 20000 mutations (%d still found the "
         "symbol)\n",
         size + 1, found);
}

static void kl_w16(uint8_t *p, uint16_t v) {
  p[0] = (uint8_t)v;
  p[1] = (uint8_t)(v >> 8);
}
static void kl_w32(uint8_t *p, uint32_t v) {
  for (int i = 0; i < 4; i++)
    p[i] = (uint8_t)(v >> (8 * i));
}
static void kl_w64(uint8_t *p, uint64_t v) {
  for (int i = 0; i < 8; i++)
    p[i] = (uint8_t)(v >> (8 * i));
}

/* A relocatable ELF64 built by hand: sections null, .strtab, .symtab,
 * .data (8 bytes), .bss (NOBITS); symbols "in_data" (offset 4, 4 bytes),
 * "in_bss" and "too_long" (offset 4, 8 bytes: past the end of .data). */
static size_t kl_build_elf(uint8_t *img) {
  memset(img, 0, 512);
  memcpy(img,
         "\x7f"
         "ELF\x02\x01\x01",
         7);
  kl_w16(img + 16, 1); /* ET_REL */
  const char strs[] = "\0in_data\0in_bss\0too_long\0";
  size_t stroff = 64, symoff = 128, dataoff = 256, shoff = 320;
  memcpy(img + stroff, strs, sizeof strs);
  /* symbols: 0 null, 1 in_data, 2 in_bss, 3 too_long */
  uint8_t *s = img + symoff;
  kl_w32(s + 24, 1), kl_w16(s + 24 + 6, 3), kl_w64(s + 24 + 8, 4),
      kl_w64(s + 24 + 16, 4);
  kl_w32(s + 48, 9), kl_w16(s + 48 + 6, 4), kl_w64(s + 48 + 16, 4);
  kl_w32(s + 72, 16), kl_w16(s + 72 + 6, 3), kl_w64(s + 72 + 8, 4),
      kl_w64(s + 72 + 16, 8);
  memcpy(img + dataoff, "\x01\x02\x03\x04\x05\x06\x07\x08", 8);
  struct {
    uint32_t type, link;
    uint64_t off, size, entsize;
  } sh[5] = {{0, 0, 0, 0, 0},
             {3, 0, stroff, sizeof strs, 0},
             {2, 1, symoff, 4 * 24, 24},
             {1, 0, dataoff, 8, 0},
             {8, 0, dataoff + 8, 64, 0}};
  for (int i = 0; i < 5; i++) {
    uint8_t *h = img + shoff + 64 * i;
    kl_w32(h + 4, sh[i].type);
    kl_w64(h + 24, sh[i].off);
    kl_w64(h + 32, sh[i].size);
    kl_w32(h + 40, sh[i].link);
    kl_w64(h + 56, sh[i].entsize);
  }
  kl_w64(img + 40, shoff);
  kl_w16(img + 58, 64);
  kl_w16(img + 60, 5);
  return shoff + 5 * 64;
}

static void kl_test_handmade_elf(void) {
  uint8_t img[704];
  size_t n = kl_build_elf(img);
  const void *d;
  size_t len;
  char why[200];
  int rc = kl_elf_symbol(img, n, "in_data", &d, &len, why, sizeof why);
  CHECK(rc == KL_OK && len == 4 && d == img + 256 + 4 &&
            memcmp(d, "\x05\x06\x07\x08", 4) == 0,
        "in_data: rc %d len %zu %s", rc, len, why);
  rc = kl_elf_symbol(img, n, "in_bss", &d, &len, why, sizeof why);
  CHECK(rc == KL_EINPUT && strstr(why, "NOBITS"), "in_bss: %s", why);
  rc = kl_elf_symbol(img, n, "too_long", &d, &len, why, sizeof why);
  CHECK(rc == KL_EINPUT && strstr(why, "past"), "too_long: %s", why);
  rc = kl_elf_symbol(img, n, "in_", &d, &len, why, sizeof why);
  CHECK(rc == KL_EINPUT && strstr(why, "no symbol named in_"),
        "prefix is not a match: %s", why);
  rc = kl_elf_symbol(img, n, "nothing", &d, &len, why, sizeof why);
  CHECK(rc == KL_EINPUT && strstr(why, "nothing"), "missing: %s", why);
  rc = kl_elf_symbol(img, 10, "in_data", &d, &len, why, sizeof why);
  CHECK(rc == KL_EINPUT, "10 bytes: %s", why);
  kl_elf_fuzz(img, n, "in_data", "too_long");
}

/* ---- NVRTC ----------------------------------------------------------------
 */

static void kl_test_compile(void) {
  kl_compiled c, c2;
  char why[512];

  /* The tiled kernel: geometry, resources, then a cache hit. */
  int rc = kl_compile(kl_src_tiled, 1, &c, why, sizeof why);
  CHECK(rc == KL_OK, "tiled: rc %d: %s", rc, why);
  CHECK(!c.cache_hit, "first compile is a miss");
  CHECK(c.has_launch, "kl_launch found when KL_LAUNCH is its only use");
  CHECK(c.launch.block_x == 16 && c.launch.block_y == 16 &&
            c.launch.tile_rows == 16 && c.launch.tile_cols == 16 &&
            c.launch.dyn_smem_bytes == 8448,
        "launch %d %d %d %d %d", c.launch.block_x, c.launch.block_y,
        c.launch.tile_rows, c.launch.tile_cols, c.launch.dyn_smem_bytes);
  CHECK(c.res.regs > 0, "regs %d", c.res.regs);
  CHECK(c.res.barriers == 1, "barriers %d", c.res.barriers);
  CHECK(c.res.smem_bytes == 0, "dynamic smem is not static: %d",
        c.res.smem_bytes);
  CHECK(c.res.spill_stores == 0 && c.res.stack_bytes == 0, "spills %d",
        c.res.spill_stores);
  CHECK(strlen(c.key) == 64, "key %s", c.key);
  CHECK(c.log && strstr(c.log, "Compiling entry function 'matmul'"), "log");
  CHECK(c.compile_ms > 0, "compile_ms %f", c.compile_ms);
  printf("tiled: %d regs, miss %.1f ms\n", c.res.regs, c.compile_ms);

  rc = kl_compile(kl_src_tiled, 1, &c2, why, sizeof why);
  CHECK(rc == KL_OK && c2.cache_hit, "second compile: rc %d hit %d", rc,
        c2.cache_hit);
  CHECK(c2.cubin_size == c.cubin_size && c.cubin && c2.cubin &&
            memcmp(c2.cubin, c.cubin, c.cubin_size) == 0,
        "cache hit returns identical cubin bytes");
  CHECK(c2.log && c.log && strcmp(c2.log, c.log) == 0, "identical log");
  CHECK(memcmp(&c2.res, &c.res, sizeof c.res) == 0 &&
            memcmp(&c2.launch, &c.launch, sizeof c.launch) == 0 &&
            c2.has_launch && strcmp(c2.key, c.key) == 0,
        "same resources, launch and key");
  printf("tiled: hit %.3f ms\n", c2.compile_ms);
  kl_compiled_free(&c2);

  /* use_cache = 0 neither reads nor writes. */
  rc = kl_compile(kl_src_tiled, 0, &c2, why, sizeof why);
  CHECK(rc == KL_OK && !c2.cache_hit, "uncached: rc %d hit %d", rc,
        c2.cache_hit);
  kl_compiled_free(&c2);

  /* A corrupted entry is a miss that recompiles the same bytes. */
  char path[4352];
  kl_cache_path(c.key, ".nvrtc", path, sizeof path);
  CHECK(kl_flip_byte(path), "flip a byte of %s", path);
  rc = kl_compile(kl_src_tiled, 1, &c2, why, sizeof why);
  CHECK(rc == KL_OK && !c2.cache_hit, "corrupt entry: rc %d hit %d", rc,
        c2.cache_hit);
  CHECK(c2.cubin_size == c.cubin_size && c2.cubin &&
            memcmp(c2.cubin, c.cubin, c.cubin_size) == 0,
        "recompiled bytes equal the original");
  kl_compiled_free(&c2);
  rc = kl_compile(kl_src_tiled, 1, &c2, why, sizeof why);
  CHECK(rc == KL_OK && c2.cache_hit, "entry rewritten after the miss");
  kl_compiled_free(&c2);
  CHECK(truncate(path, kl_file_size(path) / 2) == 0, "truncate entry");
  rc = kl_compile(kl_src_tiled, 1, &c2, why, sizeof why);
  CHECK(rc == KL_OK && !c2.cache_hit && c2.cubin_size == c.cubin_size,
        "truncated entry is a miss");
  kl_compiled_free(&c2);

  /* A different arch is a different key. */
  rc = kl_nvrtc_compile(kl_src_tiled, strlen(kl_src_tiled), "sm_90a", 1, &c2,
                        why, sizeof why);
  CHECK(rc == KL_OK && !c2.cache_hit && strcmp(c2.key, c.key) != 0,
        "sm_90a: rc %d hit %d %s", rc, c2.cache_hit, why);
  kl_compiled_free(&c2);

  /* The real cubin through the ELF reader, then fuzzed. */
  const void *d;
  size_t len;
  rc = kl_elf_symbol(c.cubin, c.cubin_size, "kl_launch", &d, &len, why,
                     sizeof why);
  CHECK(rc == KL_OK && len == 20, "kl_launch: rc %d len %zu", rc, len);
  rc = kl_elf_symbol(c.cubin, c.cubin_size, "no_such_symbol", &d, &len, why,
                     sizeof why);
  CHECK(rc == KL_EINPUT && strstr(why, "no_such_symbol"),
        "missing symbol gives a reason: %s", why);
  kl_elf_fuzz(c.cubin, c.cubin_size, "kl_launch", "matmul");
  kl_compiled_free(&c);

  /* Static shared memory. */
  rc = kl_compile(kl_src_smem, 1, &c, why, sizeof why);
  CHECK(rc == KL_OK && c.res.smem_bytes == 4096 && c.res.barriers == 1,
        "smem: rc %d smem %d barriers %d %s", rc, c.res.smem_bytes,
        c.res.barriers, why);
  CHECK(c.has_launch && c.launch.block_x == 256, "smem launch");
  kl_compiled_free(&c);

  rc = kl_compile(kl_src_plain, 1, &c, why, sizeof why);
  CHECK(rc == KL_OK && c.res.smem_bytes == 0 && c.res.barriers == 0 &&
            c.res.regs > 0,
        "plain: rc %d smem %d barriers %d", rc, c.res.smem_bytes,
        c.res.barriers);
  CHECK(c.has_launch && c.launch.block_x == 8 && c.launch.block_y == 4 &&
            c.launch.tile_rows == 4 && c.launch.tile_cols == 8,
        "plain launch");
  kl_compiled_free(&c);

  rc = kl_compile(kl_src_uses_launch, 1, &c, why, sizeof why);
  CHECK(rc == KL_OK && c.has_launch && c.launch.block_x == 32 &&
            c.launch.dyn_smem_bytes == 128,
        "kernel that reads kl_launch: rc %d has %d", rc, c.has_launch);
  kl_compiled_free(&c);

  /* The allowlisted toolkit headers resolve. */
  rc = kl_compile(kl_src_includes, 1, &c, why, sizeof why);
  CHECK(rc == KL_OK, "cuda_fp16.h/cuda_bf16.h/mma.h: rc %d %s", rc, why);
  kl_compiled_free(&c);
  rc = kl_compile(kl_src_coop, 1, &c, why, sizeof why);
  CHECK(rc == KL_OK && c.res.barriers == 1,
        "cooperative_groups.h and reduce.h: rc %d barriers %d %s", rc,
        c.res.barriers, why);
  kl_compiled_free(&c);

  /* Compile errors: summary in why, whole log kept, nothing cached. */
  rc = kl_compile(kl_src_broken, 1, &c, why, sizeof why);
  CHECK(rc == KL_ECOMPILE && strstr(why, "error"), "broken: rc %d %s", rc, why);
  CHECK(strstr(why, "undeclared_a") && strstr(why, "undeclared_c") &&
            !strstr(why, "undeclared_d") && strstr(why, " | "),
        "first three error lines joined: %s", why);
  CHECK(c.log && strstr(c.log, "undeclared_d"), "full log kept");
  CHECK(c.cubin == NULL && !c.has_launch, "no cubin on failure");
  printf("broken: %s\n", why);
  kl_compiled_free(&c);
  rc = kl_compile(kl_src_broken, 1, &c, why, sizeof why);
  CHECK(rc == KL_ECOMPILE && !c.cache_hit, "failures are not cached");
  kl_compiled_free(&c);
  char tiny[12];
  rc = kl_compile(kl_src_broken, 1, &c, tiny, sizeof tiny);
  CHECK(rc == KL_ECOMPILE && strlen(tiny) == sizeof tiny - 1,
        "why trimmed to whylen: '%s'", tiny);
  kl_compiled_free(&c);

  /* A virtual architecture gives the PTX text where the cubin would be
   * (show --ptx), of its exact length; a bogus one is rejected. */
  rc = kl_nvrtc_compile(kl_src_plain, strlen(kl_src_plain), "compute_90", 0, &c,
                        why, sizeof why);
  CHECK(rc == KL_OK && c.cubin && c.cubin_size > 0 &&
            memchr(c.cubin, 0, c.cubin_size) == NULL &&
            strstr((const char *)c.cubin, ".entry matmul") &&
            strlen((const char *)c.cubin) == c.cubin_size,
        "compute_90: %d %s", rc, why);
  kl_compiled_free(&c);
  rc = kl_nvrtc_compile(kl_src_plain, strlen(kl_src_plain), "sm_1", 1, &c, why,
                        sizeof why);
  CHECK(rc != KL_OK && why[0], "sm_1: rc %d %s", rc, why);
  kl_compiled_free(&c);

  /* A cubin over KL_MAX_CUBIN_BYTES (a 6 MB initialised table) is refused
   * and never cached: each edit of such a kernel stored another (the
   * second sandbox review) */
  const char *bloat =
      "__device__ const float kl_table[1500000] = {1.0f};\n"
      "KL_LAUNCH(1, 1, 1, 1, 0);\n"
      "extern \"C\" __global__ void matmul(const float* A, const float* B,\n"
      "    float* C, int M, int N, int K) { C[0] = kl_table[M]; }\n";
  rc = kl_compile(bloat, 1, &c, why, sizeof why);
  CHECK(rc == KL_ECOMPILE && strstr(why, "over the 4 MiB") && !c.cubin,
        "a 6 MB cubin refused: rc %d %s", rc, why);
  kl_compiled_free(&c);
  rc = kl_compile(bloat, 1, &c, why, sizeof why);
  CHECK(rc == KL_ECOMPILE && !c.cache_hit, "and not cached: rc %d", rc);
  kl_compiled_free(&c);
}

int main(void) {
  kl_fresh_cache();
  kl_test_ptxas();
  kl_test_cache();
  kl_test_handmade_elf();
  char why[512];
  if (kl_nvrtc_load(why, sizeof why) != KL_OK) {
    printf("test_nvrtc: NVRTC unavailable, compile checks skipped: %s\n", why);
    CHECK(strcmp(kl_nvrtc_version(), "unknown") == 0, "version unknown");
  } else {
    printf("NVRTC %s\n", kl_nvrtc_version());
    CHECK(strchr(kl_nvrtc_version(), '.') != NULL, "version %s",
          kl_nvrtc_version());
    kl_test_compile();
  }
  kl_remove_cache();
  return kl_test_done("test_nvrtc");
}
