/*
 * tests/bench/bench_emu.c — how fast is the CPU emulator?
 *
 * Runs the 2-D-blocktiled seed (kernels/seeds/05_blocktile_2d.cu) on the
 * emulator at 256^3 and, as the named baseline measured in the same run, a
 * plain C triple loop (i, j, k; dot product in the inner loop) of the same
 * size, both on one OS thread so the comparison is like for like, then on
 * all cores for the emulator. Prints the medians and the ratio
 * emulator / triple loop; the goal is within 4x. Then the same ratio for a
 * seed whose inner loop is warp shuffles (09_splitk_warp_reduce), the
 * emulator's costliest construct (each shuffle is a warp barrier, a fiber
 * switch per lane).
 *
 * usage: bench_emu [SOURCE_DIR] [SIZE]
 */
#include "bench_util.h"
#include "kernels/kernels.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define REPEATS 7

static double now_ms(void) {
  return bench_now_s() * 1e3;
}

/* The baseline: the textbook triple loop. */
static void __attribute__((noinline))
triple_loop(const float *A, const float *B, float *C, int M, int N, int K) {
  for (int i = 0; i < M; i++)
    for (int j = 0; j < N; j++) {
      float acc = 0.0f;
      for (int k = 0; k < K; k++)
        acc += A[i * K + k] * B[k * N + j];
      C[i * N + j] = acc;
    }
}

/* The seed dir/kernels/seeds/name built for the emulator, or NULL. */
static kl_emu_module *build_seed(const char *dir, const char *name) {
  char path[1024], why[512];
  snprintf(path, sizeof path, "%s/kernels/seeds/%s", dir, name);
  char *src = NULL;
  size_t len;
  kl_emu_module *m = NULL;
  if (kl_source_load(path, &src, &len, why, sizeof why) != KL_OK ||
      kl_emu_build(src, len, &m, NULL, NULL, why, sizeof why) != KL_OK) {
    fprintf(stderr, "bench_emu: %s\n", why);
    m = NULL;
  }
  free(src);
  return m;
}

int main(int argc, char **argv) {
  const char *dir = argc > 1 ? argv[1] : getenv("KL_SOURCE_DIR");
  if (!dir) dir = KL_DEFAULT_SOURCE_DIR;
  int n = argc > 2 ? atoi(argv[2]) : 256;
  char why[512];
  kl_emu_module *m = build_seed(dir, "05_blocktile_2d.cu");
  kl_emu_module *shfl = build_seed(dir, "09_splitk_warp_reduce.cu");
  if (!m || !shfl) return 1;
  size_t nn = (size_t)n * n;
  float *A = malloc(nn * 4), *B = malloc(nn * 4), *C = malloc(nn * 4);
  kl_fill_random(A, nn, 1, 0);
  kl_fill_random(B, nn, 1, 1);
  double t_loop[REPEATS], t_emu1[REPEATS], t_emu[REPEATS], t_shfl[REPEATS];
  for (int r = 0; r < REPEATS; r++) {
    double t0 = now_ms();
    triple_loop(A, B, C, n, n, n);
    t_loop[r] = now_ms() - t0;
    t0 = now_ms();
    if (kl_emu_run(m, A, B, C, n, n, n, 1, why, sizeof why) != KL_OK) {
      fprintf(stderr, "bench_emu: %s\n", why);
      return 1;
    }
    t_emu1[r] = now_ms() - t0;
    t0 = now_ms();
    kl_emu_run(m, A, B, C, n, n, n, 0, why, sizeof why);
    t_emu[r] = now_ms() - t0;
    t0 = now_ms();
    if (kl_emu_run(shfl, A, B, C, n, n, n, 1, why, sizeof why) != KL_OK) {
      fprintf(stderr, "bench_emu: %s\n", why);
      return 1;
    }
    t_shfl[r] = now_ms() - t0;
  }
  double loop = bench_median(t_loop, REPEATS),
         emu1 = bench_median(t_emu1, REPEATS),
         emu = bench_median(t_emu, REPEATS), sh = bench_median(t_shfl, REPEATS);
  printf("size %d^3, median of %d\n", n, REPEATS);
  printf("  baseline: plain C triple loop, 1 thread      %9.2f ms\n", loop);
  printf("  cpu-emu 05_blocktile_2d, 1 OS thread         %9.2f ms\n", emu1);
  printf("  cpu-emu 05_blocktile_2d, all cores           %9.2f ms\n", emu);
  printf("ratio emulator(1 thread) / triple loop: %.2fx (goal: within 4x)\n",
         emu1 / loop);
  printf("  cpu-emu 09_splitk_warp_reduce (shuffles), 1 OS thread %9.2f ms\n",
         sh);
  printf("ratio shuffle seed(1 thread) / triple loop: %.2fx\n", sh / loop);
  free(A);
  free(B);
  free(C);
  kl_emu_free(m);
  kl_emu_free(shfl);
  return 0;
}
