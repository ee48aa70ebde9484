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

/* One kind of call: transposes, beta zero or not, and the sizes. */
typedef struct shape {
  int trans_a, trans_b, beta_nonzero, M, N, K;
} shape;

static struct {
  pl_gemm_hook fn;
  void *ctx;
  shape *seen; /* the shapes checked so far */
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

/* Whether the shape was checked already. */
static int seen(const shape *k) {
  for (size_t i = 0; i < hook.n_seen; i++)
    if (!memcmp(&hook.seen[i], k, sizeof *k)) return 1;
  return 0;
}

/* Records a shape once its check is complete (not before: a shape whose
 * check could not run is checked again at its next call). -1 when there is
 * no memory to record it (then it is checked every time). */
static int remember(const shape *k) {
  if (hook.n_seen == hook.cap_seen) {
    size_t cap = hook.cap_seen ? 2 * hook.cap_seen : 64;
    shape *p = realloc(hook.seen, cap * sizeof *p);
    if (!p) return -1;
    hook.seen = p;
    hook.cap_seen = cap;
  }
  hook.seen[hook.n_seen++] = *k;
  return 0;
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
  if (pl_gemm_bound(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta,
                    hook.c0, hook.s, ldc) != 0) {
    memcpy(C, hook.cd, nc * sizeof(float)); /* unchecked: not used */
    return 0;
  }
  hook.checked++;
  shape k = {trans_a, trans_b, beta != 0.0f, M, N, K};
  remember(&k); /* checked: later calls of this shape go to the hook */
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
    shape k = {trans_a, trans_b, beta != 0.0f, M, N, K};
    if (seen(&k) ? hook.fn(hook.ctx, trans_a, trans_b, M, N, K, alpha, A, lda,
                           B, ldb, beta, C, ldc) == 0
                 : checked_call(trans_a, trans_b, M, N, K, alpha, A, lda, B,
                                ldb, beta, C, ldc) == 0)
      return;
  }
  pl_blas_gemm(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}
