/*
 * policy/cuda/attention.cu — causal self-attention, mirroring
 * attention_forward / attention_backward of policy/model.c, per (b, h):
 *   S = Q K^T / sqrt(hs),  P = softmax over t2 <= t (0 above the diagonal),
 *   Y = P V;
 *   dP = dY V^T,  dS = P * (dP - rowsum(P * dP)),
 *   dQ = dS K / sqrt(hs),  dK = dS^T Q / sqrt(hs),  dV = P^T dY.
 * Q, K, V are the column blocks [0,C), [C,2C), [2C,3C) of qkv (after RoPE),
 * head h at columns h*hs.. of each block.
 *
 * Naive on purpose, one kernel per step: a block per query row for the
 * softmax rows (forward; dS in the backward), then a thread per output
 * element for dQ and for dK/dV, each summing its own dot product in order,
 * so every element is written once (no atomics, deterministic). Where the
 * CPU keeps one head's dP at a time in a (T,T) scratch, the backward here
 * needs dS for every (b, h) at once: (B,NH,T,T).
 */
#include "policy/cuda/common.cuh"

/* Grid: B*NH*T blocks, block index = (b*NH + h)*T + t; block: a multiple of
 * 32 threads; dynamic shared memory: T floats (the row's probabilities). */
extern "C" __global__ void
attention_forward_kernel(float *out /*(B,T,C)*/, float *att /*(B,NH,T,T)*/,
                         const float *qkv /*(B,T,3C)*/, int B, int T, int C,
                         int NH) {
  PCUDA_DYN_SMEM(float, p);
  int hs = C / NH, C3 = 3 * C;
  float scale = 1.0f / sqrtf((float)hs);
  size_t row = blockIdx.x; /* (b*NH + h)*T + t */
  if (row >= (size_t)B * NH * T) return;
  int t = (int)(row % T), h = (int)(row / T % NH);
  size_t b = row / T / NH;
  const float *qkv_b = qkv + b * T * C3;
  const float *q = qkv_b + (size_t)t * C3 + h * hs;

  /* the softmax over t2 <= t of the scores scale * q·k[t2]: its
   * numerators in p, their sum (k[t2] at qkv_b + t2*3C + C + h*hs) */
  float sum =
      attention_row_exp(p, q, qkv_b + C + h * hs, (size_t)C3, hs, t, scale);
  float *att_row = att + row * T;
  for (int t2 = threadIdx.x; t2 < T; t2 += blockDim.x) {
    if (t2 <= t) p[t2] /= sum;
    att_row[t2] = t2 <= t ? p[t2] : 0.0f;
  }
  __syncthreads(); /* every p[t2] is final before anyone sums P V */

  /* y[t, h*hs + d] = sum_{t2 <= t} p[t2] v[t2, d] */
  float *y = out + (b * T + t) * C + h * hs;
  for (int d = threadIdx.x; d < hs; d += blockDim.x) {
    float acc = 0.0f;
    for (int t2 = 0; t2 <= t; t2++)
      acc += p[t2] * qkv_b[(size_t)t2 * C3 + 2 * C + h * hs + d];
    y[d] = acc;
  }
}

/* dS for one query row: dP[t2] = dy[t] . v[t2], then
 * dS[t2] = P[t2] (dP[t2] - sum_t2' P dP), 0 above the diagonal. Grid and
 * block as the forward (no shared memory beyond the reduction's). */
extern "C" __global__ void attention_backward_dscore_kernel(
    float *dscore /*(B,NH,T,T)*/, const float *dout /*(B,T,C)*/,
    const float *qkv /*(B,T,3C)*/, const float *att /*(B,NH,T,T)*/, int B,
    int T, int C, int NH) {
  int hs = C / NH, C3 = 3 * C;
  size_t row = blockIdx.x;
  if (row >= (size_t)B * NH * T) return;
  int t = (int)(row % T), h = (int)(row / T % NH);
  size_t b = row / T / NH;
  const float *dy = dout + (b * T + t) * C + h * hs;
  const float *p = att + row * T;
  float *ds = dscore + row * T;
  float dot = 0.0f;
  for (int t2 = threadIdx.x; t2 <= t; t2 += blockDim.x) {
    const float *v = qkv + (b * T + t2) * C3 + 2 * C + h * hs;
    float dp = 0.0f;
    for (int d = 0; d < hs; d++)
      dp += dy[d] * v[d];
    ds[t2] = dp;
    dot += p[t2] * dp;
  }
  dot = block_sum(dot);
  /* each thread rewrites only the t2 it wrote above: no barrier needed */
  for (int t2 = threadIdx.x; t2 < T; t2 += blockDim.x)
    ds[t2] = t2 <= t ? p[t2] * (ds[t2] - dot) : 0.0f;
}

/* dq[b,t,h,d] = scale * sum_{t2 <= t} dS[t,t2] k[t2,d]; one thread per
 * element of the q block of dqkv (B*T*C threads). */
extern "C" __global__ void attention_backward_dq_kernel(
    float *dqkv /*(B,T,3C)*/, const float *dscore /*(B,NH,T,T)*/,
    const float *qkv /*(B,T,3C)*/, int B, int T, int C, int NH) {
  int hs = C / NH, C3 = 3 * C;
  float scale = 1.0f / sqrtf((float)hs);
  size_t idx = global_index();
  if (idx >= (size_t)B * T * C) return;
  int c = (int)(idx % C), h = c / hs, d = c % hs;
  size_t bt = idx / C, b = bt / T;
  int t = (int)(bt % T);
  const float *ds = dscore + ((b * NH + h) * T + t) * T;
  const float *k = qkv + b * T * C3 + C + h * hs + d;
  float acc = 0.0f;
  for (int t2 = 0; t2 <= t; t2++)
    acc += ds[t2] * k[(size_t)t2 * C3];
  dqkv[bt * C3 + c] = scale * acc;
}

/* dk[b,t2,h,d] = scale * sum_{t >= t2} dS[t,t2] q[t,d] and
 * dv[b,t2,h,d] = sum_{t >= t2} P[t,t2] dy[t,d]; one thread per element of
 * the k (and v) block of dqkv (B*T*C threads). */
extern "C" __global__ void attention_backward_dkv_kernel(
    float *dqkv /*(B,T,3C)*/, const float *dscore /*(B,NH,T,T)*/,
    const float *att /*(B,NH,T,T)*/, const float *dout /*(B,T,C)*/,
    const float *qkv /*(B,T,3C)*/, int B, int T, int C, int NH) {
  int hs = C / NH, C3 = 3 * C;
  float scale = 1.0f / sqrtf((float)hs);
  size_t idx = global_index();
  if (idx >= (size_t)B * T * C) return;
  int c = (int)(idx % C), h = c / hs;
  size_t bt2 = idx / C, b = bt2 / T;
  int t2 = (int)(bt2 % T);
  const float *ds = dscore + (b * NH + h) * T * T + t2; /* column t2 */
  const float *p = att + (b * NH + h) * T * T + t2;
  const float *q = qkv + b * T * C3 + c;
  const float *dy = dout + b * T * C + c;
  float dk = 0.0f, dv = 0.0f;
  for (int t = t2; t < T; t++) {
    dk += ds[(size_t)t * T] * q[(size_t)t * C3];
    dv += p[(size_t)t * T] * dy[(size_t)t * C];
  }
  dqkv[bt2 * C3 + C + c] = scale * dk;
  dqkv[bt2 * C3 + 2 * C + c] = dv;
}
