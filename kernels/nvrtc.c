/*
 * kernels/nvrtc.c — compiles a candidate with NVRTC into an sm_90 cubin,
 * with an on-disk cache, and reads back what the harness needs without a
 * GPU: the ptxas resource report and the kl_launch geometry constant.
 *
 * NVRTC is loaded with dlopen at run time, so the build needs no CUDA
 * headers or libraries and a machine without CUDA still runs everything
 * else (kl_nvrtc_load then reports KL_EENV). The few NVRTC types used here
 * are declared below to match nvrtc.h (CUDA 13.0).
 *
 * Every compile uses the same options:
 *   --gpu-architecture=<arch>  (sm_90 unless the caller asks otherwise)
 *   --ptxas-options=-v         (resource report in the program log)
 *   --std=c++17
 *   --pre-include=kl_abi.h     (kernels/abi.h, passed as an in-memory header)
 *   -I<toolkit include dir>    (NVRTC 13.0 does not find cuda_fp16.h,
 *                              cuda_bf16.h, cuda_pipeline.h, mma.h or
 *                              cooperative_groups.h on its own)
 *   -I<toolkit include dir>/cccl  (libcu++: cooperative_groups.h includes
 *                              <cuda/std/type_traits> and <cuda/atomic>,
 *                              which CUDA 13 keeps there)
 *
 * Cache: the key is sha256 over the source, every option string, the NVRTC
 * version and the abi.h text (each length-prefixed); the entry
 * "<key>.nvrtc" holds
 *   u64 cubin_size, u64 log_size, cubin bytes, log bytes   (little-endian)
 * inside kl_cache_put's checksummed envelope. Only successful compiles are
 * cached: a failure costs one more NVRTC run if it is submitted again, and
 * a transient failure (out of memory) can never stick.
 *
 * What it deliberately does not do: load the cubin (that needs a driver and
 * is the GPU backend's job), keep PTX, lower C++ names (the entry is
 * extern "C"), or check the source (kernels/source.c does that first).
 */
#define _GNU_SOURCE /* dladdr */
#include "kernels/kernels.h"

#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

/* ---- the slice of nvrtc.h this file uses --------------------------------- */

typedef int kl_nvrtc_result; /* nvrtcResult; 0 is NVRTC_SUCCESS */
typedef struct kl_nvrtc_program *kl_nvrtc_program;
#define KL_NVRTC_SUCCESS 0
#define KL_NVRTC_ERROR_INVALID_OPTION 5
#define KL_NVRTC_ERROR_COMPILATION 6

typedef struct kl_nvrtc_api {
  void *lib;
  const char *(*GetErrorString)(kl_nvrtc_result);
  kl_nvrtc_result (*Version)(int *, int *);
  kl_nvrtc_result (*CreateProgram)(kl_nvrtc_program *, const char *,
                                   const char *, int, const char *const *,
                                   const char *const *);
  kl_nvrtc_result (*DestroyProgram)(kl_nvrtc_program *);
  kl_nvrtc_result (*CompileProgram)(kl_nvrtc_program, int, const char *const *);
  kl_nvrtc_result (*GetProgramLogSize)(kl_nvrtc_program, size_t *);
  kl_nvrtc_result (*GetProgramLog)(kl_nvrtc_program, char *);
  kl_nvrtc_result (*GetCUBINSize)(kl_nvrtc_program, size_t *);
  kl_nvrtc_result (*GetCUBIN)(kl_nvrtc_program, char *);
  /* Optional: resolved when present, not needed for a cubin. */
  kl_nvrtc_result (*GetPTXSize)(kl_nvrtc_program, size_t *);
  kl_nvrtc_result (*GetPTX)(kl_nvrtc_program, char *);
} kl_nvrtc_api;

static kl_nvrtc_api kl_nv;
static pthread_once_t kl_nv_once = PTHREAD_ONCE_INIT;
static int kl_nv_status = KL_EENV;
static char kl_nv_why[512] = "NVRTC not loaded";
static char kl_nv_version[32] = "unknown";
static char kl_nv_include[PATH_MAX + 3]; /* "-I<dir>" or "" */
static char kl_nv_cccl[PATH_MAX + 8];    /* "-I<dir>/cccl" or "" */

/* ---- loading ------------------------------------------------------------- */

static double kl_now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static int kl_is_file(const char *path) {
  struct stat st;
  return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

/* Sets the -I options for `dir`, the toolkit's include folder: the folder
 * itself, and its cccl/ folder when it holds libcu++ (CUDA 13 keeps
 * <cuda/std/...> there, and cooperative_groups.h needs it). */
static void kl_set_include(const char *dir) {
  char probe[PATH_MAX + 64];
  snprintf(kl_nv_include, sizeof kl_nv_include, "-I%s", dir);
  snprintf(probe, sizeof probe, "%s/cccl/cuda/std/type_traits", dir);
  if (kl_is_file(probe))
    snprintf(kl_nv_cccl, sizeof kl_nv_cccl, "-I%s/cccl", dir);
}

/* Finds the toolkit's include folder for cuda_fp16.h & co: next to the
 * loaded libnvrtc (<lib>/../include, which is targets/<arch>/include once
 * symlinks are resolved), else /usr/local/cuda/include. Leaves "" if
 * neither has cuda_fp16.h; such includes then fail with NVRTC's message. */
static void kl_find_include(void) {
  Dl_info info;
  char real[PATH_MAX], dir[PATH_MAX + 32], probe[PATH_MAX + 64];
  kl_nv_include[0] = kl_nv_cccl[0] = '\0';
  if (dladdr((void *)kl_nv.Version, &info) && info.dli_fname &&
      realpath(info.dli_fname, real)) {
    char *slash = strrchr(real, '/');
    if (slash) {
      *slash = '\0';
      snprintf(dir, sizeof dir, "%s/../include", real);
      snprintf(probe, sizeof probe, "%s/cuda_fp16.h", dir);
      if (kl_is_file(probe) && realpath(dir, real)) {
        kl_set_include(real);
        return;
      }
    }
  }
  if (kl_is_file("/usr/local/cuda/include/cuda_fp16.h"))
    kl_set_include("/usr/local/cuda/include");
}

/* The options of every compile for arch_opt ("--gpu-architecture=..."):
 * fills opts (room for 6) and returns how many. */
static int kl_compile_options(const char *arch_opt, const char **opts) {
  int n = 0;
  opts[n++] = arch_opt;
  opts[n++] = "--ptxas-options=-v";
  opts[n++] = "--std=c++17";
  opts[n++] = "--pre-include=kl_abi.h";
  if (kl_nv_include[0]) opts[n++] = kl_nv_include;
  if (kl_nv_cccl[0]) opts[n++] = kl_nv_cccl;
  return n;
}

/* dlopens NVRTC and resolves every entry point; runs once per process. */
static void kl_nvrtc_load_once(void) {
  static const char *const names[] = {"libnvrtc.so.13", "libnvrtc.so",
                                      "/usr/local/cuda/lib64/libnvrtc.so.13"};
  char first_err[256] = "not found";
  for (size_t i = 0; i < sizeof names / sizeof names[0] && !kl_nv.lib; i++) {
    kl_nv.lib = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
    const char *e = kl_nv.lib ? NULL : dlerror();
    if (i == 0 && e) snprintf(first_err, sizeof first_err, "%s", e);
  }
  if (!kl_nv.lib) {
    snprintf(kl_nv_why, sizeof kl_nv_why,
             "NVRTC not found (%s; also tried libnvrtc.so and "
             "/usr/local/cuda/lib64/libnvrtc.so.13): install the CUDA 13 "
             "toolkit or add its lib64 to LD_LIBRARY_PATH",
             first_err);
    return;
  }
  struct {
    const char *name;
    void **slot;
    int required;
  } syms[] = {
      {"nvrtcGetErrorString", (void **)&kl_nv.GetErrorString, 1},
      {"nvrtcVersion", (void **)&kl_nv.Version, 1},
      {"nvrtcCreateProgram", (void **)&kl_nv.CreateProgram, 1},
      {"nvrtcDestroyProgram", (void **)&kl_nv.DestroyProgram, 1},
      {"nvrtcCompileProgram", (void **)&kl_nv.CompileProgram, 1},
      {"nvrtcGetProgramLogSize", (void **)&kl_nv.GetProgramLogSize, 1},
      {"nvrtcGetProgramLog", (void **)&kl_nv.GetProgramLog, 1},
      {"nvrtcGetCUBINSize", (void **)&kl_nv.GetCUBINSize, 1},
      {"nvrtcGetCUBIN", (void **)&kl_nv.GetCUBIN, 1},
      {"nvrtcGetPTXSize", (void **)&kl_nv.GetPTXSize, 0},
      {"nvrtcGetPTX", (void **)&kl_nv.GetPTX, 0},
  };
  for (size_t i = 0; i < sizeof syms / sizeof syms[0]; i++) {
    *syms[i].slot = dlsym(kl_nv.lib, syms[i].name);
    if (!*syms[i].slot && syms[i].required) {
      snprintf(kl_nv_why, sizeof kl_nv_why,
               "NVRTC: symbol %s missing from the loaded libnvrtc",
               syms[i].name);
      dlclose(kl_nv.lib);
      memset(&kl_nv, 0, sizeof kl_nv);
      return;
    }
  }
  int major = 0, minor = 0;
  if (kl_nv.Version(&major, &minor) != KL_NVRTC_SUCCESS) {
    snprintf(kl_nv_why, sizeof kl_nv_why, "NVRTC: nvrtcVersion failed");
    return;
  }
  snprintf(kl_nv_version, sizeof kl_nv_version, "%d.%d", major, minor);
  kl_find_include();
  kl_nv_status = KL_OK;
  kl_nv_why[0] = '\0';
}

/* Loads NVRTC with dlopen, once per process (thread-safe). Returns KL_OK, or
 * KL_EENV with a reason in why that names the libraries tried. */
int kl_nvrtc_load(char *why, size_t whylen) {
  pthread_once(&kl_nv_once, kl_nvrtc_load_once);
  if (kl_nv_status != KL_OK && why && whylen)
    snprintf(why, whylen, "%s", kl_nv_why);
  return kl_nv_status;
}

/* The loaded NVRTC's "major.minor", or "unknown" before a successful
 * kl_nvrtc_load. The string is static. */
const char *kl_nvrtc_version(void) {
  return kl_nv_version;
}

/* ---- cache key and payload ----------------------------------------------- */

/* Feeds a length-prefixed field, so that no two option lists collide. */
static void kl_key_field(kl_sha256_ctx *c, const void *p, size_t n) {
  uint8_t len[8];
  for (int i = 0; i < 8; i++)
    len[i] = (uint8_t)((uint64_t)n >> (8 * i));
  kl_sha256_update(c, len, sizeof len);
  kl_sha256_update(c, p, n);
}

static void kl_compile_key(const char *src, size_t len, const char *const *opts,
                           int nopts, char key[65]) {
  static const char hex[] = "0123456789abcdef";
  kl_sha256_ctx c;
  uint8_t d[32];
  kl_sha256_init(&c);
  kl_key_field(&c, "kernlab-nvrtc-1", 15);
  kl_key_field(&c, src, len);
  for (int i = 0; i < nopts; i++)
    kl_key_field(&c, opts[i], strlen(opts[i]));
  kl_key_field(&c, kl_nv_version, strlen(kl_nv_version));
  kl_key_field(&c, kl_abi_header, strlen(kl_abi_header));
  kl_sha256_final(&c, d);
  for (int i = 0; i < 32; i++) {
    key[2 * i] = hex[d[i] >> 4];
    key[2 * i + 1] = hex[d[i] & 15];
  }
  key[64] = '\0';
}

static void kl_put_u64(uint8_t *p, uint64_t v) {
  for (int i = 0; i < 8; i++)
    p[i] = (uint8_t)(v >> (8 * i));
}

static uint64_t kl_get_u64(const uint8_t *p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; i++)
    v |= (uint64_t)p[i] << (8 * i);
  return v;
}

/* Stores cubin + log under key. A failed write is ignored: it only costs
 * the next compile. */
static void kl_cache_store(const char *key, const kl_compiled *c) {
  size_t loglen = strlen(c->log);
  size_t n = 16 + c->cubin_size + loglen;
  uint8_t *buf = malloc(n);
  if (!buf) return;
  kl_put_u64(buf, c->cubin_size);
  kl_put_u64(buf + 8, loglen);
  memcpy(buf + 16, c->cubin, c->cubin_size);
  memcpy(buf + 16 + c->cubin_size, c->log, loglen);
  (void)kl_cache_put(key, ".nvrtc", buf, n);
  free(buf);
}

/* Fills out->cubin and out->log from a cache entry. Returns 1 on a hit with
 * a well-formed payload, else 0 (treated as a miss). */
static int kl_cache_load(const char *key, kl_compiled *out) {
  uint8_t *buf;
  size_t n;
  if (!kl_cache_get(key, ".nvrtc", &buf, &n)) return 0;
  int ok = 0;
  if (n >= 16) {
    uint64_t cs = kl_get_u64(buf), ls = kl_get_u64(buf + 8);
    if (cs > 0 && cs <= n - 16 && ls == n - 16 - cs) {
      out->cubin = malloc(cs);
      out->log = malloc(ls + 1);
      if (out->cubin && out->log) {
        memcpy(out->cubin, buf + 16, cs);
        out->cubin_size = cs;
        memcpy(out->log, buf + 16 + cs, ls);
        out->log[ls] = '\0';
        ok = 1;
      } else {
        free(out->cubin);
        free(out->log);
        out->cubin = NULL;
        out->log = NULL;
      }
    }
  }
  free(buf);
  return ok;
}

/* ---- compiling ----------------------------------------------------------- */

/* why = the first three log lines that mention "error", trimmed and joined
 * with " | "; falls back to fallback when no line does. */
static void kl_error_summary(const char *log, const char *fallback, char *why,
                             size_t whylen) {
  if (!why || !whylen) return;
  why[0] = '\0';
  size_t used = 0;
  int found = 0;
  for (const char *p = log ? log : ""; *p && found < 3;) {
    size_t n = strcspn(p, "\n");
    const char *line = p;
    p += n;
    if (*p) p++;
    const char *hit = NULL;
    for (size_t i = 0; i + 5 <= n && !hit; i++)
      if (memcmp(line + i, "error", 5) == 0) hit = line + i;
    if (!hit) continue;
    while (n > 0 && (*line == ' ' || *line == '\t')) {
      line++;
      n--;
    }
    while (n > 0 && (line[n - 1] == ' ' || line[n - 1] == '\r'))
      n--;
    int w = snprintf(why + used, whylen - used, "%s%.*s", found ? " | " : "",
                     (int)n, line);
    found++;
    if (w < 0 || (size_t)w >= whylen - used) return; /* trimmed to whylen */
    used += (size_t)w;
  }
  if (!found) snprintf(why, whylen, "%s", fallback);
}

/* Reads the program log into a malloc'd NUL-terminated string ("" when
 * NVRTC has none); NULL only when out of memory. */
static char *kl_program_log(kl_nvrtc_program prog) {
  size_t n = 0;
  if (kl_nv.GetProgramLogSize(prog, &n) != KL_NVRTC_SUCCESS) n = 0;
  char *log = malloc(n + 1);
  if (!log) return NULL;
  if (n == 0 || kl_nv.GetProgramLog(prog, log) != KL_NVRTC_SUCCESS) n = 0;
  log[n] = '\0';
  size_t len = strlen(log);
  if (len > KL_MAX_LOG_BYTES) {
    /* the head holds the first errors, the tail ptxas's resource lines */
    static const char cut[] = "\n[... the log's middle is cut ...]\n";
    size_t half = (KL_MAX_LOG_BYTES - sizeof cut) / 2;
    memcpy(log + half, cut, sizeof cut - 1);
    memmove(log + half + sizeof cut - 1, log + len - half, half + 1);
    char *shorter = realloc(log, KL_MAX_LOG_BYTES + 1);
    if (shorter) log = shorter;
  }
  return log;
}

/* Runs NVRTC on the source. Returns KL_OK with out->cubin and out->log set,
 * or an error with why filled (out->log set when NVRTC produced one). */
static int kl_run_nvrtc(const char *src, size_t len, const char *const *opts,
                        int nopts, kl_compiled *out, char *why, size_t whylen) {
  char *text = malloc(len + 1);
  if (!text) {
    snprintf(why, whylen, "NVRTC: out of memory for %zu bytes of source", len);
    return KL_EENV;
  }
  memcpy(text, src, len);
  text[len] = '\0';
  const char *headers[1] = {kl_abi_header};
  const char *names[1] = {"kl_abi.h"};
  kl_nvrtc_program prog = NULL;
  kl_nvrtc_result r =
      kl_nv.CreateProgram(&prog, text, "candidate.cu", 1, headers, names);
  free(text);
  if (r != KL_NVRTC_SUCCESS) {
    snprintf(why, whylen, "NVRTC: nvrtcCreateProgram: %s",
             kl_nv.GetErrorString(r));
    return KL_EENV;
  }
  r = kl_nv.CompileProgram(prog, nopts, opts);
  out->log = kl_program_log(prog);
  int status = KL_OK;
  if (r == KL_NVRTC_ERROR_COMPILATION) {
    kl_error_summary(out->log, "NVRTC: compilation failed", why, whylen);
    /* Under the compile profile's RLIMIT_AS a template bomb ends either as
     * a crash of the worker or, when NVRTC catches the failed allocation,
     * as this log line: the same event, the same status. */
    status = out->log && strstr(out->log, "catastrophic error: out of memory")
                 ? KL_EOOM
                 : KL_ECOMPILE;
  } else if (r == KL_NVRTC_ERROR_INVALID_OPTION) {
    snprintf(why, whylen, "NVRTC: %s for %s (unknown architecture?)",
             kl_nv.GetErrorString(r), opts[0]);
    status = KL_EINPUT;
  } else if (r != KL_NVRTC_SUCCESS) {
    snprintf(why, whylen, "NVRTC: nvrtcCompileProgram: %s",
             kl_nv.GetErrorString(r));
    status = KL_EENV;
  } else if (!out->log) {
    snprintf(why, whylen, "NVRTC: out of memory for the program log");
    status = KL_EENV;
  }
  /* A virtual architecture (compute_90) yields PTX only: `kernlab show
   * --ptx` asks for it, and gets the text where the cubin would be. */
  if (status == KL_OK && !strncmp(opts[0], "--gpu-architecture=compute_", 27)) {
    size_t ps = 0;
    if (!kl_nv.GetPTXSize || !kl_nv.GetPTX ||
        kl_nv.GetPTXSize(prog, &ps) != KL_NVRTC_SUCCESS || ps == 0 ||
        ps > KL_MAX_CUBIN_BYTES || !(out->cubin = malloc(ps)) ||
        kl_nv.GetPTX(prog, (char *)out->cubin) != KL_NVRTC_SUCCESS) {
      snprintf(why, whylen, "NVRTC: no PTX for %s (%zu bytes)", opts[0], ps);
      free(out->cubin);
      out->cubin = NULL;
      status = KL_EENV;
    } else {
      out->cubin[ps - 1] = 0;
      out->cubin_size = strlen((char *)out->cubin);
    }
    kl_nv.DestroyProgram(&prog);
    return status;
  }
  size_t cs = 0;
  if (status == KL_OK &&
      (kl_nv.GetCUBINSize(prog, &cs) != KL_NVRTC_SUCCESS || cs == 0)) {
    /* A virtual architecture (compute_90) yields PTX only, size 0. */
    snprintf(why, whylen, "NVRTC: no cubin for %s (a virtual architecture?)",
             opts[0]);
    status = KL_ECOMPILE;
  }
  if (status == KL_OK && cs > KL_MAX_CUBIN_BYTES) {
    snprintf(why, whylen,
             "error: the compiled kernel is %zu bytes, over the %d MiB a "
             "cubin may have (an honest one is about 8 KB; a large "
             "initialised __device__ table is data, not a kernel)",
             cs, KL_MAX_CUBIN_BYTES >> 20);
    status = KL_ECOMPILE;
  }
  if (status == KL_OK) {
    out->cubin = malloc(cs);
    if (!out->cubin ||
        kl_nv.GetCUBIN(prog, (char *)out->cubin) != KL_NVRTC_SUCCESS) {
      snprintf(why, whylen, "NVRTC: could not read the %zu-byte cubin", cs);
      free(out->cubin);
      out->cubin = NULL;
      status = KL_EENV;
    } else {
      out->cubin_size = cs;
    }
  }
  kl_nv.DestroyProgram(&prog);
  return status;
}

/* Reads kl_launch (five little-endian int32) from the cubin, if present. */
static void kl_read_launch(kl_compiled *c) {
  const void *p;
  size_t n;
  char why[128];
  c->has_launch = 0;
  if (kl_elf_symbol(c->cubin, c->cubin_size, "kl_launch", &p, &n, why,
                    sizeof why) != KL_OK ||
      n != 5 * sizeof(int32_t))
    return;
  int32_t v[5];
  const uint8_t *b = p;
  for (int i = 0; i < 5; i++)
    v[i] =
        (int32_t)((uint32_t)b[4 * i] | (uint32_t)b[4 * i + 1] << 8 |
                  (uint32_t)b[4 * i + 2] << 16 | (uint32_t)b[4 * i + 3] << 24);
  c->launch.block_x = v[0];
  c->launch.block_y = v[1];
  c->launch.tile_rows = v[2];
  c->launch.tile_cols = v[3];
  c->launch.dyn_smem_bytes = v[4];
  c->has_launch = 1;
}

/* Compiles src (len bytes; need not be NUL-terminated) for arch (NULL or ""
 * means "sm_90"). With use_cache, a verified cache entry is returned
 * instead of compiling, and a successful compile is stored; with use_cache
 * 0 the cache is neither read nor written. On KL_OK out holds the cubin and
 * log (owned, free with kl_compiled_free), the parsed resources and, when
 * the cubin has a kl_launch symbol, the launch geometry (has_launch = 1).
 * On KL_ECOMPILE why holds the first error lines and out->log the full log
 * (KL_EOOM when that log says NVRTC ran out of memory);
 * KL_EINPUT means NVRTC rejected the arch; KL_EENV means NVRTC is missing
 * or failed. compile_ms is the wall time of the whole call in every case. */
int kl_nvrtc_compile(const char *src, size_t len, const char *arch,
                     int use_cache, kl_compiled *out, char *why,
                     size_t whylen) {
  double t0 = kl_now_ms();
  char dummy[1];
  if (!why || !whylen) {
    why = dummy;
    whylen = sizeof dummy;
  }
  why[0] = '\0';
  memset(out, 0, sizeof *out);
  out->res.regs = out->res.spill_stores = out->res.spill_loads = -1;
  out->res.smem_bytes = out->res.stack_bytes = out->res.barriers = -1;

  int status = kl_nvrtc_load(why, whylen);
  if (status != KL_OK) goto done;
  if (!arch || !*arch) arch = "sm_90";
  char arch_opt[64];
  int n = snprintf(arch_opt, sizeof arch_opt, "--gpu-architecture=%s", arch);
  if (n < 0 || (size_t)n >= sizeof arch_opt) {
    snprintf(why, whylen, "NVRTC: architecture name too long");
    status = KL_EINPUT;
    goto done;
  }
  const char *opts[6];
  int nopts = kl_compile_options(arch_opt, opts);
  kl_compile_key(src, len, opts, nopts, out->key);

  if (use_cache && kl_cache_load(out->key, out)) {
    out->cache_hit = 1;
  } else {
    status = kl_run_nvrtc(src, len, opts, nopts, out, why, whylen);
    if (status != KL_OK) goto done;
    if (use_cache) kl_cache_store(out->key, out);
  }
  kl_ptxas_parse(out->log, &out->res);
  kl_read_launch(out);
done:
  out->compile_ms = kl_now_ms() - t0;
  return status;
}

int kl_nvrtc_cached(const char *src, size_t len, const char *arch,
                    kl_compiled *out) {
  char why[600];
  memset(out, 0, sizeof *out);
  out->res.regs = out->res.spill_stores = out->res.spill_loads = -1;
  out->res.smem_bytes = out->res.stack_bytes = out->res.barriers = -1;
  if (kl_nvrtc_load(why, sizeof why) != KL_OK) return 0;
  double t0 = kl_now_ms();
  if (!arch || !*arch) arch = "sm_90";
  char arch_opt[64];
  int n = snprintf(arch_opt, sizeof arch_opt, "--gpu-architecture=%s", arch);
  if (n < 0 || (size_t)n >= sizeof arch_opt) return 0;
  const char *opts[6];
  kl_compile_key(src, len, opts, kl_compile_options(arch_opt, opts), out->key);
  if (!kl_cache_load(out->key, out)) return 0;
  out->cache_hit = 1;
  kl_compiled_finish(out);
  out->compile_ms = kl_now_ms() - t0;
  return 1;
}

void kl_nvrtc_store(const kl_compiled *c) {
  if (c->cubin && c->cubin_size && c->log && c->key[0])
    kl_cache_store(c->key, c);
}

void kl_compiled_finish(kl_compiled *c) {
  kl_ptxas_parse(c->log ? c->log : "", &c->res);
  kl_read_launch(c);
}

/* Frees what kl_nvrtc_compile allocated in c and clears it; safe on a
 * zeroed or already freed struct. */
void kl_compiled_free(kl_compiled *c) {
  if (!c) return;
  free(c->cubin);
  free(c->log);
  memset(c, 0, sizeof *c);
}
