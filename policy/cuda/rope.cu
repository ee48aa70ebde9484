/*
 * policy/cuda/rope.cu — rotary position embedding, mirroring rope_apply of
 * policy/model.c: q and k of every head rotate in place, the INTERLEAVED
 * pair (x[2i], x[2i+1]) of the head dimension by angle(t, i), read from the
 * model's tables (computed once on the host, in double, by pl_model_init's
 * formula). dir = +1 is the forward rotation, -1 its transpose (the
 * backward). v is untouched. Token t of a row sits at position pos0 + t:
 * 0 for the training forward, the cache's next free position for
 * generation's cached forward (policy/generate.c's rope_row).
 */
#include "policy/cuda/common.cuh"

/* One thread per rotated pair: B*T * 2 parts (q, k) * NH heads * hs/2
 * pairs = B*T*C threads. */
extern "C" __global__ void
rope_apply_kernel(float *qkv /*(B,T,3C)*/, const float *cos_t,
                  const float *sin_t /*(max_seq,hs/2)*/, int B, int T, int C,
                  int NH, int pos0, float dir) {
  int hs = C / NH, half = hs / 2;
  size_t idx = global_index();
  if (idx >= (size_t)B * T * C) return;
  /* idx = ((bt * 2 + part) * NH + h) * half + i */
  int i = (int)(idx % half);
  size_t r = idx / half;
  int h = (int)(r % NH);
  r /= NH;
  int part = (int)(r % 2); /* 0: q, 1: k */
  size_t bt = r / 2;
  int t = pos0 + (int)(bt % T);
  float *x = qkv + bt * 3 * C + part * C + h * hs;
  float c = cos_t[(size_t)t * half + i], s = dir * sin_t[(size_t)t * half + i];
  float x0 = x[2 * i], x1 = x[2 * i + 1];
  x[2 * i] = x0 * c - x1 * s;
  x[2 * i + 1] = x0 * s + x1 * c;
}
