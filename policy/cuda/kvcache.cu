/*
 * policy/cuda/kvcache.cu — the KV cache of sampling-time inference,
 * mirroring policy/generate.c: keys and values (after RoPE) of every layer
 * for G rows of up to max_seq positions, (L,G,max_seq,C) each, as
 * pl_kv_cache holds them; one query per token row against its cache row
 * (attention_query), the write of a step's keys and values into the cache,
 * and the copy of a shared prompt's positions into the other rows
 * (pl_kv_cache_copy_prefix).
 *
 * Token row n = b*T + t of a cached forward belongs to cache row rows[b] at
 * position pos0 + t and attends to that row's positions 0..pos0+t, whose
 * keys and values are in the cache already (kv_cache_write_kernel runs
 * first, for every token row of the call, as the CPU does).
 */
#include "policy/cuda/common.cuh"

/* k_cache and v_cache (one layer's (G,max_seq,C)) at (rows[b], pos0 + t)
 * get the k and v blocks of qkv row b*T + t; one thread per element of
 * the N*C copied values. */
extern "C" __global__ void
kv_cache_write_kernel(float *k_cache, float *v_cache /*(G,max_seq,C)*/,
                      const float *qkv /*(N,3C)*/, const int32_t *rows /*(B)*/,
                      int B, int T, int pos0, int max_seq, int C) {
  size_t idx = global_index();
  if (idx >= (size_t)B * T * C) return;
  int c = (int)(idx % C);
  size_t n = idx / C;
  int b = (int)(n / T), t = (int)(n % T);
  size_t off = ((size_t)rows[b] * max_seq + pos0 + t) * C + c;
  k_cache[off] = qkv[n * 3 * C + C + c];
  v_cache[off] = qkv[n * 3 * C + 2 * C + c];
}

/* Positions [0,n_pos) of row src copied to row dst in every layer, keys
 * and values; one thread per element of the L*n_pos*C copied pairs. */
extern "C" __global__ void
kv_cache_copy_kernel(float *k, float *v /*(L,G,max_seq,C)*/, int L, int G,
                     int max_seq, int C, int src, int dst, int n_pos) {
  size_t idx = global_index();
  size_t per_layer = (size_t)n_pos * C;
  if (idx >= (size_t)L * per_layer) return;
  size_t l = idx / per_layer, i = idx % per_layer;
  size_t from = (l * G + src) * max_seq * C + i;
  size_t to = (l * G + dst) * max_seq * C + i;
  k[to] = k[from];
  v[to] = v[from];
}

/* One query row against the cache, every head (attention_query):
 *   y_h = softmax(K_h q_h / sqrt(hs)) V_h over the row's positions
 *   0..pos0+t.
 * Grid: N*NH blocks, block index = n*NH + h; block: a multiple of 32
 * threads, at most 1024; dynamic shared memory: pos0+T floats (the
 * scores). kc, vc are one layer's (G,max_seq,C).
 * The scores take a thread per position; y = P V takes every warp: warp w
 * sums the positions j = w mod (warps) for 32 dimensions at a time (lane =
 * dimension, so a warp reads whole rows of V), and warp 0 adds the warps'
 * sums in order. (A thread per dimension walking every position left most
 * of the block idle and took pos steps in a row.) */
extern "C" __global__ void
attention_cached_kernel(float *out /*(N,C)*/, const float *qkv /*(N,3C)*/,
                        const float *kc, const float *vc,
                        const int32_t *rows /*(B)*/, int B, int T, int pos0,
                        int max_seq, int C, int NH) {
  PCUDA_DYN_SMEM(float, p);
  __shared__ float part[32][33]; /* [warp][lane]: each warp's share of y */
  int hs = C / NH;
  float scale = 1.0f / sqrtf((float)hs);
  size_t blk = blockIdx.x;
  if (blk >= (size_t)B * T * NH) return;
  int h = (int)(blk % NH);
  size_t n = blk / NH;
  int b = (int)(n / T), pos = pos0 + (int)(n % T);
  const float *q = qkv + n * 3 * C + h * hs;
  const float *k0 = kc + (size_t)rows[b] * max_seq * C + h * hs;
  const float *v0 = vc + (size_t)rows[b] * max_seq * C + h * hs;

  /* the softmax over positions 0..pos of the scores scale * q·k[j]: its
   * numerators in p, their sum (k[j] at k0 + j*C) */
  float sum = attention_row_exp(p, q, k0, (size_t)C, hs, pos, scale);
  for (int j = threadIdx.x; j <= pos; j += blockDim.x)
    p[j] /= sum;
  __syncthreads(); /* every p[j] is final before anyone sums P V */

  /* y[h*hs + d] = sum_{j <= pos} p[j] v[j, d] */
  int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  int warps = blockDim.x / 32;
  float *y = out + n * C + h * hs;
  for (int d0 = 0; d0 < hs; d0 += 32) {
    int d = d0 + lane;
    float acc = 0.0f;
    if (d < hs)
      for (int j = warp; j <= pos; j += warps)
        acc += p[j] * v0[(size_t)j * C + d];
    part[warp][lane] = acc;
    __syncthreads();
    if (warp == 0 && d < hs) {
      float s = 0.0f;
      for (int w = 0; w < warps; w++)
        s += part[w][lane];
      y[d] = s;
    }
    __syncthreads(); /* before the next 32 dimensions overwrite part */
  }
}
