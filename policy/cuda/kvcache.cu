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
#include "policy/cuda/kernel_list.h"

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

/* attention_cached_kernel's block: PCUDA_ATT_WARPS warps; its chunk of
 * positions, PCUDA_ATT_CHUNK, is a multiple of the block's threads (1 KB of
 * scores in shared memory). */
#define CACHED_WARPS PCUDA_ATT_WARPS
#define CACHED_CHUNK PCUDA_ATT_CHUNK

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
 * a chunk of CACHED_CHUNK positions at a time, with the running softmax of
 * flash attention: after each chunk the maximum m so far, the sum l of
 * exp(score - m) and the unnormalised y are rescaled by exp(m_old - m_new)
 * and the chunk's terms added. So a block's shared memory is fixed and a
 * cache of any length fits (the whole row's scores in shared memory capped
 * max_seq at 53,692 on sm_90).
 *
 * The chunks of a (row, head) are split over S blocks (flash-decoding):
 * block s takes the chunks s, s + S, s + 2S, ... that the row has, so a
 * decode step, whose N*NH (row, head) pairs are far fewer than an H200's
 * SMs, still fills the device. The host picks S (pcuda_generate.c); a
 * prefill, with thousands of pairs, runs with S = 1.
 *
 * Grid: N*NH*S blocks, block index = (n*NH + h)*S + s; block: CACHED_WARPS
 * * 32 threads; no dynamic shared memory. kc, vc are one layer's
 * (G,max_seq,C).
 *
 * With S = 1 the block finishes the row: y = P V / l into out. With S > 1
 * it leaves its share for attention_combine_kernel: m, l and the
 * unnormalised y (hs floats) at part + ((n*NH + h)*S + s) * (hs + 2) as
 * y[0..hs), m, l; a block with no chunk of its row (s*CACHED_CHUNK > the
 * row's last position) writes nothing (the combine reads only the splits
 * the row has).
 *
 * The scores stage the cache through shared memory a warp at a time
 * (attention_row_exp above); P V takes every warp: warp w sums the
 * positions j = w mod (warps) for 32 dimensions at a time (lane =
 * dimension, so a warp reads whole rows of V), and warp 0 adds the warps'
 * sums in order into y, which only its lane d reads and writes. (A thread
 * per dimension walking every position left most of the block idle and
 * took pos steps in a row.) */
extern "C" __global__ void
attention_cached_kernel(float *out /*(N,C)*/, float *part,
                        const float *qkv /*(N,3C)*/, const float *kc,
                        const float *vc, const int32_t *rows /*(B)*/, int B,
                        int T, int pos0, int max_seq, int C, int NH, int S) {
  __shared__ float p[CACHED_CHUNK];          /* the chunk's scores */
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
  int chunks = pos / CACHED_CHUNK + 1; /* the row's, positions 0..pos */
  if (s >= chunks) return;             /* none of them is this block's */
  const float *q = qkv + n * 3 * C + h * hs;
  const float *k_row = kc + (size_t)rows[b] * max_seq * C + h * hs;
  const float *v_row = vc + (size_t)rows[b] * max_seq * C + h * hs;
  float *y = S == 1 ? out + n * C + h * hs : part + blk * (hs + 2);
  int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  int warps = CACHED_WARPS;

  float m = -INFINITY, l = 0.0f;
  for (int c = s; c < chunks; c += S) {
    int j0 = c * CACHED_CHUNK;
    int last = pos - j0 < CACHED_CHUNK ? pos - j0 : CACHED_CHUNK - 1;
    const float *k0 = k_row + (size_t)j0 * C, *v0 = v_row + (size_t)j0 * C;
    /* the chunk's numerators exp(scale * q·k[j] - mc) in p (j = 0..last
     * from j0), their sum lc and maximum mc */
    float mc;
    float lc = attention_row_exp(p, ks, q, k0, (size_t)C, hs, last, scale, &mc);
    float m_new = fmaxf(m, mc);
    int first = c == s;
    float a_old = first ? 0.0f : expf(m - m_new); /* rescales y and l */
    float a_new = expf(mc - m_new);               /* scales this chunk */
    l = l * a_old + lc * a_new;
    m = m_new;
    /* the last chunk of a whole row (S = 1) divides by l as it adds */
    float norm = S == 1 && c + S >= chunks ? 1.0f / l : 1.0f;
    __syncthreads(); /* every p[j] is final before anyone sums P V */

    /* y[d] = (y[d] * a_old + a_new * sum_{j <= last} p[j] v[j, d]) * norm */
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
        /* y holds nothing yet on the first chunk (not even a number) */
        float prev = first ? 0.0f : y[d] * a_old;
        y[d] = (prev + sum * a_new) * norm;
      }
      /* before the next 32 dimensions overwrite acc_w, and before the
       * next chunk overwrites p */
      __syncthreads();
    }
  }
  if (S > 1 && threadIdx.x == 0) {
    y[hs] = m;
    y[hs + 1] = l;
  }
}

/* The splits of attention_cached_kernel (S > 1) merged into out: for the
 * splits s = 0..min(S, chunks) - 1 that hold chunks of the row, with
 * M = max_s m_s,
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
  int chunks = (pos0 + (int)(n % T)) / CACHED_CHUNK + 1;
  int splits = chunks < S ? chunks : S;
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
