/*
 * policy/cuda/adamw.cu — AdamW, mirroring pl_adamw_step of policy/adamw.c:
 * the global gradient norm (a sum of squares in double), then per element
 *   g = grad * clip;  m = b1 m + (1-b1) g;  v = b2 v + (1-b2) g^2;
 *   p -= lr (m/bc1 / (sqrt(v/bc2) + eps) + wd p).
 * The host computes clip, lr and the bias corrections exactly as the CPU
 * does and launches adamw_kernel once per parameter tensor, with wd = 0 for
 * the tensors pl_param_decays excludes.
 *
 * The norm is two launches, not atomics, so that it is deterministic: a
 * fixed number of blocks each sum a grid-strided slice into partial[block],
 * then one block sums the partials.
 */
#include "policy/cuda/common.cuh"

/* partial[blockIdx.x] = sum of grads[i]^2 over this block's grid-strided
 * slice, in double. Block: a multiple of 32 threads. */
extern "C" __global__ void
global_norm_squared_kernel(double *partial, const float *grads, size_t n) {
  double acc = 0.0;
  size_t stride = (size_t)gridDim.x * blockDim.x;
  for (size_t i = global_index(); i < n; i += stride)
    acc += (double)grads[i] * grads[i];
  acc = block_sum_double(acc);
  if (threadIdx.x == 0) partial[blockIdx.x] = acc;
}

/* *out = sum of partial[0..n_partial); one block, a multiple of 32
 * threads. */
extern "C" __global__ void
global_norm_reduce_kernel(double *out, const double *partial, int n_partial) {
  double acc = 0.0;
  for (int i = threadIdx.x; i < n_partial; i += blockDim.x)
    acc += partial[i];
  acc = block_sum_double(acc);
  if (threadIdx.x == 0) *out = acc;
}

/* One thread per parameter of one tensor (n of them). */
extern "C" __global__ void adamw_kernel(float *params, const float *grads,
                                        float *m, float *v, size_t n, float lr,
                                        float beta1, float beta2, float bc1,
                                        float bc2, float eps, float wd,
                                        float clip) {
  size_t i = global_index();
  if (i >= n) return;
  float gi = grads[i] * clip;
  float mi = m[i] = beta1 * m[i] + (1.0f - beta1) * gi;
  float vi = v[i] = beta2 * v[i] + (1.0f - beta2) * gi * gi;
  float mhat = mi / bc1, vhat = vi / bc2;
  params[i] -= lr * (mhat / (sqrtf(vhat) + eps) + wd * params[i]);
}
