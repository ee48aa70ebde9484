/*
 * policy/cuda/sample.cu — the sampler on the device, mirroring pl_sample of
 * policy/sampler.c row by row: temperature, then top-p and min-p measured on
 * the full temperature-scaled distribution (each keeps a prefix of the
 * tokens sorted by probability, descending, ties by lower id; the kept set
 * is the shorter prefix), then an inverse-CDF draw, and the two
 * log-probabilities (the untruncated policy log-prob, and the log-prob of
 * the truncated distribution actually drawn from). Greedy (temperature 0)
 * takes the argmax, ties to the lowest id.
 *
 * The random number is not drawn here: the host draws u from the row's own
 * pl_rng exactly when pl_sample would (once per row and step, never when
 * greedy) and passes it in, so a fixed seed walks the same xoshiro256**
 * stream on both paths. Everything else follows the CPU's arithmetic: the
 * weights w_i = exp((l_i - l_max) / T) in double, the same candidate
 * shortcut for top-p (llama2.c's bound, loosened by 1e-6), the draw
 * walking the sorted kept tokens (or the ids in order when nothing is
 * truncated). What differs is the order of the double sums (Z, the
 * nucleus's running mass, the draw's running sum are block reductions and
 * chunked scans rather than one loop), i.e. at the 1e-16 level: a token
 * differs from the CPU's only when u falls that close to a boundary.
 *
 * One block per row. The kept candidates are sorted by a bitonic sort in
 * the row's scratch (global memory, ordered by __syncthreads); the running
 * sums are scanned chunk by chunk (each thread sums its own contiguous
 * chunk, thread 0 walks the chunk sums and then the one chunk that crosses
 * the goal). No atomics: the result does not depend on scheduling.
 */
#include "policy/cuda/common.cuh"

/* The largest block sample_kernel supports (its shared arrays). */
#define SAMPLE_MAX_THREADS 1024

/* a precedes b in the sampler's order: weight descending, then id
 * ascending (cand_cmp of policy/sampler.c) */
__device__ inline bool sample_before(double wa, int ia, double wb, int ib) {
  return wa > wb || (wa == wb && ia < ib);
}

/* The block's best (value, id): the largest value, ties to the lowest id.
 * Every thread gets it. */
__device__ inline int block_argmax(float v, int id) {
  __shared__ float best_v[32];
  __shared__ int best_i[32];
  int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  int nwarps = blockDim.x / 32;
  for (int off = 16; off > 0; off >>= 1) {
    float ov = __shfl_xor_sync(0xffffffffu, v, off);
    int oi = __shfl_xor_sync(0xffffffffu, id, off);
    if (ov > v || (ov == v && oi < id)) v = ov, id = oi;
  }
  __syncthreads();
  if (lane == 0) best_v[warp] = v, best_i[warp] = id;
  __syncthreads();
  v = lane < nwarps ? best_v[lane] : -INFINITY;
  id = lane < nwarps ? best_i[lane] : 0x7fffffff;
  for (int off = 16; off > 0; off >>= 1) {
    float ov = __shfl_xor_sync(0xffffffffu, v, off);
    int oi = __shfl_xor_sync(0xffffffffu, id, off);
    if (ov > v || (ov == v && oi < id)) v = ov, id = oi;
  }
  return id;
}

/* Block-wide minimum / maximum of an int; every thread gets it. */
__device__ inline int block_min_int(int v) {
  __shared__ int part_min[32];
  int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  int nwarps = blockDim.x / 32;
  for (int off = 16; off > 0; off >>= 1)
    v = min(v, __shfl_xor_sync(0xffffffffu, v, off));
  __syncthreads();
  if (lane == 0) part_min[warp] = v;
  __syncthreads();
  v = lane < nwarps ? part_min[lane] : 0x7fffffff;
  for (int off = 16; off > 0; off >>= 1)
    v = min(v, __shfl_xor_sync(0xffffffffu, v, off));
  return v;
}
__device__ inline int block_max_int(int v) {
  return -block_min_int(-v);
}

/* Each thread's contiguous chunk of n items: [*lo, *hi). */
__device__ inline void my_chunk(int n, int *lo, int *hi) {
  int per = (n + (int)blockDim.x - 1) / (int)blockDim.x;
  *lo = min(n, (int)threadIdx.x * per);
  *hi = min(n, *lo + per);
}

/* The first k whose running sum w[0] + ... + w[k] crosses goal: reaches it
 * (cum >= goal, the nucleus) or, strict, exceeds it (goal < cum, the draw).
 * -1 when the whole sum does not (rounding). Every thread gets k. */
__device__ inline int block_find_crossing(const double *w, int n, double goal,
                                          int strict) {
  __shared__ double chunk_sum[SAMPLE_MAX_THREADS];
  __shared__ int found;
  int lo, hi;
  my_chunk(n, &lo, &hi);
  double s = 0.0;
  for (int i = lo; i < hi; i++)
    s += w[i];
  chunk_sum[threadIdx.x] = s;
  __syncthreads();
  if (threadIdx.x == 0) {
    int per = (n + (int)blockDim.x - 1) / (int)blockDim.x, at = -1;
    double cum = 0.0;
    for (int t = 0; t < (int)blockDim.x && at < 0; t++) {
      double next = cum + chunk_sum[t];
      if (!(strict ? goal < next : next >= goal)) {
        cum = next;
        continue;
      }
      /* walk from this chunk's start, item by item, to the crossing (on
       * past the chunk if rounding puts it a little later) */
      for (int i = t * per; i < n; i++) {
        cum += w[i];
        if (strict ? goal < cum : cum >= goal) {
          at = i;
          break;
        }
      }
      break;
    }
    found = at;
  }
  __syncthreads();
  int at = found;
  __syncthreads(); /* a next call may overwrite found */
  return at;
}

/* Gathers the tokens with w >= cut, and always the argmax, into (cw, cid)
 * and sorts them by sample_before (bitonic, padded to a power of two with
 * entries that sort last); returns their count. Every thread gets it. */
__device__ inline int collect_sorted(const double *w, int V, int amax,
                                     double cut, double *cw, int32_t *cid) {
  __shared__ int offset[SAMPLE_MAX_THREADS];
  __shared__ int total;
  int lo, hi, mine = 0;
  my_chunk(V, &lo, &hi);
  for (int i = lo; i < hi; i++)
    mine += w[i] >= cut || i == amax;
  offset[threadIdx.x] = mine;
  __syncthreads();
  if (threadIdx.x == 0) {
    int run = 0;
    for (int t = 0; t < (int)blockDim.x; t++) {
      int c = offset[t];
      offset[t] = run;
      run += c;
    }
    total = run;
  }
  __syncthreads();
  int n = total, at = offset[threadIdx.x];
  for (int i = lo; i < hi; i++)
    if (w[i] >= cut || i == amax) {
      cw[at] = w[i];
      cid[at++] = i;
    }
  int p2 = 1;
  while (p2 < n)
    p2 <<= 1;
  for (int i = n + (int)threadIdx.x; i < p2; i += blockDim.x) {
    cw[i] = -1.0; /* weights are >= 0: these sort last */
    cid[i] = 0x7fffffff;
  }
  __syncthreads();
  for (int k = 2; k <= p2; k <<= 1)
    for (int j = k >> 1; j > 0; j >>= 1) {
      for (int i = threadIdx.x; i < p2; i += blockDim.x) {
        int l = i ^ j;
        if (l <= i) continue;
        bool up = (i & k) == 0; /* this run ends up in sampler order */
        bool swap = up ? sample_before(cw[l], cid[l], cw[i], cid[i])
                       : sample_before(cw[i], cid[i], cw[l], cid[l]);
        if (swap) {
          double tw = cw[i];
          int32_t ti = cid[i];
          cw[i] = cw[l], cid[i] = cid[l];
          cw[l] = tw, cid[l] = ti;
        }
      }
      __syncthreads();
    }
  return n;
}

/* Draws row b's token. Grid: B blocks; block: a multiple of 32 threads, at
 * most SAMPLE_MAX_THREADS. logits row b starts at logits + b*row_stride
 * (row_stride 0: every row samples the same logits, e.g. a shared prompt's
 * last position). uniform (B): the host's draw for each row (unused when
 * greedy). Scratch per row: w (V) and the sorted candidates cw, cid (Vp2,
 * a power of two >= V). Outputs per row: token (-1 when a logit is not
 * finite; n_kept then holds the first such index), logprob,
 * logprob_sample, n_kept. */
extern "C" __global__ void
sample_kernel(int32_t *token, int32_t *n_kept, float *logprob,
              float *logprob_sample /*(B) each*/, double *w_all /*(B,V)*/,
              double *cw_all, int32_t *cid_all /*(B,Vp2)*/, const float *logits,
              size_t row_stride, const double *uniform /*(B)*/, int B, int V,
              int Vp2, float temperature, float top_p, float min_p) {
  size_t b = blockIdx.x;
  if (b >= (size_t)B) return;
  const float *l = logits + b * row_stride;
  double *w = w_all + b * V, *cw = cw_all + b * Vp2;
  int32_t *cid = cid_all + b * Vp2;

  /* the argmax (ties: lowest id) and the first non-finite logit */
  float best = -INFINITY;
  int best_i = 0x7fffffff, bad = 0x7fffffff;
  for (int i = threadIdx.x; i < V; i += blockDim.x) {
    float x = l[i];
    if (!isfinite(x)) {
      bad = min(bad, i);
      continue;
    }
    if (x > best || best_i == 0x7fffffff) best = x, best_i = i;
  }
  bad = block_min_int(bad);
  if (bad != 0x7fffffff) {
    if (threadIdx.x == 0) token[b] = -1, n_kept[b] = bad;
    return;
  }
  int amax = block_argmax(best, best_i);
  double lmax = (double)l[amax];

  /* greedy: the policy log-prob at T = 1, no draw */
  if (temperature == 0.0f) {
    double z = 0.0;
    for (int i = threadIdx.x; i < V; i += blockDim.x)
      z += exp((double)l[i] - lmax);
    z = block_sum_double(z);
    if (threadIdx.x == 0) {
      token[b] = amax;
      n_kept[b] = 1;
      logprob[b] = (float)(-log(z));
      logprob_sample[b] = 0.0f;
    }
    return;
  }

  double inv_t = 1.0 / (double)temperature;
  double z = 0.0;
  for (int i = threadIdx.x; i < V; i += blockDim.x) {
    w[i] = exp(((double)l[i] - lmax) * inv_t);
    z += w[i];
  }
  z = block_sum_double(z);
  __syncthreads(); /* every w[i] is written before anyone reads it */
  double u = uniform[b];
  int tok, kept;
  double w_tok, mass;

  if (top_p >= 1.0f && min_p <= 0.0f) {
    /* no truncation: the inverse CDF over ids in order, no sort;
     * zero-weight tokens never cross (the sum does not grow) */
    int k = block_find_crossing(w, V, u * z, 1);
    if (k < 0) { /* rounding: the last token with weight */
      int last = amax;
      for (int i = threadIdx.x; i < V; i += blockDim.x)
        if (w[i] > 0.0) last = max(last, i);
      k = block_max_int(last);
    }
    tok = k;
    w_tok = w[tok];
    mass = z;
    kept = V;
  } else {
    /* truncate_support of policy/sampler.c */
    double cut_m = (double)min_p;
    int n = -1, k = -1;
    if (top_p >= 1.0f) {
      n = collect_sorted(w, V, amax, cut_m, cw, cid);
      k = n;
    } else {
      double goal = (double)top_p * z;
      if (V > 1) {
        double cut_p =
            (1.0 - (double)top_p) / (double)(V - 1) * z * (1.0 - 1e-6);
        if (cut_p > cut_m) {
          n = collect_sorted(w, V, amax, cut_p, cw, cid);
          int at = block_find_crossing(cw, n, goal, 0);
          k = at >= 0 ? at + 1 : -1;
        }
      }
      if (k < 0) {
        n = collect_sorted(w, V, amax, cut_m, cw, cid);
        int at = block_find_crossing(cw, n, goal, 0);
        k = at >= 0 ? at + 1 : n;
      }
    }
    kept = k;
    mass = 0.0;
    for (int i = threadIdx.x; i < kept; i += blockDim.x)
      mass += cw[i];
    mass = block_sum_double(mass);
    int pick = block_find_crossing(cw, kept, u * mass, 1);
    if (pick < 0) { /* rounding: the last kept token with weight */
      int last = 0; /* cw[0] is the argmax, weight 1 */
      for (int i = threadIdx.x; i < kept; i += blockDim.x)
        if (cw[i] > 0.0) last = max(last, i);
      pick = block_max_int(last);
    }
    tok = cid[pick];
    w_tok = cw[pick];
  }
  if (threadIdx.x == 0) {
    token[b] = tok;
    n_kept[b] = kept;
    logprob[b] = (float)(((double)l[tok] - lmax) * inv_t - log(z));
    logprob_sample[b] = (float)(log(w_tok) - log(mass));
  }
}
