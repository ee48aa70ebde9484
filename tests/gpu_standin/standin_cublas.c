/*
 * tests/gpu_standin/standin_cublas.c — a host-only stand-in for cuBLAS
 * (libcublas.so.13), the partner of standin_cuda.c: the four entry points
 * kernels/gpu.c resolves (cublasCreate_v2, cublasSetMathMode,
 * cublasSgemm_v2, cublasDgemm_v2), with cublas_api.h's prototypes (CUDA
 * 13.0, included so that a drifting signature does not compile).
 *
 * What it does: GEMM on the CPU, column-major as cuBLAS defines it, on the
 * stand-in driver's "device memory" (host memory), for what the GPU code
 * asks: no transpose, beta = 0 (anything else is CUBLAS_STATUS_NOT_SUPPORTED
 * here, so a change to the calls shows up). A leading dimension below its
 * matrix's rows is CUBLAS_STATUS_INVALID_VALUE, as in cuBLAS, and so is a
 * matrix that does not lie inside one allocation of the stand-in driver
 * (where cuBLAS's kernel would fault). That checks the GPU code's
 * row-major-through-column-major arguments (C^T = B^T A^T) and the device
 * reference's DGEMM arguments, not cuBLAS.
 *
 * What it does NOT test: real cuBLAS (its kernels, cublasLt, its lazy
 * loading, its syscalls under the run-gpu filter), TF32 or pedantic math
 * (the mode is recorded, not honoured: the sums are plain float or double
 * loops), or any timing: the baseline it yields is a CPU loop's time.
 */
#include <cublas_api.h>

#include <stdint.h>
#include <stdlib.h>

/* From standin_cuda.c (this library links against it, as the real cuBLAS
 * uses the driver): 1 when [p, p + bytes) lies in one of its allocations. */
int kl_standin_device_range(uintptr_t p, size_t bytes);

struct cublasContext {
  cublasMath_t math_mode;
};

cublasStatus_t cublasCreate_v2(cublasHandle_t *handle) {
  if (!handle) return CUBLAS_STATUS_INVALID_VALUE;
  *handle = calloc(1, sizeof **handle);
  return *handle ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_ALLOC_FAILED;
}

cublasStatus_t cublasSetMathMode(cublasHandle_t handle, cublasMath_t mode) {
  if (!handle) return CUBLAS_STATUS_NOT_INITIALIZED;
  handle->math_mode = mode;
  return CUBLAS_STATUS_SUCCESS;
}

/* The checks cuBLAS makes of an OP_N, OP_N GEMM, plus: every matrix in
 * stand-in device memory (column-major X of r rows and c columns, leading
 * dimension ld, occupies ld * (c - 1) + r elements). */
static cublasStatus_t check_gemm(cublasHandle_t handle, cublasOperation_t ta,
                                 cublasOperation_t tb, int m, int n, int k,
                                 const void *A, int lda, const void *B, int ldb,
                                 const void *C, int ldc, size_t elem) {
  if (!handle) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (ta != CUBLAS_OP_N || tb != CUBLAS_OP_N)
    return CUBLAS_STATUS_NOT_SUPPORTED; /* the GPU code only asks for N, N */
  if (m < 0 || n < 0 || k < 0 || lda < (m > 1 ? m : 1) ||
      ldb < (k > 1 ? k : 1) || ldc < (m > 1 ? m : 1))
    return CUBLAS_STATUS_INVALID_VALUE;
  if (m == 0 || n == 0) return CUBLAS_STATUS_SUCCESS;
  size_t a_elems = (size_t)lda * (k > 0 ? k - 1 : 0) + m;
  size_t b_elems = (size_t)ldb * (n - 1) + k;
  size_t c_elems = (size_t)ldc * (n - 1) + m;
  if ((k > 0 && (!kl_standin_device_range((uintptr_t)A, elem * a_elems) ||
                 !kl_standin_device_range((uintptr_t)B, elem * b_elems))) ||
      !kl_standin_device_range((uintptr_t)C, elem * c_elems))
    return CUBLAS_STATUS_INVALID_VALUE;
  return CUBLAS_STATUS_SUCCESS;
}

/* C (m,n) = A (m,k) B (k,n), column-major, column by column so that the
 * inner loop runs down contiguous columns of A and C; each element is
 * summed over p in ascending order. */
#define GEMM_BODY(T)                                                           \
  for (int j = 0; j < n; j++) {                                                \
    T *c = C + (size_t)j * ldc;                                                \
    for (int i = 0; i < m; i++)                                                \
      c[i] = 0;                                                                \
    for (int p = 0; p < k; p++) {                                              \
      const T *a = A + (size_t)p * lda;                                        \
      T b = B[p + (size_t)j * ldb];                                            \
      for (int i = 0; i < m; i++)                                              \
        c[i] += a[i] * b;                                                      \
    }                                                                          \
  }

/* C = alpha A B with beta = 0: the old C (NaN poison, as the GPU code
 * leaves it) is never read, as BLAS specifies for beta = 0. */
cublasStatus_t cublasSgemm_v2(cublasHandle_t handle, cublasOperation_t transa,
                              cublasOperation_t transb, int m, int n, int k,
                              const float *alpha, const float *A, int lda,
                              const float *B, int ldb, const float *beta,
                              float *C, int ldc) {
  cublasStatus_t st = check_gemm(handle, transa, transb, m, n, k, A, lda, B,
                                 ldb, C, ldc, sizeof(float));
  if (st != CUBLAS_STATUS_SUCCESS || m == 0 || n == 0) return st;
  if (!alpha || !beta || *beta != 0)
    return CUBLAS_STATUS_NOT_SUPPORTED; /* the GPU code passes beta = 0 */
  GEMM_BODY(float)
  for (int j = 0; j < n; j++)
    for (int i = 0; i < m; i++)
      C[i + (size_t)j * ldc] *= *alpha;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasDgemm_v2(cublasHandle_t handle, cublasOperation_t transa,
                              cublasOperation_t transb, int m, int n, int k,
                              const double *alpha, const double *A, int lda,
                              const double *B, int ldb, const double *beta,
                              double *C, int ldc) {
  cublasStatus_t st = check_gemm(handle, transa, transb, m, n, k, A, lda, B,
                                 ldb, C, ldc, sizeof(double));
  if (st != CUBLAS_STATUS_SUCCESS || m == 0 || n == 0) return st;
  if (!alpha || !beta || *beta != 0) return CUBLAS_STATUS_NOT_SUPPORTED;
  GEMM_BODY(double)
  for (int j = 0; j < n; j++)
    for (int i = 0; i < m; i++)
      C[i + (size_t)j * ldc] *= *alpha;
  return CUBLAS_STATUS_SUCCESS;
}
