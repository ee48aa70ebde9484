/*
 * policy/tokenizer_internal.h — what policy/tokenizer.c (format, encode,
 * decode) and policy/tokenizer_train.c (BPE training) share. Not part of
 * the module's API (that is policy/policy.h); prefix pltok_.
 */
#ifndef POLICY_TOKENIZER_INTERNAL_H
#define POLICY_TOKENIZER_INTERNAL_H

#include "policy/policy.h"

#include <stddef.h>
#include <stdint.h>

/* Pair hashing, shared by training and the rank table. */

#define PAIR_EMPTY UINT64_MAX

static inline uint64_t pair_key(uint32_t a, uint32_t b) {
  return (uint64_t)a << 32 | b;
}

static inline size_t pair_slot(uint64_t key, size_t cap) {
  uint64_t h = key * 0x9e3779b97f4a7c15ull; /* Fibonacci hashing */
  return (size_t)(h ^ (h >> 29)) & (cap - 1);
}

/* Writes a formatted message into why (why_len bytes); returns code. */
int pltok_fail(char *why, size_t why_len, int code, const char *fmt, ...);

/* The end (exclusive) of the pre-split chunk of s[0..n) that starts at
 * i < n (rules: file comment of policy/tokenizer.c). */
size_t pltok_chunk_end(const uint8_t *s, size_t n, size_t i);

/* Builds a tokenizer from n merges (uint32 pairs; ownership of merges
 * passes to it, also on failure), checking their consistency; name starts
 * the messages. */
int pltok_build(pl_tokenizer **out, uint32_t *merges, int n, const char *name,
                char *why, size_t why_len);

#endif
