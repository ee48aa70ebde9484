/*
 * tests/unit/test_emu_mask.c — the masks of warp operations on the CPU
 * emulator: __syncwarp(mask), the __shfl_*_sync family, __ballot_sync,
 * __any_sync, __all_sync and __activemask().
 *
 * What a device (sm_70 and later, independent thread scheduling) does, per
 * the CUDA C++ Programming Guide's warp shuffle, warp vote and __syncwarp
 * sections: the mask names the lanes that take part; each lane it names
 * (that has not exited) must execute the same call with the same mask; a
 * lane must name itself; a shuffle that reads a lane outside the mask (or
 * one that has exited) gets an undefined value; a ballot has bits only for
 * the lanes in the mask; __activemask() gives the lanes executing the call
 * together. The emulator must run an honest kernel with partial masks
 * right, and a kernel that is wrong on a device because of its mask wrong
 * or refused: an undefined read is a poisoned value (NaN), a lane missing
 * from its own mask and lanes that never all arrive fail the launch with
 * a reason.
 *
 * As in test_emu.c, each case is a kernel with the contract's signature
 * used as a general launch (C is the output); the expected numbers are
 * computed here in C.
 */
#include "kernels/kernels.h"
#include "tests/unit/kltest.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#define ENTRY                                                                  \
  "extern \"C\" __global__ void matmul(const float* A, const float* B,\n"      \
  "    float* C, int M, int N, int K) {\n"                                     \
  "  unsigned* U = (unsigned*)C;\n"                                            \
  "  int t = threadIdx.x, lane = t % 32;\n"

static kl_emu_module *build(const char *src) {
  kl_emu_module *m = NULL;
  char why[600];
  int rc = kl_emu_build(src, strlen(src), &m, NULL, NULL, why, sizeof why);
  CHECK(rc == KL_OK, "build failed: %s", why);
  return rc == KL_OK ? m : NULL;
}

/* Runs m on a 1 x N output with 1 and 2 OS threads, in both scheduling
 * orders; returns 0 when every run succeeded (C holds the last). */
static int run_all(kl_emu_module *m, const float *A, float *C, int N) {
  char why[512];
  for (int reverse = 0; reverse <= 1; reverse++)
    for (int threads = 1; threads <= 2; threads++) {
      kl_emu_set_reverse(m, reverse, 1);
      int rc = kl_emu_run(m, A, NULL, C, 1, N, 1, threads, why, sizeof why);
      CHECK(rc == KL_OK, "run (reverse %d, %d threads): %s", reverse, threads,
            why);
      if (rc != KL_OK) return -1;
    }
  kl_emu_set_reverse(m, 0, 0);
  return 0;
}

/* Runs m once in each scheduling order and expects the launch to fail
 * with a reason holding every one of the (up to three) strings. */
static void expect_failure(kl_emu_module *m, const char *what, const char *s1,
                           const char *s2, const char *s3) {
  static float C[4096];
  for (int reverse = 0; reverse <= 1; reverse++) {
    char why[512] = "";
    kl_emu_set_reverse(m, reverse, 1);
    int rc = kl_emu_run(m, C, NULL, C, 1, 64, 1, 1, why, sizeof why);
    CHECK(rc == KL_ERUN, "%s (reverse %d): the launch fails, got %d", what,
          reverse, rc);
    CHECK(strstr(why, s1) && (!s2 || strstr(why, s2)) &&
              (!s3 || strstr(why, s3)),
          "%s (reverse %d): the reason names '%s' '%s' '%s': %s", what, reverse,
          s1, s2 ? s2 : "", s3 ? s3 : "", why);
  }
  kl_emu_set_reverse(m, 0, 0);
}

static unsigned bits_of(float f) {
  unsigned u;
  memcpy(&u, &f, 4);
  return u;
}

/* Honest partial masks in a block of two warps: a reduction over the
 * first 16 lanes with mask 0xffff inside `if (lane < 16)` (its lanes 8..15
 * read lanes outside the mask, values nothing uses) while the other half
 * reduces with its own mask; __syncwarp(0xffff) as the barrier of a
 * shared-memory exchange among 16 lanes; a shuffle among the odd lanes;
 * ballot, all and any with __activemask() inside both sides of a branch. */
static void test_partial_masks(void) {
  const char *src =
      "KL_LAUNCH(64, 1, 1, 64, 0);\n" ENTRY "  __shared__ float sh[64];\n"
      "  float v = A[t], r, w = v, odd = 0.0f;\n"
      "  if (lane < 16) {\n"
      "    float s = v;\n"
      "    for (int o = 8; o > 0; o >>= 1)\n"
      "      s += __shfl_down_sync(0x0000ffffu, s, o);\n"
      "    r = __shfl_sync(0x0000ffffu, s, 0);\n"
      "    sh[t] = v;\n"
      "    __syncwarp(0x0000ffffu);\n"
      "    w = sh[(t & ~31) + 15 - lane];\n"
      "    __syncwarp(0x0000ffffu);\n"
      "  } else {\n"
      "    float s = v;\n"
      "    for (int o = 8; o > 0; o >>= 1)\n"
      "      s += __shfl_xor_sync(0xffff0000u, s, o);\n"
      "    r = s;\n"
      "  }\n"
      "  if (lane & 1) odd = __shfl_sync(0xaaaaaaaau, v, lane ^ 2);\n"
      "  unsigned act, bal;\n"
      "  int all, any;\n"
      "  if (lane % 4 == 0) {\n"
      "    act = __activemask();\n"
      "    bal = __ballot_sync(act, lane % 8 == 0);\n"
      "    all = __all_sync(act, lane < 32);\n"
      "    any = __any_sync(act, lane == 12);\n"
      "  } else {\n"
      "    act = __activemask();\n"
      "    bal = __ballot_sync(act, lane < 8);\n"
      "    all = __all_sync(act, lane < 8);\n"
      "    any = __any_sync(act, lane == 12);\n"
      "  }\n"
      "  __syncwarp();\n"
      "  C[t * 8 + 0] = r;\n"
      "  C[t * 8 + 1] = w;\n"
      "  C[t * 8 + 2] = odd;\n"
      "  U[t * 8 + 3] = act;\n"
      "  U[t * 8 + 4] = bal;\n"
      "  U[t * 8 + 5] = (unsigned)all;\n"
      "  U[t * 8 + 6] = (unsigned)any;\n"
      "  C[t * 8 + 7] = __shfl_sync(0xffffffffu, v, 31);\n"
      "}\n";
  kl_emu_module *m = build(src);
  if (!m) return;
  float A[64];
  static float C[64 * 8];
  for (int i = 0; i < 64; i++)
    A[i] = (float)(i + 1);
  if (run_all(m, A, C, 64) == 0) {
    int bad = 0;
    for (int t = 0; t < 64; t++) {
      int lane = t % 32, base = t - lane, lo = lane < 16;
      float half = 0;
      for (int i = 0; i < 16; i++)
        half += A[base + (lo ? 0 : 16) + i];
      const float *o = C + t * 8;
      int quad = lane % 4 == 0;
      unsigned want_act = quad ? 0x11111111u : 0xeeeeeeeeu;
      unsigned want_bal = quad ? 0x01010101u : 0xeeu;
      float want_w = lo ? A[base + 15 - lane] : A[t];
      float want_odd = lane & 1 ? A[base + (lane ^ 2)] : 0.0f;
      if (o[0] != half || o[1] != want_w || o[2] != want_odd ||
          bits_of(o[3]) != want_act || bits_of(o[4]) != want_bal ||
          bits_of(o[5]) != (unsigned)quad || bits_of(o[6]) != (unsigned)quad ||
          o[7] != A[base + 31]) {
        if (bad++ < 4)
          fprintf(stderr,
                  "  thread %d: sum %g (%g) smem %g (%g) odd %g (%g) "
                  "act %08x (%08x) ballot %08x (%08x) all %u any %u (%d) "
                  "warp %g\n",
                  t, o[0], half, o[1], want_w, o[2], want_odd, bits_of(o[3]),
                  want_act, bits_of(o[4]), want_bal, bits_of(o[5]),
                  bits_of(o[6]), quad, o[7]);
      }
    }
    CHECK(bad == 0, "%d of 64 threads wrong with partial masks", bad);
  }
  kl_emu_free(m);
}

/* What a device leaves undefined reads poisoned: a shuffle from a lane
 * outside its mask, from a lane that has returned, and from a lane a
 * partial warp does not have (a 48-thread block). Reads inside the mask
 * are right in the same shuffles. */
static void test_reads_outside_mask_poisoned(void) {
  const char *src = "KL_LAUNCH(48, 1, 1, 48, 0);\n" ENTRY
                    "  float v = A[t], x = 0.0f, y = 0.0f, z = 0.0f;\n"
                    "  if (t < 16) {\n"
                    "    x = __shfl_sync(0x0000ffffu, v, 20);\n"
                    "    y = __shfl_down_sync(0x0000ffffu, v, 8);\n"
                    "  }\n"
                    "  C[t * 3 + 0] = x;\n"
                    "  C[t * 3 + 1] = y;\n"
                    "  if (t >= 16 && t < 32 && lane >= 24) return;\n"
                    "  z = __shfl_down_sync(0xffffffffu, v, 8);\n"
                    "  C[t * 3 + 2] = z;\n"
                    "}\n";
  kl_emu_module *m = build(src);
  if (!m) return;
  float A[48], C[48 * 3];
  for (int i = 0; i < 48; i++)
    A[i] = (float)(i + 1);
  if (run_all(m, A, C, 48) == 0) {
    int bad = 0;
    for (int t = 0; t < 48; t++) {
      int lane = t % 32;
      const float *o = C + t * 3;
      if (t < 16) {
        bad += !isnan(o[0]); /* lane 20 is outside the mask */
        bad += t < 8 ? o[1] != A[t + 8] : !isnan(o[1]);
      }
      if (t >= 24 && t < 32) continue; /* returned */
      /* warp 0: lanes 16..23 read 24..31, which returned; warp 1 (16
       * lanes): lanes 8..15 read lanes it does not have */
      int gone = t < 32 ? lane >= 16 : lane >= 8;
      if (lane + 8 >= 32)
        bad += o[2] != A[t]; /* past the warp: its own value */
      else
        bad += gone ? !isnan(o[2]) : o[2] != A[t + 8];
    }
    CHECK(bad == 0, "%d reads outside the mask not poisoned, or inside wrong",
          bad);
  }
  kl_emu_free(m);
}

/* A lane that calls a warp operation with a mask that leaves it out: the
 * launch fails and says which mask (a device's result is undefined). */
static void test_mask_leaves_out_caller(void) {
  static const struct {
    const char *body, *mask;
  } cases[] = {
      {"  C[t] = __shfl_sync(0x0000ffffu, A[t], 0);\n", "0x0000ffff"},
      {"  __syncwarp(0u);\n  C[t] = 1.0f;\n", "0x00000000"},
      {"  if (lane == 1) U[t] = __ballot_sync(1u, 1);\n", "0x00000001"},
      {"  if (lane < 2) U[t] = __all_sync(0xfffffffdu, 1);\n", "0xfffffffd"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    char src[1024]; /* (ENTRY holds a '%': no format) */
    snprintf(src, sizeof src, "%s%s}\n", "KL_LAUNCH(64, 1, 1, 64, 0);\n" ENTRY,
             cases[i].body);
    kl_emu_module *m = build(src);
    if (!m) continue;
    expect_failure(m, cases[i].body, cases[i].mask, "leaves out", NULL);
    kl_emu_free(m);
  }
}

/* Lanes a mask names that never meet it with that mask: a deadlock,
 * reported with the mask, where the masks' mismatch was invisible when
 * every warp operation met the whole warp. Lanes that returned do not
 * hold a group back. */
static void test_mask_deadlocks(void) {
  const char *mismatch = "KL_LAUNCH(64, 1, 1, 64, 0);\n" ENTRY
                         "  if (lane < 16) __syncwarp(0xffffffffu);\n"
                         "  else __syncwarp(0xffff0000u);\n"
                         "  __syncthreads();\n"
                         "  C[t] = 1.0f;\n"
                         "}\n";
  kl_emu_module *m = build(mismatch);
  if (m) {
    expect_failure(m, "half-warp masks", "deadlock", "0xffffffff", NULL);
    kl_emu_free(m);
  }
  const char *nested =
      "KL_LAUNCH(64, 1, 1, 64, 0);\n" ENTRY "  float v = A[t];\n"
      "  if (lane < 8) v += __shfl_xor_sync(0x000000ffu, v, 1);\n"
      "  else if (lane < 16) v += __shfl_xor_sync(0x0000ffffu, v, 1);\n"
      "  else v += __shfl_xor_sync(0xffff0000u, v, 1);\n"
      "  __syncthreads();\n"
      "  C[t] = v;\n"
      "}\n";
  m = build(nested);
  if (m) {
    expect_failure(m, "a mask naming another group's lanes", "deadlock",
                   "0x0000ffff", NULL);
    kl_emu_free(m);
  }
  const char *returned =
      "KL_LAUNCH(64, 1, 1, 64, 0);\n" ENTRY "  if (lane >= 16) return;\n"
      "  __syncwarp(0xffffffffu);\n"
      "  C[t] = __shfl_xor_sync(0xffffffffu, A[t], 1);\n"
      "}\n";
  m = build(returned);
  if (m) {
    float A[64], C[64];
    for (int i = 0; i < 64; i++)
      A[i] = (float)i;
    if (run_all(m, A, C, 64) == 0)
      CHECK(C[0] == 1.0f && C[33] == 32.0f && C[15] == 14.0f,
            "lanes that returned do not count: %g %g %g", C[0], C[33], C[15]);
    kl_emu_free(m);
  }
}

/* __activemask(): the lanes that call it together. The whole warp at the
 * start (a partial warp's lanes only), each side of a branch its own
 * lanes (two calls the compiler would merge into one), a loop that lanes
 * leave at different iterations, its ballot over the lanes still in it,
 * and after a __syncwarp() that brings them together again, the lanes
 * that have not returned. */
static void test_activemask(void) {
  const char *src = "KL_LAUNCH(48, 1, 1, 48, 0);\n" ENTRY
                    "  unsigned top = __activemask(), side;\n"
                    "  if (lane & 1) side = __activemask();\n"
                    "  else side = __activemask();\n"
                    "  int votes = 0;\n"
                    "  for (int i = 0; i < lane % 4 + 1; i++)\n"
                    "    votes += __popc(__ballot_sync(__activemask(), 1));\n"
                    "  U[t * 4 + 0] = top;\n"
                    "  U[t * 4 + 1] = side;\n"
                    "  U[t * 4 + 2] = (unsigned)votes;\n"
                    "  __syncwarp();\n"
                    "  if (lane < 4) return;\n"
                    "  U[t * 4 + 3] = __activemask();\n"
                    "}\n";
  kl_emu_module *m = build(src);
  if (!m) return;
  float C[48 * 4];
  if (run_all(m, NULL, C, 48) == 0) {
    int bad = 0;
    for (int t = 0; t < 48; t++) {
      int lane = t % 32, n = t < 32 ? 32 : 16;
      unsigned all = n == 32 ? 0xffffffffu : 0xffffu;
      unsigned side = all & (lane & 1 ? 0xaaaaaaaau : 0x55555555u);
      unsigned votes = 0;
      for (int i = 0; i <= lane % 4; i++)
        votes += (unsigned)(n - n / 4 * i);
      const unsigned u[4] = {bits_of(C[t * 4]), bits_of(C[t * 4 + 1]),
                             bits_of(C[t * 4 + 2]), bits_of(C[t * 4 + 3])};
      int wrong = u[0] != all || u[1] != side || u[2] != votes ||
                  (lane >= 4 && u[3] != (all & ~0xfu));
      if (wrong && bad++ < 4)
        fprintf(stderr,
                "  thread %d: top %08x (%08x) side %08x (%08x) votes %u "
                "(%u) late %08x\n",
                t, u[0], all, u[1], side, u[2], votes, u[3]);
    }
    CHECK(bad == 0, "%d of 48 threads got a wrong __activemask", bad);
  }
  kl_emu_free(m);
}

int main(void) {
  test_partial_masks();
  test_reads_outside_mask_poisoned();
  test_mask_leaves_out_caller();
  test_mask_deadlocks();
  test_activemask();
  return kl_test_done("test_emu_mask");
}
