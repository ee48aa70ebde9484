/*
 * tests/unit/test_emu.c — the CPU emulator's semantics, one CUDA feature at a
 * time: barriers, static and dynamic shared memory, warp shuffles and votes,
 * atomics, vector loads, half/bfloat16 conversions, deadlock detection, and
 * the fallback when a barrier hides from the text scan.
 *
 * Each case is a tiny kernel with the contract's signature (matmul(A, B, C,
 * M, N, K)) used as a general-purpose launch: the grid is
 * (ceil(N / tile_cols), ceil(M / tile_rows)), C is the output buffer. Each
 * kernel is written so that a wrong emulation gives a wrong number (e.g. a
 * barrier that does not wait lets a reader see a slot before it is written).
 */
#include "kernels/kernels.h"
#include "tests/unit/kltest.h"

#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

/* tests/cheats/forge_samples_{median,count}.cu find the runner's report by
 * its first fields and rewrite its samples at these offsets: when the
 * report changes, change the cheats with it */
_Static_assert(offsetof(kl_run_report, launch) == 12 &&
                   offsetof(kl_run_report, has_launch) == 32 &&
                   offsetof(kl_run_report, samples) == 548 &&
                   offsetof(kl_run_report, sample_us) == 552,
               "kl_run_report moved: update tests/cheats/forge_samples_*.cu");

static kl_emu_module *build(const char *src) {
  kl_emu_module *m = NULL;
  char why[600];
  int rc = kl_emu_build(src, strlen(src), &m, NULL, NULL, why, sizeof why);
  CHECK(rc == KL_OK, "build failed: %s", why);
  return rc == KL_OK ? m : NULL;
}

static int run(kl_emu_module *m, const float *A, const float *B, float *C,
               int M, int N, int K, int threads, char *why, size_t len) {
  return kl_emu_run(m, A, B, C, M, N, K, threads, why, len);
}

/* Block of 256 threads reverses 256 values through shared memory: every
 * thread writes slot t, barrier, reads slot 255 - t. Without a working
 * barrier thread 0 reads slot 255 before thread 255 has written it. The
 * second barrier and reuse of the array checks barriers in a loop. */
static void test_barrier_static_smem(void) {
  const char *src =
      "KL_LAUNCH(256, 1, 1, 256, 0);\n"
      "extern \"C\" __global__ void matmul(const float* A, const float* B,\n"
      "    float* C, int M, int N, int K) {\n"
      "  __shared__ float s[256];\n"
      "  int t = threadIdx.x, base = blockIdx.x * 256;\n"
      "  float v = A[base + t];\n"
      "  for (int r = 0; r < K; r++) {\n"
      "    s[t] = v;\n"
      "    __syncthreads();\n"
      "    v = s[255 - t] + 1.0f;\n"
      "    __syncthreads();\n"
      "  }\n"
      "  C[base + t] = v;\n"
      "}\n";
  kl_emu_module *m = build(src);
  if (!m) return;
  float A[512], C[512];
  for (int i = 0; i < 512; i++)
    A[i] = (float)i;
  char why[300];
  for (int threads = 1; threads <= 2; threads++) {
    CHECK(run(m, A, NULL, C, 1, 512, 3, threads, why, sizeof why) == KL_OK,
          "%s", why);
    int bad = 0;
    for (int i = 0; i < 512; i++) {
      int b = i / 256 * 256, t = i % 256;
      float want = (float)(b + 255 - t) + 3.0f; /* three reversals */
      bad += C[i] != want;
    }
    CHECK(bad == 0, "%d of 512 wrong after 3 barrier rounds", bad);
  }
  kl_emu_free(m);
}

/* Dynamic shared memory, declared both at file scope and in the kernel, and
 * a 2-D block: each block sums its 16x16 inputs in a tree through dynamic
 * shared memory. */
static void test_dynamic_smem(void) {
  const char *src =
      "KL_LAUNCH(16, 16, 16, 16, 256 * sizeof(float) + 64);\n"
      "extern __shared__ __align__(16) float file_scope_smem[];\n"
      "extern \"C\" __global__ void matmul(const float* A, const float* B,\n"
      "    float* C, int M, int N, int K) {\n"
      "  extern __shared__ float red[];\n"
      "  int t = threadIdx.y * 16 + threadIdx.x;\n"
      "  int blk = blockIdx.y * gridDim.x + blockIdx.x;\n"
      "  red[t] = A[blk * 256 + t];\n"
      "  __syncthreads();\n"
      "  for (int s = 128; s > 0; s >>= 1) {\n"
      "    if (t < s) red[t] += red[t + s];\n"
      "    __syncthreads();\n"
      "  }\n"
      "  if (t == 0) C[blk] = file_scope_smem[0];\n"
      "}\n";
  kl_emu_module *m = build(src);
  if (!m) return;
  CHECK(kl_emu_geometry(m)->dyn_smem_bytes == 1088, "dyn smem %d",
        kl_emu_geometry(m)->dyn_smem_bytes);
  float A[4 * 256], C[4];
  for (int i = 0; i < 4 * 256; i++)
    A[i] = (float)(i % 7);
  char why[300];
  CHECK(run(m, A, NULL, C, 32, 32, 1, 2, why, sizeof why) == KL_OK, "%s", why);
  for (int b = 0; b < 4; b++) {
    float want = 0;
    for (int i = 0; i < 256; i++)
      want += (float)((b * 256 + i) % 7);
    CHECK(C[b] == want, "block %d sum %g want %g", b, C[b], want);
  }
  kl_emu_free(m);
}

/* Warp shuffles: xor butterfly sum, down-reduction, up-scan step, indexed
 * broadcast, ballot and any/all, in a block of 64 threads (two warps). */
static void test_shuffles_and_votes(void) {
  const char *src =
      "KL_LAUNCH(64, 1, 1, 64, 0);\n"
      "extern \"C\" __global__ void matmul(const float* A, const float* B,\n"
      "    float* C, int M, int N, int K) {\n"
      "  int t = threadIdx.x, lane = t % 32;\n"
      "  float v = A[t];\n"
      "  float x = v;\n"
      "  for (int o = 16; o > 0; o >>= 1) x += __shfl_xor_sync(0xffffffff, x, "
      "o);\n"
      "  float d = v;\n"
      "  for (int o = 16; o > 0; o >>= 1) d += __shfl_down_sync(0xffffffff, d, "
      "o);\n"
      "  float u = __shfl_up_sync(0xffffffff, v, 1);\n"
      "  float b = __shfl_sync(0xffffffff, v, 5);\n"
      "  unsigned bal = __ballot_sync(0xffffffff, lane % 3 == 0);\n"
      "  int any = __any_sync(0xffffffff, lane == 7);\n"
      "  int all = __all_sync(0xffffffff, lane < 31);\n"
      "  __syncwarp();\n"
      "  C[t * 6 + 0] = x;\n"
      "  C[t * 6 + 1] = lane == 0 ? d : 0.0f;\n"
      "  C[t * 6 + 2] = u;\n"
      "  C[t * 6 + 3] = b;\n"
      "  C[t * 6 + 4] = (float)__popc(bal);\n"
      "  C[t * 6 + 5] = (float)(any * 2 + all);\n"
      "}\n";
  kl_emu_module *m = build(src);
  if (!m) return;
  float A[64], C[64 * 6];
  for (int i = 0; i < 64; i++)
    A[i] = (float)(i + 1);
  char why[300];
  CHECK(run(m, A, NULL, C, 1, 64, 1, 1, why, sizeof why) == KL_OK, "%s", why);
  for (int t = 0; t < 64; t++) {
    int w = t / 32, lane = t % 32;
    float wsum = 0;
    for (int i = 0; i < 32; i++)
      wsum += A[w * 32 + i];
    CHECK(C[t * 6] == wsum, "xor-sum t=%d got %g want %g", t, C[t * 6], wsum);
    if (lane == 0)
      CHECK(C[t * 6 + 1] == wsum, "down-sum warp %d got %g", w, C[t * 6 + 1]);
    float up = lane == 0 ? A[t] : A[t - 1];
    CHECK(C[t * 6 + 2] == up, "up t=%d got %g want %g", t, C[t * 6 + 2], up);
    CHECK(C[t * 6 + 3] == A[w * 32 + 5], "idx t=%d got %g", t, C[t * 6 + 3]);
    CHECK(C[t * 6 + 4] == 11.0f, "ballot popc t=%d got %g", t, C[t * 6 + 4]);
    CHECK(C[t * 6 + 5] == 2.0f, "any/all t=%d got %g", t, C[t * 6 + 5]);
  }
  kl_emu_free(m);
}

/* Atomics from many blocks on both OS threads: a float and an int counter.
 * Lost updates would show as a smaller total. */
static void test_atomics(void) {
  const char *src =
      "KL_LAUNCH(128, 1, 1, 128, 0);\n"
      "extern \"C\" __global__ void matmul(const float* A, const float* B,\n"
      "    float* C, int M, int N, int K) {\n"
      "  atomicAdd(&C[0], 1.0f);\n"
      "  atomicAdd((int*)&C[1], 2);\n"
      "  atomicMax((int*)&C[2], (int)(blockIdx.x * 128 + threadIdx.x));\n"
      "}\n";
  kl_emu_module *m = build(src);
  if (!m) return;
  float C[3] = {0, 0, 0};
  char why[300];
  CHECK(run(m, NULL, NULL, C, 1, 128 * 64, 1, 2, why, sizeof why) == KL_OK,
        "%s", why);
  int ic, im;
  memcpy(&ic, &C[1], 4);
  memcpy(&im, &C[2], 4);
  CHECK(C[0] == 8192.0f, "float atomicAdd total %g want 8192", C[0]);
  CHECK(ic == 16384, "int atomicAdd total %d want 16384", ic);
  CHECK(im == 8191, "atomicMax %d want 8191", im);
  kl_emu_free(m);
}

/* float4 loads through reinterpret_cast and make_float4 stores; float2 too;
 * half and bfloat16 round trips. No barrier: runs without fibers. */
static void test_vectors_and_conversions(void) {
  const char *src =
      "#include <cuda_fp16.h>\n"
      "#include <cuda_bf16.h>\n"
      "KL_LAUNCH(32, 1, 1, 32, 0);\n"
      "extern \"C\" __global__ void matmul(const float* __restrict__ A,\n"
      "    const float* B, float* C, int M, int N, int K) {\n"
      "  int t = threadIdx.x;\n"
      "  float4 v = reinterpret_cast<const float4*>(A)[t];\n"
      "  reinterpret_cast<float4*>(C)[t] =\n"
      "      make_float4(v.w, v.z, v.y, __ldg(&A[4 * t]));\n"
      "  float2 h = reinterpret_cast<const float2*>(B)[t];\n"
      "  C[128 + t] = __half2float(__float2half(h.x));\n"
      "  C[160 + t] = __bfloat162float(__float2bfloat16(h.y));\n"
      "  C[192 + t] = fmaf(h.x, 2.0f, 1.0f) + min(t, 3) + max(0.5f, h.y);\n"
      "}\n";
  kl_emu_module *m = build(src);
  if (!m) return;
  float A[128] __attribute__((aligned(16))), B[64] __attribute__((aligned(16)));
  float C[224] __attribute__((aligned(16)));
  for (int i = 0; i < 128; i++)
    A[i] = (float)i;
  for (int i = 0; i < 64; i++)
    B[i] = 1.0f + (float)i / 1024.0f;
  B[0] = 65504.0f;    /* largest half */
  B[2] = 1.0f / 3.0f; /* rounds in both formats */
  B[1] = 3.0e38f;     /* bf16 keeps the exponent range */
  char why[300];
  CHECK(run(m, A, B, C, 1, 32, 1, 1, why, sizeof why) == KL_OK, "%s", why);
  for (int t = 0; t < 32; t++) {
    CHECK(C[4 * t] == A[4 * t + 3] && C[4 * t + 3] == A[4 * t],
          "float4 swap at %d", t);
  }
  CHECK(C[128] == 65504.0f, "half max %g", C[128]);
  CHECK(fabsf(C[129] - 1.0f / 3.0f) < 1.0f / 2048.0f && C[129] != B[2],
        "half(1/3) = %.9g", C[129]);
  CHECK(fabsf(C[160] / 3.0e38f - 1.0f) < 1.0f / 128.0f, "bf16(3e38) = %g",
        C[160]);
  CHECK(C[192 + 5] == fmaf(B[10], 2.0f, 1.0f) + 3.0f + B[11], "fmaf/min/max %g",
        C[197]);
  kl_emu_free(m);
}

/* A barrier inside divergent code that the other threads never reach while
 * they wait at a warp barrier: the emulator must say deadlock, not hang. */
static void test_deadlock_detected(void) {
  const char *src =
      "KL_LAUNCH(64, 1, 1, 64, 0);\n"
      "extern \"C\" __global__ void matmul(const float* A, const float* B,\n"
      "    float* C, int M, int N, int K) {\n"
      "  if (threadIdx.x < 32) { __syncthreads(); }\n"
      "  else { __syncwarp(); __syncwarp(); }\n"
      "  C[threadIdx.x] = 1.0f;\n"
      "}\n";
  kl_emu_module *m = build(src);
  if (!m) return;
  float C[64];
  char why[300] = "";
  /* Threads 32..63 pass their two warp barriers and finish; then the block
   * barrier releases the first warp (finished threads do not count). */
  CHECK(run(m, NULL, NULL, C, 1, 64, 1, 1, why, sizeof why) == KL_OK,
        "exited threads must not block __syncthreads: %s", why);
  kl_emu_free(m);

  const char *src2 =
      "KL_LAUNCH(64, 1, 1, 64, 0);\n"
      "extern \"C\" __global__ void matmul(const float* A, const float* B,\n"
      "    float* C, int M, int N, int K) {\n"
      "  if (threadIdx.x % 2) { __syncthreads(); }\n"
      "  else { __syncwarp(); }\n"
      "  C[threadIdx.x] = 1.0f;\n"
      "}\n";
  m = build(src2);
  if (!m) return;
  int rc = run(m, NULL, NULL, C, 1, 64, 1, 1, why, sizeof why);
  CHECK(rc == KL_ERUN && strstr(why, "deadlock"),
        "divergent barrier must be a deadlock, got rc %d: %s", rc, why);
  kl_emu_free(m);
}

/* A barrier spelled so the text scan cannot see it: the first launch runs
 * without fibers, meets the barrier, and is repeated with fibers. */
static void test_hidden_barrier_fallback(void) {
  const char *src =
      "#define CAT(a, b) a##b\n"
      "KL_LAUNCH(128, 1, 1, 128, 0);\n"
      "extern \"C\" __global__ void matmul(const float* A, const float* B,\n"
      "    float* C, int M, int N, int K) {\n"
      "  __shared__ float s[128];\n"
      "  s[threadIdx.x] = A[threadIdx.x];\n"
      "  CAT(__syn, cthreads)();\n"
      "  C[threadIdx.x] = s[127 - threadIdx.x];\n"
      "}\n";
  kl_emu_module *m = build(src);
  if (!m) return;
  float A[128], C[128];
  for (int i = 0; i < 128; i++)
    A[i] = (float)i;
  char why[300];
  CHECK(run(m, A, NULL, C, 1, 128, 1, 1, why, sizeof why) == KL_OK, "%s", why);
  int bad = 0;
  for (int i = 0; i < 128; i++)
    bad += C[i] != (float)(127 - i);
  CHECK(bad == 0, "%d wrong after the fiber fallback", bad);
  kl_emu_free(m);
}

/* Compile errors come back as KL_ECOMPILE with the compiler's error line;
 * mma.h is refused on cpu-emu with a message that says so. */
static void test_compile_errors(void) {
  kl_emu_module *m = NULL;
  char why[600];
  const char *bad = "KL_LAUNCH(1,1,1,1,0);\nextern \"C\" __global__ void "
                    "matmul(const float* A, const float* B, float* C, int M, "
                    "int N, int K) { C[0] = undeclared; }\n";
  CHECK(kl_emu_build(bad, strlen(bad), &m, NULL, NULL, why, sizeof why) ==
                KL_ECOMPILE &&
            strstr(why, "undeclared"),
        "compile error: %s", why);
  /* a candidate's own words are not the compiler's: not oom, not timeout */
  const char *spoof =
      "#error virtual memory exhausted\n#error g++: fatal error: CPU time "
      "limit exceeded signal terminated program cc1plus\n"
      "KL_LAUNCH(1,1,1,1,0);\nextern \"C\" __global__ void matmul(const "
      "float* A, const float* B, float* C, int M, int N, int K) {}\n";
  int rc = kl_emu_build(spoof, strlen(spoof), &m, NULL, NULL, why, sizeof why);
  CHECK(rc == KL_ECOMPILE, "#error naming a compiler limit: rc %d (%s)", rc,
        why);
  const char *mma = "#include <mma.h>\nKL_LAUNCH(1,1,1,1,0);\nextern \"C\" "
                    "__global__ void matmul(const float* A, const float* B, "
                    "float* C, int M, int N, int K) {}\n";
  CHECK(kl_emu_build(mma, strlen(mma), &m, NULL, NULL, why, sizeof why) ==
                KL_ECOMPILE &&
            strstr(why, "cpu-emu"),
        "mma.h: %s", why);
  /* the time-stamp counter, under any spelling that reaches g++ (the
   * scanner is the first wall; this is the second) */
  static const char *const tsc[] = {"__builtin_ia32_rdtsc()",
                                    "__builtin_ia32_rdtscp(&aux)"};
  for (int i = 0; i < 2; i++) {
    char src[400];
    snprintf(src, sizeof src,
             "KL_LAUNCH(1,1,1,1,0);\nextern \"C\" "
             "__global__ void matmul(const float* A, const float* B, float* "
             "C, int M, int N, int K) { unsigned aux; (void)aux; C[0] = "
             "(float)%s; }\n",
             tsc[i]);
    CHECK(kl_emu_build(src, strlen(src), &m, NULL, NULL, why, sizeof why) ==
                  KL_ECOMPILE &&
              strstr(why, "timer_reads_are_not_allowed"),
          "%s: %s", tsc[i], why);
  }
  const char *sig = "KL_LAUNCH(1,1,1,1,0);\nextern \"C\" __global__ void "
                    "matmul(float* A, const float* B, float* C, int N) {}\n";
  CHECK(kl_emu_build(sig, strlen(sig), &m, NULL, NULL, why, sizeof why) ==
                KL_ECOMPILE &&
            strstr(why, "kl_contract"),
        "wrong signature: %s", why);
}

/* kl_emu_set_reverse: thread 0 publishes a value through shared memory
 * and the others read it without a barrier (a race on hardware). From
 * thread 0 up, every reader finds it written; from the last thread down,
 * none does (they read the block's zeroed slot, or the previous block's
 * value). The same kernel with the barrier gives the same result in both
 * orders, with fibers and without (the racy one has no barrier, so it runs
 * fiber-less). */
static void test_reverse_order(void) {
  const char *racy =
      "KL_LAUNCH(64, 1, 1, 64, 0);\n"
      "extern \"C\" __global__ void matmul(const float* A, const float* B,\n"
      "    float* C, int M, int N, int K) {\n"
      "  __shared__ float s;\n"
      "  if (threadIdx.x == 0) s = A[blockIdx.x];\n"
      "  C[blockIdx.x * 64 + threadIdx.x] = s;\n"
      "}\n";
  const char *fenced =
      "KL_LAUNCH(64, 1, 1, 64, 0);\n"
      "extern \"C\" __global__ void matmul(const float* A, const float* B,\n"
      "    float* C, int M, int N, int K) {\n"
      "  __shared__ float s;\n"
      "  if (threadIdx.x == 0) s = A[blockIdx.x];\n"
      "  __syncthreads();\n"
      "  C[blockIdx.x * 64 + threadIdx.x] = s;\n"
      "}\n";
  float A[4] = {10, 20, 30, 40}, C[256];
  char why[300];
  for (int k = 0; k < 2; k++) {
    kl_emu_module *m = build(k ? fenced : racy);
    if (!m) continue;
    for (int reverse = 0; reverse <= 1; reverse++) {
      kl_emu_set_reverse(m, reverse, 1);
      CHECK(run(m, A, NULL, C, 1, 256, 1, 1, why, sizeof why) == KL_OK, "%s",
            why);
      int right = 0;
      for (int i = 0; i < 256; i++)
        right += C[i] == A[i / 64];
      int expect = !k && reverse ? 4 : 256; /* only thread 0 of each block */
      CHECK(right == expect,
            "%s kernel, threads %s: %d of 256 read the published value, "
            "expected %d",
            k ? "fenced" : "racy", reverse ? "last first" : "from 0", right,
            expect);
    }
    kl_emu_free(m);
  }
}

/* Runs `src` three times: each launch must read the poison -1 where the
 * launch before left 1234 (launch 0 may read a fresh page's zero unless
 * `first_too`). */
static void expect_poison(const char *src, const char *where, int first_too) {
  kl_emu_module *m = build(src);
  if (!m) return;
  float C[1];
  char why[300];
  for (int launch = 0; launch < 3; launch++) {
    CHECK(run(m, NULL, NULL, C, 1, 1, 1, 1, why, sizeof why) == KL_OK, "%s",
          why);
    CHECK((launch == 0 && !first_too) || C[0] == -1.0f,
          "launch %d read %g from %s, expected the poison -1 (not the 1234 "
          "the launch before left)",
          launch, (double)C[0], where);
  }
  kl_emu_free(m);
}

#define POISON_KERNEL(LAUNCH, BODY)                                            \
  LAUNCH "extern \"C\" __global__ void matmul(const float* A, "                \
         "const float* B, float* C, int M, int N, int K) {\n" BODY "}\n"

/* __shared__ storage and uninitialised locals start undefined in every
 * launch, as on a device (here 0xFF bytes, an int -1): what one launch
 * leaves in them is gone by the next, so they cannot carry a memoised
 * result or a launch count. __shared__ from the first launch on: it read
 * zeros there (the module's thread-local block did not exist yet). */
static void test_shared_starts_undefined(void) {
  expect_poison(POISON_KERNEL("KL_LAUNCH(1, 1, 1, 1, 0);\n",
                              "  __shared__ int left;\n"
                              "  C[0] = (float)left;\n"
                              "  left = 1234;\n"),
                "__shared__", 1);
  /* dynamic shared memory too (malloc hands back the last launch's bytes) */
  expect_poison(POISON_KERNEL("KL_LAUNCH(1, 1, 1, 1, 64);\n",
                              "  extern __shared__ int left[];\n"
                              "  C[0] = (float)left[0];\n"
                              "  left[0] = 1234;\n"),
                "dynamic shared memory", 1);
  /* a fiber-less kernel's locals far below the 64 KiB scrubbed under its
   * frame (pool threads have 16 MiB stacks) */
  expect_poison(POISON_KERNEL("KL_LAUNCH(1, 1, 1, 1, 0);\n",
                              "  volatile int left[64 * 1024];\n"
                              "  C[0] = (float)left[7];\n"
                              "  left[7] = 1234;\n"),
                "a local 256 KiB down a pool thread's stack", 0);
  /* and locals: a kernel with a barrier runs its threads as fibers, whose
   * stacks are kept between launches at the same addresses */
  expect_poison(POISON_KERNEL("KL_LAUNCH(2, 1, 1, 1, 0);\n",
                              "  volatile int left[64];\n"
                              "  __syncthreads();\n"
                              "  if (threadIdx.x == 0) C[0] = (float)left[7];\n"
                              "  left[7] = 1234;\n"
                              "  __syncthreads();\n"),
                "an uninitialised local of a fiber", 0);
}

/* Unpaced, the runner drives its own timed launches (kl_pace in its
 * process) and checks every one: a kernel that skips the work on one
 * timed launch (here by a launch counter in a page this test maps and
 * writes into the source as an address: host memory the kernel's module
 * does not own, so neither its read-only data nor the poisoned stacks and
 * TLS reset it) raises timed_output_wrong although every other launch is
 * right. */
static void test_timed_launches_checked(void) {
  int *counter = mmap(NULL, 4096, PROT_READ | PROT_WRITE,
                      MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  CHECK(counter != MAP_FAILED, "counter page: %s", strerror(errno));
  if (counter == MAP_FAILED) return;
  char src[2048];
  snprintf(
      src, sizeof src,
      "#define KL_N (*(volatile int*)%#llxull)\n"
      "KL_LAUNCH(16, 16, 16, 16, 0);\n"
      "extern \"C\" __global__ void matmul(const float* A, const float* B,\n"
      "    float* C, int M, int N, int K) {\n"
      "  int r = blockIdx.y * 16 + threadIdx.y, c = blockIdx.x * 16 + "
      "threadIdx.x;\n"
      "  int kl_n = r == 0 && c == 0 ? ++KL_N : KL_N;\n"
      "  if (kl_n == 3 || r >= M || c >= N) return; /* the first timed run */\n"
      "  float acc = 0.0f;\n"
      "  for (int k = 0; k < K; k++) acc += A[r * K + k] * B[k * N + c];\n"
      "  C[r * N + c] = acc;\n"
      "}\n",
      (unsigned long long)(uintptr_t)counter);
  kl_run_job job;
  memset(&job, 0, sizeof job);
  char why[600];
  int rc = kl_emu_compile(src, strlen(src), job.so_path, sizeof job.so_path,
                          NULL, NULL, why, sizeof why);
  CHECK(rc == KL_OK, "build: %s", why);
  if (rc != KL_OK) return;
  job.n_shapes = 1;
  job.shapes[0] = (kl_shape){16, 16, 16};
  job.timed_shape = (kl_shape){16, 16, 16};
  job.seed = 5;
  job.threads = 1;
  job.timed = 1;
  job.max_samples = 6;
  job.time_budget_ms = 0;
  size_t offs[KL_OUT_SLOTS];
  size_t n = kl_run_output_layout(&job, offs);
  /* in a child, as the sandbox runs it: the module stays loaded */
  size_t bytes = sizeof(kl_run_report) + n * sizeof(float);
  void *map = mmap(NULL, bytes, PROT_READ | PROT_WRITE,
                   MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (map == MAP_FAILED) return;
  kl_run_report *rep = map;
  float *outs = (float *)(rep + 1);
  /* launches: the check (1), the warm-up (2), sample 1 (3: skipped),
   * samples 2..6 (right) */
  pid_t kid = fork();
  if (kid == 0) {
    kl_run_execute(&job, rep, outs, NULL);
    _exit(0);
  }
  waitpid(kid, NULL, 0);
  CHECK(rep->done && !rep->failed, "run: %s", rep->why);
  CHECK(rep->flags >> KL_FLAG_TIMED_OUTPUT_WRONG & 1,
        "a skipped timed launch raises timed_output_wrong: flags %#llx (%s)",
        (unsigned long long)rep->flags, rep->flag_detail);
  munmap(map, bytes);
  munmap(counter, 4096);
}

/* No launch sees the inputs an earlier one saw: each timed launch has its
 * own, from a secret seed (kl_pace), and the reversed rerun of the check
 * has its check's scaled (kl_scaled). A memo kept in host memory the
 * module does not own (here a page this test maps; a candidate would find
 * libc's) and keyed on the input values never hits, and one keyed on the
 * input pointer replays outputs made for other inputs, which the launch
 * checks name (timed_output_wrong). Once, every timed launch of an input
 * set repeated its inputs, and both memos replayed unnoticed. */
typedef struct kl_memo_page {
  unsigned long long key[8];
  int filled[8];
  int launches, replays;
  float c[8][256];
} kl_memo_page;

static void memo_run(const char *key_expr, kl_memo_page *page,
                     kl_run_report *out) {
  memset(page, 0, sizeof *page);
  char src[4096];
  snprintf(
      src, sizeof src,
      "struct kl_memo_page { unsigned long long key[8]; int filled[8];\n"
      "  int launches, replays; float c[8][256]; };\n"
      "#define KL_M ((kl_memo_page*)%#llxull)\n"
      "KL_LAUNCH(16, 16, 16, 16, 0);\n"
      "extern \"C\" __global__ void matmul(const float* A, const float* B,\n"
      "    float* C, int M, int N, int K) {\n"
      "  int r = threadIdx.y, c = threadIdx.x, last = r == 15 && c == 15;\n"
      "  float vs = 0.0f;\n"
      "  for (int i = 0; i < 16; i++) vs += A[i * K] * (i + 1) + B[i] * (i + "
      "17);\n"
      "  unsigned long long key = %s;\n"
      "  for (int s = 0; s < 8; s++)\n"
      "    if (KL_M->filled[s] && KL_M->key[s] == key) {\n"
      "      C[r * N + c] = KL_M->c[s][r * 16 + c];\n"
      "      if (last) KL_M->replays++;\n"
      "      return;\n"
      "    }\n"
      "  float acc = 0.0f;\n"
      "  for (int k = 0; k < K; k++) acc += A[r * K + k] * B[k * N + c];\n"
      "  C[r * N + c] = acc;\n"
      "  int w = KL_M->launches %% 8;\n"
      "  KL_M->c[w][r * 16 + c] = acc;\n"
      "  if (last) { KL_M->key[w] = key; KL_M->filled[w] = 1; "
      "KL_M->launches++; }\n"
      "}\n",
      (unsigned long long)(uintptr_t)page, key_expr);
  kl_run_job job;
  memset(&job, 0, sizeof job);
  char why[600];
  int rc = kl_emu_compile(src, strlen(src), job.so_path, sizeof job.so_path,
                          NULL, NULL, why, sizeof why);
  CHECK(rc == KL_OK, "build: %s", why);
  memset(out, 0, sizeof *out);
  if (rc != KL_OK) return;
  job.n_shapes = 1;
  job.shapes[0] = (kl_shape){16, 16, 16};
  job.timed_shape = (kl_shape){16, 16, 16};
  job.seed = 7;
  job.second_run = 1; /* the reversed rerun of the check is scaled too */
  job.threads = 1;
  job.timed = 1;
  job.max_samples = 6;
  size_t offs[KL_OUT_SLOTS];
  size_t n = kl_run_output_layout(&job, offs);
  size_t bytes = sizeof(kl_run_report) + n * sizeof(float);
  void *map = mmap(NULL, bytes, PROT_READ | PROT_WRITE,
                   MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (map == MAP_FAILED) return;
  pid_t kid = fork(); /* as the sandbox runs it: the module stays loaded */
  if (kid == 0) {
    kl_run_execute(&job, map, (float *)((kl_run_report *)map + 1), NULL);
    _exit(0);
  }
  waitpid(kid, NULL, 0);
  *out = *(kl_run_report *)map;
  munmap(map, bytes);
}

static void test_memo_misses_or_is_caught(void) {
  kl_memo_page *page = mmap(NULL, sizeof(kl_memo_page), PROT_READ | PROT_WRITE,
                            MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  CHECK(page != MAP_FAILED, "memo page: %s", strerror(errno));
  if (page == MAP_FAILED) return;
  kl_run_report rep;
  uint64_t wrong = (uint64_t)1 << KL_FLAG_TIMED_OUTPUT_WRONG;
  /* keyed on the values: it never hits, and every launch computes */
  memo_run("(unsigned long long)A ^ (unsigned long long)(long long)(vs * "
           "1e6f)",
           page, &rep);
  CHECK(rep.done && !rep.failed, "value-keyed memo run: %s", rep.why);
  CHECK(page->launches >= 7 && page->replays == 0,
        "a value-keyed memo replayed %d of %d timed launches", page->replays,
        page->launches + page->replays);
  CHECK(!(rep.flags & wrong), "a kernel that computes: %s", rep.flag_detail);
  /* keyed on the pointer: it replays an earlier launch's output */
  memo_run("(unsigned long long)A", page, &rep);
  CHECK(page->replays > 0, "a pointer-keyed memo replays (%d)", page->replays);
  CHECK(rep.flags & wrong,
        "replayed timed outputs raise timed_output_wrong: flags %#llx (%s)",
        (unsigned long long)rep.flags, rep.flag_detail);
  munmap(page, sizeof(kl_memo_page));
}

/* The module's own data is read-only once loaded: a file-scope memo that
 * got past the scanner (built here directly) faults on its first write
 * instead of outliving the launch. In a child, before this process has
 * pool threads (see main). */
static void test_module_data_read_only(void) {
  const char *src =
      "#ifndef __CUDACC_RTC__\nstatic int kl_memo;\n#endif\n"
      "KL_LAUNCH(1, 1, 1, 1, 0);\n"
      "extern \"C\" __global__ void matmul(const float* A, const float* B,\n"
      "    float* C, int M, int N, int K) { C[0] = (float)kl_memo++; }\n";
  char so[512], why[600];
  int rc = kl_emu_compile(src, strlen(src), so, sizeof so, NULL, NULL, why,
                          sizeof why);
  CHECK(rc == KL_OK, "build: %s", why);
  if (rc != KL_OK) return;
  pid_t kid = fork();
  if (kid == 0) {
    kl_emu_module *m = NULL;
    if (kl_emu_load(so, 0, NULL, NULL, &m, why, sizeof why) != KL_OK) _exit(3);
    float C[1];
    kl_emu_run(m, NULL, NULL, C, 1, 1, 1, 1, why, sizeof why);
    _exit(0);
  }
  int st = 0;
  waitpid(kid, &st, 0);
  int segv = WIFSIGNALED(st) && WTERMSIG(st) == SIGSEGV;
#if defined(__SANITIZE_ADDRESS__)
  segv |= WIFEXITED(st) && WEXITSTATUS(st) == 1; /* ASan's SEGV report */
#endif
  CHECK(segv, "a write to the module's own global: expected SIGSEGV, got %s %d",
        WIFSIGNALED(st) ? "signal" : "exit",
        WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st));
}

/* A second load of a loaded module: dlopen would hand back the first, its
 * data read-only by now, and binding it again faulted (bench_sandbox's
 * in-process baseline crashed so); refused with a message instead. */
static void test_second_load_refused(void) {
  const char *src = "KL_LAUNCH(1, 1, 1, 1, 0);\n"
                    "extern \"C\" __global__ void matmul(const float* A, "
                    "const float* B,\n"
                    "    float* C, int M, int N, int K) { C[0] = 2.0f; }\n";
  char so[512], why[600];
  int rc = kl_emu_compile(src, strlen(src), so, sizeof so, NULL, NULL, why,
                          sizeof why);
  CHECK(rc == KL_OK, "build: %s", why);
  if (rc != KL_OK) return;
  pid_t kid = fork();
  if (kid == 0) {
    kl_emu_module *m = NULL, *again = NULL;
    if (kl_emu_load(so, 0, NULL, NULL, &m, why, sizeof why) != KL_OK) _exit(3);
    rc = kl_emu_load(so, 0, NULL, NULL, &again, why, sizeof why);
    if (rc != KL_EENV || again || !strstr(why, "already loaded")) _exit(4);
    float C[1] = {0};
    kl_emu_run(m, NULL, NULL, C, 1, 1, 1, 1, why, sizeof why);
    _exit(C[0] == 2.0f ? 0 : 5); /* the first load still runs */
  }
  int st = 0;
  waitpid(kid, &st, 0);
  CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0,
        "second load: expected a refusal and a working first load, got %s %d",
        WIFSIGNALED(st) ? "signal" : "exit",
        WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st));
}

/* The emulator rewrites `extern __shared__` declarations for g++; it must
 * see the text as both compilers do. A `// comment \` ending in a line
 * splice hides the next line from them (the declaration there must not
 * become a g++-only macro: any code could hide in its type), and a raw
 * string's contents are not code. */
static void test_rewrite_sees_compilers_text(void) {
  const char *src =
      "// a note \\\n"
      "extern __shared__ int kl_hidden[];\n"
      "static const char kl_raw[] = R\"x(\" extern __shared__ int q[]; "
      "\")x\";\n"
      "KL_LAUNCH(1, 1, 1, 1, 0);\n"
      "extern \"C\" __global__ void matmul(const float* A, const float* B,\n"
      "    float* C, int M, int N, int K) {\n"
      "#ifdef kl_hidden\n"
      "  C[0] = 1.0f;\n"
      "#else\n"
      "  C[0] = 2.0f;\n"
      "#endif\n"
      "  C[1] = (float)sizeof kl_raw;\n"
      "}\n";
  kl_emu_module *m = build(src);
  if (!m) return;
  float C[2] = {0, 0};
  char why[300];
  CHECK(run(m, NULL, NULL, C, 1, 2, 1, 1, why, sizeof why) == KL_OK, "%s", why);
  CHECK(C[0] == 2.0f,
        "a declaration on a line spliced into a // comment became a macro "
        "for g++ (C[0] = %g, expected 2)",
        (double)C[0]);
  CHECK(C[1] == 31.0f,
        "the raw string's contents were rewritten: sizeof %g, expected 31",
        (double)C[1]);
  kl_emu_free(m);
}

/* Host code that runs when the module loads (under the loader's filter,
 * which may still open files) is refused at build time, whichever way it
 * got there: a constructor, a dynamic initialiser, an ifunc resolver. The
 * scanner keeps such code out of candidates; this is the second wall. */
static void test_no_code_at_load(void) {
  static const char *const host[] = {
      "static volatile int kl_v;\n"
      "__attribute__((constructor)) static void kl_c(void) { kl_v = 1; }\n",
      "static int kl_f(void) { return 3; }\nint kl_d = kl_f();\n",
      "extern \"C\" { static void kl_i(void) {}\n"
      "static void (*kl_r(void))(void) { return kl_i; }\n"
      "void kl_g(void) __attribute__((ifunc(\"kl_r\"))); }\n"
      "void (*kl_p)(void) = kl_g;\n",
      "extern \"C\" void _init(void) {}\n",
      /* dlclose runs these (the sandbox review) */
      "static volatile int kl_v;\n"
      "__attribute__((destructor)) static void kl_x(void) { kl_v = 1; }\n",
      "extern \"C\" void _fini(void) {}\n",
  };
  const char *kernel =
      "KL_LAUNCH(1, 1, 1, 1, 0);\n"
      "extern \"C\" __global__ void matmul(const float* A, const float* B,\n"
      "    float* C, int M, int N, int K) { C[0] = 1.0f; }\n";
  for (size_t i = 0; i < sizeof host / sizeof host[0]; i++) {
    char src[1024], so[512], why[600];
    snprintf(src, sizeof src, "%s%s", host[i], kernel);
    int rc = kl_emu_compile(src, strlen(src), so, sizeof so, NULL, NULL, why,
                            sizeof why);
    CHECK(rc == KL_ECOMPILE && strstr(why, "when it loads or unloads"),
          "host code run at load (case %zu) gave rc %d: %s", i, rc,
          rc == KL_OK ? "built" : why);
  }
  /* and an honest module still builds and loads */
  kl_emu_module *m = build(kernel);
  if (m) kl_emu_free(m);
}

/* kl_emu_load calls `opened` as soon as dlopen returns, so the sandbox's
 * no-open filter is in place before the module is refused and closed
 * again: a refusal (no visible `matmul`) used to dlclose it, running what
 * it runs at unload, under the filter that still let files be opened (the
 * sandbox review). In a child: the module stays loaded in it. */
static int opened_calls;
static void count_opened(void *ctx) {
  opened_calls += ctx == &opened_calls;
}
static void test_opened_before_refusal(void) {
  const char *src =
      "#ifndef __CUDA_ARCH__\n#define KL_HIDE "
      "__attribute__((visibility(\"hidden\")))\n#else\n#define KL_HIDE\n"
      "#endif\nKL_LAUNCH(1, 1, 1, 1, 0);\n"
      "extern \"C\" KL_HIDE __global__ void matmul(const float* A,\n"
      "    const float* B, float* C, int M, int N, int K) { C[0] = 1.0f; }\n";
  char so[512], why[600];
  int rc = kl_emu_compile(src, strlen(src), so, sizeof so, NULL, NULL, why,
                          sizeof why);
  CHECK(rc == KL_OK, "build: %s", why);
  if (rc != KL_OK) return;
  pid_t kid = fork();
  if (kid == 0) {
    kl_emu_module *m = NULL;
    rc = kl_emu_load(so, 0, count_opened, &opened_calls, &m, why, sizeof why);
    _exit(rc == KL_ECOMPILE && !m && strstr(why, "matmul") ? opened_calls
                                                           : 100 + rc);
  }
  int st = 0;
  waitpid(kid, &st, 0);
  CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 1,
        "a module refused after dlopen: opened called once before it was "
        "closed (expected exit 1, got %s %d)",
        WIFSIGNALED(st) ? "signal" : "exit",
        WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st));
}

/* A host library function reached from device code is refused at build
 * time (the module's imports), however the source named it: a __device__
 * template that g++ resolves to glibc's non-template function (NVRTC sees
 * only the template, the scanner knows neither name), a plain extern
 * declaration, a weak one. What device code may call still builds: math,
 * memcpy/memset, printf, malloc/free, new/delete. */
static int deny_all(const char *name) {
  return name == NULL;
}
static int allow_all(const char *name) {
  return name != NULL;
}

/* kl_elf_imports_allowed on a real module: it names an import when one is
 * refused (a name inside the image), and truncated or corrupted images give
 * OK or an explained KL_EINPUT, never a read outside the image (ASan
 * watches this build). */
static void test_imports_reader(const char *so) {
  FILE *f = fopen(so, "rb");
  CHECK(f != NULL, "open %s", so);
  if (!f) return;
  static uint8_t img[1 << 20], m[1 << 20];
  size_t n = fread(img, 1, sizeof img, f);
  fclose(f);
  CHECK(n > 0 && n < sizeof img, "module size %zu", n);
  char why[200];
  const char *refused = NULL;
  int rc = kl_elf_imports_allowed(img, n, deny_all, &refused, why, sizeof why);
  CHECK(rc == KL_OK && refused && *refused && (const uint8_t *)refused > img &&
            (const uint8_t *)refused < img + n,
        "deny-all names an import inside the image: rc %d %s", rc,
        refused ? refused : why);
  rc = kl_elf_imports_allowed(img, n, allow_all, &refused, why, sizeof why);
  CHECK(rc == KL_OK && !refused, "allow-all passes: %s",
        refused ? refused : why);
  int bad = 0;
  unsigned r = 12345;
  for (int it = 0; it < 4000; it++) {
    size_t len = it < 1000 ? n * (size_t)it / 1000 : n;
    memcpy(m, img, len);
    for (int k = 0; it >= 1000 && k < 1 + it % 8; k++) {
      r = r * 1103515245u + 12345u;
      m[(r >> 8) % len] = (uint8_t)(r >> 3);
    }
    /* a copy of exactly len bytes on the heap, so ASan sees its end */
    uint8_t *c = malloc(len ? len : 1);
    if (!c) break;
    memcpy(c, m, len);
    why[0] = 0;
    rc = kl_elf_imports_allowed(c, len, it & 1 ? deny_all : allow_all, &refused,
                                why, sizeof why);
    if (rc != KL_OK && (rc != KL_EINPUT || !why[0])) bad++;
    /* a refused name lies inside the copy, its NUL too */
    if (rc == KL_OK && refused &&
        ((const uint8_t *)refused < c || (const uint8_t *)refused >= c + len ||
         !memchr(refused, 0, (size_t)(c + len - (const uint8_t *)refused))))
      bad++;
    free(c);
  }
  CHECK(bad == 0, "%d truncations or mutations broke the contract", bad);
}

static void test_host_imports_refused(void) {
  static const struct {
    const char *decl, *call, *name;
  } host[] = {
      {"template <class T> __device__ char* strtok(T s, const char* d) "
       "{ return 0; }\n",
       "char b[4] = {'a', ',', 'b', 0}; if (strtok(b, \",\")) C[1] = 0.0f;",
       "strtok"},
      {"extern \"C\" int rand(void);\n", "C[1] = (float)(rand() & 1);", "rand"},
      {"extern \"C\" __attribute__((weak)) char* getenv(const char*);\n",
       "if (getenv && getenv(\"X\")) C[1] = 0.0f;", "getenv"},
  };
  for (size_t i = 0; i < sizeof host / sizeof host[0]; i++) {
    char src[1024], so[512], why[600];
    snprintf(src, sizeof src,
             "%sKL_LAUNCH(1, 1, 1, 1, 0);\n"
             "extern \"C\" __global__ void matmul(const float* A, const "
             "float* B,\n    float* C, int M, int N, int K) { C[0] = 1.0f; "
             "%s }\n",
             host[i].decl, host[i].call);
    int rc = kl_emu_compile(src, strlen(src), so, sizeof so, NULL, NULL, why,
                            sizeof why);
    CHECK(rc == KL_ECOMPILE && strstr(why, "host library function") &&
              strstr(why, host[i].name),
          "a call to host %s gave rc %d: %s", host[i].name, rc,
          rc == KL_OK ? "built" : why);
  }
  const char *ok_src =
      "#include <cuda_fp16.h>\n"
      "KL_LAUNCH(1, 1, 1, 1, 0);\n"
      "struct S { virtual float f(float x) { return x; } };\n"
      "extern \"C\" __global__ void matmul(const float* A, const float* B,\n"
      "    float* C, int M, int N, int K) {\n"
      "  volatile float x = A[0];\n"
      "  float* t = (float*)malloc(64); memset(t, 0, 64);\n"
      "  memcpy(t, A, 4); float* u = new float[4]; u[0] = t[0];\n"
      "  C[0] = expf(x) + sqrt((double)x) + powf(x, 2.5f) + tanhf(x) +\n"
      "         erff(x) + u[0] * 0.0f;\n"
      "  S s; C[0] += s.f(0.0f);\n"
      "  if (M < 0) printf(\"%d\\n\", M);\n"
      "  delete[] u; free(t);\n"
      "}\n";
  kl_emu_module *m = build(ok_src);
  CHECK(m != NULL, "device-callable library functions still build");
  if (m) kl_emu_free(m);
  char so[512], why[600];
  if (kl_emu_compile(ok_src, strlen(ok_src), so, sizeof so, NULL, NULL, why,
                     sizeof why) == KL_OK)
    test_imports_reader(so);
}

int main(void) {
  /* First on purpose: as the process's first emulator launch (64-thread
   * blocks, later launches 256) it made LeakSanitizer's exit-time scan
   * crash under ASan ("Tracer caught signal 11"). Two causes, both mended
   * in kernels/emu/emu_run.c: a sanitizer-runtime bug with the candidate
   * modules' dynamic TLS (__asan_default_options there), and ours, the
   * fibers' switches back to the scheduler naming no stack (LSan saw a
   * pool thread with a 0-0 stack; sched_stack_lo) */
  /* (this one forks before any launch here: a child of a process whose
   * pool threads exist would wait for them) */
  test_timed_launches_checked();
  test_memo_misses_or_is_caught();
  test_module_data_read_only();
  test_second_load_refused();
  test_opened_before_refusal();
  test_reverse_order();
  test_barrier_static_smem();
  test_dynamic_smem();
  test_shuffles_and_votes();
  test_atomics();
  test_vectors_and_conversions();
  test_deadlock_detected();
  test_hidden_barrier_fallback();
  test_compile_errors();
  test_shared_starts_undefined();
  test_rewrite_sees_compilers_text();
  test_no_code_at_load();
  test_host_imports_refused();
  return kl_test_done("test_emu");
}
