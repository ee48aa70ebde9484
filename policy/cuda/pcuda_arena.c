/*
 * policy/cuda/pcuda_arena.c — the device memory arena behind pcuda_alloc
 * and pcuda_free: the backend's allocator (cuMemAlloc, or the emulator's
 * host memory) is asked for large chunks, and the buffers of the model,
 * the optimiser, the KV cache, the sampler and the scratches are carved
 * out of them.
 *
 * Why: cuMemAlloc is a driver call and cuMemFree waits for the device,
 * and the policy allocates as it goes: every pcuda_generate (one per GRPO
 * group) takes and frees its KV cache, scratch and sampler; the
 * activations grow when a longer batch arrives, the KV scratch with the
 * rows fed, the bf16 and candidate-matmul scratches with the widest GEMM.
 * Through the arena each of these is a walk over a short host-side list
 * once the chunks are there: after the first steps, training and
 * generation make no backend allocation at all
 * (tests/unit/test_policy_cuda_arena.c counts them; bench_policy_cuda
 * times repeated generations against PCUDA_ARENA=off, on a device).
 *
 * How:
 *   - Chunks of at least chunk_min bytes (64 MiB on a device, 1 MiB on the
 *     emulator so that tests share chunks between buffers); a larger
 *     request gets a chunk of its own size.
 *   - Inside a chunk, blocks in address order, each used or free; an
 *     allocation takes the smallest free block that fits (best fit) and
 *     splits off the rest; a free merges with free neighbours.
 *   - Every block starts 256 bytes aligned, as cuMemAlloc's pointers do, so
 *     vector loads behave on both backends alike.
 *   - When no free block fits, chunks that hold no buffer go back to the
 *     backend first (after waiting for the backend, since a kernel still in
 *     flight may be reading what was freed a moment ago), then a new chunk
 *     is taken. So memory held is bounded by the peak a fragmentation-free
 *     allocator would hold, plus the free space of chunks still in use.
 *   - Reuse is safe without events because one stream carries every kernel
 *     and copy of a context (pcuda_device.c): a buffer freed and handed out
 *     again is written only by work queued after the work that read it.
 *   - On the emulator (ops->poison set) each block is followed by a 256-byte
 *     red zone and everything not handed out is poisoned for AddressSanitizer,
 *     down to the byte past the size asked for, so a kernel that overruns its
 *     buffer still trips ASan as it did with one host allocation per buffer.
 *     A buffer handed out there is filled with 0xff bytes (a NaN in every
 *     float, -1 in every int): a device's fresh memory holds whatever was
 *     there before, so a kernel that reads what nothing wrote must fail the
 *     emulator's tests too, not read the zeros or old values of reuse.
 *   - PCUDA_ARENA=off in the environment makes every pcuda_alloc a backend
 *     allocation and every pcuda_free a backend free (for compute-sanitizer,
 *     whose memcheck sees backend allocations only).
 *
 * A context is used by one thread at a time (as the rest of pcuda_ctx), so
 * the arena takes no lock. Host-side bookkeeping is one malloc'd node per
 * block; buffers number in the tens.
 */
#include "policy/cuda/pcuda_internal.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define ALIGN 256u

/* One buffer or free range of a chunk. */
struct pcuda_block {
  uintptr_t addr;
  size_t size;  /* bytes, a multiple of ALIGN, red zone included */
  size_t asked; /* bytes the caller asked for, >= 1; 0: the block is free */
  pcuda_block *next; /* the next block of the same chunk, by address */
};

/* n rounded up to a multiple of to. */
static size_t round_up(size_t n, size_t to) {
  return (n + to - 1) / to * to;
}

void pcuda_arena_init(pcuda_arena *a, size_t chunk_min, size_t redzone) {
  memset(a, 0, sizeof *a);
  const char *env = getenv("PCUDA_ARENA");
  a->passthrough = env && (!strcmp(env, "off") || !strcmp(env, "0"));
  a->chunk_min = chunk_min;
  a->redzone = round_up(redzone, ALIGN);
  a->stats.arena = !a->passthrough;
}

/* (Un)poisons [addr, addr + bytes) for ASan where the backend can (the
 * emulator's host memory); nothing on a device. */
static void poison(pcuda_ctx *ctx, uintptr_t addr, size_t bytes, int on) {
  if (ctx->ops->poison && bytes) ctx->ops->poison((void *)addr, bytes, on);
}

/* Returns chunk i to the backend and drops it from the array. */
static void release_chunk(pcuda_ctx *ctx, int i) {
  pcuda_arena *a = &ctx->arena;
  pcuda_chunk *c = &a->chunks[i];
  poison(ctx, (uintptr_t)c->base, c->size, 0);
  ctx->ops->free(ctx, c->base);
  a->stats.backend_frees++;
  a->stats.reserved -= c->size;
  while (c->blocks) {
    pcuda_block *next = c->blocks->next;
    free(c->blocks);
    c->blocks = next;
  }
  a->chunks[i] = a->chunks[--a->n_chunks];
}

/* Releases every chunk with no buffer in it, after waiting for the
 * backend (a kernel in flight may still read a buffer freed just now).
 * Returns how many went back. */
static int release_empty_chunks(pcuda_ctx *ctx) {
  pcuda_arena *a = &ctx->arena;
  int empty = 0, released = 0;
  for (int i = 0; i < a->n_chunks; i++)
    empty += !a->chunks[i].blocks->asked && !a->chunks[i].blocks->next;
  if (!empty) return 0;
  if (ctx->ops->sync(ctx) != 0) {
    ctx->failed = 1;
    return 0;
  }
  for (int i = a->n_chunks - 1; i >= 0; i--)
    if (!a->chunks[i].blocks->asked && !a->chunks[i].blocks->next) {
      release_chunk(ctx, i);
      released++;
    }
  return released;
}

/* Takes a chunk of at least need bytes from the backend; its one block is
 * free. 0, or -1 with the failure recorded. */
static int add_chunk(pcuda_ctx *ctx, size_t need) {
  pcuda_arena *a = &ctx->arena;
  size_t size = need;
  if (!a->passthrough && size < a->chunk_min) size = a->chunk_min;
  if (a->n_chunks == a->cap_chunks) {
    int cap = a->cap_chunks ? 2 * a->cap_chunks : 8;
    pcuda_chunk *grown = realloc(a->chunks, (size_t)cap * sizeof *grown);
    if (!grown) {
      pcuda_fail(ctx, "arena: out of host memory for the chunk table");
      return -1;
    }
    a->chunks = grown;
    a->cap_chunks = cap;
  }
  pcuda_block *b = calloc(1, sizeof *b);
  if (!b) {
    pcuda_fail(ctx, "arena: out of host memory for a block");
    return -1;
  }
  void *base = NULL;
  if (ctx->ops->alloc(ctx, &base, size) != 0) { /* ops filled ctx->why */
    free(b);
    ctx->failed = 1;
    return -1;
  }
  a->stats.backend_allocs++;
  a->stats.reserved += size;
  b->addr = (uintptr_t)base;
  b->size = size;
  a->chunks[a->n_chunks++] = (pcuda_chunk){base, size, b};
  poison(ctx, b->addr, size, 1);
  return 0;
}

/* The smallest free block of at least need bytes, or NULL. */
static pcuda_block *best_fit(pcuda_arena *a, size_t need) {
  pcuda_block *best = NULL;
  for (int i = 0; i < a->n_chunks; i++)
    for (pcuda_block *b = a->chunks[i].blocks; b; b = b->next)
      if (!b->asked && b->size >= need && (!best || b->size < best->size))
        best = b;
  return best;
}

void *pcuda_arena_alloc(pcuda_ctx *ctx, size_t bytes) {
  pcuda_arena *a = &ctx->arena;
  size_t need = round_up(bytes, ALIGN) + a->redzone;
  pcuda_block *b = best_fit(a, need);
  if (!b) {
    if (!a->passthrough) release_empty_chunks(ctx);
    if (ctx->failed || add_chunk(ctx, need) != 0) return NULL;
    b = a->chunks[a->n_chunks - 1].blocks;
  }
  if (b->size - need >= ALIGN) { /* split: the rest stays free */
    pcuda_block *rest = calloc(1, sizeof *rest);
    if (!rest) {
      pcuda_fail(ctx, "arena: out of host memory for a block");
      return NULL;
    }
    rest->addr = b->addr + need;
    rest->size = b->size - need;
    rest->next = b->next;
    b->next = rest;
    b->size = need;
  }
  b->asked = bytes; /* pcuda_alloc passes at least 1 */
  poison(ctx, b->addr, bytes, 0);
  if (ctx->ops->poison) /* the emulator: see the header comment */
    memset((void *)b->addr, 0xff, bytes);
  a->stats.allocs++;
  a->stats.in_use += b->size;
  if (a->stats.in_use > a->stats.peak) a->stats.peak = a->stats.in_use;
  return (void *)b->addr;
}

void pcuda_arena_free(pcuda_ctx *ctx, void *dev) {
  pcuda_arena *a = &ctx->arena;
  uintptr_t p = (uintptr_t)dev;
  for (int i = 0; i < a->n_chunks; i++) {
    pcuda_chunk *c = &a->chunks[i];
    if (p < (uintptr_t)c->base || p >= (uintptr_t)c->base + c->size) continue;
    pcuda_block *prev = NULL, *b = c->blocks;
    while (b && b->addr != p) {
      prev = b;
      b = b->next;
    }
    if (!b || !b->asked) {
      pcuda_fail(ctx,
                 "arena: pcuda_free of %p, which is not a live buffer "
                 "(expected a pointer pcuda_alloc returned, not yet freed)",
                 dev);
      return;
    }
    a->stats.in_use -= b->size;
    poison(ctx, b->addr, b->asked, 1);
    b->asked = 0;
    pcuda_block *n = b->next;
    if (n && !n->asked) { /* merge the next block into b */
      b->size += n->size;
      b->next = n->next;
      free(n);
    }
    if (prev && !prev->asked) { /* merge b into the previous block */
      prev->size += b->size;
      prev->next = b->next;
      free(b);
    }
    if (a->passthrough && !c->blocks->asked && !c->blocks->next) {
      if (ctx->ops->sync(ctx) != 0) /* work in flight may still read it */
        ctx->failed = 1;
      else
        release_chunk(ctx, i);
    }
    return;
  }
  pcuda_fail(ctx,
             "arena: pcuda_free of %p, which no chunk holds (expected a "
             "pointer pcuda_alloc returned on this context)",
             dev);
}

void pcuda_arena_release(pcuda_ctx *ctx) {
  pcuda_arena *a = &ctx->arena;
  while (a->n_chunks)
    release_chunk(ctx, a->n_chunks - 1);
  free(a->chunks);
  a->chunks = NULL;
  a->cap_chunks = 0;
  a->stats.in_use = 0;
}

void pcuda_mem_stats_get(const pcuda_ctx *ctx, pcuda_mem_stats *out) {
  *out = ctx->arena.stats;
  out->chunks = ctx->arena.n_chunks;
}
