/*
 * policy/cuda/rmsnorm.cu — RMSNorm, mirroring rmsnorm_forward /
 * rmsnorm_backward of policy/model.c:
 *   y = x * rstd * w,  rstd = 1/sqrt(mean(x^2) + eps)
 *   dx += rstd g - rstd^3 x (g . x) / C  (g = dout * w),  dw += dout x rstd.
 *
 * One block per row for the row-wise work (a block-wide sum of squares, or
 * of g . x). The weight gradient sums over rows, so it has two kernels of
 * its own: partial sums over chunks of rows (a block per chunk and 32
 * columns, its 8 warps' shares added in a fixed order), then a thread per
 * column adding the chunks in order onto dw. Deterministic, no atomics;
 * the order differs from the CPU's single loop, so the result agrees to
 * rounding. (A thread per column walking all N rows, as before, leaves a
 * device nearly idle: one block's worth of threads.)
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

/* partial[k,i] = sum over rows n of chunk k (rows k*rows .. k*rows+rows-1)
 * of dout[n,i] x[n,i] rstd[n]. Grid: chunks * ceil(C/32) blocks, index =
 * chunk * ceil(C/32) + column tile; block (32, 8): lane tx is column
 * tile*32 + tx, warp ty takes rows ty, ty+8, ... of the chunk. */
extern "C" __global__ void rmsnorm_backward_dweight_kernel(
    float *partial /*(chunks,C)*/, const float *dout /*(N,C)*/,
    const float *inp /*(N,C)*/, const float *rstd /*(N)*/, int N, int C,
    int rows) {
  __shared__ float share[8][33];
  int col_tiles = (C + 31) / 32, tx = threadIdx.x, ty = threadIdx.y;
  int chunk = (int)(blockIdx.x / col_tiles);
  int i = (int)(blockIdx.x % col_tiles) * 32 + tx;
  int n0 = chunk * rows, n1 = n0 + rows < N ? n0 + rows : N;
  float acc = 0.0f;
  if (i < C)
    for (int n = n0 + ty; n < n1; n += 8)
      acc += dout[(size_t)n * C + i] * inp[(size_t)n * C + i] * rstd[n];
  share[ty][tx] = acc;
  __syncthreads();
  if (ty == 0 && i < C) {
    float sum = 0.0f;
    for (int w = 0; w < 8; w++)
      sum += share[w][tx];
    partial[(size_t)chunk * C + i] = sum;
  }
}

/* dw[i] += sum_k partial[k,i], k in order; one thread per column i. */
extern "C" __global__ void rmsnorm_backward_dweight_sum_kernel(
    float *dw /*(C)*/, const float *partial /*(chunks,C)*/, int chunks, int C) {
  size_t i = global_index();
  if (i >= (size_t)C) return;
  float acc = dw[i];
  for (int k = 0; k < chunks; k++)
    acc += partial[(size_t)k * C + i];
  dw[i] = acc;
}
