/*
 * kernels/sha256.c — SHA-256 (FIPS 180-4) for cache keys and artifact names.
 *
 * A plain, portable implementation: streaming init/update/final plus a
 * one-shot hex helper. It is used to name cache entries and to check that a
 * cached payload was not truncated or corrupted; it is not meant for
 * secrets, so it makes no attempt at constant-time behaviour or at wiping
 * its state, and it has no SIMD or SHA-NI fast path.
 */
#include "kernels/kernels.h"

#include <string.h>

/* First 32 bits of the fractional parts of the cube roots of the first 64
 * primes (FIPS 180-4 section 4.2.2). */
static const uint32_t kl_sha256_k[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1,
    0x923f82a4, 0xab1c5ed5, 0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3,
    0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786,
    0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147,
    0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13,
    0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b,
    0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a,
    0x5b9cca4f, 0x682e6ff3, 0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208,
    0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};

static uint32_t kl_rotr(uint32_t x, int n) {
  return (x >> n) | (x << (32 - n));
}

/* Processes one 64-byte block (section 6.2.2): message schedule W[0..63],
 * then 64 rounds over the working variables a..h. */
static void kl_sha256_block(uint32_t state[8], const uint8_t block[64]) {
  uint32_t w[64];
  for (int t = 0; t < 16; t++)
    w[t] = (uint32_t)block[4 * t] << 24 | (uint32_t)block[4 * t + 1] << 16 |
           (uint32_t)block[4 * t + 2] << 8 | (uint32_t)block[4 * t + 3];
  for (int t = 16; t < 64; t++) {
    uint32_t s0 =
        kl_rotr(w[t - 15], 7) ^ kl_rotr(w[t - 15], 18) ^ (w[t - 15] >> 3);
    uint32_t s1 =
        kl_rotr(w[t - 2], 17) ^ kl_rotr(w[t - 2], 19) ^ (w[t - 2] >> 10);
    w[t] = w[t - 16] + s0 + w[t - 7] + s1;
  }
  uint32_t a = state[0], b = state[1], c = state[2], d = state[3];
  uint32_t e = state[4], f = state[5], g = state[6], h = state[7];
  for (int t = 0; t < 64; t++) {
    uint32_t S1 = kl_rotr(e, 6) ^ kl_rotr(e, 11) ^ kl_rotr(e, 25);
    uint32_t ch = (e & f) ^ (~e & g);
    uint32_t t1 = h + S1 + ch + kl_sha256_k[t] + w[t];
    uint32_t S0 = kl_rotr(a, 2) ^ kl_rotr(a, 13) ^ kl_rotr(a, 22);
    uint32_t maj = (a & b) ^ (a & c) ^ (b & c);
    uint32_t t2 = S0 + maj;
    h = g;
    g = f;
    f = e;
    e = d + t1;
    d = c;
    c = b;
    b = a;
    a = t1 + t2;
  }
  state[0] += a;
  state[1] += b;
  state[2] += c;
  state[3] += d;
  state[4] += e;
  state[5] += f;
  state[6] += g;
  state[7] += h;
}

/* Starts a digest with the initial hash value of section 5.3.3. */
void kl_sha256_init(kl_sha256_ctx *ctx) {
  static const uint32_t h0[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372,
                                 0xa54ff53a, 0x510e527f, 0x9b05688c,
                                 0x1f83d9ab, 0x5be0cd19};
  memcpy(ctx->state, h0, sizeof h0);
  ctx->bytes = 0;
  ctx->fill = 0;
}

/* Adds len bytes of data. Any chunking gives the same digest: partial
 * blocks wait in ctx->block until 64 bytes have arrived. */
void kl_sha256_update(kl_sha256_ctx *ctx, const void *data, size_t len) {
  const uint8_t *p = data;
  ctx->bytes += len;
  if (ctx->fill > 0) {
    size_t take = 64 - ctx->fill;
    if (take > len) take = len;
    memcpy(ctx->block + ctx->fill, p, take);
    ctx->fill += take;
    p += take;
    len -= take;
    if (ctx->fill < 64) return;
    kl_sha256_block(ctx->state, ctx->block);
    ctx->fill = 0;
  }
  for (; len >= 64; p += 64, len -= 64)
    kl_sha256_block(ctx->state, p);
  memcpy(ctx->block, p, len);
  ctx->fill = len;
}

/* Pads (section 5.1.1: a 1 bit, zeros, the 64-bit big-endian bit length) and
 * writes the 32-byte big-endian digest. The context is spent afterwards. */
void kl_sha256_final(kl_sha256_ctx *ctx, uint8_t out[32]) {
  uint64_t bits = ctx->bytes * 8;
  uint8_t pad[72] = {0x80};
  /* Pad so that fill + padlen == 56 (mod 64), then 8 length bytes. */
  size_t padlen = (ctx->fill < 56) ? 56 - ctx->fill : 120 - ctx->fill;
  for (int i = 0; i < 8; i++)
    pad[padlen + i] = (uint8_t)(bits >> (56 - 8 * i));
  uint64_t keep = ctx->bytes;
  kl_sha256_update(ctx, pad, padlen + 8);
  ctx->bytes = keep;
  for (int i = 0; i < 8; i++) {
    out[4 * i] = (uint8_t)(ctx->state[i] >> 24);
    out[4 * i + 1] = (uint8_t)(ctx->state[i] >> 16);
    out[4 * i + 2] = (uint8_t)(ctx->state[i] >> 8);
    out[4 * i + 3] = (uint8_t)ctx->state[i];
  }
}

/* One-shot digest of data as 64 lowercase hex characters plus NUL. */
void kl_sha256_hex(const void *data, size_t len, char out[65]) {
  static const char hex[] = "0123456789abcdef";
  kl_sha256_ctx ctx;
  uint8_t d[32];
  kl_sha256_init(&ctx);
  kl_sha256_update(&ctx, data, len);
  kl_sha256_final(&ctx, d);
  for (int i = 0; i < 32; i++) {
    out[2 * i] = hex[d[i] >> 4];
    out[2 * i + 1] = hex[d[i] & 15];
  }
  out[64] = '\0';
}
