/*
 * policy/cuda/rmsnorm.cu — RMSNorm, mirroring rmsnorm_forward /
 * rmsnorm_backward of policy/model.c:
 *   y = x * rstd * w,  rstd = 1/sqrt(mean(x^2) + eps)
 *   dx += rstd g - rstd^3 x (g . x) / C  (g = dout * w),  dw += dout x rstd.
 *
 * One block per row for the row-wise work (a block-wide sum of squares, or
 * of g . x). The weight gradient sums over rows, so it has its own kernel
 * with one thread per column walking the rows in order (deterministic, the
 * CPU's order, no atomics).
 */
#include "policy/cuda/common.cuh"

/* Grid: N blocks (one per row); block: a multiple of 32 threads. */
extern "C" __global__ void rmsnorm_forward_kernel(float *out /*(N,C)*/,
                                                  float *rstd /*(N)*/,
                                                  const float *inp /*(N,C)*/,
                                                  const float *w /*(C)*/, int N,
                                                  int C) {
  size_t n = blockIdx.x;
  if (n >= (size_t)N) return; /* whole block: no thread reaches a barrier */
  const float *x = inp + n * C;
  float *o = out + n * C;
  float ss = 0.0f;
  for (int i = threadIdx.x; i < C; i += blockDim.x)
    ss += x[i] * x[i];
  ss = block_sum(ss);
  float r = 1.0f / sqrtf(ss / C + PCUDA_RMS_EPS);
  for (int i = threadIdx.x; i < C; i += blockDim.x)
    o[i] = x[i] * r * w[i];
  if (threadIdx.x == 0) rstd[n] = r;
}

/* dinp[n,:] += r g - r^3 x (g . x) / C; one block per row. dinp
 * accumulates: it is the residual stream's gradient. */
extern "C" __global__ void
rmsnorm_backward_kernel(float *dinp /*(N,C)*/, const float *dout /*(N,C)*/,
                        const float *inp /*(N,C)*/, const float *w /*(C)*/,
                        const float *rstd /*(N)*/, int N, int C) {
  size_t n = blockIdx.x;
  if (n >= (size_t)N) return;
  const float *x = inp + n * C, *d = dout + n * C;
  float *dx = dinp + n * C;
  float r = rstd[n], gx = 0.0f;
  for (int i = threadIdx.x; i < C; i += blockDim.x)
    gx += d[i] * w[i] * x[i];
  gx = block_sum(gx);
  float k = r * r * r * gx / C;
  for (int i = threadIdx.x; i < C; i += blockDim.x)
    dx[i] += r * d[i] * w[i] - k * x[i];
}

/* dw[i] += sum_n dout[n,i] x[n,i] rstd[n]; one thread per column i. */
extern "C" __global__ void
rmsnorm_backward_dweight_kernel(float *dw /*(C)*/, const float *dout /*(N,C)*/,
                                const float *inp /*(N,C)*/,
                                const float *rstd /*(N)*/, int N, int C) {
  size_t i = global_index();
  if (i >= (size_t)C) return;
  float acc = dw[i];
  for (int n = 0; n < N; n++)
    acc += dout[(size_t)n * C + i] * inp[(size_t)n * C + i] * rstd[n];
  dw[i] = acc;
}
