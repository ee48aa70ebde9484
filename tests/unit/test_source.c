/*
 * tests/unit/test_source.c — source checks (include allowlist in all its
 * spellings, UTF-8, NUL, entry point and KL_LAUNCH presence), launch
 * geometry limits, and the correctness arithmetic (reference, poison,
 * tolerances) that every verdict rests on.
 */
#include "kernels/kernels.h"
#include "tests/unit/kltest.h"

#include <math.h>
#include <string.h>

#define BODY                                                                   \
  "KL_LAUNCH(16, 16, 16, 16, 0);\n"                                            \
  "extern \"C\" __global__ void matmul(const float* A, const float* B, "       \
  "float* C, int M, int N, int K) {}\n"

static int validate(const char *src, char *why, size_t len) {
  return kl_source_validate(src, strlen(src), why, len);
}

static void test_includes(void) {
  char why[300];
  CHECK(validate(BODY, why, sizeof why) == KL_OK, "plain body: %s", why);
  CHECK(validate("#include <cuda_fp16.h>\n# include \"mma.h\"\n" BODY, why,
                 sizeof why) == KL_OK,
        "allowlisted: %s", why);
  const char *rejected[] = {
      "#include <stdio.h>\n" BODY,
      "#include \"/etc/passwd\"\n" BODY,
      "#include \"../cuda_fp16.h\"\n" BODY,
      "#define H <stdio.h>\n#include H\n" BODY,
      "%:include <stdio.h>\n" BODY,
      "#inc\\\nlude <stdio.h>\n" BODY,
      "  #  include_next <cuda_fp16.h>\n" BODY,
      "#import <stdio.h>\n" BODY,
      "#embed \"/etc/passwd\"\n" BODY,
      "#pragma GCC dependency \"/etc/passwd\"\n" BODY,
      "/* c */ #include <stdio.h>\n" BODY,
      /* white space the preprocessor takes around '#': form feed, vertical
       * tab, a comment (one space, even across lines) */
      "\f#include \"/etc/passwd\"\n" BODY,
      "#\vinclude \"/etc/passwd\"\n" BODY,
      "#/* x */include \"/etc/passwd\"\n" BODY,
      "#/*\n*/include \"/etc/passwd\"\n" BODY,
      "#include /* x */ \"/etc/passwd\"\n" BODY,
      "?"
      "?=include <stdio.h>\n" BODY, /* a trigraph, split for our cc */
      /* line ends g++ and NVRTC read differently: a lone CR (also inside
       * a // comment, or after '#'), a backslash and blanks before one */
      "#\rinclude \"/etc/passwd\"\n" BODY,
      "// x\r int hidden = 1;\n" BODY,
      "#\\ \ninclude \"/etc/passwd\"\n" BODY,
      "// x \\ \nint hidden = 1;\n" BODY,
      /* a lone CR ends a line */
      "int x;\r#include \"/etc/passwd\"\r" BODY,
      /* what the comment stripper misreads: a digit separator or a raw
       * string taken for a quote, whose "comment" hides a real #include */
      "const int a = 1'2 + '/*';\n#include \"/etc/passwd\"\nconst int b = "
      "'*/';\n" BODY,
      "const char* s = R\"(\"/*)\";\n#include \"/etc/passwd\"\n// */\n" BODY,
  };
  for (size_t i = 0; i < sizeof rejected / sizeof *rejected; i++) {
    why[0] = 0;
    CHECK(validate(rejected[i], why, sizeof why) == KL_EINPUT && why[0],
          "case %zu must be rejected: %s", i, rejected[i]);
  }
  /* Mentions inside comments and strings are not directives (a line of a
   * block comment that reads as one is refused: see kl_source_validate). */
  CHECK(validate("// #include <stdio.h>\n/* #include <x> */\n" BODY, why,
                 sizeof why) == KL_OK,
        "commented include: %s", why);
}

/* The one allowlist: exact names only, and abi.h (which the policy reads)
 * names every header on it. */
static void test_allowlist(void) {
  CHECK(kl_include_allowed("cuda_fp16.h", 11) && kl_include_allowed("mma.h", 5),
        "allowlisted names");
  CHECK(!kl_include_allowed("mma.h ", 6) && !kl_include_allowed("mma", 3) &&
            !kl_include_allowed("a.h", 3) && !kl_include_allowed("", 0) &&
            !kl_include_allowed("cuda_fp16.h, cuda_bf16.h", 24),
        "near misses are not allowed");
  for (const char *p = KL_INCLUDE_ALLOWLIST; *p;) {
    size_t n = strcspn(p, ",");
    char name[64];
    snprintf(name, sizeof name, "%.*s", (int)n, p);
    CHECK(kl_include_allowed(p, n), "%s is allowed", name);
    CHECK(strstr(kl_abi_header, name), "abi.h names %s", name);
    char src[256];
    snprintf(src, sizeof src, "#include <%s>\n%s", name, BODY);
    char why[300];
    CHECK(kl_source_validate(src, strlen(src), why, sizeof why) == KL_OK,
          "#include <%s>: %s", name, why);
    p += n;
    p += strspn(p, ", ");
  }
}

/* Cooperative groups: the block and tile level passes; the rest is
 * refused with what and why, wherever it appears outside comments and
 * literals. */
static void test_cooperative_groups(void) {
#define CG                                                                     \
  "#include <cooperative_groups.h>\nnamespace cg = cooperative_groups;\n"
  char why[400];
  const char *ok[] = {
      CG "#include <cooperative_groups/reduce.h>\n"
         "// cg::this_grid().sync(); cg::memcpy_async\n"
         "const char *s = \"thread_group cuda::std\";\n"
         "const char c = 'x'; const int big = 1'000;\n"
         "__device__ void f() { auto b = cg::this_thread_block(); b.sync();\n"
         "  auto w = cg::tiled_partition<32>(b); auto q = "
         "cg::tiled_partition<4>(w);\n"
         "  cg::thread_block_tile<16> h = cg::tiled_partition<16>(b);\n"
         "  float v = cg::reduce(w, 1.0f, cg::plus<float>()); cg::sync(q);\n"
         "  int wait = 0; (void)wait; }\n" BODY,
      /* names of the kernel's own where cooperative groups are not used */
      "__device__ int wait_prior(int details) { return details; }\n" BODY,
  };
  for (size_t i = 0; i < sizeof ok / sizeof *ok; i++)
    CHECK(validate(ok[i], why, sizeof why) == KL_OK, "case %zu: %s", i, why);
  const struct {
    const char *src, *said;
  } refused[] = {
      {CG "__device__ void f() { cg::this_grid().sync(); }\n", "this_grid"},
      {"__device__ void f() { cooperative_groups::this_grid().sync(); }\n",
       "cooperative launch"},
      {CG "__device__ void f(cg::grid_group g) { g.sync(); }\n", "grid_group"},
      {CG "__device__ void f() { cg::this_multi_grid().sync(); }\n",
       "this_multi_grid"},
      {CG "__device__ void f() { cg::this_cluster().sync(); }\n",
       "cluster launch"},
      {CG "__device__ void f(float *d, const float *s) {\n"
          "  cg::memcpy_async(cg::this_thread_block(), d, s, 64); }\n",
       "memcpy_async"},
      {CG "__device__ void f() { cg::wait(cg::this_thread_block()); }\n",
       "cooperative_groups::wait"},
      {CG "__device__ void f() { cg::wait_prior<1>(cg::this_thread_block()); "
          "}\n",
       "wait_prior"},
      {CG "__device__ void f() { auto g = cg::coalesced_threads(); }\n",
       "coalesced_threads"},
      {CG "__device__ void f(cg::thread_group g) { g.sync(); }\n",
       "thread_group"},
      {CG "__device__ void f() { auto t = "
          "cg::tiled_partition(cg::this_thread_block(), 8); }\n",
       "tiled_partition(g, n)"},
      {CG "__device__ void f() { auto t = "
          "cg::tiled_partition<64>(cg::this_thread_block()); }\n",
       "tiled_partition<64>"},
      {CG "__device__ void f(cg::thread_block_tile<12> t) {}\n",
       "thread_block_tile<12>"},
      {CG "__device__ void f() { auto t = cg::this_thread_block(); "
          "t.barrier_wait(t.barrier_arrive()); }\n",
       "barrier_wait"},
      {CG "__device__ void f() { auto r = cuda::std::chrono::system_clock::"
          "now(); }\n",
       "libcu++"},
      {"__device__ void f() { using namespace cuda; }\n", "cuda::"},
      {"__device__ float f() { float cuda = 1.f; return cuda; }\n",
       "the name cuda"},
      {CG "__device__ void f() { cg::details::sync_grids(0, 0); }\n",
       "details"},
      {"__device__ void f() { _CUDA_VSTD::__cccl_thread_yield(); }\n",
       "_CUDA_VSTD (libcu++"},
      {"__device__ void f() { __cccl_thread_poll_with_backoff([] { return "
       "true; }); }\n",
       "__cccl_thread_poll_with_backoff (libcu++"},
      {CG "__device__ void f() { auto s = cg::thread_block::thread_scope; }\n",
       "thread_scope"},
  };
  for (size_t i = 0; i < sizeof refused / sizeof *refused; i++) {
    char src[1024];
    snprintf(src, sizeof src, "%s%s", refused[i].src, BODY);
    why[0] = 0;
    CHECK(validate(src, why, sizeof why) == KL_EINPUT &&
              strstr(why, refused[i].said) && strstr(why, "not supported") &&
              strstr(why, "line "),
          "case %zu must be refused naming %s: %s", i, refused[i].said, why);
  }
#undef CG
}

static void test_text(void) {
  char why[300];
  char buf[512];
  snprintf(buf, sizeof buf, "\xEF\xBB\xBF%s", BODY);
  CHECK(validate(buf, why, sizeof why) == KL_EINPUT &&
            strstr(why, "byte-order mark"),
        "a leading BOM: %s", why);
  snprintf(buf, sizeof buf, "%s// caf\xe9\n", BODY);
  CHECK(validate(buf, why, sizeof why) == KL_EINPUT && strstr(why, "UTF-8"),
        "latin-1 byte: %s", why);
  snprintf(buf, sizeof buf, "%s// caf\xc3\xa9 \xe2\x82\xac\n", BODY);
  CHECK(validate(buf, why, sizeof why) == KL_OK, "valid UTF-8: %s", why);
  snprintf(buf, sizeof buf, "%s// \xed\xa0\x80\n", BODY); /* surrogate */
  CHECK(validate(buf, why, sizeof why) == KL_EINPUT, "surrogate accepted");
  snprintf(buf, sizeof buf, "%s// \xc0\xaf\n", BODY); /* overlong '/' */
  CHECK(validate(buf, why, sizeof why) == KL_EINPUT, "overlong accepted");
  CHECK(kl_source_validate(BODY "\0x", sizeof(BODY) + 1, why, sizeof why) ==
                KL_EINPUT &&
            strstr(why, "NUL"),
        "NUL: %s", why);
  CHECK(validate("KL_LAUNCH(1,1,1,1,0);\n// matmul(\n", why, sizeof why) ==
                KL_EINPUT &&
            strstr(why, "matmul"),
        "matmul only in a comment: %s", why);
  CHECK(validate("extern \"C\" __global__ void matmul() {}\n", why,
                 sizeof why) == KL_EINPUT &&
            strstr(why, "KL_LAUNCH"),
        "no KL_LAUNCH: %s", why);
}

static void test_geometry(void) {
  char why[300];
  kl_launch ok = {256, 1, 64, 64, 0}, big = {64, 32, 16, 16, 0},
            zero = {0, 1, 16, 16, 0}, tile = {16, 16, 0, 16, 0},
            smem = {16, 16, 16, 16, 300000};
  CHECK(kl_launch_validate(&ok, why, sizeof why) == KL_OK, "%s", why);
  CHECK(kl_launch_validate(&big, why, sizeof why) == KL_EINPUT &&
            strstr(why, "2048"),
        "%s", why);
  CHECK(kl_launch_validate(&zero, why, sizeof why) == KL_EINPUT, "zero");
  CHECK(kl_launch_validate(&tile, why, sizeof why) == KL_EINPUT, "tile");
  CHECK(kl_launch_validate(&smem, why, sizeof why) == KL_EINPUT, "smem");
}

/* The reference and the comparison: an exact result passes; a single
 * element off by one ulp-scale amount passes; off by 1% fails; an unwritten
 * element (poison) and a NaN are counted apart. */
static void test_compare(void) {
  enum { M = 7, N = 5, K = 300 };
  float A[M * K], B[K * N], C[M * N];
  double R[M * N], S[M * N];
  kl_fill_random(A, M * K, 42, 0);
  kl_fill_random(B, K * N, 42, 1);
  for (int i = 0; i < M * K; i++)
    CHECK(A[i] >= -1.0f && A[i] < 1.0f, "input %g out of [-1, 1)", A[i]);
  kl_reference(A, B, R, S, M, N, K);
  for (int i = 0; i < M * N; i++)
    C[i] = (float)R[i];
  kl_shape_check ck = {.shape = {M, N, K}};
  kl_compare(C, R, S, &ck);
  CHECK(ck.pass && ck.rel_err < 1e-7, "rounded reference: rel %g", ck.rel_err);
  C[3] = nextafterf(C[3], 1e30f);
  kl_compare(C, R, S, &ck);
  CHECK(ck.pass, "one ulp off must pass");
  C[3] = (float)R[3] * 1.01f + 0.01f;
  kl_compare(C, R, S, &ck);
  CHECK(!ck.pass && ck.over_tol == 1, "1%% off must fail (over %ld)",
        ck.over_tol);
  C[3] = (float)R[3];
  kl_poison(C + 4, 2);
  C[10] = NAN;
  kl_compare(C, R, S, &ck);
  CHECK(!ck.pass && ck.unwritten == 2 && ck.nonfinite == 1,
        "poison %ld, nonfinite %ld", ck.unwritten, ck.nonfinite);
  CHECK(isinf(ck.rel_err) && isinf(ck.max_abs_err),
        "a NaN written makes the error infinite: rel %g abs %g", ck.rel_err,
        ck.max_abs_err);
  /* all +inf: no element is compared, and the error was 0 (exact) */
  for (int i = 0; i < M * N; i++)
    C[i] = INFINITY;
  kl_compare(C, R, S, &ck);
  CHECK(!ck.pass && ck.nonfinite == M * N && isinf(ck.rel_err) &&
            isinf(ck.max_abs_err),
        "all inf: nonfinite %ld, rel %g, abs %g", ck.nonfinite, ck.rel_err,
        ck.max_abs_err);
  /* all unwritten: no finite element, so no error measured as 0 either */
  kl_poison(C, (size_t)M * N);
  kl_compare(C, R, S, &ck);
  CHECK(!ck.pass && ck.unwritten == M * N && isinf(ck.rel_err),
        "all unwritten: poison %ld, rel %g", ck.unwritten, ck.rel_err);
  /* Same seed and stream, same numbers; another stream, others. */
  float x[8], y[8], z[8];
  kl_fill_random(x, 8, 9, 3);
  kl_fill_random(y, 8, 9, 3);
  kl_fill_random(z, 8, 9, 4);
  CHECK(!memcmp(x, y, sizeof x) && memcmp(x, z, sizeof x), "seeded streams");
}

int main(void) {
  test_includes();
  test_allowlist();
  test_cooperative_groups();
  test_text();
  test_geometry();
  test_compare();
  return kl_test_done("test_source");
}
