/*
 * tests/bench/bench_compile.c — what the NVRTC compile cache buys.
 *
 * For every .cu file in kernels/seeds (or two built-in kernels when there are
 * no seeds yet) it measures, in one process: miss: kl_nvrtc_compile with
 * use_cache = 0, i.e. a plain NVRTC compile of the same text (the baseline),
 * median of MISS_REPS runs; hit:  kl_nvrtc_compile with the cache on after one
 * priming compile, median of HIT_REPS runs, each checked to be a hit that
 * returns the baseline's cubin bytes. It prints one row per seed and the
 * overall ratio sum(miss) / sum(hit) against the goal "a hit >= 100x faster
 * than a miss".
 *
 * The cache is a fresh temporary folder, removed at the end, so the user's
 * cache is neither read nor polluted. What it does not measure: concurrent
 * compiles, the emulator's build cache, or cold-disk reads (hits come from
 * the page cache, which is the common case in a campaign).
 *
 * Usage: bench_compile [source-dir | seeds-dir]
 *   default: $KL_SOURCE_DIR, else the source tree this was built from.
 */
#include "kernels/kernels.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MISS_REPS 3
#define HIT_REPS 25

#ifndef KL_DEFAULT_SOURCE_DIR
#define KL_DEFAULT_SOURCE_DIR "."
#endif

static const char *kl_sample_naive =
    "KL_LAUNCH(16, 16, 16, 16, 0);\n"
    "extern \"C\" __global__ void matmul(const float* A, const float* B,\n"
    "    float* C, int M, int N, int K) {\n"
    "  int row = blockIdx.y * 16 + threadIdx.y;\n"
    "  int col = blockIdx.x * 16 + threadIdx.x;\n"
    "  if (row >= M || col >= N) return;\n"
    "  float acc = 0.0f;\n"
    "  for (int k = 0; k < K; k++) acc += A[row * K + k] * B[k * N + col];\n"
    "  C[row * N + col] = acc;\n"
    "}\n";

static const char *kl_sample_tiled =
    "#define BS 32\n"
    "KL_LAUNCH(BS, BS, BS, BS, 0);\n"
    "extern \"C\" __global__ void matmul(const float* A, const float* B,\n"
    "    float* C, int M, int N, int K) {\n"
    "  __shared__ float As[BS][BS + 1], Bs[BS][BS + 1];\n"
    "  int tx = threadIdx.x, ty = threadIdx.y;\n"
    "  int row = blockIdx.y * BS + ty, col = blockIdx.x * BS + tx;\n"
    "  float acc = 0.0f;\n"
    "  for (int k0 = 0; k0 < K; k0 += BS) {\n"
    "    As[ty][tx] = (row < M && k0 + tx < K) ? A[row * K + k0 + tx] : 0.f;\n"
    "    Bs[ty][tx] = (k0 + ty < K && col < N) ? B[(k0 + ty) * N + col] "
    ": 0.f;\n"
    "    __syncthreads();\n"
    "#pragma unroll\n"
    "    for (int k = 0; k < BS; k++) acc += As[ty][k] * Bs[k][tx];\n"
    "    __syncthreads();\n"
    "  }\n"
    "  if (row < M && col < N) C[row * N + col] = acc;\n"
    "}\n";

static int kl_cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static double kl_median(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, kl_cmp_double);
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static int kl_is_cu(const struct dirent *e) {
  size_t n = strlen(e->d_name);
  return n > 3 && strcmp(e->d_name + n - 3, ".cu") == 0;
}

static char *kl_read_file(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *buf = n >= 0 ? malloc((size_t)n + 1) : NULL;
  if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
    free(buf);
    buf = NULL;
  }
  fclose(f);
  if (buf) {
    buf[n] = '\0';
    *len = (size_t)n;
  }
  return buf;
}

/* Measures one text; adds its medians to the totals. Returns 0 on success. */
static int kl_bench_one(const char *name, const char *src, size_t len,
                        double *sum_miss, double *sum_hit) {
  char why[512];
  double miss[MISS_REPS], hit[HIT_REPS];
  kl_compiled base, c;
  int rc = kl_nvrtc_compile(src, len, "sm_90", 0, &base, why, sizeof why);
  if (rc != KL_OK) {
    printf("%-28s compile failed (rc %d): %s\n", name, rc, why);
    kl_compiled_free(&base);
    return 1;
  }
  miss[0] = base.compile_ms;
  for (int i = 1; i < MISS_REPS; i++) {
    kl_nvrtc_compile(src, len, "sm_90", 0, &c, why, sizeof why);
    miss[i] = c.compile_ms;
    kl_compiled_free(&c);
  }
  /* Priming compile writes the entry; every later call must hit. */
  kl_nvrtc_compile(src, len, "sm_90", 1, &c, why, sizeof why);
  kl_compiled_free(&c);
  for (int i = 0; i < HIT_REPS; i++) {
    rc = kl_nvrtc_compile(src, len, "sm_90", 1, &c, why, sizeof why);
    int same = rc == KL_OK && c.cache_hit && c.cubin_size == base.cubin_size &&
               memcmp(c.cubin, base.cubin, base.cubin_size) == 0;
    hit[i] = c.compile_ms;
    kl_compiled_free(&c);
    if (!same) {
      printf("%-28s cache did not hit with identical bytes (rc %d)\n", name,
             rc);
      kl_compiled_free(&base);
      return 1;
    }
  }
  double m = kl_median(miss, MISS_REPS), h = kl_median(hit, HIT_REPS);
  printf("%-28s %10.1f %10.3f %10.0fx   (%d regs, %zu-byte cubin)\n", name, m,
         h, m / h, base.res.regs, base.cubin_size);
  *sum_miss += m;
  *sum_hit += h;
  kl_compiled_free(&base);
  return 0;
}

/* Removes the bench's temporary cache folder and its entries. */
static void kl_remove_dir(const char *dir) {
  DIR *d = opendir(dir);
  if (!d) return;
  struct dirent *e;
  char p[4400];
  while ((e = readdir(d)) != NULL) {
    if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
    snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
    unlink(p);
  }
  closedir(d);
  rmdir(dir);
}

int main(int argc, char **argv) {
  char why[512];
  if (kl_nvrtc_load(why, sizeof why) != KL_OK) {
    fprintf(stderr, "bench_compile: %s\n", why);
    return 3;
  }
  char cache[] = "/tmp/kl_bench_compile.XXXXXX";
  if (!mkdtemp(cache)) {
    perror("bench_compile: mkdtemp");
    return 3;
  }
  setenv("KERNLAB_CACHE", cache, 1);

  /* argv[1] or $KL_SOURCE_DIR: a source tree (use its kernels/seeds) or a
   * folder of .cu files. */
  const char *root = argc > 1 ? argv[1] : getenv("KL_SOURCE_DIR");
  if (!root || !*root) root = KL_DEFAULT_SOURCE_DIR;
  char seeds[4096];
  struct stat st;
  snprintf(seeds, sizeof seeds, "%s/kernels/seeds", root);
  if (stat(seeds, &st) != 0 || !S_ISDIR(st.st_mode))
    snprintf(seeds, sizeof seeds, "%s", root);
  struct dirent **list = NULL;
  int n = scandir(seeds, &list, kl_is_cu, alphasort);

  printf("bench_compile: NVRTC %s, sm_90, cache in %s\n", kl_nvrtc_version(),
         cache);
  printf("baseline: uncached NVRTC compile of the same text (use_cache=0), "
         "median of %d; hit: median of %d\n\n",
         MISS_REPS, HIT_REPS);
  printf("%-28s %10s %10s %10s\n", "seed", "miss_ms", "hit_ms", "ratio");
  double sum_miss = 0, sum_hit = 0;
  int failed = 0, measured = 0;
  if (n > 0) {
    for (int i = 0; i < n; i++) {
      char path[8192];
      size_t len = 0;
      snprintf(path, sizeof path, "%s/%s", seeds, list[i]->d_name);
      char *src = kl_read_file(path, &len);
      if (!src) {
        printf("%-28s unreadable\n", list[i]->d_name);
        failed++;
      } else if (kl_bench_one(list[i]->d_name, src, len, &sum_miss, &sum_hit) ==
                 0) {
        measured++;
      } else {
        failed++;
      }
      free(src);
      free(list[i]);
    }
    free(list);
  } else {
    printf("(no .cu files in %s: using two built-in kernels)\n", seeds);
    const char *names[2] = {"builtin_naive", "builtin_tiled"};
    const char *srcs[2] = {kl_sample_naive, kl_sample_tiled};
    for (int i = 0; i < 2; i++) {
      if (kl_bench_one(names[i], srcs[i], strlen(srcs[i]), &sum_miss,
                       &sum_hit) == 0)
        measured++;
      else
        failed++;
    }
  }
  kl_remove_dir(cache);
  if (measured == 0) {
    printf("\nnothing measured\n");
    return 1;
  }
  double ratio = sum_miss / sum_hit;
  printf("\noverall (%d kernels): miss %.1f ms, hit %.3f ms, ratio %.0fx\n",
         measured, sum_miss, sum_hit, ratio);
  printf("goal: a hit >= 100x faster than a miss: %s\n",
         ratio >= 100 ? "met" : "NOT met");
  return failed ? 1 : 0;
}
