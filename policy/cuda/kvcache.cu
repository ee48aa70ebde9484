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

/* attention_cached_kernel's block: four warps. */
#define CACHED_WARPS 4
/* Positions per block of attention_cached_kernel: a multiple of the
 * block's threads, 1 KB of scores in shared memory. */
#define CACHED_CHUNK 256

/* One query's causal attention row against the cache, up to its
 * normalisation:
 *   p[j] = exp(scale * q·k_j - max_j' scale * q·k_j')  for j = 0..last,
 * the maximum in *max_out,
 * k_j = k0 + j * k_stride (hs floats each, as q). Returns sum_j p[j] to
 * every thread; every thread of the block (CACHED_WARPS warps) must call
 * it. Each warp takes tiles of 32 positions in turn and stages them in its
 * own slice of ks, 32 dimensions at a time, so that the cache is read a
 * whole row per warp load (lane = dimension) rather than a row per thread;
 * lane l then sums position j0 + l over the staged dimensions, in the
 * order d = 0, 1, ... as a plain loop would. The caller synchronises
 * before reading a p[j] another thread wrote. */
__device__ inline float
attention_row_exp(float *p /*(last+1)*/, float (*ks)[32][33],
                  const float *q /*(hs)*/, const float *k0, size_t k_stride,
                  int hs, int last, float scale, float *max_out) {
  int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  int tiles = (last + 32) / 32; /* positions 0..last */
  float mx = -INFINITY;
  for (int t = warp; t < tiles; t += CACHED_WARPS) {
    int j0 = t * 32;
    float s = 0.0f;
    for (int d0 = 0; d0 < hs; d0 += 32) {
      for (int r = 0; r < 32; r++) {
        int j = j0 + r, d = d0 + lane;
        ks[warp][r][lane] =
            j <= last && d < hs ? k0[(size_t)j * k_stride + d] : 0.0f;
      }
      __syncwarp(); /* the tile is staged before any lane reads it */
      int n = hs - d0 < 32 ? hs - d0 : 32;
      for (int c = 0; c < n; c++)
        s += q[d0 + c] * ks[warp][lane][c];
      __syncwarp(); /* read before the next stage overwrites it */
    }
    if (j0 + lane <= last) {
      p[j0 + lane] = scale * s;
      mx = fmaxf(mx, scale * s);
    }
  }
  mx = block_max(mx);
  *max_out = mx;
  float sum = 0.0f;
  for (int j = threadIdx.x; j <= last; j += blockDim.x) {
    p[j] = expf(p[j] - mx);
    sum += p[j];
  }
  return block_sum(sum);
}

/* One query row against the cache, every head (attention_query):
 *   y_h = softmax(K_h q_h / sqrt(hs)) V_h over the row's positions
 *   0..pos0+t,
 * split over the positions (flash-decoding): block s of a (row, head)
 * takes the positions [s*CACHED_CHUNK, (s+1)*CACHED_CHUNK) that the row
 * has. Splitting keeps the scores of a block in a fixed CACHED_CHUNK floats
 * of shared memory, so a cache of any length fits (the whole row's scores
 * in shared memory capped max_seq at 53,692 on sm_90), and it gives a
 * decode step, whose N*NH (row, head) pairs are far fewer than an H200's
 * 132 SMs, S times the blocks.
 *
 * Grid: N*NH*S blocks, block index = (n*NH + h)*S + s, S = the splits of the
 * longest row, ceil((pos0+T) / CACHED_CHUNK); block: CACHED_WARPS * 32
 * threads; no dynamic shared memory. kc, vc are one layer's (G,max_seq,C).
 *
 * With S = 1 the block finishes the row: y = P V / sum P into out. With
 * S > 1 it leaves its share for attention_combine_kernel: the maximum m_s
 * of its scores, l_s = sum_j exp(score_j - m_s) and the unnormalised
 * sum_j exp(score_j - m_s) v_j (hs floats) at part + ((n*NH + h)*S + s) *
 * (hs + 2); a block past its row's last position writes nothing (the
 * combine reads only the splits the row has).
 *
 * The scores stage the cache through shared memory a warp at a time
 * (attention_row_exp above); P V takes every warp: warp w sums the
 * positions j = w mod (warps) for 32 dimensions at a time (lane =
 * dimension, so a warp reads whole rows of V), and warp 0 adds the warps'
 * sums in order. (A thread per dimension walking every position left most
 * of the block idle and took pos steps in a row.) */
extern "C" __global__ void
attention_cached_kernel(float *out /*(N,C)*/, float *part,
                        const float *qkv /*(N,3C)*/, const float *kc,
                        const float *vc, const int32_t *rows /*(B)*/, int B,
                        int T, int pos0, int max_seq, int C, int NH, int S) {
  __shared__ float p[CACHED_CHUNK];          /* this block's scores */
  __shared__ float ks[CACHED_WARPS][32][33]; /* each warp's staged keys */
  __shared__ float acc_w[CACHED_WARPS][33];  /* each warp's share of y */
  int hs = C / NH;
  float scale = 1.0f / sqrtf((float)hs);
  size_t blk = blockIdx.x;
  if (blk >= (size_t)B * T * NH * S) return;
  int s = (int)(blk % S);
  size_t nh = blk / S;
  int h = (int)(nh % NH);
  size_t n = nh / NH;
  int b = (int)(n / T), pos = pos0 + (int)(n % T);
  int j0 = s * CACHED_CHUNK;
  if (j0 > pos) return; /* the row ends before this split */
  int last = pos - j0 < CACHED_CHUNK ? pos - j0 : CACHED_CHUNK - 1;
  const float *q = qkv + n * 3 * C + h * hs;
  const float *k0 = kc + ((size_t)rows[b] * max_seq + j0) * C + h * hs;
  const float *v0 = vc + ((size_t)rows[b] * max_seq + j0) * C + h * hs;

  /* this split's softmax numerators exp(scale * q·k[j] - m) in p (k[j] at
   * k0 + j*C, j = 0..last relative to j0), their sum l and maximum m */
  float m;
  float l = attention_row_exp(p, ks, q, k0, (size_t)C, hs, last, scale, &m);
  float norm = S == 1 ? 1.0f / l : 1.0f; /* S = 1: the whole row is here */
  __syncthreads(); /* every p[j] is final before anyone sums P V */

  /* y[d] = norm * sum_{j <= last} p[j] v[j, d] */
  int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  int warps = CACHED_WARPS;
  float *y = S == 1 ? out + n * C + h * hs : part + blk * (hs + 2);
  for (int d0 = 0; d0 < hs; d0 += 32) {
    int d = d0 + lane;
    float acc = 0.0f;
    if (d < hs)
      for (int j = warp; j <= last; j += warps)
        acc += p[j] * v0[(size_t)j * C + d];
    acc_w[warp][lane] = acc;
    __syncthreads();
    if (warp == 0 && d < hs) {
      float sum = 0.0f;
      for (int w = 0; w < warps; w++)
        sum += acc_w[w][lane];
      y[d] = sum * norm;
    }
    __syncthreads(); /* before the next 32 dimensions overwrite acc_w */
  }
  if (S > 1 && threadIdx.x == 0) {
    y[hs] = m;
    y[hs + 1] = l;
  }
}

/* The splits of attention_cached_kernel (S > 1) merged into out: for the
 * row's splits s = 0..pos/CACHED_CHUNK, with M = max_s m_s,
 *   y[d] = sum_s exp(m_s - M) ysum_s[d] / sum_s exp(m_s - M) l_s,
 * the softmax over all the row's positions. One thread per element of out
 * (N*C); each sums its splits in order s = 0, 1, ... */
extern "C" __global__ void attention_combine_kernel(float *out /*(N,C)*/,
                                                    const float *part, int N,
                                                    int T, int pos0, int C,
                                                    int NH, int S) {
  size_t idx = global_index();
  if (idx >= (size_t)N * C) return;
  int hs = C / NH;
  size_t n = idx / C;
  int c = (int)(idx % C), h = c / hs, d = c % hs;
  int splits = (pos0 + (int)(n % T)) / CACHED_CHUNK + 1;
  const float *base = part + (n * NH + h) * S * (size_t)(hs + 2);
  float M = -INFINITY;
  for (int s = 0; s < splits; s++)
    M = fmaxf(M, base[(size_t)s * (hs + 2) + hs]);
  float num = 0.0f, den = 0.0f;
  for (int s = 0; s < splits; s++) {
    const float *sp = base + (size_t)s * (hs + 2);
    float w = expf(sp[hs] - M);
    num += w * sp[d];
    den += w * sp[hs + 1];
  }
  out[idx] = num / den;
}
