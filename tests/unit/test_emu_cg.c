/*
 * tests/unit/test_emu_cg.c — cooperative groups on the CPU emulator
 * (kernels/emu/cg_shim.h, cg_reduce_shim.h): the thread_block API, tile
 * shuffles and votes within each tile size, tiles of one warp that take
 * different paths, cg::reduce in the device's order, shuffles of types
 * wider than 8 bytes, the device's type sizes, deadlocks at a tile
 * barrier, and which kernels the reversed check run still isolates.
 *
 * As in test_emu.c, each case is a kernel with the contract's signature
 * used as a general launch (C is the output), written so that a wrong
 * emulation gives a wrong number; the expected numbers are computed here
 * in C, the way the device computes them.
 */
#include "kernels/kernels.h"
#include "tests/unit/kltest.h"

#include <stdio.h>
#include <string.h>

#define CG_HEAD                                                                \
  "#include <cooperative_groups.h>\n"                                          \
  "#include <cooperative_groups/reduce.h>\n"                                   \
  "namespace cg = cooperative_groups;\n"
#define ENTRY                                                                  \
  "extern \"C\" __global__ void matmul(const float* A, const float* B,\n"      \
  "    float* C, int M, int N, int K) {\n"

static kl_emu_module *build(const char *src) {
  kl_emu_module *m = NULL;
  char why[600];
  int rc = kl_emu_build(src, strlen(src), &m, NULL, NULL, why, sizeof why);
  CHECK(rc == KL_OK, "build failed: %s", why);
  return rc == KL_OK ? m : NULL;
}

/* Runs m on an M x N output with 1 and 2 OS threads, in both scheduling
 * orders; returns 0 when every run succeeded (C holds the last). */
static int run_all(kl_emu_module *m, const float *A, float *C, int M, int N) {
  char why[300];
  for (int reverse = 0; reverse <= 1; reverse++)
    for (int threads = 1; threads <= 2; threads++) {
      kl_emu_set_reverse(m, reverse, 1);
      int rc = kl_emu_run(m, A, NULL, C, M, N, 1, threads, why, sizeof why);
      CHECK(rc == KL_OK, "run (reverse %d, %d threads): %s", reverse, threads,
            why);
      if (rc != KL_OK) return -1;
    }
  kl_emu_set_reverse(m, 0, 0);
  return 0;
}

/* thread_block: ranks, sizes, indices in a (32, 4) block of a (2, 3)
 * grid, and its sync (block.sync and cg::sync) as a barrier: values
 * reversed through shared memory twice. */
static void test_block(void) {
  const char *src = CG_HEAD
      "KL_LAUNCH(32, 4, 3, 64, 0);\n" ENTRY
      "  cg::thread_block b = cg::this_thread_block();\n"
      "  __shared__ float s[128];\n"
      "  unsigned r = b.thread_rank();\n"
      "  dim3 g = b.group_index(), t = b.thread_index();\n"
      "  dim3 d = b.dim_threads(), d2 = b.group_dim();\n"
      "  float v = (float)r;\n"
      "  for (int i = 0; i < 2; i++) {\n"
      "    s[r] = v;\n"
      "    b.sync();\n"
      "    v = s[127 - r] + 1.0f;\n"
      "    cg::sync(b);\n"
      "  }\n"
      "  float* o = C + ((g.y * 2 + g.x) * 128 + r) * 8;\n"
      "  o[0] = v; o[1] = (float)b.size(); o[2] = (float)b.num_threads();\n"
      "  o[3] = (float)(t.y * 32 + t.x);\n"
      "  o[4] = (float)(d.x * 10 + d.y + d.z * 1000 + d2.x * 100000);\n"
      "  o[5] = (float)(g.x + 10 * g.y);\n"
      "  o[6] = (float)cg::thread_rank(b);\n"
      "  o[7] = (float)cg::group_size(b);\n"
      "}\n";
  kl_emu_module *m = build(src);
  if (!m) return;
  static float C[6 * 128 * 8];
  if (run_all(m, NULL, C, 9, 128) == 0) {
    int bad = 0;
    for (int blk = 0; blk < 6; blk++)
      for (int r = 0; r < 128; r++) {
        const float *o = C + (blk * 128 + r) * 8;
        /* dim_threads (32, 4, 1), group_dim the same */
        float want[8] = {(float)r + 2.0f,
                         128,
                         128,
                         (float)r,
                         32 * 10 + 4 + 1 * 1000 + 32 * 100000,
                         (float)(blk % 2 + 10 * (blk / 2)),
                         (float)r,
                         128};
        for (int k = 0; k < 8; k++)
          bad += o[k] != want[k];
      }
    CHECK(bad == 0, "%d wrong thread_block values", bad);
  }
  kl_emu_free(m);
}

/* The same tile kernel for every tile size: shfl_down and shfl_xor sums,
 * shfl_up, shfl by rank (negative and past the tile too), ballot, any,
 * all, ranks and the tile's place in the block (through a tile with a
 * parent and one converted to thread_block_tile<N>). */
static void test_tile_collectives(void) {
  static const int sizes[] = {1, 2, 4, 8, 16, 32};
  for (size_t si = 0; si < sizeof sizes / sizeof *sizes; si++) {
    int S = sizes[si];
    char src[4096];
    snprintf(
        src, sizeof src,
        CG_HEAD
        "#define S %d\n"
        "KL_LAUNCH(96, 1, 1, 96, 0);\n" ENTRY
        "  cg::thread_block b = cg::this_thread_block();\n"
        "  auto typed = cg::tiled_partition<S>(b);\n"
        "  cg::thread_block_tile<S> t = typed;\n"
        "  int r = b.thread_rank();\n"
        "  float v = A[r];\n"
        "  float down = v, x = v;\n"
        "  for (int o = S / 2; o > 0; o /= 2) down += t.shfl_down(down, o);\n"
        "  for (int o = S / 2; o > 0; o /= 2) x += t.shfl_xor(x, o);\n"
        "  float up = t.shfl_up(v, 1);\n"
        "  float at = t.shfl(v, S - 1), neg = t.shfl(v, -1);\n"
        "  float past = t.shfl(v, S + 1);\n"
        "  unsigned bal = t.ballot(t.thread_rank() %% 2 == 0);\n"
        "  int any = t.any(t.thread_rank() == S - 1);\n"
        "  int all = t.all(t.thread_rank() < S - 1);\n"
        "  int all1 = t.all(1);\n"
        "  t.sync();\n"
        "  float* o = C + r * 12;\n"
        "  o[0] = down; o[1] = x; o[2] = up; o[3] = at; o[4] = neg;\n"
        "  o[5] = past; o[6] = (float)bal; o[7] = (float)(any * 4 + all * 2 + "
        "all1);\n"
        "  o[8] = (float)t.thread_rank(); o[9] = (float)t.meta_group_rank();\n"
        "  o[10] = (float)(typed.meta_group_size() * 100 + "
        "t.meta_group_size());\n"
        "  o[11] = (float)(t.size() * 100 + t.num_threads());\n"
        "}\n",
        S);
    kl_emu_module *m = build(src);
    if (!m) continue;
    float A[96];
    static float C[96 * 12];
    for (int i = 0; i < 96; i++)
      A[i] = (float)(i * 3 + 1);
    if (run_all(m, A, C, 1, 96) == 0) {
      int bad = 0;
      for (int r = 0; r < 96; r++) {
        int base = r / S * S, rank = r % S;
        float down = A[r], x = A[r];
        /* the device's order, lane by lane: own value past the tile */
        float dn[32], xs[32];
        for (int l = 0; l < S; l++)
          dn[l] = xs[l] = A[base + l];
        for (int o = S / 2; o > 0; o /= 2) {
          float nd[32], nx[32];
          for (int l = 0; l < S; l++) {
            nd[l] = dn[l] + (l + o < S ? dn[l + o] : dn[l]);
            nx[l] = xs[l] + xs[l ^ o];
          }
          memcpy(dn, nd, sizeof nd);
          memcpy(xs, nx, sizeof nx);
        }
        down = dn[rank], x = xs[rank];
        unsigned bal = 0;
        for (int l = 0; l < S; l += 2)
          bal |= 1u << l;
        float want[12] = {down,
                          x,
                          rank ? A[r - 1] : A[r],
                          A[base + S - 1],
                          A[base + S - 1],
                          A[base + 1 % S],
                          (float)bal,
                          (float)(4 + 0 + 1), /* any, not all, all(1) */
                          (float)rank,
                          (float)(r / S),
                          (float)((96 + S - 1) / S * 101),
                          (float)(S * 101)};
        for (int k = 0; k < 12; k++)
          if (C[r * 12 + k] != want[k]) {
            if (bad++ < 3)
              fprintf(stderr, "S=%d r=%d field %d: %g, want %g\n", S, r, k,
                      C[r * 12 + k], want[k]);
          }
      }
      CHECK(bad == 0, "tile of %d: %d wrong values", S, bad);
    }
    kl_emu_free(m);
  }
}

/* Tiles of one warp on different paths, as a device allows: the first
 * 8-tile of each warp reduces (three exchanges), the others skip it, one
 * 16-tile syncs alone, then the whole warp shuffles. With exchange
 * buffers picked by a lane's own count of exchanges the warp's shuffle
 * read the wrong buffer; with a warp-wide barrier the lone tile sync
 * deadlocked. */
static void test_tiles_diverge(void) {
  const char *src =
      CG_HEAD "KL_LAUNCH(64, 1, 1, 64, 0);\n" ENTRY
              "  cg::thread_block b = cg::this_thread_block();\n"
              "  cg::thread_block_tile<32> w = cg::tiled_partition<32>(b);\n"
              "  auto t8 = cg::tiled_partition<8>(w);\n"
              "  auto t16 = cg::tiled_partition<16>(b);\n"
              "  float v = A[b.thread_rank()];\n"
              "  if (t8.meta_group_rank() == 0) v = cg::reduce(t8, v, "
              "cg::plus<float>());\n"
              "  if (t16.meta_group_rank() % 2 == 1) t16.sync();\n"
              "  float n = w.shfl(v, (w.thread_rank() + 1) % 32);\n"
              "  C[b.thread_rank()] = n;\n"
              "}\n";
  kl_emu_module *m = build(src);
  if (!m) return;
  float A[64], C[64];
  for (int i = 0; i < 64; i++)
    A[i] = (float)(i + 1);
  if (run_all(m, A, C, 1, 64) == 0) {
    int bad = 0;
    for (int r = 0; r < 64; r++) {
      int src_lane = (r % 32 + 1) % 32, s = r / 32 * 32 + src_lane;
      float want = A[s];
      if (src_lane < 8) {
        want = 0;
        for (int i = 0; i < 8; i++)
          want += A[r / 32 * 32 + i];
      }
      bad += C[r] != want;
    }
    CHECK(bad == 0, "%d of 64 wrong after tiles diverged", bad);
  }
  kl_emu_free(m);
}

/* cg::reduce: plus of floats bit for bit as the device's butterfly, less
 * and greater of ints, bit_xor, on tiles of 32 and 4. */
static void test_reduce(void) {
  const char *src =
      CG_HEAD "KL_LAUNCH(64, 1, 1, 64, 0);\n" ENTRY
              "  auto b = cg::this_thread_block();\n"
              "  auto w = cg::tiled_partition<32>(b);\n"
              "  auto q = cg::tiled_partition<4>(b);\n"
              "  unsigned r = b.thread_rank();\n"
              "  float v = A[r];\n"
              "  int i = (int)(r * 37 % 64) - 20;\n"
              "  C[r * 6 + 0] = cg::reduce(w, v, cg::plus<float>());\n"
              "  C[r * 6 + 1] = (float)cg::reduce(w, i, cg::less<int>());\n"
              "  C[r * 6 + 2] = (float)cg::reduce(w, i, cg::greater<int>());\n"
              "  cg::plus<float> add;\n"
              "  C[r * 6 + 3] = cg::reduce(q, v, add);\n"
              "  C[r * 6 + 4] = (float)cg::reduce(q, (unsigned)r, "
              "cg::bit_xor<unsigned>());\n"
              "  C[r * 6 + 5] = cg::reduce(q, v, [](float a, float c) { "
              "return a > c ? a : c; });\n"
              "}\n";
  kl_emu_module *m = build(src);
  if (!m) return;
  float A[64], C[64 * 6];
  for (int i = 0; i < 64; i++)
    A[i] = 1.0f / (float)(i + 3) + (float)(i % 5) * 1e4f;
  if (run_all(m, A, C, 1, 64) == 0) {
    int bad = 0;
    for (int r = 0; r < 64; r++) {
      float x[32];
      int base = r / 32 * 32;
      for (int l = 0; l < 32; l++)
        x[l] = A[base + l];
      for (int o = 16; o > 0; o /= 2) {
        float n[32];
        for (int l = 0; l < 32; l++)
          n[l] = x[l] + x[l ^ o];
        memcpy(x, n, sizeof n);
      }
      int lo = 1 << 30, hi = -(1 << 30);
      for (int l = 0; l < 32; l++) {
        int i = (int)((unsigned)(base + l) * 37 % 64) - 20;
        lo = i < lo ? i : lo;
        hi = i > hi ? i : hi;
      }
      int q = r / 4 * 4;
      float qs = (A[q] + A[q + 2]) + (A[q + 1] + A[q + 3]);
      float qm = A[q];
      for (int l = 1; l < 4; l++)
        qm = A[q + l] > qm ? A[q + l] : qm;
      float want[6] = {x[r % 32],
                       (float)lo,
                       (float)hi,
                       qs,
                       (float)(q ^ (q + 1) ^ (q + 2) ^ (q + 3)),
                       qm};
      for (int k = 0; k < 6; k++)
        bad += C[r * 6 + k] != want[k];
    }
    CHECK(bad == 0, "%d wrong reductions", bad);
  }
  kl_emu_free(m);
}

/* Values wider than 8 bytes (a float4, a 12-byte struct) and a double
 * travel whole; the group types have the device's sizes. */
static void test_wide_values_and_sizes(void) {
  const char *src = CG_HEAD
      "static_assert(sizeof(cg::thread_block) == 24 && "
      "alignof(cg::thread_block) == 8, \"block\");\n"
      "static_assert(sizeof(cg::thread_block_tile<32>) == 16 && "
      "alignof(cg::thread_block_tile<4>) == 8, \"tile\");\n"
      "static_assert(sizeof(cg::thread_block_tile<32, cg::thread_block>) == "
      "1, \"typed tile\");\n"
      "static_assert(cg::thread_block_tile<8>::size() == 8, \"constexpr\");\n"
      /* the traits CUDA 13's NVRTC gives the three kinds of group */
      "static_assert(__is_trivially_copyable(cg::thread_block) && "
      "!__is_empty(cg::thread_block) && "
      "!__is_standard_layout(cg::thread_block), \"block traits\");\n"
      "static_assert(!__is_trivially_copyable(cg::thread_block_tile<32>) && "
      "!__is_empty(cg::thread_block_tile<32>) && "
      "__is_standard_layout(cg::thread_block_tile<32>), \"tile traits\");\n"
      "typedef cg::thread_block_tile<32, cg::thread_block> typed;\n"
      "static_assert(__is_trivially_copyable(typed) && __is_empty(typed) && "
      "__is_standard_layout(typed), \"typed tile traits\");\n"
      "struct three { float a, b, c; };\n"
      "KL_LAUNCH(32, 1, 1, 32, 0);\n" ENTRY
      "  auto w = cg::tiled_partition<32>(cg::this_thread_block());\n"
      "  int r = w.thread_rank();\n"
      "  float4 f = make_float4(A[r], A[r] + 1, A[r] + 2, A[r] + 3);\n"
      "  three t = {A[r] * 2, A[r] * 3, A[r] * 4};\n"
      "  float4 g = w.shfl_xor(f, 1);\n"
      "  three u = w.shfl_down(t, 2);\n"
      "  double d = w.shfl((double)A[r] / 3.0, 31 - r);\n"
      "  C[r * 8 + 0] = g.x; C[r * 8 + 1] = g.w;\n"
      "  C[r * 8 + 2] = u.a; C[r * 8 + 3] = u.c;\n"
      "  C[r * 8 + 4] = (float)(d * 3.0);\n"
      "  C[r * 8 + 5] = (float)cg::this_thread().size();\n"
      "  C[r * 8 + 6] = (float)cg::this_thread().meta_group_size();\n"
      "  C[r * 8 + 7] = cg::this_thread().shfl(A[r], 5);\n"
      "}\n";
  kl_emu_module *m = build(src);
  if (!m) return;
  float A[32], C[32 * 8];
  for (int i = 0; i < 32; i++)
    A[i] = (float)(i * 5);
  if (run_all(m, A, C, 1, 32) == 0) {
    int bad = 0;
    for (int r = 0; r < 32; r++) {
      int d2 = r + 2 < 32 ? r + 2 : r;
      float want[8] = {
          A[r ^ 1], A[r ^ 1] + 3, A[d2] * 2, A[d2] * 4, A[31 - r], 1, 1, A[r]};
      for (int k = 0; k < 8; k++)
        bad += C[r * 8 + k] != want[k];
    }
    CHECK(bad == 0, "%d wrong wide shuffles", bad);
  }
  kl_emu_free(m);
}

/* A tile barrier some of its lanes never reach while they wait at
 * __syncthreads is a deadlock, said as one; lanes that returned do not
 * hold a tile back. */
static void test_tile_deadlock(void) {
  const char *src =
      CG_HEAD "KL_LAUNCH(32, 1, 1, 32, 0);\n" ENTRY
              "  auto b = cg::this_thread_block();\n"
              "  auto t = cg::tiled_partition<8>(b);\n"
              "  if (t.thread_rank() < 4) t.sync(); else b.sync();\n"
              "  C[b.thread_rank()] = 1.0f;\n"
              "}\n";
  kl_emu_module *m = build(src);
  if (!m) return;
  float C[32];
  char why[300] = "";
  int rc = kl_emu_run(m, NULL, NULL, C, 1, 32, 1, 1, why, sizeof why);
  CHECK(rc == KL_ERUN && strstr(why, "deadlock"),
        "a divergent tile barrier is a deadlock: rc %d %s", rc, why);
  kl_emu_free(m);

  const char *src2 =
      CG_HEAD "KL_LAUNCH(32, 1, 1, 32, 0);\n" ENTRY
              "  auto t = cg::tiled_partition<8>(cg::this_thread_block());\n"
              "  if (t.thread_rank() >= 6) return;\n"
              "  float v = t.shfl_down(A[threadIdx.x], 1);\n"
              "  C[threadIdx.x] = v;\n"
              "}\n";
  m = build(src2);
  if (!m) return;
  float A[32];
  for (int i = 0; i < 32; i++)
    A[i] = (float)i;
  rc = kl_emu_run(m, A, NULL, C, 1, 32, 1, 1, why, sizeof why);
  CHECK(rc == KL_OK, "returned lanes do not count: %s", why);
  CHECK(rc != KL_OK || (C[0] == 1.0f && C[4] == 5.0f && C[8] == 9.0f),
        "shfl_down among the lanes left: %g %g %g", C[0], C[4], C[8]);
  kl_emu_free(m);
}

/* Which sources run on fibers and which the reversed check run may not
 * isolate: a thread_block alone is __syncthreads (isolated, so a race
 * around block.sync() is caught as one around __syncthreads is); a tile
 * exchanges as warp intrinsics do. */
static void test_needs_fibers(void) {
  const char *block = CG_HEAD "auto b = cg::this_thread_block(); b.sync();";
  const char *tile = CG_HEAD "auto t = cg::tiled_partition<32>(b);";
  const char *rank = CG_HEAD "C[cg::this_thread_block().thread_rank()] = 0;";
  CHECK(kl_emu_needs_fibers(block) == KL_EMU_FIBERS, "block: %d",
        kl_emu_needs_fibers(block));
  CHECK(kl_emu_needs_fibers(rank) == KL_EMU_FIBERS, "rank: %d",
        kl_emu_needs_fibers(rank));
  CHECK(kl_emu_needs_fibers(tile) == (KL_EMU_FIBERS | KL_EMU_NO_ISOLATION),
        "tile: %d", kl_emu_needs_fibers(tile));
}

int main(void) {
  test_needs_fibers();
  test_block();
  test_tile_collectives();
  test_tiles_diverge();
  test_reduce();
  test_wide_values_and_sizes();
  test_tile_deadlock();
  return kl_test_done("test_emu_cg");
}
