/*
 * tests/unit/test_verify_launch.c — the checks on one timed launch
 * (kernels/pace.c, kl_verify_launch), which both the cpu-emu driver and
 * the GPU runner apply to every timed output, on their own: an honest
 * float32 product passes (ragged shapes, and K = 4096, the GPU's timing
 * depth, where float32 rounding is largest); a wrong element at a row the
 * spot checks are unlikely to draw is found by Freivalds' check every
 * time; poison, inf, a 3e-5 error on every element (inside the element
 * bound, outside the relative one), bfloat16 inputs, and the previous
 * launch's output handed back are each flagged; after one failure later
 * calls add nothing. Every verification is repeated on 3 and 8 threads
 * and must end the same. Then kl_fill_random_mt (kl_fill_random's values
 * on any split), kl_report_flags (a detail only with a new flag) and
 * kl_secret_seed (two calls differ).
 */
#include "kernels/kernels.h"
#include "tests/unit/kltest.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* C = A B accumulated in float, in k order: what an honest kernel gives. */
static void product(kl_shape sh, const float *A, const float *B, float *C) {
  for (int i = 0; i < sh.M; i++)
    for (int j = 0; j < sh.N; j++) {
      float acc = 0;
      for (int k = 0; k < sh.K; k++)
        acc += A[(size_t)i * sh.K + k] * B[(size_t)k * sh.N + j];
      C[(size_t)i * sh.N + j] = acc;
    }
}

static float to_bf16(float x) {
  uint32_t u;
  memcpy(&u, &x, 4);
  u = (u + 0x7fff + (u >> 16 & 1)) & 0xffff0000u;
  memcpy(&x, &u, 4);
  return x;
}

typedef struct fixture {
  kl_shape sh;
  float *A, *B, *C, *W; /* W: a copy of C to spoil */
  double *scratch;
} fixture;

static void make(fixture *f, kl_shape sh, uint64_t seed) {
  f->sh = sh;
  size_t na = (size_t)sh.M * sh.K, nb = (size_t)sh.K * sh.N,
         nc = (size_t)sh.M * sh.N;
  f->A = malloc(na * sizeof(float));
  f->B = malloc(nb * sizeof(float));
  f->C = malloc(nc * sizeof(float));
  f->W = malloc(nc * sizeof(float));
  f->scratch = malloc(KL_VERIFY_SCRATCH(sh) * sizeof(double));
  kl_fill_random(f->A, na, seed, 0);
  kl_fill_random(f->B, nb, seed, 1);
  product(sh, f->A, f->B, f->C);
  memcpy(f->W, f->C, nc * sizeof(float));
}

static void drop(fixture *f) {
  free(f->A);
  free(f->B);
  free(f->C);
  free(f->W);
  free(f->scratch);
}

/* Verifies f->W as launch n with a fresh rng; the flags. The same
 * verification split over 1, 3 and 8 threads must end the same: flags,
 * detail, and what it drew from rng. */
static uint64_t verify(fixture *f, kl_pace_result *res, int n) {
  static uint64_t draw = 12345;
  uint64_t seed = kl_splitmix64(&draw), rng = seed;
  kl_pace_result before = *res;
  kl_verify_launch(f->sh, f->A, f->B, f->W, f->scratch, &rng, n, 1, res);
  static const int split[] = {3, 8};
  for (int i = 0; i < 2; i++) {
    kl_pace_result again = before;
    uint64_t rng2 = seed;
    kl_verify_launch(f->sh, f->A, f->B, f->W, f->scratch, &rng2, n, split[i],
                     &again);
    CHECK(again.flags == res->flags &&
              !strcmp(again.flag_detail, res->flag_detail) && rng2 == rng,
          "%d threads: '%s' where one thread says '%s'", split[i],
          again.flag_detail, res->flag_detail);
  }
  return res->flags;
}

static const uint64_t WRONG = (uint64_t)1 << KL_FLAG_TIMED_OUTPUT_WRONG;

int main(void) {
  kl_pace_result res;
  fixture f;

  /* honest float32, ragged; then deep K */
  kl_shape shapes[] = {{96, 80, 72}, {1, 1, 1}, {33, 17, 129}, {48, 40, 4096}};
  for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
    make(&f, shapes[s], 7 + s);
    for (int n = 0; n < 20; n++) {
      memset(&res, 0, sizeof res);
      CHECK(verify(&f, &res, n) == 0, "honest %dx%dx%d flagged: %s", f.sh.M,
            f.sh.N, f.sh.K, res.flag_detail);
    }
    drop(&f);
  }

  /* M N = 2^21 elements: the row passes split into 8 parts (kernels/pace.c
   * gives a part 2^18 elements at least) */
  make(&f, (kl_shape){2048, 1024, 16}, 99);
  size_t nc = (size_t)f.sh.M * f.sh.N;

  /* one element wrong by 4 (a row's bound is about 0.4 here): the 64
   * spots draw its row with odds about 3%, Freivalds' check every time, with
   * the launch named */
  int freivalds = 0;
  for (int t = 0; t < 50; t++) {
    memcpy(f.W, f.C, nc * sizeof(float));
    f.W[(size_t)(t * 41 % f.sh.M) * f.sh.N + (size_t)(t * 7 % f.sh.N)] += 4;
    memset(&res, 0, sizeof res);
    CHECK(verify(&f, &res, 3) == WRONG, "element off by 4 (trial %d): %s", t,
          res.flag_detail);
    freivalds += strstr(res.flag_detail, "Freivalds") != NULL;
    CHECK(strstr(res.flag_detail, "timed launch 3") != NULL, "detail: %s",
          res.flag_detail);
  }
  CHECK(freivalds == 50, "Freivalds found %d of 50 single wrong elements",
        freivalds);

  /* rows 5 and 1500 wrong, in different parts: the first is named, on any
   * split */
  memcpy(f.W, f.C, nc * sizeof(float));
  f.W[5 * (size_t)f.sh.N + 1] += 4;
  f.W[1500 * (size_t)f.sh.N + 2] += 4;
  memset(&res, 0, sizeof res);
  CHECK(verify(&f, &res, 3) == WRONG && strstr(res.flag_detail, "row 5 "),
        "two wrong rows: %s", res.flag_detail);

  /* poison left in one element; an inf */
  memcpy(f.W, f.C, nc * sizeof(float));
  kl_poison(f.W + 17, 1);
  memset(&res, 0, sizeof res);
  CHECK(verify(&f, &res, 1) == WRONG && strstr(res.flag_detail, "1 elements "
                                                                "of C "
                                                                "unwritten"),
        "poison: %s", res.flag_detail);
  memcpy(f.W, f.C, nc * sizeof(float));
  f.W[nc - 1] = INFINITY;
  memset(&res, 0, sizeof res);
  CHECK(verify(&f, &res, 1) == WRONG && strstr(res.flag_detail, "1 NaN/inf"),
        "inf: %s", res.flag_detail);

  /* 3e-5 on every element: each inside KL_TOL_ELEM, the whole outside
   * KL_TOL_REL */
  for (size_t i = 0; i < nc; i++)
    f.W[i] = f.C[i] * (1 + 3e-5f);
  memset(&res, 0, sizeof res);
  CHECK(verify(&f, &res, 2) == WRONG && strstr(res.flag_detail, "relative"),
        "3e-5 everywhere: %s", res.flag_detail);

  /* bfloat16 inputs, float accumulation */
  {
    size_t na = (size_t)f.sh.M * f.sh.K, nb = (size_t)f.sh.K * f.sh.N;
    float *a = malloc(na * sizeof(float)), *b = malloc(nb * sizeof(float));
    for (size_t i = 0; i < na; i++)
      a[i] = to_bf16(f.A[i]);
    for (size_t i = 0; i < nb; i++)
      b[i] = to_bf16(f.B[i]);
    product(f.sh, a, b, f.W);
    memset(&res, 0, sizeof res);
    CHECK(verify(&f, &res, 4) == WRONG, "bf16 inputs passed");
    free(a);
    free(b);
  }

  /* the previous launch's output handed back */
  {
    fixture g;
    make(&g, f.sh, 100);
    memcpy(f.W, g.C, nc * sizeof(float));
    memset(&res, 0, sizeof res);
    CHECK(verify(&f, &res, 5) == WRONG, "an earlier launch's C passed");
    drop(&g);
  }

  /* after one failure: nothing more (the detail names the first) */
  memcpy(f.W, f.C, nc * sizeof(float));
  kl_poison(f.W, nc);
  memset(&res, 0, sizeof res);
  verify(&f, &res, 6);
  char first[sizeof res.flag_detail];
  memcpy(first, res.flag_detail, sizeof first);
  f.W[0] = NAN;
  verify(&f, &res, 7);
  CHECK(res.flags == WRONG && !strcmp(first, res.flag_detail),
        "a second failure changed '%s' into '%s'", first, res.flag_detail);
  drop(&f);

  /* kl_fill_random_mt: the values of kl_fill_random, whatever the split */
  {
    /* the last in 9 parts of 2^18 and more (kernels/pace.c's split) */
    size_t sizes[] = {1, 63, 100003, ((size_t)9 << 18) + 7};
    for (size_t z = 0; z < 4; z++) {
      size_t nz = sizes[z];
      float *one = malloc(nz * sizeof(float)), *many = malloc(nz * 4);
      kl_fill_random(one, nz, 42, 3);
      for (int threads = 1; threads <= 9; threads += 4) {
        memset(many, 0, nz * sizeof(float));
        kl_fill_random_mt(many, nz, 42, 3, threads);
        CHECK(!memcmp(one, many, nz * sizeof(float)),
              "kl_fill_random_mt of %zu on %d threads differs", nz, threads);
      }
      free(one);
      free(many);
    }
  }

  /* kl_report_flags: the detail only with a flag the report lacks */
  kl_run_report *rep = calloc(1, sizeof *rep);
  kl_report_flags(rep, WRONG, "first");
  kl_report_flags(rep, WRONG, "again");
  CHECK(rep->flags == WRONG && !strcmp(rep->flag_detail, "first"),
        "flags %llx detail '%s'", (unsigned long long)rep->flags,
        rep->flag_detail);
  uint64_t mut = (uint64_t)1 << KL_FLAG_INPUT_MUTATED;
  kl_report_flags(rep, mut | WRONG, "second");
  CHECK(rep->flags == (mut | WRONG) && !strcmp(rep->flag_detail, "first; "
                                                                 "second"),
        "detail '%s'", rep->flag_detail);
  free(rep);

  uint64_t s1 = kl_secret_seed(), s2 = kl_secret_seed();
  CHECK(s1 != s2, "two secret seeds alike: %llx", (unsigned long long)s1);

  return kl_test_done("test_verify_launch");
}
