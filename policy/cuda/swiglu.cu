/*
 * policy/cuda/swiglu.cu — the element-wise pieces of the block, mirroring
 * swiglu_forward / swiglu_backward / residual_forward of policy/model.c:
 *   out = silu(gate) * up, gate = h13[n, 0:F], up = h13[n, F:2F];
 *   silu'(g) = sig(g) (1 + g (1 - sig(g)));  residual: out = a + b.
 * One thread per element, the CPU's expressions unchanged.
 */
#include "policy/cuda/common.cuh"

/* One thread per element of out (N*F threads). */
extern "C" __global__ void swiglu_forward_kernel(float *out /*(N,F)*/,
                                                 const float *h13 /*(N,2F)*/,
                                                 int N, int F) {
  size_t idx = global_index();
  if (idx >= (size_t)N * F) return;
  size_t n = idx / F, i = idx % F;
  float g = h13[n * 2 * F + i], u = h13[n * 2 * F + F + i];
  out[idx] = g / (1.0f + expf(-g)) * u;
}

/* dh13 is overwritten; one thread per element of dout (N*F threads). */
extern "C" __global__ void swiglu_backward_kernel(float *dh13 /*(N,2F)*/,
                                                  const float *dout /*(N,F)*/,
                                                  const float *h13 /*(N,2F)*/,
                                                  int N, int F) {
  size_t idx = global_index();
  if (idx >= (size_t)N * F) return;
  size_t n = idx / F, i = idx % F;
  float g = h13[n * 2 * F + i], u = h13[n * 2 * F + F + i], d = dout[idx];
  float sig = 1.0f / (1.0f + expf(-g));
  dh13[n * 2 * F + F + i] = d * g * sig;
  dh13[n * 2 * F + i] = d * u * sig * (1.0f + g * (1.0f - sig));
}

/* out = a + b; one thread per element. */
extern "C" __global__ void residual_forward_kernel(float *out, const float *a,
                                                   const float *b, size_t n) {
  size_t idx = global_index();
  if (idx < n) out[idx] = a[idx] + b[idx];
}
