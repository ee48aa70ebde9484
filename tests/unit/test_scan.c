/*
 * tests/unit/test_scan.c — the static scanner (kernels/scan.c) and the flag
 * table (kernels/flags.c).
 *
 * For every static flag: a minimal snippet raises it, and the same word in
 * a comment or a string literal does not. Then the tricks the scanner
 * promises to see through (line splices, token pasting, asm strings,
 * macro-expanded includes), the declarations it must tell apart (const vs
 * mutable device state, device vs host functions), that threads scanning
 * at once each get their own text's answer, and finally every seed and
 * every honest kernel under $KL_SOURCE_DIR scans clean.
 */
#define _GNU_SOURCE
#include "kernels/kernels.h"
#include "kltest.h"

#include <dirent.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* The snippet raises `name` (and the detail line names it). */
static void raises(const char *name, const char *src) {
  int bit = kl_flag_bit(name);
  CHECK(bit >= 0, "unknown flag %s", name);
  if (bit < 0) return;
  char detail[512];
  kl_flags f = kl_scan(src, strlen(src), detail, sizeof detail);
  CHECK(f & KL_FLAG(bit), "%s not raised by: %s (detail: %s)", name, src,
        detail);
  CHECK(strstr(detail, name) != NULL, "detail lacks %s: %s", name, detail);
}

/* The snippet raises no flag at all. */
static void clean(const char *src) {
  char detail[512];
  kl_flags f = kl_scan(src, strlen(src), detail, sizeof detail);
  CHECK(f == 0, "flags raised by clean text: %s\n  text: %s", detail, src);
}

/* A minimal honest kernel around a body line, for context. */
static char *kernel_with(const char *top, const char *body) {
  static char buf[4096];
  snprintf(buf, sizeof buf,
           "%s\nKL_LAUNCH(16, 16, 16, 16, 0);\n"
           "extern \"C\" __global__ void matmul(const float* A, const float* "
           "B, float* C, int M, int N, int K) {\n"
           "  const int r = blockIdx.y * 16 + threadIdx.y;\n"
           "  const int c = blockIdx.x * 16 + threadIdx.x;\n"
           "  %s\n"
           "  if (r < M && c < N) { float acc = 0.0f;\n"
           "    for (int k = 0; k < K; ++k) acc += A[r * K + k] * B[k * N + "
           "c];\n"
           "    C[r * N + c] = acc; }\n}\n",
           top, body);
  return buf;
}

static void test_table(void) {
  size_t n;
  const kl_flag_info *t = kl_flag_table(&n);
  CHECK(n >= 20, "flag table has %zu rows", n);
  int statics = 0, dynamics = 0;
  for (size_t i = 0; i < n; i++) {
    CHECK(t[i].name && t[i].description && t[i].hack && t[i].kind,
          "row %zu incomplete", i);
    CHECK(kl_flag_bit(t[i].name) == t[i].bit, "%s: bit lookup", t[i].name);
    CHECK(!strcmp(kl_flag_name(t[i].bit), t[i].name), "%s: name lookup",
          t[i].name);
    int is_static = !strcmp(t[i].kind, KL_FLAG_KIND_STATIC);
    CHECK(is_static == (t[i].bit < 32), "%s: kind matches bit range",
          t[i].name);
    statics += is_static, dynamics += !is_static;
    for (const char *p = t[i].name; *p; p++)
      CHECK((*p >= 'a' && *p <= 'z') || *p == '_', "%s: snake_case", t[i].name);
    for (size_t j = 0; j < i; j++)
      CHECK(t[j].bit != t[i].bit && strcmp(t[j].name, t[i].name),
            "%s duplicates row %zu", t[i].name, j);
  }
  CHECK(statics >= 12 && dynamics >= 7, "%d static, %d dynamic", statics,
        dynamics);
  CHECK(kl_flag_name(63) == NULL && kl_flag_bit("nope") == -1, "unknowns");
  char buf[256];
  size_t need =
      kl_flags_format(KL_FLAG(KL_FLAG_PRINTF) | KL_FLAG(KL_FLAG_INPUT_MUTATED),
                      ",", buf, sizeof buf);
  CHECK(!strcmp(buf, "printf,input_mutated") && need == strlen(buf), "%s", buf);
  char tiny[4];
  kl_flags_format(KL_FLAG(KL_FLAG_PRINTF), ",", tiny, sizeof tiny);
  CHECK(strlen(tiny) == 3, "truncated format stays terminated");
}

/* One snippet per static flag, and the same word where it must not count. */
static void test_each_flag(void) {
  raises("inline_asm", kernel_with("", "asm volatile(\"membar.gl;\");"));
  raises("inline_asm", kernel_with("", "__asm__(\"nop;\");"));
  clean(kernel_with("/* asm(\"nop;\") in a comment */",
                    "const char* s = \"asm(nop)\"; (void)s;"));

  raises("timer_read", kernel_with("", "long long t0 = clock64(); (void)t0;"));
  raises("timer_read", kernel_with("", "auto t = clock(); (void)t;"));
  raises("timer_read",
         kernel_with("", "unsigned long long t; asm volatile(\"mov.u64 %0, "
                         "%%globaltimer;\" : \"=l\"(t));"));
  clean(kernel_with("// clock64() would be a timer read",
                    "const char* s = \"clock64() %globaltimer\"; (void)s;"));

  raises("printf", kernel_with("", "if (r == 0) printf(\"hi\\n\");"));
  clean(kernel_with("/* printf(\"x\") */", "(void)\"printf\";"));

  raises("device_malloc",
         kernel_with("", "float* p = (float*)malloc(64); free(p);"));
  raises("device_malloc", kernel_with("", "float* p = new float[4]; (void)p;"));
  clean(kernel_with("// malloc, free, new", "(void)\"new float[4]\";"));

  raises("stream_or_event",
         kernel_with("", "cudaStream_t s; cudaStreamCreate(&s);"));
  raises("stream_or_event", kernel_with("", "cudaEvent_t e; (void)e;"));
  clean(kernel_with("/* cudaStreamCreate */", "(void)\"cudaEventRecord\";"));

  raises("graph_or_dynamic_parallelism",
         kernel_with("__global__ void child(float* C) { C[0] = 1; }",
                     "child<<<1, 1>>>(C);"));
  raises("graph_or_dynamic_parallelism",
         kernel_with("", "cudaGraph_t g; (void)g;"));
  clean(kernel_with("/* kid<<<1,1>>>() */", "int s = 1 << 3; (void)s;"));

  raises("cooperative_grid_sync",
         kernel_with("", "cooperative_groups::this_grid().sync();"));
  clean(kernel_with("// this_grid().sync()", "(void)\"grid_group\";"));

  raises("mutable_device_state", kernel_with("__device__ int calls;", ""));
  raises("mutable_device_state",
         kernel_with("__device__ const float* last_C;", ""));
  raises("mutable_device_state",
         kernel_with("__managed__ float cache[16];", ""));
  raises("mutable_device_state",
         kernel_with("__device__ float tbl[2] = {1, 2};", ""));
  raises("mutable_device_state", kernel_with("", "static int launches = 0;"));
  raises("mutable_device_state",
         kernel_with("struct S { static int n; };", ""));
  raises("mutable_device_state", kernel_with("int host_counter;", ""));
  clean(kernel_with("__device__ const float tbl[2] = {1, 2};\n"
                    "__device__ float* const p = nullptr;\n"
                    "__constant__ float W[4];\n"
                    "constexpr int kT = 16;\n"
                    "struct Cfg { static constexpr int n = 4; int x; };",
                    "static constexpr int s = 2; static const float h = 1;"
                    " __shared__ float t[4]; (void)t; (void)s; (void)h;"));

  raises("compile_pass_branch",
         kernel_with("#ifdef __CUDA_ARCH__\n#define X 1\n#else\n#define X "
                     "2\n#endif",
                     ""));
  raises("compile_pass_branch",
         kernel_with("#ifndef __CUDACC_RTC__\n#endif", ""));
  raises("compile_pass_branch", kernel_with("#if defined(__SSE2__)\n#endif",
                                            "")); /* not in any list */
  raises("compile_pass_branch",
         kernel_with("extern \"C\" int kill(int, int);", ""));
  raises("compile_pass_branch",
         kernel_with("int helper(int x) { return x; }", ""));
  raises("compile_pass_branch",
         kernel_with("__host__ int helper(int x) { return x; }", ""));
  raises("compile_pass_branch", kernel_with("", "system(\"ls\");"));
  /* a device overload of a host function: g++ in the emulator picks
   * glibc's getenv(const char*) over the template, so the call is host */
  raises("compile_pass_branch",
         kernel_with("template <class T> __device__ char* getenv(T);",
                     "char* m = getenv(\"KL_MEMO\"); (void)m;"));
  raises("compile_pass_branch",
         kernel_with("template <class T> __device__ char*(getenv)(T);",
                     "char* m = (getenv)(\"KL_MEMO\"); (void)m;"));
  raises(
      "compile_pass_branch",
      kernel_with("__device__ float read(const float* p) { return *p; }", ""));
  raises("device_malloc",
         kernel_with("", "void* p = reallocarray(0, 4, 4); (void)p;"));
  raises("device_malloc", kernel_with("", "void* p = sbrk(64); (void)p;"));
  raises("compile_pass_branch",
         kernel_with("extern \"C\" void kl_reference(const float*);", ""));
  clean(kernel_with("#define BM 64\n#ifndef BM\n#define BM 32\n#endif\n"
                    "#if BM > 32 && defined(BM)\n#endif\n"
                    "__host__ __device__ inline int twice(int x) { return 2 "
                    "* x; }\n"
                    "__device__ float load(const float* p) { return *p; }\n"
                    "constexpr int cdiv(int a, int b) { return (a + b - 1) / "
                    "b; }",
                    "int write = 0, system = 1; float v = load(A); (void)v;"
                    " (void)write; (void)system;"
                    " extern __shared__ float dyn[]; (void)dyn;"));

  raises("disallowed_include", kernel_with("#include <stdio.h>", ""));
  raises("disallowed_include",
         kernel_with("#define H \"/etc/passwd\"\n#include H", ""));
  raises("disallowed_include", kernel_with("%:include <stdlib.h>", ""));
  raises("disallowed_include", kernel_with("#include_next <mma.h>", ""));
  clean(kernel_with("#include <mma.h>\n#include \"cuda_fp16.h\"\n"
                    "// #include <stdio.h>",
                    ""));

  raises("precision_downgrade",
         kernel_with("", "float x = __half2float(__float2half(1.0f));"));
  raises("precision_downgrade",
         kernel_with("", "nv_bfloat16 b = __float2bfloat16(1.0f); (void)b;"));
  raises("precision_downgrade", kernel_with("", "half h; (void)h;"));
  raises("precision_downgrade",
         kernel_with("", "float y = (float)(half)1.0f; (void)y;"));
  raises("precision_downgrade",
         kernel_with("using namespace nvcuda;",
                     "wmma::fragment<wmma::matrix_a, 16, 16, 8, "
                     "wmma::precision::tf32, wmma::row_major> a;"));
  raises("precision_downgrade",
         kernel_with("", "float t; asm(\"cvt.rna.tf32.f32 %0, %1;\" : "
                         "\"=f\"(t) : \"f\"(1.0f));"));
  clean(kernel_with("/* __float2half, half, nv_bfloat16, tf32 */",
                    "const int half = K / 2; int lo = half + 1; (void)lo;"
                    " (void)\"__float2half\";"));

  raises("runtime_api", kernel_with("", "cudaMemcpy(C, A, 4, "
                                        "cudaMemcpyDeviceToDevice);"));
  clean(kernel_with("// cudaMemcpy", "(void)\"cudaMemcpy\";"));
}

static void test_size(void) {
  size_t n = KL_SCAN_OVERSIZE_BYTES + 100;
  char *big = malloc(n + 1);
  const char *k = kernel_with("", "");
  size_t kl = strlen(k);
  memcpy(big, k, kl);
  memset(big + kl, ' ', n - kl);
  big[n] = 0;
  char detail[256];
  kl_flags f = kl_scan(big, n, detail, sizeof detail);
  CHECK(f == KL_FLAG(KL_FLAG_OVERSIZE_SOURCE), "oversize only: %s", detail);
  CHECK(strstr(detail, "65536") != NULL, "threshold named: %s", detail);
  CHECK(kl_scan(big, KL_SCAN_OVERSIZE_BYTES, NULL, 0) == 0, "at the limit");
  free(big);
}

/* What hides a name from a naive grep must not hide it from the scanner. */
static void test_tricks(void) {
  raises("timer_read",
         kernel_with("", "long long t = clo\\\nck64(); (void)t;"));
  raises("timer_read",
         kernel_with("#define CAT(a, b) a##b", "(void)CAT(cl, ock64)();"));
  raises("timer_read",
         kernel_with("#define T cl ## ock64", "long long t = T(); (void)t;"));
  raises("timer_read", kernel_with("#define T3(a, b, c) a##b##c",
                                   "(void)T3(cl, oc, k64)();"));
  raises("printf", kernel_with("#define P(x) pri##x", "P(ntf)(\"x\");"));
  raises("printf", kernel_with("#define SAY printf", "SAY(\"x\");"));
  raises("inline_asm", kernel_with("#define A_ __asm__", "A_(\"nop;\");"));
  raises("compile_pass_branch",
         kernel_with("#if \\\n  defined(__CUDACC__)\n#endif", ""));
  /* a raw string holding a comment opener does not swallow the code */
  raises("printf", kernel_with("", "const char* s = R\"x(/* )x\"; (void)s; "
                                   "printf(\"*/\");"));
  /* a comment opener inside a string does not hide what follows */
  raises("printf",
         kernel_with("", "const char* s = \"/*\"; printf(\"x\"); (void)s;"));
  /* digit separators are numbers, not character literals */
  raises("printf", kernel_with("", "int n = 1'000; printf(\"%d\", n);"));
  /* detail names the first line of the finding */
  char detail[256];
  const char *two = "KL_LAUNCH(1,1,1,1,0);\n\n__device__ int x;\n";
  kl_scan(two, strlen(two), detail, sizeof detail);
  CHECK(strstr(detail, "line 3") != NULL, "line number: %s", detail);
  /* a branch on the CUDA compiler says what to do instead (an honest
   * `#if __CUDA_ARCH__ >= 800` guard read only "line 13: __CUDA_ARCH__") */
  const char *arch =
      "KL_LAUNCH(1,1,1,1,0);\n#if __CUDA_ARCH__ >= 800\n#endif\n";
  kl_scan(arch, strlen(arch), detail, sizeof detail);
  CHECK(strstr(detail, "sm_90 is the only target") != NULL,
        "__CUDA_ARCH__ hint: %s", detail);
  clean(kernel_with("", "int x = sizeof(float) * 2; (void)x; int y = "
                        "static_cast<int>(1.5f); (void)y;"));
}

/* The third adversarial review's tricks: names built through variadic or
 * aliased pasting macros, branches on the shim's libc macros, pragmas that
 * rename symbols, prototypes of host functions, digraph braces. */
static void test_macro_tricks(void) {
  raises("timer_read",
         kernel_with("#define V(...) clo##__VA_ARGS__", "(void)V(ck64)();"));
  raises("timer_read", kernel_with("#define V(a, ...) a##__VA_ARGS__",
                                   "(void)V(clo, ck64)();"));
  raises("timer_read",
         kernel_with("#define V(args...) clo##args", "(void)V(ck64)();"));
  /* a call in another macro's body with literal arguments is resolved */
  raises("timer_read",
         kernel_with("#define V(x) clo##x\n#define NOW() V(ck64)()",
                     "(void)NOW();"));
  raises("compile_pass_branch",
         kernel_with("#define CAT(a, b) a##b\n#define J CAT",
                     "(void)J(clo, ck64)();"));
  raises("compile_pass_branch",
         kernel_with("#define CAT(a, b) a##b\n#define W(a, b) CAT(a, b)",
                     "(void)W(clo, ck64)();"));
  raises("compile_pass_branch",
         kernel_with("#define CAT(a, b) a##b\n#define ID(x) x",
                     "(void)ID(CAT)(clo, ck64)();"));
  /* names the shim's libc headers define, whatever the file #defines */
  raises("compile_pass_branch",
         kernel_with("#if 0\n#define EOF\n#endif\n#ifdef EOF\n#endif", ""));
  raises(
      "compile_pass_branch",
      kernel_with("#define M_PI 3.14159265358979323846\n#if M_PI\n#endif", ""));
  raises("compile_pass_branch", kernel_with("#ifndef INT32_MAX\n#endif", ""));
  /* names cooperative_groups.h brings under NVRTC only (libcu++'s), whatever
   * the file #defines in a dead branch */
  static const char *const nvrtc_only[] = {
      "NV_IS_DEVICE",    "NV_PROVIDES_SM_90",
      "CCCL_VERSION",    "LIBCUDACXX_VERSION",
      "CHAR_BIT",        "INT_MAX",
      "UINT_FAST16_MAX", "INT8_C",
      "FP_NAN",          "offsetof"};
  for (size_t i = 0; i < sizeof nvrtc_only / sizeof *nvrtc_only; i++) {
    char head[200];
    snprintf(head, sizeof head,
             "#include <cooperative_groups.h>\n#if 0\n#define %s\n#endif\n"
             "#ifdef %s\n#endif",
             nvrtc_only[i], nvrtc_only[i]);
    raises("compile_pass_branch", kernel_with(head, ""));
  }
  /* a macro of the file's own with a name alike is its own */
  clean(kernel_with("#define TILE_MAX 64\n#if TILE_MAX > 32\n#endif\n"
                    "#define NVX 1\n#ifdef NVX\n#endif",
                    ""));
  raises("compile_pass_branch",
         kernel_with("#pragma redefine_extname kl_get malloc", ""));
  raises("compile_pass_branch",
         kernel_with("_Pragma(\"GCC poison clock64\")", ""));
  raises("compile_pass_branch", kernel_with("#pragma weak kl_get", ""));
  raises(
      "compile_pass_branch",
      kernel_with("extern \"C\" __device__ void* kl_get(unsigned long);", ""));
  raises("compile_pass_branch",
         kernel_with("extern \"C\" {\n__device__ int kl_t(void);\n}", ""));
  raises("mutable_device_state",
         kernel_with("", "if (r == 0) <% static int n = 0; n++; %>"));
  /* declarations the tracker misread: operator functions, lambdas with
   * noexcept(...) or a decltype return, qualifiers before an unnamed
   * record */
  raises("mutable_device_state",
         kernel_with("struct T {};\n__device__ const int operator+(T, int) "
                     "{ static int n = 0; return ++n; }",
                     ""));
  raises("mutable_device_state",
         kernel_with("struct F { __device__ int operator()(int x) const { "
                     "static int n = 0; return x + ++n; } };",
                     ""));
  raises("mutable_device_state",
         kernel_with("", "auto f = []() noexcept(true) { static int n = 0; "
                         "return ++n; }; (void)f;"));
  raises("mutable_device_state",
         kernel_with("", "auto f = []() -> decltype(1) { static int n = 0; "
                         "return ++n; }; (void)f;"));
  raises("mutable_device_state",
         kernel_with("__device__ struct { int n; } memo;", ""));
  raises("mutable_device_state",
         kernel_with("", "static struct { int n; } memo; memo.n++;"));
  raises("mutable_device_state",
         kernel_with("", "static struct { int n; } memo = {0}; memo.n++;"));
  raises("mutable_device_state",
         kernel_with("struct M { __align__(4) mutable int n; };", ""));
  clean(kernel_with("struct T { float v; };\n"
                    "__device__ T operator+(T a, T b) { return T{a.v + b.v}; "
                    "}\ntypedef struct { int n; } Pair;\n"
                    "__device__ const struct { int n; } kOne = {1};",
                    "auto g = [k = 0]() mutable { return ++k; }; (void)g; "
                    "const struct { int a; } z = {1}; (void)z;"));
  /* the second review: a paste that builds a macro's name, a call opened
   * in a macro and closed in code, chains past 16 pieces, names NVRTC
   * predefines, a guard that is not around the whole file, macros whose
   * bodies declare */
  raises("compile_pass_branch",
         kernel_with("#define CAT(a, b) a##b\n#define CAT2(a, b) a##b",
                     "(void)CAT(CA, T2)(clo, ck64)();"));
  raises("compile_pass_branch",
         kernel_with("#define CAT(a, b) a##b\n#define KEEP CAT(sta,",
                     "KEEP tic) int n = 0; (void)n;"));
  raises("compile_pass_branch",
         kernel_with("#define J(a,b,c,d,e,f,g,h,i,j,k,l,m,n,o,p,q) "
                     "a##b##c##d##e##f##g##h##i##j##k##l##m##n##o##p##q",
                     "(void)J(,,,,,,,,,,,,,,,clo,ck64)();"));
  raises("compile_pass_branch",
         kernel_with("#ifdef CUDART_VERSION\n#endif", ""));
  raises("compile_pass_branch",
         kernel_with("#if 0\n#define assert(x)\n#endif\n#ifdef assert\n#endif",
                     ""));
  {
    char src[4200];
    snprintf(src, sizeof src,
             "#ifndef __EDG__\n#define __EDG__\n#endif\n#if 1\n%s\n#endif\n",
             kernel_with("", ""));
    raises("compile_pass_branch", src);
  }
  raises("mutable_device_state",
         kernel_with("#define G(name) __device__ unsigned long long name\n"
                     "G(launches);",
                     ""));
  raises("mutable_device_state",
         kernel_with("#define DEVFN(name) __device__ unsigned name()\n"
                     "DEVFN(bump) { static unsigned n; return ++n; }",
                     ""));
  raises("mutable_device_state",
         kernel_with("#define DEV __device__\nDEV int memo;", ""));
  clean(kernel_with("#define DI __device__ __forceinline__\n"
                    "#define SDI static __device__ __forceinline__\n"
                    "DI float mac(float a, float b) { return a * b; }\n"
                    "SDI float two(float x) { return 2 * x; }",
                    "for (int half = 16; half > 0; half >>= 1) (void)half;"));
  clean(kernel_with("#ifndef TILE\n#define TILE 16\n#endif\n"
                    "#define CAT(a, b) a##b\n#define V(...) (__VA_ARGS__)\n"
                    "__device__ float twice(float x);\n"
                    "__device__ float twice(float x) { return 2 * x; }",
                    "\n#pragma unroll 4\n  for (int u = 0; u < 4; ++u) "
                    "(void)CAT(twi, ce)(V(1.0f)); _Pragma(\"unroll\") "
                    "for (int u = 0; u < 2; ++u) { float v<:2:> = <%0, 1%>; "
                    "(void)v; }"));
}

/* Memos that got past the declaration checks once (each passed the
 * evaluation as correct, flag-free and 15-36x faster on cpu-emu). */
static void test_memo_tricks(void) {
  /* a static local inside a lambda inside an initializer */
  raises("mutable_device_state",
         kernel_with("", "auto memo = []() -> float* { static float m[64]; "
                         "return m; }; (void)memo;"));
  raises("mutable_device_state",
         kernel_with("", "float* m = f([] __device__ (int i) { static float "
                         "q[8]; return q + i; }); (void)m;"));
  /* `static` built by a paste */
  raises("mutable_device_state",
         kernel_with("#define S(x) sta##x", "S(tic) float memo[64]; "
                                            "(void)memo;"));
  /* const objects of a class with a user-provided constructor are in
   * writable memory on both backends: a cast writes them */
  const char *ctor = "struct M { float v[64]; __device__ M() {} };\n";
  char top[256];
  snprintf(top, sizeof top, "%s__device__ const M memo;", ctor);
  raises("mutable_device_state",
         kernel_with(top, "float* w = (float*)&memo.v; (void)w;"));
  raises("mutable_device_state",
         kernel_with(ctor, "static const M memo; float* w = (float*)(&memo); "
                           "(void)w;"));
  raises("mutable_device_state",
         kernel_with(ctor, "static const M memo; M* w = const_cast<M*>(&memo);"
                           " (void)w;"));
  raises("mutable_device_state",
         kernel_with("__constant__ unsigned memo_k[16];",
                     "unsigned* w = (unsigned*)(memo_k); (void)w;"));
  /* reading through a cast that keeps const is fine; so are lambdas and
   * arrays with braced initializers */
  clean(kernel_with("__constant__ float table[16];",
                    "const float4* t4 = (const float4*)table; (void)t4;"));
  clean(kernel_with("__device__ const float tab[2] = {1.0f, 2.0f};",
                    "const float* t = reinterpret_cast<const float*>(tab); "
                    "(void)t;"));
  clean(kernel_with("", "auto sq = [](float x) { float y = x * x; return y; "
                        "}; int a[2]{1, 2}; (void)sq; (void)a;"));
}

/* Pastes cost chains x invocations x argument length; with unclosed
 * invocations that is cubic in the file's size (a 5 KB file took 20 s, a
 * 220 KB one days). Past a budget the scanner stops and flags the names it
 * did not build. Without the budget this test does not end. */
static void test_paste_budget(void) {
  size_t cap = 64 * 1024;
  char *src = malloc(cap);
  size_t o = (size_t)snprintf(src, cap, "#define P(x)");
  for (int i = 0; i < 2000; i++)
    o += (size_t)snprintf(src + o, cap - o, " x##x");
  src[o++] = '\n';
  for (int i = 0; i < 6000 && o + 3 < cap; i++)
    src[o++] = 'P', src[o++] = '(';
  src[o] = 0;
  char detail[512];
  kl_flags f = kl_scan(src, o, detail, sizeof detail);
  CHECK(f & KL_FLAG(KL_FLAG_COMPILE_PASS_BRANCH),
        "paste budget not reported: %s", detail);
  CHECK(strstr(detail, "budget") != NULL, "detail: %s", detail);
  free(src);
}

/* Threads scanning at once (`kernlab run` and `search` scan each candidate
 * on the evaluator's slot thread, lab/evaluator.c) each get their own
 * text's answer. The comparisons of the scanner's name tables read the
 * scanner through a pointer that was one for the whole process: a thread
 * looked its names up in another thread's tokens and text, wrong, or
 * freed when that scan ended (ASan: a heap-use-after-free in memcmp, from
 * text_cmp, in a `kernlab run`; without ASan a crash here, or a wrong
 * answer, in nearly every run). Each text declares many const tables and
 * reads every one through a cast, so each scan spends most of its time in
 * those lookups; the odd threads' casts drop const (flagged), the even
 * threads' keep it. Each thread scans for SCAN_SECONDS: some 500 times
 * in a plain build on two cores, some 40 under ASan. */
enum { SCAN_THREADS = 4, SCAN_TABLES = 60, SCAN_SECONDS = 2 };

typedef struct scan_job {
  char *src;
  size_t len;
  kl_flags want;
  char want_detail[512];
  int rounds, wrong; /* scans, and those whose flags or detail differed */
} scan_job;

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static void *scan_again(void *arg) {
  scan_job *j = arg;
  double end = now_s() + SCAN_SECONDS;
  while (j->rounds < 10 || now_s() < end) {
    char detail[512];
    kl_flags f = kl_scan(j->src, j->len, detail, sizeof detail);
    j->wrong += f != j->want || strcmp(detail, j->want_detail) != 0;
    j->rounds++;
  }
  return NULL;
}

static void test_threads(void) {
  scan_job jobs[SCAN_THREADS];
  memset(jobs, 0, sizeof jobs);
  for (int t = 0; t < SCAN_THREADS; t++) {
    scan_job *j = &jobs[t];
    size_t cap = 64 * 1024, o = 0;
    j->src = malloc(cap);
    CHECK(j->src != NULL, "out of memory");
    if (!j->src) return;
    /* names of its own per thread: another thread's lookups find none */
    for (int i = 0; i < SCAN_TABLES; i++)
      o += (size_t)snprintf(j->src + o, cap - o,
                            "__device__ const float t%d_%d[2] = {1, 2};\n", t,
                            i);
    o += (size_t)snprintf(j->src + o, cap - o,
                          "extern \"C\" __global__ void matmul(const float* "
                          "A, const float* B, float* C, int M, int N, int K) "
                          "{\n");
    for (int i = 0; i < SCAN_TABLES; i++)
      o += (size_t)snprintf(
          j->src + o, cap - o,
          t % 2 ? "  float* p%d = (float*)t%d_%d; (void)p%d;\n"
                : "  const float* p%d = (const float*)t%d_%d; (void)p%d;\n",
          i, t, i, i);
    o += (size_t)snprintf(j->src + o, cap - o, "}\n");
    j->len = o;
    j->want = kl_scan(j->src, j->len, j->want_detail, sizeof j->want_detail);
    CHECK(t % 2 ? (j->want & KL_FLAG(KL_FLAG_MUTABLE_DEVICE_STATE)) != 0
                : j->want == 0,
          "thread %d's text alone: %s", t, j->want_detail);
  }
  pthread_t tid[SCAN_THREADS];
  int started = 0;
  for (; started < SCAN_THREADS; started++)
    if (pthread_create(&tid[started], NULL, scan_again, &jobs[started]) != 0)
      break;
  CHECK(started == SCAN_THREADS, "started %d of %d threads", started,
        SCAN_THREADS);
  for (int t = 0; t < started; t++)
    pthread_join(tid[t], NULL);
  for (int t = 0; t < SCAN_THREADS; t++) {
    CHECK(jobs[t].wrong == 0,
          "thread %d: %d of %d scans differ from its text's scan alone (%s)", t,
          jobs[t].wrong, jobs[t].rounds, jobs[t].want_detail);
    free(jobs[t].src);
  }
}

/* Every seed and honest kernel scans clean. */
static void scan_dir(const char *sub, int min_files) {
  const char *root = getenv("KL_SOURCE_DIR");
  CHECK(root != NULL, "KL_SOURCE_DIR not set");
  if (!root) return;
  char dir[1024];
  snprintf(dir, sizeof dir, "%s/%s", root, sub);
  DIR *d = opendir(dir);
  CHECK(d != NULL, "cannot open %s", dir);
  if (!d) return;
  int count = 0;
  struct dirent *e;
  while ((e = readdir(d))) {
    size_t nl = strlen(e->d_name);
    if (nl < 4 || strcmp(e->d_name + nl - 3, ".cu")) continue;
    char path[2048], why[256], detail[512];
    snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
    char *src;
    size_t len;
    if (kl_source_load(path, &src, &len, why, sizeof why) != KL_OK) {
      CHECK(0, "%s", why);
      continue;
    }
    kl_flags f = kl_scan(src, len, detail, sizeof detail);
    CHECK(f == 0, "%s raises: %s", path, detail);
    free(src);
    count++;
  }
  closedir(d);
  CHECK(count >= min_files, "%s: %d kernels, expected >= %d", dir, count,
        min_files);
}

int main(void) {
  test_table();
  test_each_flag();
  test_size();
  test_tricks();
  test_paste_budget();
  test_memo_tricks();
  test_macro_tricks();
  test_threads();
  scan_dir("kernels/seeds", 8);
  scan_dir("tests/kernels/honest", 30);
  return kl_test_done("test_scan");
}
