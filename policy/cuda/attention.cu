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
 * Tiled: a block owns a tile of ATT_TILE (32) query rows (or, for dK and dV,
 * 32 key rows) of one (b, h) and walks the tiles of the other side that the
 * causal mask lets through, staging 32x32 pieces of its operands in shared
 * memory, 32 head dimensions at a time (so any head size works with the
 * same 8-17 KB). Each row of Q, K, V, dY is then read from global memory
 * once per tile of 32 rows instead of once per row, as the earlier kernels
 * (a block per query row, re-reading every key and value row of its head)
 * did: a 32x cut of the reads that, counted on paper, dominate attention
 * at the policy's T of 1024. Only this version has run on a device: on
 * an H200 (tests/gpu/LOG.md, 2026-12-04), bench_policy_cuda's whole
 * training step ran at 692k tokens/s, 6.5x PyTorch's on the same card.
 * Attention's own share of that time has not been measured.
 *
 * The probabilities P (B,NH,T,T) are stored by the forward, as the CPU
 * stores them, and read back by the backward; dS of every (b, h) is a
 * (B,NH,T,T) scratch (the CPU keeps one head's at a time). Each output
 * element is summed by one thread in a fixed order, and the row reductions
 * are warp shuffles in a fixed order: no atomics, the same bits every run.
 *
 * Thread layout of every kernel here: block (32, 8); warp ty owns the tile
 * rows ty, ty+8, ty+16, ty+24 (ATT_ROWS each); lane tx is a column of the
 * tile (a key, or a head dimension).
 */
#include "policy/cuda/common.cuh"

#define ATT_TILE 32
#define ATT_ROWS (ATT_TILE / 8) /* tile rows per thread */

/* Which tile of which (b, h) this block owns: block index = (b*NH + h) *
 * tiles + tile, tiles = ceil(T/32). */
struct att_block {
  int tiles; /* tiles of 32 rows covering T */
  int tile;  /* this block's tile: rows tile*32 .. */
  int h;     /* head */
  size_t bh; /* b*NH + h: which (T,T) matrix of att and dS */
  size_t b;  /* batch row */
};

/* Fills ix for this block; false for a block past the grid's last tile
 * (the whole block returns: no thread reaches a barrier). */
__device__ inline bool att_block_of(att_block *ix, int B, int T, int NH) {
  ix->tiles = (T + ATT_TILE - 1) / ATT_TILE;
  size_t blk = blockIdx.x;
  if (blk >= (size_t)B * NH * ix->tiles) return false;
  ix->tile = (int)(blk % ix->tiles);
  ix->bh = blk / ix->tiles;
  ix->b = ix->bh / NH;
  ix->h = (int)(ix->bh % NH);
  return true;
}

/* s[i] = sum_d a[r0 + ty + 8i, d] * b[c0 + tx, d] for one 32x32 tile of
 * a · b^T, with a and b rows of hs floats at a_stride / b_stride (rows at
 * or past T read as 0), staged 32 dimensions at a time through as and bs.
 * Every thread of the block must call it. */
__device__ inline void tile_dot(float s[ATT_ROWS], float (*as)[ATT_TILE + 1],
                                float (*bs)[ATT_TILE + 1], const float *a,
                                size_t a_stride, int r0, const float *b,
                                size_t b_stride, int c0, int T, int hs) {
  int tx = threadIdx.x, ty = threadIdx.y;
  for (int i = 0; i < ATT_ROWS; i++)
    s[i] = 0.0f;
  for (int d0 = 0; d0 < hs; d0 += ATT_TILE) {
    int d = d0 + tx;
    for (int i = 0; i < ATT_ROWS; i++) {
      int r = ty + 8 * i;
      as[r][tx] =
          r0 + r < T && d < hs ? a[(size_t)(r0 + r) * a_stride + d] : 0.0f;
      bs[r][tx] =
          c0 + r < T && d < hs ? b[(size_t)(c0 + r) * b_stride + d] : 0.0f;
    }
    __syncthreads();
    for (int c = 0; c < ATT_TILE; c++) {
      float bv = bs[tx][c];
      for (int i = 0; i < ATT_ROWS; i++)
        s[i] += as[ty + 8 * i][c] * bv;
    }
    __syncthreads(); /* before the next stage overwrites as and bs */
  }
}

/* acc[i] = sum_{t2} w[r0 + ty + 8i, t2] * x[t2, d0 + tx] over the key
 * tiles kt_begin..kt_end (inclusive) for the 32 dimensions d0.., where w is
 * a (T,T) matrix (P or dS, 0 above the diagonal) and x rows of hs floats at
 * x_stride. Every thread of the block must call it. */
__device__ inline void
tile_weighted_sum(float acc[ATT_ROWS], float (*ws)[ATT_TILE + 1],
                  float (*xs)[ATT_TILE + 1], const float *w, int r0,
                  int kt_begin, int kt_end, const float *x, size_t x_stride,
                  int d0, int T, int hs) {
  int tx = threadIdx.x, ty = threadIdx.y;
  for (int i = 0; i < ATT_ROWS; i++)
    acc[i] = 0.0f;
  for (int kt = kt_begin; kt <= kt_end; kt++) {
    int k0 = kt * ATT_TILE;
    for (int i = 0; i < ATT_ROWS; i++) {
      int r = ty + 8 * i;
      ws[r][tx] =
          r0 + r < T && k0 + tx < T ? w[(size_t)(r0 + r) * T + k0 + tx] : 0.0f;
      xs[r][tx] = k0 + r < T && d0 + tx < hs
                      ? x[(size_t)(k0 + r) * x_stride + d0 + tx]
                      : 0.0f;
    }
    __syncthreads();
    for (int c = 0; c < ATT_TILE; c++) {
      float xv = xs[c][tx];
      for (int i = 0; i < ATT_ROWS; i++)
        acc[i] += ws[ty + 8 * i][c] * xv;
    }
    __syncthreads();
  }
}

/* Grid: B*NH*ceil(T/32) blocks, block index = (b*NH + h)*tiles + query
 * tile; block (32, 8). Writes the whole rows of att (zeros above the
 * diagonal) and out's head-h columns of the tile's rows. */
extern "C" __global__ void
attention_forward_kernel(float *out /*(B,T,C)*/, float *att /*(B,NH,T,T)*/,
                         const float *qkv /*(B,T,3C)*/, int B, int T, int C,
                         int NH) {
  __shared__ float as[ATT_TILE][ATT_TILE + 1];
  __shared__ float bs[ATT_TILE][ATT_TILE + 1];
  att_block ix;
  if (!att_block_of(&ix, B, T, NH)) return;
  int hs = C / NH, C3 = 3 * C, h = ix.h;
  float scale = 1.0f / sqrtf((float)hs);
  int qt = ix.tile, q0 = qt * ATT_TILE;
  size_t bh = ix.bh, b = ix.b;
  int tx = threadIdx.x, ty = threadIdx.y;
  const float *q = qkv + b * T * C3 + h * hs; /* row t at q + t*3C */
  float *att_bh = att + bh * T * T;

  /* 1. scaled scores at or below the diagonal into att, and each thread's
   * running max of its rows */
  float mx[ATT_ROWS], s[ATT_ROWS];
  for (int i = 0; i < ATT_ROWS; i++)
    mx[i] = -INFINITY;
  for (int kt = 0; kt <= qt; kt++) {
    int k0 = kt * ATT_TILE;
    tile_dot(s, as, bs, q, (size_t)C3, q0, q + C, (size_t)C3, k0, T, hs);
    for (int i = 0; i < ATT_ROWS; i++) {
      int t = q0 + ty + 8 * i, t2 = k0 + tx;
      if (t < T && t2 <= t) {
        att_bh[(size_t)t * T + t2] = scale * s[i];
        mx[i] = fmaxf(mx[i], scale * s[i]);
      }
    }
  }

  /* 2. each row's softmax, by the warp that owns it: lane tx holds the
   * columns t2 = tx mod 32, the very ones it wrote above */
  for (int i = 0; i < ATT_ROWS; i++) {
    int t = q0 + ty + 8 * i;
    if (t >= T) continue; /* the same for the whole warp */
    float *row = att_bh + (size_t)t * T;
    float m = warp_max(mx[i]), sum = 0.0f;
    for (int t2 = tx; t2 <= t; t2 += ATT_TILE) {
      row[t2] = expf(row[t2] - m);
      sum += row[t2];
    }
    sum = warp_sum(sum);
    for (int t2 = tx; t2 < T; t2 += ATT_TILE)
      row[t2] = t2 <= t ? row[t2] / sum : 0.0f;
  }
  __syncthreads(); /* the tile's P rows are final before anyone reads them */

  /* 3. y = P V, 32 dimensions at a time */
  for (int d0 = 0; d0 < hs; d0 += ATT_TILE) {
    float acc[ATT_ROWS];
    tile_weighted_sum(acc, as, bs, att_bh, q0, 0, qt, q + 2 * C, (size_t)C3, d0,
                      T, hs);
    for (int i = 0; i < ATT_ROWS; i++) {
      int t = q0 + ty + 8 * i;
      if (t < T && d0 + tx < hs)
        out[(b * T + t) * C + h * hs + d0 + tx] = acc[i];
    }
  }
}

/* dS for a tile of query rows: dP[t,t2] = dy[t] . v[t2], then
 * dS[t,t2] = P[t,t2] (dP[t,t2] - sum_t2' P dP), 0 above the diagonal.
 * Grid and block as the forward. */
extern "C" __global__ void attention_backward_dscore_kernel(
    float *dscore /*(B,NH,T,T)*/, const float *dout /*(B,T,C)*/,
    const float *qkv /*(B,T,3C)*/, const float *att /*(B,NH,T,T)*/, int B,
    int T, int C, int NH) {
  __shared__ float as[ATT_TILE][ATT_TILE + 1];
  __shared__ float bs[ATT_TILE][ATT_TILE + 1];
  att_block ix;
  if (!att_block_of(&ix, B, T, NH)) return;
  int hs = C / NH, C3 = 3 * C, h = ix.h;
  int qt = ix.tile, q0 = qt * ATT_TILE;
  size_t bh = ix.bh, b = ix.b;
  int tx = threadIdx.x, ty = threadIdx.y;
  const float *dy = dout + b * T * C + h * hs;        /* row t: + t*C */
  const float *v = qkv + b * T * C3 + 2 * C + h * hs; /* row t: + t*3C */
  const float *p_bh = att + bh * T * T;
  float *ds_bh = dscore + bh * T * T;

  /* dP into dscore, and each thread's share of sum_t2 P dP of its rows */
  float dot[ATT_ROWS], s[ATT_ROWS];
  for (int i = 0; i < ATT_ROWS; i++)
    dot[i] = 0.0f;
  for (int kt = 0; kt <= qt; kt++) {
    int k0 = kt * ATT_TILE;
    tile_dot(s, as, bs, dy, (size_t)C, q0, v, (size_t)C3, k0, T, hs);
    for (int i = 0; i < ATT_ROWS; i++) {
      int t = q0 + ty + 8 * i, t2 = k0 + tx;
      if (t < T && t2 <= t) {
        ds_bh[(size_t)t * T + t2] = s[i];
        dot[i] += p_bh[(size_t)t * T + t2] * s[i];
      }
    }
  }
  /* each row by the warp that owns it; lane tx rewrites only the columns
   * t2 = tx mod 32 it wrote */
  for (int i = 0; i < ATT_ROWS; i++) {
    int t = q0 + ty + 8 * i;
    if (t >= T) continue; /* the same for the whole warp */
    float rowdot = warp_sum(dot[i]);
    const float *p = p_bh + (size_t)t * T;
    float *ds = ds_bh + (size_t)t * T;
    for (int t2 = tx; t2 < T; t2 += ATT_TILE)
      ds[t2] = t2 <= t ? p[t2] * (ds[t2] - rowdot) : 0.0f;
  }
}

/* dq[b,t,h,:] = scale * sum_{t2 <= t} dS[t,t2] k[t2,:] for a tile of query
 * rows, into the q block of dqkv. Grid and block as the forward. */
extern "C" __global__ void attention_backward_dq_kernel(
    float *dqkv /*(B,T,3C)*/, const float *dscore /*(B,NH,T,T)*/,
    const float *qkv /*(B,T,3C)*/, int B, int T, int C, int NH) {
  __shared__ float as[ATT_TILE][ATT_TILE + 1];
  __shared__ float bs[ATT_TILE][ATT_TILE + 1];
  att_block ix;
  if (!att_block_of(&ix, B, T, NH)) return;
  int hs = C / NH, C3 = 3 * C, h = ix.h;
  float scale = 1.0f / sqrtf((float)hs);
  int qt = ix.tile, q0 = qt * ATT_TILE;
  size_t bh = ix.bh, b = ix.b;
  int tx = threadIdx.x, ty = threadIdx.y;
  const float *k = qkv + b * T * C3 + C + h * hs;
  for (int d0 = 0; d0 < hs; d0 += ATT_TILE) {
    float acc[ATT_ROWS];
    tile_weighted_sum(acc, as, bs, dscore + bh * T * T, q0, 0, qt, k,
                      (size_t)C3, d0, T, hs);
    for (int i = 0; i < ATT_ROWS; i++) {
      int t = q0 + ty + 8 * i;
      if (t < T && d0 + tx < hs)
        dqkv[(b * T + t) * C3 + h * hs + d0 + tx] = scale * acc[i];
    }
  }
}

/* For a tile of key rows t2:
 *   dk[b,t2,h,:] = scale * sum_{t >= t2} dS[t,t2] q[t,:],
 *   dv[b,t2,h,:] = sum_{t >= t2} P[t,t2] dy[t,:],
 * into the k and v blocks of dqkv, walking the query tiles at or after the
 * key tile (dS and P staged transposed). Grid: B*NH*ceil(T/32) blocks,
 * index = (b*NH + h)*tiles + key tile; block (32, 8). */
extern "C" __global__ void attention_backward_dkv_kernel(
    float *dqkv /*(B,T,3C)*/, const float *dscore /*(B,NH,T,T)*/,
    const float *att /*(B,NH,T,T)*/, const float *dout /*(B,T,C)*/,
    const float *qkv /*(B,T,3C)*/, int B, int T, int C, int NH) {
  __shared__ float dst[ATT_TILE][ATT_TILE + 1]; /* dS^T: [t2][t] */
  __shared__ float pt[ATT_TILE][ATT_TILE + 1];  /* P^T */
  __shared__ float qs[ATT_TILE][ATT_TILE + 1];  /* q[t][d] */
  __shared__ float dys[ATT_TILE][ATT_TILE + 1]; /* dy[t][d] */
  att_block ix;
  if (!att_block_of(&ix, B, T, NH)) return;
  int hs = C / NH, C3 = 3 * C, tiles = ix.tiles, h = ix.h;
  float scale = 1.0f / sqrtf((float)hs);
  int kt = ix.tile, k0 = kt * ATT_TILE;
  size_t bh = ix.bh, b = ix.b;
  int tx = threadIdx.x, ty = threadIdx.y;
  const float *q = qkv + b * T * C3 + h * hs;
  const float *dy = dout + b * T * C + h * hs;
  const float *ds_bh = dscore + bh * T * T, *p_bh = att + bh * T * T;
  for (int d0 = 0; d0 < hs; d0 += ATT_TILE) {
    float dk[ATT_ROWS], dv[ATT_ROWS];
    for (int i = 0; i < ATT_ROWS; i++)
      dk[i] = dv[i] = 0.0f;
    for (int qt = kt; qt < tiles; qt++) {
      int q0 = qt * ATT_TILE;
      for (int i = 0; i < ATT_ROWS; i++) {
        int r = ty + 8 * i; /* query row q0 + r of the staged tiles */
        int t = q0 + r, d = d0 + tx;
        /* lane tx reads key column k0 + tx of query row t (coalesced) and
         * stores it transposed; dS and P are 0 above the diagonal */
        size_t at = (size_t)t * T + k0 + tx;
        int in = t < T && k0 + tx < T;
        dst[tx][r] = in ? ds_bh[at] : 0.0f;
        pt[tx][r] = in ? p_bh[at] : 0.0f;
        qs[r][tx] = t < T && d < hs ? q[(size_t)t * C3 + d] : 0.0f;
        dys[r][tx] = t < T && d < hs ? dy[(size_t)t * C + d] : 0.0f;
      }
      __syncthreads();
      for (int c = 0; c < ATT_TILE; c++) {
        float qv = qs[c][tx], dyv = dys[c][tx];
        for (int i = 0; i < ATT_ROWS; i++) {
          dk[i] += dst[ty + 8 * i][c] * qv;
          dv[i] += pt[ty + 8 * i][c] * dyv;
        }
      }
      __syncthreads();
    }
    for (int i = 0; i < ATT_ROWS; i++) {
      int t2 = k0 + ty + 8 * i;
      if (t2 < T && d0 + tx < hs) {
        dqkv[(b * T + t2) * C3 + C + h * hs + d0 + tx] = scale * dk[i];
        dqkv[(b * T + t2) * C3 + 2 * C + h * hs + d0 + tx] = dv[i];
      }
    }
  }
}
