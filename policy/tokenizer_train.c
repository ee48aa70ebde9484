/*
 * policy/tokenizer_train.c — BPE training for the policy's tokenizer (the
 * rest, and the rules, are in policy/tokenizer.c).
 *
 * The corpus is cut into pre-split chunks; the distinct chunks are counted
 * ("words", with frequencies). Then, until the vocabulary is full or no pair
 * occurs twice: take the most frequent adjacent pair (ties: the lowest
 * (left, right) ids), append it as the next merge, and rewrite every word
 * holding it, left to right, without overlaps. A step costs the words it
 * rewrites, not the corpus.
 *
 * What keeps that small: merge `id` glues a and b where they touch, so
 * every adjacency it creates holds `id` itself, the newest symbol. Hence
 * all occurrences of a pair (u, v) are made in one step (the one that made
 * max(u, v), or the start for two bytes), and from then on its count only
 * goes down. So a pair that counts less than 2 when it is made can never be
 * merged and is not stored at all (most pairs, on varied text), and a
 * stored pair leaves as soon as it drops below 2. A stored pair's word list
 * is complete and free of duplicates from the step that made it and is
 * never appended to; it only goes stale (words that lost the pair, skipped
 * when it is merged). Lists are delta-coded (see list_decode). The stored
 * pairs are a max-heap with exact counts, so heap[0] is the next merge.
 *
 * Memory, for N corpus bytes, S of them in distinct chunks (W chunks): the
 * symbols 2 S (uint16_t, ids < 65536); per distinct chunk 17 bytes (and a
 * 4-byte index slot at load <= 1/2 while counting); word lists 1-2 bytes
 * per (pair, word) incidence, about S of them at the start and fewer after;
 * per stored pair 24 bytes of heap and 5-11 of table. Stored pairs are at
 * most N / 2 (each counts >= 2 of the N - 1 adjacencies), in practice
 * 0.05 N (random bytes) to 0.16 N (every chunk twice: all pairs stored).
 * Measured peak of training alone, /usr/bin/time -v: 7.2-7.5 N on 16 and
 * 64 MiB of random bytes, a 40 MB single line of base64, and 16 MB random
 * with every chunk twice. All of `kernlab tokenizer train` (its copy of the
 * corpus, its encoding pass): 8.5-9.5 N, against 66-134 N before this
 * design (per-pair word lists appended to on every rewrite, never pruned,
 * each at least 64 entries; every pair ever seen kept with its list; a lazy
 * heap of every count change). Time fell 4-10x on those inputs.
 */
#include "policy/policy.h"
#include "policy/tokenizer_internal.h"

#include <stdlib.h>
#include <string.h>

enum { TOK_N_SPECIAL = PL_TOK_FIRST_MERGE - 256 };

_Static_assert(PL_TOK_MAX_VOCAB <= 65536, "a symbol is a uint16_t");
_Static_assert(PL_TOK_MAX_CHUNK <= 255, "a word's length is a uint8_t");

/* Grows *buf (elements of size sz) to hold at least need; -1 no memory. */
static int grow(void *buf, size_t *cap, size_t need, size_t sz) {
  if (need <= *cap) return 0;
  size_t c = *cap ? *cap : 64;
  while (c < need)
    c *= 2;
  void *nb = realloc(*(void **)buf, c * sz);
  if (!nb) return -1;
  *(void **)buf = nb;
  *cap = c;
  return 0;
}

/* ---- words: the distinct chunks ---- */

/* The distinct chunks of the corpus: each a run of symbols in one arena,
 * with how often it occurs. */
typedef struct {
  uint16_t *sym; /* all words' symbols, word w at sym[start[w]..] */
  size_t *start; /* (n) */
  uint8_t *len;  /* (n): current length in symbols (shrinks as merges go) */
  int64_t *freq; /* (n) */
  size_t n, cap, n_sym, cap_sym;
  uint32_t *slot; /* while counting: hash of bytes -> word + 1 (0: empty) */
  size_t slot_cap;
} words;

static uint64_t fnv1a(const uint8_t *s, size_t n) {
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < n; i++)
    h = (h ^ s[i]) * 1099511628211ull;
  return h;
}

static int words_same(const words *w, size_t i, const uint8_t *s, size_t n) {
  if (w->len[i] != n) return 0;
  const uint16_t *x = w->sym + w->start[i];
  for (size_t k = 0; k < n; k++)
    if (x[k] != s[k]) return 0;
  return 1;
}

static int words_grow_slots(words *w) {
  size_t cap = w->slot_cap ? w->slot_cap * 2 : 1024;
  uint32_t *slot = calloc(cap, sizeof *slot);
  if (!slot) return -1;
  for (size_t i = 0; i < w->n; i++) {
    const uint16_t *x = w->sym + w->start[i];
    uint8_t b[PL_TOK_MAX_CHUNK];
    for (uint32_t k = 0; k < w->len[i]; k++)
      b[k] = (uint8_t)x[k];
    size_t s = fnv1a(b, w->len[i]) & (cap - 1);
    while (slot[s])
      s = (s + 1) & (cap - 1);
    slot[s] = (uint32_t)i + 1;
  }
  free(w->slot);
  w->slot = slot;
  w->slot_cap = cap;
  return 0;
}

/* Counts one chunk (n <= PL_TOK_MAX_CHUNK bytes, so symbols are bytes).
 * Returns -1 out of memory (or past 2^32 - 2 distinct chunks: word lists
 * hold uint32_t). */
static int words_add(words *w, const uint8_t *s, size_t n) {
  if (w->n * 2 >= w->slot_cap && words_grow_slots(w)) return -1;
  size_t h = fnv1a(s, n) & (w->slot_cap - 1);
  while (w->slot[h]) {
    if (words_same(w, w->slot[h] - 1, s, n)) {
      w->freq[w->slot[h] - 1]++;
      return 0;
    }
    h = (h + 1) & (w->slot_cap - 1);
  }
  if (w->n >= UINT32_MAX - 1) return -1;
  if (w->n == w->cap) {
    size_t cap = w->cap ? w->cap * 2 : 1024;
    size_t *st = realloc(w->start, cap * sizeof *st);
    if (st) w->start = st;
    uint8_t *ln = realloc(w->len, cap * sizeof *ln);
    if (ln) w->len = ln;
    int64_t *fr = realloc(w->freq, cap * sizeof *fr);
    if (fr) w->freq = fr;
    if (!st || !ln || !fr) return -1;
    w->cap = cap;
  }
  if (grow(&w->sym, &w->cap_sym, w->n_sym + n, sizeof *w->sym)) return -1;
  for (size_t k = 0; k < n; k++)
    w->sym[w->n_sym + k] = s[k];
  w->start[w->n] = w->n_sym;
  w->len[w->n] = (uint8_t)n;
  w->freq[w->n] = 1;
  w->n_sym += n;
  w->slot[h] = (uint32_t)++w->n;
  return 0;
}

static void words_free(words *w) {
  free(w->sym);
  free(w->start);
  free(w->len);
  free(w->freq);
  free(w->slot);
}

/* ---- word lists: increasing word indices, delta-coded ---- */

/* A pair's word list is made once, in increasing word order (the words of
 * the start in order; a step's words in the order of the merged pair's
 * list), and read once, front to back, when the pair is merged. So it is
 * stored as LEB128 deltas between successive (word + 1)s: a byte or two a
 * word instead of four. The uint64_t that holds a list is 0 (empty); or,
 * bit 0 set, the list itself: byte count in bits 1..3, bytes 1..7 the data;
 * or a malloc'd block: uint64_t byte count, then the data. */

static size_t varint_len(uint32_t v) {
  size_t n = 1;
  for (; v >= 0x80; v >>= 7)
    n++;
  return n;
}

static uint8_t *varint_put(uint8_t *o, uint32_t v) {
  for (; v >= 0x80; v >>= 7)
    *o++ = (uint8_t)(v | 0x80);
  *o++ = (uint8_t)v;
  return o;
}

enum { LIST_INLINE_MAX = 7 };

static void list_free(uint64_t list) {
  if (!(list & 1)) free((void *)(uintptr_t)list);
}

/* Decodes a list into *out (grown as needed, *cap elements); sets *n.
 * -1 when out of memory. */
static int list_decode(uint64_t list, uint32_t **out, size_t *cap, size_t *n) {
  uint8_t inl[LIST_INLINE_MAX];
  const uint8_t *d = inl;
  uint64_t len = 0;
  if (list & 1) {
    len = (list >> 1) & 7;
    for (uint64_t k = 0; k < len; k++)
      inl[k] = (uint8_t)(list >> (8 * (k + 1)));
  } else if (list) {
    memcpy(&len, (const void *)(uintptr_t)list, sizeof len);
    d = (const uint8_t *)(uintptr_t)list + sizeof(uint64_t);
  }
  size_t count = 0;
  for (uint64_t k = 0; k < len; k++)
    count += d[k] < 0x80;
  if (grow(out, cap, count, sizeof **out)) return -1;
  uint32_t v = 0, shift = 0, prev = 0;
  *n = 0;
  for (uint64_t k = 0; k < len; k++) {
    v |= (uint32_t)(d[k] & 0x7f) << shift;
    shift += 7;
    if (d[k] < 0x80) {
      prev += v;
      (*out)[(*n)++] = prev - 1;
      v = shift = 0;
    }
  }
  return 0;
}

/* ---- stored pairs: those that can still be merged ---- */

/* A pair's key: left << 16 | right, so keys order as (left, right) do. */
static uint32_t key_of(uint32_t a, uint32_t b) {
  return a << 16 | b;
}

typedef struct {
  int64_t count; /* sum of the frequencies of its occurrences; >= 2 */
  uint32_t key;
  uint32_t slot; /* its slot in the table */
  uint64_t list; /* every word that held it when it was made (some may
                    have lost it since) */
} pair;

/* The stored pairs: a max-heap of records (higher count first, then the
 * lower key), so heap[0] is the next merge, and an open-addressing table
 * key -> heap position + 1 (linear probing, deletion by backward shift).
 * A record knows its table slot, so moving it in the heap costs no lookup.
 * Counts only go down: a changed record sinks, or leaves below 2. */
typedef struct {
  pair *heap;
  size_t n, heap_cap;
  uint32_t *slot; /* (cap): heap position + 1, 0 = empty */
  size_t cap;
  int shift; /* 64 - log2(cap): Fibonacci hashing keeps the top bits */
} pair_table;

static size_t home_of(const pair_table *p, uint32_t key) {
  return (size_t)(((uint64_t)key * 0x9e3779b97f4a7c15ull) >> p->shift);
}

static int pair_before(const pair *x, const pair *y) {
  return x->count > y->count || (x->count == y->count && x->key < y->key);
}

static void heap_put(pair_table *p, size_t i, pair e) {
  p->heap[i] = e;
  p->slot[e.slot] = (uint32_t)i + 1;
}

static void sift_up(pair_table *p, size_t i) {
  pair e = p->heap[i];
  for (; i && pair_before(&e, &p->heap[(i - 1) / 2]); i = (i - 1) / 2)
    heap_put(p, i, p->heap[(i - 1) / 2]);
  heap_put(p, i, e);
}

static void sift_down(pair_table *p, size_t i) {
  pair e = p->heap[i];
  for (;;) {
    size_t c = 2 * i + 1;
    if (c >= p->n) break;
    if (c + 1 < p->n && pair_before(&p->heap[c + 1], &p->heap[c])) c++;
    if (!pair_before(&p->heap[c], &e)) break;
    heap_put(p, i, p->heap[c]);
    i = c;
  }
  heap_put(p, i, e);
}

/* The heap position of the pair with this key, -1 when not stored. */
static int64_t pair_find(const pair_table *p, uint32_t key) {
  if (!p->n) return -1;
  for (size_t s = home_of(p, key); p->slot[s]; s = (s + 1) & (p->cap - 1))
    if (p->heap[p->slot[s] - 1].key == key) return p->slot[s] - 1;
  return -1;
}

/* Removes the pair at heap position i and frees its list. */
static void pair_remove(pair_table *p, size_t i) {
  size_t mask = p->cap - 1, hole = p->heap[i].slot;
  list_free(p->heap[i].list);
  /* Entries later in the probe run move back, so no lookup stops early. */
  for (size_t j = (hole + 1) & mask; p->slot[j]; j = (j + 1) & mask) {
    uint32_t v = p->slot[j];
    size_t home = home_of(p, p->heap[v - 1].key);
    if (((j - home) & mask) >= ((j - hole) & mask)) {
      p->slot[hole] = v;
      p->heap[v - 1].slot = (uint32_t)hole;
      hole = j;
    }
  }
  p->slot[hole] = 0;
  pair last = p->heap[--p->n];
  if (i == p->n) return;
  heap_put(p, i, last);
  if (i && pair_before(&last, &p->heap[(i - 1) / 2]))
    sift_up(p, i);
  else
    sift_down(p, i);
}

/* Stores a new pair (count >= 2), taking its list. -1 when out of memory
 * (the list is then still the caller's). */
static int pair_insert(pair_table *p, int64_t count, uint32_t key,
                       uint64_t list) {
  if (p->n >= UINT32_MAX - 1 ||
      grow(&p->heap, &p->heap_cap, p->n + 1, sizeof *p->heap))
    return -1;
  if ((p->n + 1) * 4 > p->cap * 3) {
    size_t cap = p->cap ? p->cap * 2 : 1024;
    uint32_t *slot = calloc(cap, sizeof *slot);
    if (!slot) return -1;
    free(p->slot);
    p->slot = slot;
    p->cap = cap;
    for (p->shift = 64; cap > 1; cap >>= 1)
      p->shift--;
    for (size_t i = 0; i < p->n; i++) {
      size_t s = home_of(p, p->heap[i].key);
      while (p->slot[s])
        s = (s + 1) & (p->cap - 1);
      p->slot[s] = (uint32_t)i + 1;
      p->heap[i].slot = (uint32_t)s;
    }
  }
  size_t s = home_of(p, key);
  while (p->slot[s])
    s = (s + 1) & (p->cap - 1);
  p->heap[p->n] = (pair){count, key, (uint32_t)s, list};
  p->slot[s] = (uint32_t)++p->n;
  sift_up(p, p->n - 1);
  return 0;
}

/* Takes c off the stored count of (x, y), if stored; a pair that drops
 * below 2 is removed (counts never rise again). */
static void pair_lose(pair_table *p, uint16_t x, uint16_t y, int64_t c) {
  int64_t i = pair_find(p, key_of(x, y));
  if (i < 0) return;
  if ((p->heap[i].count -= c) < 2)
    pair_remove(p, (size_t)i);
  else
    sift_down(p, (size_t)i);
}

static void pairs_free(pair_table *p) {
  for (size_t i = 0; i < p->n; i++)
    list_free(p->heap[i].list);
  free(p->heap);
  free(p->slot);
}

/* ---- pairs being made: the byte pairs at the start, then per merge ---- */

/* The pairs a batch of words makes, before they are stored. At the start
 * every pair is two bytes: slot left << 8 | right. In the step of merge
 * `id` every new pair holds id: (x, id) is slot x, (id, y != id) slot
 * 65536 + y. Two passes over the same words, in increasing order: count
 * and size the lists (fresh_count), then, lists allocated (fresh_alloc),
 * write them (fresh_fill). */
enum { FRESH_SLOTS = 2 * 65536 };

typedef struct {
  int start;         /* the byte pairs of the start, else merge id's */
  uint16_t id;       /* when !start */
  int64_t *count;    /* (FRESH_SLOTS) */
  uint64_t *bytes;   /* (FRESH_SLOTS): the size of the word list */
  uint32_t *last;    /* (FRESH_SLOTS): the last word listed, + 1 */
  uint8_t **block;   /* (FRESH_SLOTS): a long list's block, when kept */
  uint8_t **at;      /* (FRESH_SLOTS): where the list's next byte goes */
  uint8_t *small;    /* (FRESH_SLOTS * LIST_INLINE_MAX): short lists */
  uint32_t *touched; /* (FRESH_SLOTS): the slots with count > 0 */
  size_t n_touched;
} fresh_pairs;

static int fresh_init(fresh_pairs *f) {
  f->count = calloc(FRESH_SLOTS, sizeof *f->count);
  f->bytes = calloc(FRESH_SLOTS, sizeof *f->bytes);
  f->last = calloc(FRESH_SLOTS, sizeof *f->last);
  f->block = calloc(FRESH_SLOTS, sizeof *f->block);
  f->at = calloc(FRESH_SLOTS, sizeof *f->at);
  f->small = malloc(FRESH_SLOTS * LIST_INLINE_MAX);
  f->touched = malloc(FRESH_SLOTS * sizeof *f->touched);
  f->start = 1;
  return f->count && f->bytes && f->last && f->block && f->at && f->small &&
                 f->touched
             ? 0
             : -1;
}

static void fresh_free(fresh_pairs *f) {
  for (size_t t = 0; f->block && t < f->n_touched; t++)
    free(f->block[f->touched[t]]);
  free(f->count);
  free(f->bytes);
  free(f->last);
  free(f->block);
  free(f->at);
  free(f->small);
  free(f->touched);
}

/* The slot of pair (a, b), or -1 when the batch does not make it. */
static int32_t fresh_slot(const fresh_pairs *f, uint16_t a, uint16_t b) {
  if (f->start) return a << 8 | b;
  if (b == f->id) return a;
  return a == f->id ? 65536 + b : -1;
}

static uint32_t fresh_key(const fresh_pairs *f, uint32_t slot) {
  if (f->start) return key_of(slot >> 8, slot & 0xff);
  if (slot < 65536) return key_of(slot, f->id);
  return key_of(f->id, slot - 65536);
}

/* Pass 1: adds word wi's new pairs to their counts and list sizes. */
static void fresh_count(fresh_pairs *f, const words *w, uint32_t wi) {
  const uint16_t *x = w->sym + w->start[wi];
  for (uint32_t k = 0; k + 1 < w->len[wi]; k++) {
    int32_t s = fresh_slot(f, x[k], x[k + 1]);
    if (s < 0) continue;
    if (!f->count[s]) f->touched[f->n_touched++] = (uint32_t)s;
    f->count[s] += w->freq[wi];
    if (f->last[s] != wi + 1) {
      f->bytes[s] += varint_len(wi + 1 - f->last[s]);
      f->last[s] = wi + 1;
    }
  }
}

/* Between the passes: gives every pair that will be stored (count >= 2;
 * the others can never be merged) room for its list. */
static int fresh_alloc(fresh_pairs *f) {
  for (size_t t = 0; t < f->n_touched; t++) {
    uint32_t s = f->touched[t];
    f->last[s] = 0;
    if (f->count[s] < 2) continue;
    if (f->bytes[s] <= LIST_INLINE_MAX) {
      f->at[s] = f->small + (size_t)s * LIST_INLINE_MAX;
      continue;
    }
    f->block[s] = malloc(sizeof(uint64_t) + f->bytes[s]);
    if (!f->block[s]) return -1;
    memcpy(f->block[s], &f->bytes[s], sizeof(uint64_t));
    f->at[s] = f->block[s] + sizeof(uint64_t);
  }
  return 0;
}

/* Pass 2: writes word wi into the lists of its new pairs. */
static void fresh_fill(fresh_pairs *f, const words *w, uint32_t wi) {
  const uint16_t *x = w->sym + w->start[wi];
  for (uint32_t k = 0; k + 1 < w->len[wi]; k++) {
    int32_t s = fresh_slot(f, x[k], x[k + 1]);
    if (s < 0 || !f->at[s] || f->last[s] == wi + 1) continue;
    f->at[s] = varint_put(f->at[s], wi + 1 - f->last[s]);
    f->last[s] = wi + 1;
  }
}

/* Stores the batch's pairs that count at least 2 and clears the batch.
 * -1 when out of memory. */
static int fresh_commit(fresh_pairs *f, pair_table *p) {
  for (size_t t = 0; t < f->n_touched; t++) {
    uint32_t s = f->touched[t];
    if (!f->at[s]) continue;
    uint64_t list = (uint64_t)(uintptr_t)f->block[s];
    if (!f->block[s]) {
      const uint8_t *d = f->small + (size_t)s * LIST_INLINE_MAX;
      list = 1 | f->bytes[s] << 1;
      for (size_t k = 0; k < f->bytes[s]; k++)
        list |= (uint64_t)d[k] << (8 * (k + 1));
    }
    if (pair_insert(p, f->count[s], fresh_key(f, s), list)) return -1;
    f->block[s] = NULL; /* the table's now */
    f->at[s] = NULL;
  }
  for (size_t t = 0; t < f->n_touched; t++) {
    uint32_t s = f->touched[t];
    f->count[s] = 0;
    f->bytes[s] = 0;
    f->last[s] = 0;
  }
  f->n_touched = 0;
  return 0;
}

/* ---- one merge ---- */

/* Rewrites word wi, gluing (a, b) into id left to right without overlaps,
 * and takes the pairs it destroys off the stored counts: the one at each
 * merge and those on either side. Returns 0 when the word no longer holds
 * (a, b) (a stale list entry), else 1. */
static int word_merge(pair_table *p, words *w, uint32_t wi, uint16_t a,
                      uint16_t b, uint16_t id) {
  uint16_t *x = w->sym + w->start[wi];
  uint32_t len = w->len[wi], first = len, next = 0; /* next: undestroyed */
  int64_t freq = w->freq[wi];
  for (uint32_t k = 0; k + 1 < len;) {
    if (x[k] != a || x[k + 1] != b) {
      k++;
      continue;
    }
    if (first == len) first = k;
    uint32_t lo = k ? k - 1 : 0, hi = k + 2 < len ? k + 1 : k;
    for (uint32_t j = lo > next ? lo : next; j <= hi; j++)
      pair_lose(p, x[j], x[j + 1], freq);
    next = hi + 1;
    k += 2;
  }
  if (first == len) return 0;
  uint32_t o = first;
  for (uint32_t k = first; k < len; k++) {
    if (k + 1 < len && x[k] == a && x[k + 1] == b) {
      x[o++] = id;
      k++;
    } else {
      x[o++] = x[k];
    }
  }
  w->len[wi] = (uint8_t)o;
  return 1;
}

int pl_tok_train(pl_tokenizer **out, const char *const *texts,
                 const size_t *lens, int n_texts, int vocab, char *why,
                 size_t why_len) {
  *out = NULL;
  if (vocab < PL_TOK_FIRST_MERGE || vocab > PL_TOK_MAX_VOCAB)
    return pltok_fail(
        why, why_len, PL_EINPUT,
        "tokenizer: vocab %d, expected %d..%d (256 bytes, %d special "
        "tokens, then merges)",
        vocab, PL_TOK_FIRST_MERGE, PL_TOK_MAX_VOCAB, TOK_N_SPECIAL);
  size_t total = 0;
  for (int i = 0; i < n_texts; i++)
    total += lens[i];
  if (total == 0)
    return pltok_fail(why, why_len, PL_EINPUT,
                      "tokenizer: the corpus is empty (%d texts, 0 bytes)",
                      n_texts);

  words w = {0};
  pair_table p = {0};
  fresh_pairs f = {0};
  uint32_t *todo = NULL; /* the words of the pair being merged */
  size_t todo_cap = 0;
  int n_want = vocab - PL_TOK_FIRST_MERGE, n = 0;
  uint32_t *merges = malloc(sizeof *merges * 2 * (size_t)(n_want ? n_want : 1));
  int rc = PL_EENV;
  if (!merges || fresh_init(&f)) goto done;
  for (int i = 0; i < n_texts; i++) {
    const uint8_t *s = (const uint8_t *)texts[i];
    for (size_t k = 0; k < lens[i];) {
      size_t e = pltok_chunk_end(s, lens[i], k);
      if (words_add(&w, s + k, e - k)) goto done;
      k = e;
    }
  }
  free(w.slot); /* the byte-content index is no longer needed */
  w.slot = NULL;
  for (uint32_t i = 0; i < w.n; i++)
    fresh_count(&f, &w, i);
  if (fresh_alloc(&f)) goto done;
  for (uint32_t i = 0; i < w.n; i++)
    fresh_fill(&f, &w, i);
  if (fresh_commit(&f, &p)) goto done;

  f.start = 0;
  for (; n < n_want && p.n; n++) {
    uint16_t a = (uint16_t)(p.heap[0].key >> 16);
    uint16_t b = (uint16_t)p.heap[0].key;
    uint16_t id = (uint16_t)(PL_TOK_FIRST_MERGE + n);
    merges[2 * n] = a;
    merges[2 * n + 1] = b;
    /* Rewrite every word that still holds (a, b); that takes (a, b) to
     * count 0, which removes it. The words rewritten stay at the front of
     * todo, in order, for the second pass. */
    size_t n_todo, n_done = 0;
    if (list_decode(p.heap[0].list, &todo, &todo_cap, &n_todo)) goto done;
    list_free(p.heap[0].list);
    p.heap[0].list = 0;
    f.id = id;
    for (size_t t = 0; t < n_todo; t++) {
      /* The words lie scattered over the arena: ask for them early. */
      if (t + 16 < n_todo) {
        __builtin_prefetch(&w.start[todo[t + 16]]);
        __builtin_prefetch(&w.len[todo[t + 16]]);
        __builtin_prefetch(&w.freq[todo[t + 16]]);
      }
      if (t + 8 < n_todo) __builtin_prefetch(&w.sym[w.start[todo[t + 8]]]);
      if (!word_merge(&p, &w, todo[t], a, b, id)) continue;
      fresh_count(&f, &w, todo[t]);
      todo[n_done++] = todo[t];
    }
    if (fresh_alloc(&f)) goto done;
    for (size_t t = 0; t < n_done; t++)
      fresh_fill(&f, &w, todo[t]);
    if (fresh_commit(&f, &p)) goto done;
  }
  rc = pltok_build(out, merges, n, "tokenizer", why, why_len);
  merges = NULL;
done:
  if (rc == PL_EENV && !*out)
    pltok_fail(why, why_len, PL_EENV,
               "tokenizer: out of memory while training");
  free(merges);
  free(todo);
  fresh_free(&f);
  pairs_free(&p);
  words_free(&w);
  return rc;
}
