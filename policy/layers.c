/*
 * policy/layers.c — the layers of the policy's transformer on the CPU
 * (policy/layers_internal.h), forward and backward, in fp32: the readable
 * reference that policy/cuda/ mirrors kernel by kernel. policy/model.c
 * owns the parameters and activations and calls these in order.
 *
 * Every matmul, attention's included, goes through cblas_sgemm; the linear
 * layers' through pl_linear_gemm, which a hook can take over (policy.h).
 * The element-wise loops split their rows over the policy's pool
 * (policy/parallel.c), and attention splits its (batch, head) pairs, each
 * thread running single-threaded GEMMs over the causal blocks only. exp in
 * the hot loops is a polynomial over GCC/Clang vectors (vexp4, ~2 ulp).
 */
#include "policy/layers_internal.h"

#include <cblas.h>
#include <math.h>
#include <string.h>

/* ------------------------------------------------------------------------ */
/* exp over 4 lanes: GCC/Clang vector extensions (one SSE register on
 * plain x86-64, NEON on arm64). Cephes' expf: x = n ln2 + r,
 * |r| <= ln2/2, a degree-5 polynomial for e^r, 2^n put into the exponent
 * bits. Inputs are clamped to [-87, 88] (e^-87 ~ 1.6e-38 stands in for 0,
 * e^88 ~ 1.7e38 for overflow), within ~2 ulp of expf elsewhere. */

typedef float v4f __attribute__((vector_size(16)));
typedef int32_t v4i __attribute__((vector_size(16)));

static inline v4f v4_splat(float x) {
  return (v4f){x, x, x, x};
}
static inline v4f v4f_one(void) {
  return v4_splat(1.0f);
}
static inline v4f v4_load(const float *p) {
  v4f v;
  memcpy(&v, p, sizeof v);
  return v;
}
static inline void v4_store(float *p, v4f v) {
  memcpy(p, &v, sizeof v);
}
static inline float v4_sum(v4f v) {
  return (v[0] + v[2]) + (v[1] + v[3]);
}
static inline v4f v4_max(v4f a, v4f b) {
  v4i gt = a > b;
  return (v4f)(((v4i)a & gt) | ((v4i)b & ~gt));
}
static inline v4f v4_min(v4f a, v4f b) {
  return -v4_max(-a, -b);
}

static inline v4f vexp4(v4f x) {
  x = v4_min(v4_max(x, v4_splat(-87.0f)), v4_splat(88.0f));
  /* n = round(x log2 e): adding 1.5 * 2^23 rounds to an integer */
  v4f big = v4_splat(12582912.0f);
  v4f n = (x * v4_splat(1.44269504088896341f) + big) - big;
  v4f r = x - n * v4_splat(0.693359375f) - n * v4_splat(-2.12194440e-4f);
  v4f y = v4_splat(1.9875691500e-4f);
  y = y * r + v4_splat(1.3981999507e-3f);
  y = y * r + v4_splat(8.3334519073e-3f);
  y = y * r + v4_splat(4.1665795894e-2f);
  y = y * r + v4_splat(1.6666665459e-1f);
  y = y * r + v4_splat(5.0000001201e-1f);
  y = y * (r * r) + r + v4_splat(1.0f);
  v4i e = (__builtin_convertvector(n, v4i) + 127) << 23;
  return y * (v4f)e;
}

/* x[i] = exp(x[i] - shift) for i < n; returns their sum */
static float vexp_shift(float *x, int n, float shift) {
  v4f acc = v4_splat(0.0f), sh = v4_splat(shift);
  int i = 0;
  for (; i + 4 <= n; i += 4) {
    v4f e = vexp4(v4_load(x + i) - sh);
    v4_store(x + i, e);
    acc += e;
  }
  float sum = v4_sum(acc);
  if (i < n) {
    float tail[4] = {0};
    memcpy(tail, x + i, (n - i) * sizeof(float));
    v4f e = vexp4(v4_load(tail) - sh);
    for (int j = 0; j < n - i; j++) {
      x[i + j] = e[j];
      sum += e[j];
    }
  }
  return sum;
}

/* max of x[0..n), n >= 1 */
static float vmax(const float *x, int n) {
  float mx = x[0];
  int i = 0;
  if (n >= 4) {
    v4f m = v4_load(x);
    for (i = 4; i + 4 <= n; i += 4)
      m = v4_max(m, v4_load(x + i));
    for (int j = 0; j < 4; j++)
      mx = m[j] > mx ? m[j] : mx;
  }
  for (; i < n; i++)
    mx = x[i] > mx ? x[i] : mx;
  return mx;
}

/* ------------------------------------------------------------------------ */
/* layers. Each parallel one is a rows function over [begin, end) and a
 * wrapper handing slices of its rows to pl_parallel_for (policy.h). */

/* the arguments of every layer's rows function: a union of what they use */
typedef struct {
  float *out, *out2, *dw;
  const float *in, *in2, *w, *rstd, *cos_t, *sin_t;
  const int32_t *tokens;
  int B, T, C, NH, V;
  float dir;
  size_t dw_stride; /* per-slot partial dw: slot k at dw + k * dw_stride */
} layer_args;

/* out[bt,:] = wte[tokens[bt],:] */
void pll_embedding_forward(float *out /*(BT,C)*/, const int32_t *tokens,
                           const float *wte /*(V,C)*/, size_t BT, int C) {
  for (size_t bt = 0; bt < BT; bt++)
    memcpy(out + bt * C, wte + (size_t)tokens[bt] * C, C * sizeof(float));
}

/* Serial: rows of dwte repeat when tokens do. */
void pll_embedding_backward(float *dwte /*(V,C)*/, const float *dout /*(BT,C)*/,
                            const int32_t *tokens, size_t BT, int C) {
  for (size_t bt = 0; bt < BT; bt++) {
    float *row = dwte + (size_t)tokens[bt] * C;
    const float *d = dout + bt * C;
    for (int i = 0; i < C; i++)
      row[i] += d[i];
  }
}

/* out = x * rstd * w, rstd = 1/sqrt(mean(x^2) + eps), per row */
static void rmsnorm_forward_rows(void *ctx, size_t begin, size_t end,
                                 int slot) {
  const layer_args *g = ctx;
  int C = g->C;
  (void)slot;
  for (size_t n = begin; n < end; n++) {
    const float *x = g->in + n * C;
    float *o = g->out + n * C;
    float ss = 0.0f;
    for (int i = 0; i < C; i++)
      ss += x[i] * x[i];
    float r = 1.0f / sqrtf(ss / C + PLL_RMS_EPS);
    for (int i = 0; i < C; i++)
      o[i] = x[i] * r * g->w[i];
    g->out2[n] = r;
  }
}

void pll_rmsnorm_forward(float *out /*(N,C)*/, float *rstd /*(N)*/,
                         const float *inp /*(N,C)*/, const float *w /*(C)*/,
                         size_t N, int C) {
  layer_args g = {.out = out, .out2 = rstd, .in = inp, .w = w, .C = C};
  pl_parallel_for(rmsnorm_forward_rows, &g, N, 16);
}

/* With g = dout * w and r = rstd (dr/dx_i = -r^3 x_i / C):
 *   dx_i += r g_i - r^3 x_i (g . x) / C;   dw_i += dout_i x_i r.
 * dinp accumulates: it is the residual stream's gradient. Each slot sums
 * its rows' dw into its own zeroed partial; the wrapper adds them up. */
static void rmsnorm_backward_rows(void *ctx, size_t begin, size_t end,
                                  int slot) {
  const layer_args *g = ctx;
  int C = g->C;
  float *dw = g->dw + slot * g->dw_stride;
  memset(dw, 0, C * sizeof(float));
  for (size_t n = begin; n < end; n++) {
    const float *x = g->in + n * C, *d = g->in2 + n * C;
    float *dx = g->out + n * C;
    float r = g->rstd[n], gx = 0.0f;
    for (int i = 0; i < C; i++)
      gx += d[i] * g->w[i] * x[i];
    float k = r * r * r * gx / C;
    for (int i = 0; i < C; i++) {
      dx[i] += r * d[i] * g->w[i] - k * x[i];
      dw[i] += d[i] * x[i] * r;
    }
  }
}

/* part: (PL_POOL_MAX, C) scratch for the partial dw */
void pll_rmsnorm_backward(float *dinp /*(N,C)*/, float *dw /*(C)*/,
                          const float *dout /*(N,C)*/,
                          const float *inp /*(N,C)*/, const float *w,
                          const float *rstd /*(N)*/, float *part, size_t N,
                          int C) {
  layer_args g = {.out = dinp,
                  .dw = part,
                  .in = inp,
                  .in2 = dout,
                  .w = w,
                  .rstd = rstd,
                  .C = C,
                  .dw_stride = (size_t)C};
  int slots = pl_parallel_for(rmsnorm_backward_rows, &g, N, 16);
  for (int k = 0; k < slots; k++)
    for (int i = 0; i < C; i++)
      dw[i] += part[(size_t)k * C + i];
}

/* out = inp · w^T (w stored (OC,IC), PyTorch's Linear without bias) */
void pll_matmul_forward(float *out /*(N,OC)*/, const float *inp /*(N,IC)*/,
                        const float *w /*(OC,IC)*/, size_t N, int IC, int OC) {
  pl_linear_gemm(0, 1, (int)N, OC, IC, 1.0f, inp, IC, w, IC, 0.0f, out, OC);
}

/* dinp = dout · w (overwritten); dw += dout^T · inp */
void pll_matmul_backward(float *dinp /*(N,IC)*/, float *dw /*(OC,IC)*/,
                         const float *dout /*(N,OC)*/,
                         const float *inp /*(N,IC)*/,
                         const float *w /*(OC,IC)*/, size_t N, int IC, int OC) {
  pl_linear_gemm(0, 0, (int)N, IC, OC, 1.0f, dout, OC, w, IC, 0.0f, dinp, IC);
  pl_linear_gemm(1, 0, OC, IC, (int)N, 1.0f, dout, OC, inp, IC, 1.0f, dw, IC);
}

/* Rotates q and k of every head in place: the interleaved pair
 * (x[2i], x[2i+1]) of head dimension turns by angle(t, i). dir = +1 is the
 * forward rotation, -1 its transpose (the backward of a rotation). Rows are
 * the (b,t) positions. */
static void rope_rows(void *ctx, size_t begin, size_t end, int slot) {
  const layer_args *g = ctx;
  int C = g->C, NH = g->NH, hs = C / NH, half = hs / 2;
  (void)slot;
  for (size_t bt = begin; bt < end; bt++) {
    int t = (int)(bt % g->T);
    float *row = g->out + bt * 3 * C;
    const float *ct = g->cos_t + (size_t)t * half,
                *st = g->sin_t + (size_t)t * half;
    for (int part = 0; part < 2; part++) /* q, then k */
      for (int h = 0; h < NH; h++) {
        float *x = row + part * C + h * hs;
        for (int i = 0; i < half; i++) {
          float c = ct[i], s = g->dir * st[i];
          float x0 = x[2 * i], x1 = x[2 * i + 1];
          x[2 * i] = x0 * c - x1 * s;
          x[2 * i + 1] = x0 * s + x1 * c;
        }
      }
  }
}

void pll_rope_apply(float *qkv /*(B,T,3C)*/, const float *cos_t,
                    const float *sin_t /*(max_seq,hs/2)*/, int B, int T, int C,
                    int NH, float dir) {
  layer_args g = {.out = qkv,
                  .cos_t = cos_t,
                  .sin_t = sin_t,
                  .T = T,
                  .C = C,
                  .NH = NH,
                  .dir = dir};
  pl_parallel_for(rope_rows, &g, (size_t)B * T, 16);
}

/* Attention works on blocks of ATT_BLOCK query rows: block [t0, t0+tb)
 * sees keys [0, t0+tb) only, so the GEMMs skip the blocks above the
 * diagonal (10 of 16 for T = 256) where P is 0. */
#define ATT_BLOCK 64

/* Runs fn over the (b,h) pairs, one slice of pairs per thread. */
static void attention_parallel(pl_par_fn fn, layer_args *g) {
  pl_parallel_for(fn, g, (size_t)g->B * g->NH, 1);
}

/* Causal attention per (b,h): S = Q K^T / sqrt(hs), P = softmax over t2 <= t
 * (zero above the diagonal), Y = P V. Q, K, V are column blocks of qkv,
 * read in place through the leading dimension 3C. Rows: (b,h) pairs. */
static void attention_forward_rows(void *ctx, size_t begin, size_t end,
                                   int slot) {
  const layer_args *g = ctx;
  int T = g->T, C = g->C, NH = g->NH, hs = C / NH, C3 = 3 * C;
  float scale = 1.0f / sqrtf((float)hs);
  (void)slot;
  for (size_t bh = begin; bh < end; bh++) {
    size_t b = bh / NH, h = bh % NH;
    const float *q = g->in + b * T * C3 + h * hs;
    const float *k = q + C, *v = q + 2 * C;
    float *p = g->out2 + bh * T * T;
    float *y = g->out + b * T * C + h * hs;
    for (int t0 = 0; t0 < T; t0 += ATT_BLOCK) {
      int tb = T - t0 < ATT_BLOCK ? T - t0 : ATT_BLOCK, nk = t0 + tb;
      float *pb = p + (size_t)t0 * T;
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, tb, nk, hs, scale,
                  q + (size_t)t0 * C3, C3, k, C3, 0.0f, pb, T);
      for (int t = t0; t < nk; t++) {
        float *row = p + (size_t)t * T;
        float mx = vmax(row, t + 1);
        float inv = 1.0f / vexp_shift(row, t + 1, mx);
        for (int t2 = 0; t2 <= t; t2++)
          row[t2] *= inv;
        memset(row + t + 1, 0, (T - t - 1) * sizeof(float));
      }
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, tb, hs, nk, 1.0f,
                  pb, T, v, C3, 0.0f, y + (size_t)t0 * C, C);
    }
  }
}

void pll_attention_forward(float *out /*(B,T,C)*/, float *att /*(B,NH,T,T)*/,
                           const float *qkv /*(B,T,3C)*/, int B, int T, int C,
                           int NH) {
  layer_args g = {
      .out = out, .out2 = att, .in = qkv, .B = B, .T = T, .C = C, .NH = NH};
  attention_parallel(attention_forward_rows, &g);
}

/* dP = dY V^T; dV = P^T dY; dS = P * (dP - rowsum(P * dP));
 * dQ = dS K / sqrt(hs); dK = dS^T Q / sqrt(hs). dqkv is overwritten. Per
 * query block: dP, dS and dQ over its keys; then per key block [s0, s0+sb):
 * dV and dK from the rows t >= s0 (P and dS are 0 above the diagonal). */
static void attention_backward_rows(void *ctx, size_t begin, size_t end,
                                    int slot) {
  const layer_args *g = ctx;
  int T = g->T, C = g->C, NH = g->NH, hs = C / NH, C3 = 3 * C;
  float scale = 1.0f / sqrtf((float)hs);
  float *dp = g->dw + slot * g->dw_stride; /* this thread's (T,T) */
  for (size_t bh = begin; bh < end; bh++) {
    size_t b = bh / NH, h = bh % NH;
    size_t off = b * T * C3 + h * hs;
    const float *q = g->in + off, *k = q + C, *v = q + 2 * C;
    float *dq = g->out + off, *dk = dq + C, *dv = dq + 2 * C;
    const float *p = g->w + bh * T * T;
    const float *dy = g->in2 + b * T * C + h * hs;
    for (int t0 = 0; t0 < T; t0 += ATT_BLOCK) {
      int tb = T - t0 < ATT_BLOCK ? T - t0 : ATT_BLOCK, nk = t0 + tb;
      float *db = dp + (size_t)t0 * T;
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, tb, nk, hs, 1.0f,
                  dy + (size_t)t0 * C, C, v, C3, 0.0f, db, T);
      for (int t = t0; t < nk; t++) {
        const float *pr = p + (size_t)t * T;
        float *dr = dp + (size_t)t * T, dot = 0.0f;
        for (int t2 = 0; t2 <= t; t2++)
          dot += pr[t2] * dr[t2];
        for (int t2 = 0; t2 <= t; t2++)
          dr[t2] = pr[t2] * (dr[t2] - dot);
        for (int t2 = t + 1; t2 < nk; t2++)
          dr[t2] = 0.0f;
      }
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, tb, hs, nk, scale,
                  db, T, k, C3, 0.0f, dq + (size_t)t0 * C3, C3);
    }
    for (int s0 = 0; s0 < T; s0 += ATT_BLOCK) {
      int sb = T - s0 < ATT_BLOCK ? T - s0 : ATT_BLOCK, rows = T - s0;
      size_t at = (size_t)s0 * T + s0;
      cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, sb, hs, rows, 1.0f,
                  p + at, T, dy + (size_t)s0 * C, C, 0.0f, dv + (size_t)s0 * C3,
                  C3);
      cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, sb, hs, rows, scale,
                  dp + at, T, q + (size_t)s0 * C3, C3, 0.0f,
                  dk + (size_t)s0 * C3, C3);
    }
  }
}

/* dp: (PL_POOL_MAX,T,T) scratch */
void pll_attention_backward(float *dqkv /*(B,T,3C)*/, float *dp,
                            const float *dout /*(B,T,C)*/,
                            const float *qkv /*(B,T,3C)*/,
                            const float *att /*(B,NH,T,T)*/, int B, int T,
                            int C, int NH) {
  layer_args g = {.out = dqkv,
                  .dw = dp,
                  .in = qkv,
                  .in2 = dout,
                  .w = att,
                  .B = B,
                  .T = T,
                  .C = C,
                  .NH = NH,
                  .dw_stride = (size_t)T * T};
  attention_parallel(attention_backward_rows, &g);
}

/* silu(g) u over 4 lanes */
static inline v4f swiglu4(v4f g, v4f u) {
  return g / (v4f_one() + vexp4(-g)) * u;
}

/* out = silu(gate) * up, gate = h13[n, 0:F], up = h13[n, F:2F] */
static void swiglu_forward_rows(void *ctx, size_t begin, size_t end, int slot) {
  const layer_args *a = ctx;
  int F = a->C;
  (void)slot;
  for (size_t n = begin; n < end; n++) {
    const float *g = a->in + n * 2 * F, *u = g + F;
    float *o = a->out + n * F;
    int i = 0;
    for (; i + 4 <= F; i += 4)
      v4_store(o + i, swiglu4(v4_load(g + i), v4_load(u + i)));
    if (i < F) { /* the tail through the same lanes */
      float gb[4] = {0}, ub[4] = {0}, ob[4];
      memcpy(gb, g + i, (F - i) * sizeof(float));
      memcpy(ub, u + i, (F - i) * sizeof(float));
      v4_store(ob, swiglu4(v4_load(gb), v4_load(ub)));
      memcpy(o + i, ob, (F - i) * sizeof(float));
    }
  }
}

void pll_swiglu_forward(float *out /*(N,F)*/, const float *h13 /*(N,2F)*/,
                        size_t N, int F) {
  layer_args g = {.out = out, .in = h13, .C = F};
  pl_parallel_for(swiglu_forward_rows, &g, N, 16);
}

/* silu'(g) = sig(g) (1 + g (1 - sig(g))): dg and du of 4 lanes */
static inline void swiglu_back4(v4f g, v4f u, v4f d, v4f *dg, v4f *du) {
  v4f one = v4f_one(), sig = one / (one + vexp4(-g));
  *du = d * g * sig;
  *dg = d * u * sig * (one + g * (one - sig));
}

/* dh13 is overwritten */
static void swiglu_backward_rows(void *ctx, size_t begin, size_t end,
                                 int slot) {
  const layer_args *a = ctx;
  int F = a->C;
  (void)slot;
  for (size_t n = begin; n < end; n++) {
    const float *g = a->in + n * 2 * F, *u = g + F, *d = a->in2 + n * F;
    float *dg = a->out + n * 2 * F, *du = dg + F;
    int i = 0;
    v4f vg, vu;
    for (; i + 4 <= F; i += 4) {
      swiglu_back4(v4_load(g + i), v4_load(u + i), v4_load(d + i), &vg, &vu);
      v4_store(dg + i, vg);
      v4_store(du + i, vu);
    }
    if (i < F) {
      float gb[4] = {0}, ub[4] = {0}, db[4] = {0}, dgb[4], dub[4];
      size_t w = (F - i) * sizeof(float);
      memcpy(gb, g + i, w);
      memcpy(ub, u + i, w);
      memcpy(db, d + i, w);
      swiglu_back4(v4_load(gb), v4_load(ub), v4_load(db), &vg, &vu);
      v4_store(dgb, vg);
      v4_store(dub, vu);
      memcpy(dg + i, dgb, w);
      memcpy(du + i, dub, w);
    }
  }
}

void pll_swiglu_backward(float *dh13 /*(N,2F)*/, const float *dout /*(N,F)*/,
                         const float *h13 /*(N,2F)*/, size_t N, int F) {
  layer_args g = {.out = dh13, .in = h13, .in2 = dout, .C = F};
  pl_parallel_for(swiglu_backward_rows, &g, N, 16);
}

/* out = a + b; rows are elements */
static void residual_rows(void *ctx, size_t begin, size_t end, int slot) {
  const layer_args *g = ctx;
  (void)slot;
  for (size_t i = begin; i < end; i++)
    g->out[i] = g->in[i] + g->in2[i];
}

void pll_residual_forward(float *out, const float *a, const float *b,
                          size_t n) {
  layer_args g = {.out = out, .in = a, .in2 = b};
  pl_parallel_for(residual_rows, &g, n, 4096);
}

/* lse[bt] = log sum exp(logits[bt,:]); losses[bt] = lse - logits[target]
 * (0 where target == -1). scratch (PL_POOL_MAX, V): each thread's exps. */
static void crossentropy_forward_rows(void *ctx, size_t begin, size_t end,
                                      int slot) {
  const layer_args *g = ctx;
  int V = g->V;
  float *e = g->dw + slot * g->dw_stride;
  for (size_t bt = begin; bt < end; bt++) {
    const float *z = g->in + bt * V;
    float mx = vmax(z, V);
    memcpy(e, z, V * sizeof(float));
    float lse = mx + logf(vexp_shift(e, V, mx));
    g->out2[bt] = lse;
    int32_t tg = g->tokens ? g->tokens[bt] : -1;
    g->out[bt] = tg >= 0 ? lse - z[tg] : 0.0f;
  }
}

/* Returns the sum of losses (in row order); *count the positions. */
double pll_crossentropy_forward(float *losses /*(BT)*/, float *lse /*(BT)*/,
                                const float *logits /*(BT,V)*/,
                                const int32_t *targets /*(BT) or NULL*/,
                                float *scratch, size_t BT, int V,
                                size_t *count) {
  layer_args g = {.out = losses,
                  .out2 = lse,
                  .in = logits,
                  .dw = scratch,
                  .tokens = targets,
                  .V = V,
                  .dw_stride = (size_t)V};
  pl_parallel_for(crossentropy_forward_rows, &g, BT, 16);
  double total = 0.0;
  *count = 0;
  for (size_t bt = 0; bt < BT; bt++)
    if (targets && targets[bt] >= 0) {
      total += losses[bt];
      (*count)++;
    }
  return total;
}

/* dlogits[bt,:] = (softmax(logits[bt,:]) - onehot(target)) * dloss[bt], and
 * 0 where target == -1. */
static void crossentropy_backward_rows(void *ctx, size_t begin, size_t end,
                                       int slot) {
  const layer_args *g = ctx;
  int V = g->V;
  (void)slot;
  for (size_t bt = begin; bt < end; bt++) {
    float *d = g->out + bt * V;
    float dl = g->in2[bt];
    int32_t tg = g->tokens[bt];
    if (tg < 0 || dl == 0.0f) {
      memset(d, 0, V * sizeof(float));
      continue;
    }
    memcpy(d, g->in + bt * V, V * sizeof(float));
    vexp_shift(d, V, g->rstd[bt]);
    for (int i = 0; i < V; i++)
      d[i] *= dl;
    d[tg] -= dl;
  }
}

void pll_crossentropy_softmax_backward(float *dlogits /*(BT,V)*/,
                                       const float *dloss /*(BT)*/,
                                       const float *logits /*(BT,V)*/,
                                       const float *lse /*(BT)*/,
                                       const int32_t *targets /*(BT)*/,
                                       size_t BT, int V) {
  layer_args g = {.out = dlogits,
                  .in = logits,
                  .in2 = dloss,
                  .rstd = lse,
                  .tokens = targets,
                  .V = V};
  pl_parallel_for(crossentropy_backward_rows, &g, BT, 16);
}
