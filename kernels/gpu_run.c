/*
 * kernels/gpu_run.c — one run job on the GPU (kl_gpu_run_execute), the
 * device mirror of kernels/run.c's kl_run_execute.
 *
 * Same job, same outputs, same anti-cheat evidence: inputs made here from
 * (seed, stream) exactly as the lab makes them; every buffer on the device
 * with a canary band of KL_CANARY_FLOATS on each side; C NaN-poisoned
 * (cuMemsetD32 with KL_POISON_BITS) before every launch, timed ones too;
 * A and B read back and compared after the checks and after timing; shape
 * 0 run twice. Where the GPU differs from kernels/run.c is the timed
 * launches: each gets inputs of its own and is verified here (below), as
 * kernels/pace.c does for cpu-emu, so no timed output goes back. This
 * process is the lab's own code on the GPU
 * (the candidate is device code only), so the verdicts can be made here.
 *
 * What is GPU-only:
 *  - kl_launch is read from the loaded module (cuModuleGetGlobal) and must
 *    equal the cubin's ELF symbol, which is what the lab read; resource
 *    use (cuFuncGetAttribute) and occupancy go into rep->gpu; dynamic
 *    shared memory above the 48 KB default is opted in
 *    (MAX_DYNAMIC_SHARED_SIZE_BYTES) up to the device's opt-in limit.
 *  - Large shapes (kl_gpu_device_ref) are checked here against cuBLAS DGEMM
 *    on float64 copies of the inputs, in fresh allocations made after the
 *    candidate ran, and S = |A||B| the same way; the verdict goes in
 *    rep->gpu.dev_checks (kl_compare, the lab's tolerances).
 *  - Timing, per sample: poison C, flush L2 (cuMemsetD32 over a buffer >=
 *    2x L2), synchronise; then CUPTI timestamp, host clock, event, launch,
 *    event, cuCtxSynchronize, host clock, CUPTI timestamp, SM clock (NVML,
 *    for the throttle filter). The sample is the
 *    sum of the CUPTI kernel records inside that window (every kernel the
 *    launch caused), or the event time when CUPTI is unavailable
 *    (rep->gpu.timer says which). Before each timed launch (the warm-up
 *    too) A and B are drawn afresh from a seed of that launch's own
 *    (kl_secret_seed, never on the device) and uploaded; after the window
 *    C is copied back and verified on them (kl_verify_launch: poison and
 *    NaN scan, Freivalds' check of every row, 64 spot dot products; the
 *    first failure sets timed_output_wrong). So a launch's output cannot
 *    be worked out ahead (no earlier launch saw its inputs, nor anything
 *    that predicts them) and a launch that skips work cannot hide among
 *    checked ones (every one is checked). Each launch's inputs and the
 *    canaries are also read back after a random eighth of the launches
 *    and after the last. The host work per launch, O(M K + K N + M N),
 *    is outside the samples but inside the wall cap. The second run of
 *    shape 0 gets its inputs scaled by powers of two (kl_scaled, as on
 *    cpu-emu), so a memo of the first run cannot answer it unseen.
 *    kernels/stats.c decides when to stop: at least 10 samples and 0.5 s
 *    of measured time, then relative noise < 0.5%, or the caps
 *    (KL_MAX_TIMING_SAMPLES samples; the job's budget, at least 5 s).
 *  - The cuBLAS baseline is the same job with no cubin: SGEMM row-major
 *    through the column-major identity C^T = B^T A^T (default math: true
 *    fp32, no TF32).
 *
 * After any CUDA error the report says `cuda:<NAME>` and the function
 * returns at once: the context is unusable (perf-anchors §5, sticky
 * errors), and the caller replies and exits.
 */
#define _GNU_SOURCE
#include "kernels/gpu_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define DEFAULT_SMEM_LIMIT (48 * 1024)

static double now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

/* Records a CUDA error in rep: status "cuda:ILLEGAL_ADDRESS" (DESIGN.md's
 * spelling), why "cuda:CUDA_ERROR_ILLEGAL_ADDRESS during <what>". */
static int cuda_failed(CUresult r, const char *what, kl_run_report *rep) {
  const char *name = kl_gpu_error_name(r);
  const char *shortname =
      strncmp(name, "CUDA_ERROR_", 11) == 0 ? name + 11 : name;
  snprintf(rep->gpu.status, sizeof rep->gpu.status, "cuda:%s", shortname);
  snprintf(rep->why, sizeof rep->why, "cuda:%s during %s", name, what);
  rep->failed = 1;
  return -1;
}

#define CK(call, what)                                                         \
  do {                                                                         \
    CUresult r_ = (call);                                                      \
    if (r_ != KL_CUDA_SUCCESS) return cuda_failed(r_, what, rep);              \
  } while (0)

static int fail(kl_run_report *rep, const char *msg) {
  snprintf(rep->why, sizeof rep->why, "%s", msg);
  rep->failed = 1;
  return -1;
}

/* ---- one shape's buffers: host inputs, guarded device A, B, C ---- */

typedef struct dbuf {
  kl_shape sh;
  float *A, *B;           /* host copies of the inputs (as on the device) */
  CUdeviceptr base[3];    /* allocations, canary bands included */
  CUdeviceptr dA, dB, dC; /* base + the front band */
  size_t n[3];            /* elements of A, B, C */
  kl_scaled sc;           /* the set's own inputs, once scaling began */
  int scaled;
} dbuf;

/* Stream NO_INPUTS: the buffers only; each timed launch draws and uploads
 * its own inputs (dbuf_fresh). */
#define NO_INPUTS UINT64_MAX

static int dbuf_make(dbuf *b, const kl_run_job *job, kl_shape sh,
                     uint64_t stream, kl_run_report *rep) {
  kl_cuda_api *cu = &kl_gpu.cu;
  memset(b, 0, sizeof *b);
  b->sh = sh;
  b->n[0] = (size_t)sh.M * sh.K;
  b->n[1] = (size_t)sh.K * sh.N;
  b->n[2] = (size_t)sh.M * sh.N;
  b->A = malloc(sizeof(float) * b->n[0]);
  b->B = malloc(sizeof(float) * b->n[1]);
  if (!b->A || !b->B) return fail(rep, "out of memory for inputs");
  for (int i = 0; i < 3; i++) {
    size_t total = b->n[i] + 2 * KL_CANARY_FLOATS;
    CK(cu->MemAlloc(&b->base[i], total * sizeof(float)), "cuMemAlloc");
    CK(cu->MemsetD32(b->base[i], KL_CANARY_BITS, KL_CANARY_FLOATS),
       "cuMemsetD32 (canary)");
    CK(cu->MemsetD32(b->base[i] + (KL_CANARY_FLOATS + b->n[i]) * 4,
                     KL_CANARY_BITS, KL_CANARY_FLOATS),
       "cuMemsetD32 (canary)");
  }
  b->dA = b->base[0] + KL_CANARY_FLOATS * 4;
  b->dB = b->base[1] + KL_CANARY_FLOATS * 4;
  b->dC = b->base[2] + KL_CANARY_FLOATS * 4;
  if (stream == NO_INPUTS) return 0;
  /* the lab's inputs for (seed, stream), on the job's threads */
  kl_fill_random_mt(b->A, b->n[0], job->seed, stream, job->threads);
  kl_fill_random_mt(b->B, b->n[1], job->seed, stream + 1, job->threads);
  CK(cu->MemcpyHtoD(b->dA, b->A, b->n[0] * 4), "cuMemcpyHtoD (A)");
  CK(cu->MemcpyHtoD(b->dB, b->B, b->n[1] * 4), "cuMemcpyHtoD (B)");
  return 0;
}

static void dbuf_free(dbuf *b) {
  for (int i = 0; i < 3; i++)
    if (b->base[i]) kl_gpu.cu.MemFree(b->base[i]);
  free(b->A);
  free(b->B);
  if (b->scaled) kl_scaled_free(&b->sc);
  memset(b, 0, sizeof *b);
}

/* The rerun's scaling of the check's own inputs (kl_scaled_inputs, as
 * kernels/run.c does on cpu-emu), on the host copies and the device. It
 * costs two uploads of A and B. */
static int dbuf_scale(dbuf *b, uint64_t seed, uint64_t launch_no,
                      kl_run_report *rep) {
  if (!b->scaled) {
    if (kl_scaled_init(&b->sc, b->A, b->B, b->sh) != 0)
      return fail(rep, "out of memory for inputs");
    b->scaled = 1;
  }
  kl_scaled_inputs(&b->sc, b->A, b->B, seed, launch_no);
  CK(kl_gpu.cu.MemcpyHtoD(b->dA, b->A, b->n[0] * 4), "cuMemcpyHtoD (A)");
  CK(kl_gpu.cu.MemcpyHtoD(b->dB, b->B, b->n[1] * 4), "cuMemcpyHtoD (B)");
  return 0;
}

/* Reads back the canary bands and the inputs; raises canary_overwritten
 * and input_mutated as kernels/run.c does. */
static int dbuf_inspect(dbuf *b, kl_run_report *rep) {
  kl_cuda_api *cu = &kl_gpu.cu;
  uint32_t band[KL_CANARY_FLOATS];
  int intact = 1;
  for (int i = 0; i < 3 && intact; i++) {
    for (int side = 0; side < 2 && intact; side++) {
      CUdeviceptr at =
          b->base[i] + (side ? (KL_CANARY_FLOATS + b->n[i]) * 4 : 0);
      CK(cu->MemcpyDtoH(band, at, sizeof band), "cuMemcpyDtoH (canary)");
      for (size_t k = 0; k < KL_CANARY_FLOATS; k++)
        if (band[k] != KL_CANARY_BITS) intact = 0;
    }
  }
  if (!intact)
    kl_report_flag_at(rep, KL_FLAG_CANARY_OVERWRITTEN,
                      "a write outside A, B or C", b->sh);
  size_t most = b->n[0] > b->n[1] ? b->n[0] : b->n[1];
  float *back = malloc(most * sizeof(float));
  if (!back) return fail(rep, "out of memory for the input check");
  int same = 1;
  CK(cu->MemcpyDtoH(back, b->dA, b->n[0] * 4), "cuMemcpyDtoH (A)");
  same &= memcmp(back, b->A, b->n[0] * 4) == 0;
  CK(cu->MemcpyDtoH(back, b->dB, b->n[1] * 4), "cuMemcpyDtoH (B)");
  same &= memcmp(back, b->B, b->n[1] * 4) == 0;
  free(back);
  if (!same)
    kl_report_flag_at(rep, KL_FLAG_INPUT_MUTATED, "A or B changed", b->sh);
  return 0;
}

/* ---- what is launched: the candidate, or cuBLAS SGEMM ---- */

typedef struct target {
  CUfunction fn; /* NULL: cuBLAS */
  kl_launch g;
} target;

static int launch(const target *t, dbuf *b, kl_run_report *rep) {
  kl_shape sh = b->sh;
  if (!t->fn) {
    kl_cublas_api *bl = &kl_gpu.blas;
    float one = 1, zero = 0;
    bl->SetMathMode(bl->handle, KL_CUBLAS_DEFAULT_MATH);
    /* Row-major C (MxN) = A (MxK) B (KxN) is column-major C^T = B^T A^T:
     * m = N, n = M, k = K; B^T is B's bytes with ld N, A^T is A's with
     * ld K, C^T is C's with ld N. */
    cublasStatus_t st = bl->Sgemm(
        bl->handle, KL_CUBLAS_OP_N, KL_CUBLAS_OP_N, sh.N, sh.M, sh.K, &one,
        (const float *)(uintptr_t)b->dB, sh.N, (const float *)(uintptr_t)b->dA,
        sh.K, &zero, (float *)(uintptr_t)b->dC, sh.N);
    if (st != 0) {
      snprintf(rep->why, sizeof rep->why,
               "cublasSgemm_v2 failed (cublasStatus %d) at %dx%dx%d", st, sh.M,
               sh.N, sh.K);
      rep->failed = 1;
      return -1;
    }
    return 0;
  }
  unsigned gx = (unsigned)((sh.N + t->g.tile_cols - 1) / t->g.tile_cols);
  unsigned gy = (unsigned)((sh.M + t->g.tile_rows - 1) / t->g.tile_rows);
  if (gy > 65535) {
    snprintf(rep->why, sizeof rep->why,
             "grid (%u, %u) at %dx%dx%d: gridDim.y is at most 65535; raise "
             "tile_rows in KL_LAUNCH",
             gx, gy, sh.M, sh.N, sh.K);
    rep->failed = 1;
    return -1;
  }
  CUdeviceptr A = b->dA, B = b->dB, C = b->dC;
  int M = sh.M, N = sh.N, K = sh.K;
  void *args[] = {&A, &B, &C, &M, &N, &K};
  CK(kl_gpu.cu.LaunchKernel(t->fn, gx, gy, 1, (unsigned)t->g.block_x,
                            (unsigned)t->g.block_y, 1,
                            (unsigned)t->g.dyn_smem_bytes, NULL, args, NULL),
     "cuLaunchKernel");
  return 0;
}

/* Poison C, launch, wait. */
static int run_once(const target *t, dbuf *b, kl_run_report *rep) {
  CK(kl_gpu.cu.MemsetD32(b->dC, KL_POISON_BITS, b->n[2]), "cuMemsetD32 (C)");
  if (launch(t, b, rep) != 0) return -1;
  CK(kl_gpu.cu.CtxSynchronize(), "the kernel (cuCtxSynchronize)");
  return 0;
}

/* ---- the float64 reference on the device ---- */

/* Checks the output in `C` (host, b's shape) against cuBLAS DGEMM of b's
 * inputs in float64; S from |A| |B|. Fresh allocations, freed after. */
static int device_check(const dbuf *b, const float *C, kl_shape_check *ck,
                        kl_run_report *rep) {
  kl_cuda_api *cu = &kl_gpu.cu;
  kl_cublas_api *bl = &kl_gpu.blas;
  if (!bl->handle) {
    char msg[256];
    snprintf(msg, sizeof msg,
             "no float64 reference for %dx%dx%d: cuBLAS unavailable (%s)",
             b->sh.M, b->sh.N, b->sh.K, kl_gpu.blas_why);
    return fail(rep, msg);
  }
  kl_shape sh = b->sh;
  size_t na = b->n[0], nb = b->n[1], nc = b->n[2];
  double *h = malloc(sizeof(double) * (na > nb ? na : nb));
  double *R = malloc(sizeof(double) * nc), *S = malloc(sizeof(double) * nc);
  CUdeviceptr dA = 0, dB = 0, dR = 0;
  int rc = -1;
  if (!h || !R || !S) {
    fail(rep, "out of memory for the float64 reference");
    goto out;
  }
  CUresult r;
  const char *what = "cuMemAlloc (reference)";
  if ((r = cu->MemAlloc(&dA, na * 8)) || (r = cu->MemAlloc(&dB, nb * 8)) ||
      (r = cu->MemAlloc(&dR, nc * 8))) {
    cuda_failed(r, what, rep);
    goto out;
  }
  double one = 1, zero = 0;
  bl->SetMathMode(bl->handle, KL_CUBLAS_PEDANTIC_MATH);
  for (int pass = 0; pass < 2; pass++) { /* R = A B, then S = |A| |B| */
    for (size_t i = 0; i < na; i++)
      h[i] = pass ? fabs((double)b->A[i]) : (double)b->A[i];
    what = "cuMemcpyHtoD (reference)";
    if ((r = cu->MemcpyHtoD(dA, h, na * 8))) break;
    for (size_t i = 0; i < nb; i++)
      h[i] = pass ? fabs((double)b->B[i]) : (double)b->B[i];
    if ((r = cu->MemcpyHtoD(dB, h, nb * 8))) break;
    cublasStatus_t st = bl->Dgemm(
        bl->handle, KL_CUBLAS_OP_N, KL_CUBLAS_OP_N, sh.N, sh.M, sh.K, &one,
        (const double *)(uintptr_t)dB, sh.N, (const double *)(uintptr_t)dA,
        sh.K, &zero, (double *)(uintptr_t)dR, sh.N);
    if (st != 0) {
      char msg[160];
      snprintf(msg, sizeof msg, "cublasDgemm_v2 failed (cublasStatus %d)", st);
      fail(rep, msg);
      goto out;
    }
    what = "cuMemcpyDtoH (reference)";
    if ((r = cu->MemcpyDtoH(pass ? S : R, dR, nc * 8))) break;
  }
  if (r) {
    cuda_failed(r, what, rep);
    goto out;
  }
  memset(ck, 0, sizeof *ck);
  ck->shape = sh;
  kl_compare(C, R, S, ck);
  rc = 0;
out:
  if (dA) cu->MemFree(dA);
  if (dB) cu->MemFree(dB);
  if (dR) cu->MemFree(dR);
  free(h);
  free(R);
  free(S);
  return rc;
}

/* Copies C back into outs + off, and checks it on the device when the
 * shape is large (slot: its index in kl_run_output_layout's offs). */
static int take_output(dbuf *b, float *dst, int slot, kl_run_report *rep) {
  CK(kl_gpu.cu.MemcpyDtoH(dst, b->dC, b->n[2] * 4), "cuMemcpyDtoH (C)");
  if (slot >= 0 && kl_gpu_device_ref(b->sh)) {
    if (device_check(b, dst, &rep->gpu.dev_checks[slot], rep) != 0) return -1;
    rep->gpu.dev_checked[slot] = 1;
  }
  return 0;
}

/* ---- loading the candidate ---- */

static int load_candidate(const uint8_t *cubin, size_t cubin_size, target *t,
                          kl_run_report *rep) {
  kl_cuda_api *cu = &kl_gpu.cu;
  /* What the lab read from the same bytes: the ELF symbol. */
  const void *sym = NULL;
  size_t sym_len = 0;
  char why[256];
  if (kl_elf_symbol(cubin, cubin_size, "kl_launch", &sym, &sym_len, why,
                    sizeof why) != KL_OK ||
      sym_len < sizeof(kl_launch)) {
    snprintf(rep->why, sizeof rep->why, "kl_launch: %s", why);
    rep->failed = 1;
    return -1;
  }
  kl_launch from_elf;
  memcpy(&from_elf, sym, sizeof from_elf);
  CUmodule mod;
  CK(cu->ModuleLoadData(&mod, cubin), "cuModuleLoadData");
  CK(cu->ModuleGetFunction(&t->fn, mod, "matmul"),
     "cuModuleGetFunction(`matmul`)");
  CUdeviceptr gptr;
  size_t gbytes = 0;
  CK(cu->ModuleGetGlobal(&gptr, &gbytes, mod, "kl_launch"),
     "cuModuleGetGlobal(kl_launch)");
  if (gbytes != sizeof(kl_launch))
    return fail(rep, "kl_launch in the module is not five ints");
  CK(cu->MemcpyDtoH(&t->g, gptr, sizeof t->g), "cuMemcpyDtoH (kl_launch)");
  rep->launch = t->g;
  rep->has_launch = 1;
  if (memcmp(&t->g, &from_elf, sizeof t->g) != 0)
    return fail(rep, "kl_launch in the loaded module differs from the "
                     "cubin's symbol");
  if (kl_launch_validate(&t->g, rep->why, sizeof rep->why) != KL_OK) {
    rep->failed = 1;
    return -1;
  }
  kl_gpu_stats *gs = &rep->gpu;
  CK(cu->FuncGetAttribute(&gs->regs, KL_CU_FUNC_NUM_REGS, t->fn),
     "cuFuncGetAttribute");
  CK(cu->FuncGetAttribute(&gs->static_smem, KL_CU_FUNC_SHARED_SIZE_BYTES,
                          t->fn),
     "cuFuncGetAttribute");
  CK(cu->FuncGetAttribute(&gs->local_bytes, KL_CU_FUNC_LOCAL_SIZE_BYTES, t->fn),
     "cuFuncGetAttribute");
  CK(cu->FuncGetAttribute(&gs->const_bytes, KL_CU_FUNC_CONST_SIZE_BYTES, t->fn),
     "cuFuncGetAttribute");
  CK(cu->FuncGetAttribute(&gs->max_threads, KL_CU_FUNC_MAX_THREADS_PER_BLOCK,
                          t->fn),
     "cuFuncGetAttribute");
  int threads = t->g.block_x * t->g.block_y;
  if (threads > gs->max_threads) {
    snprintf(rep->why, sizeof rep->why,
             "block of %d threads, but `matmul` can run at most %d per block "
             "(%d registers per thread)",
             threads, gs->max_threads, gs->regs);
    rep->failed = 1;
    return -1;
  }
  int dyn = t->g.dyn_smem_bytes;
  if (dyn + gs->static_smem > kl_gpu.smem_optin) {
    snprintf(rep->why, sizeof rep->why,
             "%d bytes of dynamic + %d of static shared memory exceed the "
             "device's %d per block",
             dyn, gs->static_smem, kl_gpu.smem_optin);
    rep->failed = 1;
    return -1;
  }
  if (dyn + gs->static_smem > DEFAULT_SMEM_LIMIT) {
    CK(cu->FuncSetAttribute(t->fn, KL_CU_FUNC_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                            dyn),
       "cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES)");
    gs->dyn_smem_opt_in = 1;
  }
  CK(cu->OccupancyMaxActiveBlocksPerMultiprocessor(&gs->blocks_per_sm, t->fn,
                                                   threads, (size_t)dyn),
     "cuOccupancyMaxActiveBlocksPerMultiprocessor");
  int warps = (threads + 31) / 32;
  if (kl_gpu.max_threads_sm > 0)
    gs->occupancy =
        (double)gs->blocks_per_sm * warps / (kl_gpu.max_threads_sm / 32.0);
  return 0;
}

/* ---- timing ---- */

#define MAX_CUPTI_MISSES 5

/* Fresh inputs for one timed launch, drawn from a seed of their own
 * (kl_secret_seed: it never reaches the device, and no seed serves two
 * launches, so one recovered from a launch's inputs says nothing of the
 * next), into the host copies and the device. Outside any timing window. */
static int dbuf_fresh(dbuf *b, int threads, kl_run_report *rep) {
  uint64_t seed = kl_secret_seed();
  kl_fill_random_mt(b->A, b->n[0], seed, 0, threads);
  kl_fill_random_mt(b->B, b->n[1], seed, 1, threads);
  CK(kl_gpu.cu.MemcpyHtoD(b->dA, b->A, b->n[0] * 4), "cuMemcpyHtoD (A)");
  CK(kl_gpu.cu.MemcpyHtoD(b->dB, b->B, b->n[1] * 4), "cuMemcpyHtoD (B)");
  return 0;
}

static int time_target(const kl_run_job *job, const target *t, dbuf *b,
                       kl_run_report *rep) {
  kl_cuda_api *cu = &kl_gpu.cu;
  kl_gpu_stats *gs = &rep->gpu;
  kl_stats_rule rule;
  kl_stats_rule_defaults(&rule);
  rule.max_samples = KL_MAX_TIMING_SAMPLES;
  double cap_ms = job->time_budget_ms > 5000 ? job->time_budget_ms : 5000;
  rule.max_total_us = cap_ms * 1e3;
  kl_sampler *smp = malloc(sizeof *smp);
  double *ev = malloc(sizeof(double) * KL_MAX_TIMING_SAMPLES);
  double *host = malloc(sizeof(double) * KL_MAX_TIMING_SAMPLES);
  if (!smp || !ev || !host) {
    free(smp);
    free(ev);
    free(host);
    return fail(rep, "out of memory for timing");
  }
  /* C as the launch left it, the scratch of the checks, their verdicts */
  float *C0 = malloc(sizeof(float) * b->n[2]);
  double *scratch = malloc(sizeof(double) * KL_VERIFY_SCRATCH(b->sh));
  kl_pace_result *vr = calloc(1, sizeof *vr);
  if (!C0 || !scratch || !vr) {
    free(C0);
    free(scratch);
    free(vr);
    free(smp);
    free(ev);
    free(host);
    return fail(rep, "out of memory for timing");
  }
  uint64_t rng = kl_secret_seed();
  kl_stats_init(smp, &rule);
  int rc = 0, n_cross = 0;
  int use_cupti = kl_gpu.cupti, misses = 0;
  double wall_start = now_us();
  snprintf(gs->timer, sizeof gs->timer, "%s", use_cupti ? "cupti" : "events");
  if (!kl_gpu.cupti)
    snprintf(gs->timer_note, sizeof gs->timer_note, "%s", kl_gpu.cupti_why);
  /* i = -1 is the warm-up (checked, not kept). */
  for (int i = -1; rc == 0; i++) {
    if ((rc = dbuf_fresh(b, job->threads, rep)) != 0) break;
    CUresult r;
    const char *what = "cuMemsetD32 (C)";
    if ((r = cu->MemsetD32(b->dC, KL_POISON_BITS, b->n[2])) ||
        (what = "the L2 flush",
         r = cu->MemsetD32(kl_gpu.flush, 0, kl_gpu.flush_bytes / 4)) ||
        (r = cu->CtxSynchronize())) {
      rc = cuda_failed(r, what, rep);
      break;
    }
    uint64_t lo = kl_gpu_cupti_now();
    double h0 = now_us();
    if ((r = cu->EventRecord(kl_gpu.ev0, NULL))) {
      rc = cuda_failed(r, "cuEventRecord", rep);
      break;
    }
    if (launch(t, b, rep) != 0) {
      rc = -1;
      break;
    }
    if ((r = cu->EventRecord(kl_gpu.ev1, NULL))) {
      rc = cuda_failed(r, "cuEventRecord", rep);
      break;
    }
    if ((r = cu->CtxSynchronize())) {
      rc = cuda_failed(r, "a timed run (cuCtxSynchronize)", rep);
      break;
    }
    double h1 = now_us();
    uint64_t hi = kl_gpu_cupti_now();
    /* The SM clock for the throttle filter, read here, right after the
     * kernel: by the end of the launch checks below (tens of ms of host
     * work at 4096^3, the GPU idle) the clock may have dropped towards idle
     * (345 MHz seen on an H200 here, 1980 under load), which would discard
     * a sample that ran at full speed. */
    double sm_mhz = kl_gpu_sm_clock_mhz();
    float ms = 0;
    if ((r = cu->EventElapsedTime(&ms, kl_gpu.ev0, kl_gpu.ev1))) {
      rc = cuda_failed(r, "cuEventElapsedTime", rep);
      break;
    }
    uint64_t ns = 0;
    int nk = kl_gpu_cupti_collect(lo, hi, &ns);
    /* After the window, not in the sample: this launch's C, checked on
     * this launch's inputs; after a random eighth of the launches (drawn
     * now) also the canaries and A and B, which the last one gets anyway
     * (dbuf_inspect in the caller). */
    if ((r = cu->MemcpyDtoH(C0, b->dC, b->n[2] * sizeof(float)))) {
      rc = cuda_failed(r, "cuMemcpyDtoH (a timed C)", rep);
      break;
    }
    kl_verify_launch(b->sh, b->A, b->B, C0, scratch, &rng, i + 1, job->threads,
                     vr);
    if (kl_splitmix64(&rng) % 8 == 0 && (rc = dbuf_inspect(b, rep)) != 0) break;
    if (i < 0) continue;
    double ev_us = ms * 1e3, sample = ev_us;
    if (use_cupti && nk > 0) {
      misses = 0; /* only misses in a row switch to events */
      sample = ns / 1e3;
      gs->kernels_per_launch = nk;
      if (fabs(sample - ev_us) > 0.05 * sample + 2.0) gs->disagreements++;
    } else if (use_cupti) {
      /* No record in the window (dropped, or still incomplete at the
       * flush). The sample is skipped, not replaced by the event time,
       * which includes the launch's front-end gap: one distribution of
       * mixed timers would skew the median. After MAX_CUPTI_MISSES misses
       * in a row the run starts over on events alone, and says so. */
      if (++misses < MAX_CUPTI_MISSES) continue;
      use_cupti = 0;
      kl_stats_init(smp, &rule);
      rep->samples = 0;
      n_cross = 0;
      gs->disagreements = 0;
      gs->kernels_per_launch = 0;
      wall_start = now_us();
      snprintf(gs->timer, sizeof gs->timer, "events");
      snprintf(gs->timer_note, sizeof gs->timer_note,
               "CUPTI delivered no kernel record for %d samples", misses);
      continue;
    }
    /* A sample whose kernel ran throttled is dropped. */
    int kept = kl_stats_add(smp, sample, sm_mhz, kl_gpu_default_sm_clock_mhz());
    if (kept == KL_STATS_SAMPLE_KEPT && rep->samples < KL_MAX_TIMING_SAMPLES) {
      rep->sample_us[rep->samples++] = sample;
      ev[n_cross] = ev_us;
      host[n_cross] = h1 - h0;
      n_cross++;
    }
    if (kl_stats_done(smp) || rep->samples >= KL_MAX_TIMING_SAMPLES) break;
    /* The wall cap covers host overhead too (flushes, poison, CUPTI). */
    if (now_us() - wall_start > 3 * cap_ms * 1e3) break;
  }
  if (rc == 0) {
    kl_stats st;
    kl_stats_summary(smp, &st);
    gs->median_us = st.median;
    gs->min_us = st.min;
    gs->p20_us = st.p20;
    gs->p80_us = st.p80;
    gs->cv = st.cv;
    gs->rel_noise = st.rel_noise;
    gs->stop = st.stop;
    gs->n_throttled = st.n_throttled;
    gs->n_invalid = st.n_invalid;
    /* Inside the run-gpu filter: kl_stats_median, never qsort, which
     * makes a sysinfo call for 128 doubles or more and the filter traps it
     * (every kernel under 2.5 ms takes 200 samples); test_sandbox runs
     * kl_stats_median under the run-gpu profile. */
    gs->event_median_us = kl_stats_median(ev, (size_t)n_cross);
    gs->host_median_us = kl_stats_median(host, (size_t)n_cross);
  }
  kl_report_flags(rep, vr->flags, vr->flag_detail);
  free(C0);
  free(scratch);
  free(vr);
  free(smp);
  free(ev);
  free(host);
  return rc;
}

/* ---- the job ---- */

void kl_gpu_run_execute(const kl_run_job *job, const uint8_t *cubin,
                        size_t cubin_size, kl_run_report *rep, float *outs) {
  kl_gpu_stats *gs = &rep->gpu;
  gs->valid = 1;
  snprintf(gs->device, sizeof gs->device, "%s", kl_gpu.name);
  gs->cc_major = kl_gpu.cc_major;
  gs->cc_minor = kl_gpu.cc_minor;
  gs->sm_count = kl_gpu.sm_count;
  gs->l2_bytes = kl_gpu.l2_bytes;
  gs->driver_version = kl_gpu.driver_version;
  gs->flush_bytes = (double)kl_gpu.flush_bytes;
  if (!kl_gpu.ready) {
    fail(rep, "GPU backend not initialised (kl_gpu_init)");
    return;
  }
  target t;
  memset(&t, 0, sizeof t);
  if (cubin && cubin_size) {
    if (load_candidate(cubin, cubin_size, &t, rep) != 0) return;
  } else if (!kl_gpu.blas.handle) {
    char msg[256];
    snprintf(msg, sizeof msg, "cuBLAS baseline unavailable: %s",
             kl_gpu.blas_why);
    fail(rep, msg);
    return;
  }
  size_t offs[KL_OUT_SLOTS];
  kl_run_output_layout(job, offs);
  /* Checks: every shape on fresh inputs; shape 0 twice when asked. */
  for (int s = 0; s < job->n_shapes; s++) {
    dbuf b;
    int ok = dbuf_make(&b, job, job->shapes[s], 2 * (uint64_t)s, rep) == 0 &&
             run_once(&t, &b, rep) == 0 && dbuf_inspect(&b, rep) == 0 &&
             take_output(&b, outs + offs[s], s, rep) == 0;
    if (ok && s == 0 && job->second_run) {
      /* scaled, as on cpu-emu: a memo cannot hand back the first run's C */
      float *dst = outs + offs[job->n_shapes];
      ok = dbuf_scale(&b, job->seed, KL_SCALED_RERUN, rep) == 0 &&
           run_once(&t, &b, rep) == 0 && take_output(&b, dst, -1, rep) == 0;
      if (ok) kl_scaled_output(&b.sc, dst);
    }
    dbuf_free(&b);
    if (!ok) return;
  }
  if (job->timed) {
    /* One buffer, fresh inputs per launch (time_target): the outputs
     * are checked there, launch by launch, so none goes back. */
    dbuf b;
    int ok = dbuf_make(&b, job, job->timed_shape, NO_INPUTS, rep) == 0 &&
             time_target(job, &t, &b, rep) == 0 && dbuf_inspect(&b, rep) == 0;
    dbuf_free(&b);
    if (!ok) return;
  }
  rep->done = 1;
}
