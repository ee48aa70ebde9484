/*
 * policy/gemm_hook.c — the linear layers' GEMM and the hook that may take
 * it over (policy.h: pl_set_gemm_hook, pl_linear_gemm), with the check a
 * hook's products get at every new shape.
 *
 * The hook is the lab's --policy-matmul on the CPU: a kernel a campaign
 * found, run on the emulator. The lab checks it on the policy's GEMMs at a
 * few row counts before the first step; a run meets many more shapes (a
 * decode step's rows, every completion length), and a kernel may be wrong
 * at some of them only (M odd, say). So the first call of each new shape
 * (transposes, beta zero or not, M, N, K) also runs through BLAS, and the
 * two are compared by kl_compare_fp32 (kernels.h: the same rule as the
 * lab's check and pcuda's first-call check on a device, which this
 * mirrors). On a disagreement that call keeps BLAS's product and the hook
 * is dropped for the rest of the process (pl_gemm_hook_dropped says why);
 * the policy never trains on a wrong product. A shape the check cannot
 * afford (no memory for its copies) is left to BLAS rather than given to
 * the hook unchecked.
 *
 * Not thread-safe, like the hook itself: the model calls pl_linear_gemm
 * from one thread (the pool splits inside pl_blas_gemm).
 */
#include "policy/policy.h"

#include "kernels/kernels.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static struct {
  pl_gemm_hook fn;
  void *ctx;
  uint64_t *seen; /* the shapes checked so far (first_time's keys) */
  size_t n_seen, cap_seen;
  long long checked;
  int dropped;
  char why[768];
  float *c0, *cd, *s; /* a checked call's C before, BLAS's C, the bound */
  size_t cap;
} hook;

void pl_set_gemm_hook(pl_gemm_hook fn, void *ctx) {
  free(hook.seen);
  free(hook.c0);
  free(hook.cd);
  free(hook.s);
  memset(&hook, 0, sizeof hook);
  hook.fn = fn;
  hook.ctx = ctx;
}

int pl_gemm_hook_dropped(long long *checked, char *why, size_t whylen) {
  if (checked) *checked = hook.checked;
  if (hook.dropped && why && whylen) snprintf(why, whylen, "%s", hook.why);
  return hook.dropped;
}

/* The floats an operand spans: rows of ld, the last one only cols long. */
static size_t extent(int rows, int cols, int ld) {
  return (size_t)(rows - 1) * (size_t)ld + (size_t)cols;
}

int pl_gemm_bound(int trans_a, int trans_b, int M, int N, int K, float alpha,
                  const float *A, int lda, const float *B, int ldb, float beta,
                  const float *C0, float *S, int ldc) {
  size_t na = trans_a ? extent(K, M, lda) : extent(M, K, lda);
  size_t nb = trans_b ? extent(N, K, ldb) : extent(K, N, ldb);
  float *a = malloc(na * sizeof *a), *b = malloc(nb * sizeof *b);
  if (!a || !b) {
    free(a);
    free(b);
    return -1;
  }
  for (size_t i = 0; i < na; i++)
    a[i] = fabsf(A[i]);
  for (size_t i = 0; i < nb; i++)
    b[i] = fabsf(B[i]);
  if (beta != 0.0f)
    for (int m = 0; m < M; m++)
      for (int n = 0; n < N; n++)
        S[(size_t)m * ldc + n] = fabsf(C0[(size_t)m * ldc + n]);
  pl_blas_gemm(trans_a, trans_b, M, N, K, fabsf(alpha), a, lda, b, ldb,
               fabsf(beta), S, ldc);
  free(a);
  free(b);
  return 0;
}

/* 1 when the shape is new, and records it; 0 when seen. -1: no memory to
 * record it (the caller leaves the call to BLAS). */
static int first_time(int trans_a, int trans_b, int M, int N, int K,
                      float beta) {
  uint64_t key = (uint64_t)trans_a | (uint64_t)trans_b << 1 |
                 (uint64_t)(beta != 0.0f) << 2 | (uint64_t)M << 3 |
                 (uint64_t)N << 23 | (uint64_t)K << 43;
  for (size_t i = 0; i < hook.n_seen; i++)
    if (hook.seen[i] == key) return 0;
  if (hook.n_seen == hook.cap_seen) {
    size_t cap = hook.cap_seen ? 2 * hook.cap_seen : 64;
    uint64_t *p = realloc(hook.seen, cap * sizeof *p);
    if (!p) return -1;
    hook.seen = p;
    hook.cap_seen = cap;
  }
  hook.seen[hook.n_seen++] = key;
  return 1;
}

static int grow(size_t n) {
  if (n <= hook.cap) return 0;
  float *c0 = realloc(hook.c0, n * sizeof(float));
  if (c0) hook.c0 = c0;
  float *cd = realloc(hook.cd, n * sizeof(float));
  if (cd) hook.cd = cd;
  float *s = realloc(hook.s, n * sizeof(float));
  if (s) hook.s = s;
  if (!c0 || !cd || !s) return -1;
  hook.cap = n;
  return 0;
}

static const char *call_kind(int trans_a, int trans_b) {
  return trans_b ? "forward" : trans_a ? "weight gradient" : "input gradient";
}

/* The first call of a shape: through the hook and through BLAS, compared.
 * 0 with C written (the hook's product, or BLAS's when they disagree or
 * the hook declined); 1 to leave the call to BLAS untouched. */
static int checked_call(int trans_a, int trans_b, int M, int N, int K,
                        float alpha, const float *A, int lda, const float *B,
                        int ldb, float beta, float *C, int ldc) {
  size_t nc = extent(M, N, ldc);
  if (grow(nc) != 0) return 1;
  memcpy(hook.c0, C, nc * sizeof(float));
  memcpy(hook.cd, C, nc * sizeof(float));
  pl_blas_gemm(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, hook.cd,
               ldc);
  if (hook.fn(hook.ctx, trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta,
              C, ldc) != 0) {
    memcpy(C, hook.cd, nc * sizeof(float)); /* declined: BLAS's product */
    return 0;
  }
  hook.checked++;
  if (pl_gemm_bound(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta,
                    hook.c0, hook.s, ldc) != 0) {
    memcpy(C, hook.cd, nc * sizeof(float)); /* unchecked: not used */
    return 0;
  }
  kl_fp32_agreement a;
  kl_compare_fp32(C, hook.cd, hook.s, M, N, ldc, &a);
  if (!a.pass) {
    char say[512];
    kl_fp32_agreement_say(&a, C, hook.cd, ldc, say, sizeof say);
    snprintf(hook.why, sizeof hook.why,
             "disagrees with the default path at %dx%dx%d (%s): %s", M, N, K,
             call_kind(trans_a, trans_b), say);
    hook.dropped = 1;
    memcpy(C, hook.cd, nc * sizeof(float));
  }
  return 0;
}

void pl_linear_gemm(int trans_a, int trans_b, int M, int N, int K, float alpha,
                    const float *A, int lda, const float *B, int ldb,
                    float beta, float *C, int ldc) {
  if (hook.fn && !hook.dropped && M > 0 && N > 0 && K > 0) {
    int first = first_time(trans_a, trans_b, M, N, K, beta);
    if (first == 0 && hook.fn(hook.ctx, trans_a, trans_b, M, N, K, alpha, A,
                              lda, B, ldb, beta, C, ldc) == 0)
      return;
    if (first == 1 && checked_call(trans_a, trans_b, M, N, K, alpha, A, lda, B,
                                   ldb, beta, C, ldc) == 0)
      return;
  }
  pl_blas_gemm(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}
