/*
 * policy/tokenizer_train.c — BPE training for the policy's tokenizer (the
 * rest, and the rules, are in policy/tokenizer.c).
 *
 * The corpus is cut into pre-split chunks; the distinct chunks are counted
 * ("words", with frequencies). Then, until the vocabulary is full or no pair
 * occurs twice: take the most frequent adjacent pair (ties: the lowest
 * (left, right) ids), append it as the next merge, and rewrite every word
 * holding it, left to right, without overlaps. Pair counts are incremental
 * (see pair_stats), so a step costs the words it rewrites.
 */
#include "policy/policy.h"
#include "policy/tokenizer_internal.h"

#include <stdlib.h>
#include <string.h>

enum { TOK_N_SPECIAL = PL_TOK_FIRST_MERGE - 256 };

/* The distinct chunks of the corpus: each a run of symbols in one arena,
 * with how often it occurs. */
typedef struct {
  int32_t *sym;  /* all words' symbols, word w at sym[start[w]..] */
  size_t *start; /* (n) */
  uint32_t *len; /* (n): current length in symbols (shrinks as merges go) */
  int64_t *freq; /* (n) */
  size_t n, cap, n_sym, cap_sym;
  size_t *slot; /* hash of byte content -> word index + 1 (0: empty) */
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
  const int32_t *x = w->sym + w->start[i];
  for (size_t k = 0; k < n; k++)
    if (x[k] != s[k]) return 0;
  return 1;
}

static int words_grow_slots(words *w) {
  size_t cap = w->slot_cap ? w->slot_cap * 2 : 1024;
  size_t *slot = calloc(cap, sizeof *slot);
  if (!slot) return -1;
  for (size_t i = 0; i < w->n; i++) {
    const int32_t *x = w->sym + w->start[i];
    uint8_t b[PL_TOK_MAX_CHUNK];
    for (uint32_t k = 0; k < w->len[i]; k++)
      b[k] = (uint8_t)x[k];
    size_t s = fnv1a(b, w->len[i]) & (cap - 1);
    while (slot[s])
      s = (s + 1) & (cap - 1);
    slot[s] = i + 1;
  }
  free(w->slot);
  w->slot = slot;
  w->slot_cap = cap;
  return 0;
}

/* Counts one chunk (bytes, so symbols are bytes). Returns -1 out of memory. */
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
  if (w->n == w->cap) {
    size_t cap = w->cap ? w->cap * 2 : 1024;
    size_t *st = realloc(w->start, cap * sizeof *st);
    if (st) w->start = st;
    uint32_t *ln = realloc(w->len, cap * sizeof *ln);
    if (ln) w->len = ln;
    int64_t *fr = realloc(w->freq, cap * sizeof *fr);
    if (fr) w->freq = fr;
    if (!st || !ln || !fr) return -1;
    w->cap = cap;
  }
  if (w->n_sym + n > w->cap_sym) {
    size_t cap = w->cap_sym ? w->cap_sym * 2 : 16384;
    while (cap < w->n_sym + n)
      cap *= 2;
    int32_t *sym = realloc(w->sym, cap * sizeof *sym);
    if (!sym) return -1;
    w->sym = sym;
    w->cap_sym = cap;
  }
  for (size_t k = 0; k < n; k++)
    w->sym[w->n_sym + k] = s[k];
  w->start[w->n] = w->n_sym;
  w->len[w->n] = (uint32_t)n;
  w->freq[w->n] = 1;
  w->n_sym += n;
  w->slot[h] = ++w->n;
  return 0;
}

static void words_free(words *w) {
  free(w->sym);
  free(w->start);
  free(w->len);
  free(w->freq);
  free(w->slot);
}

/* Pair statistics for training. A pair gets a stable index when first
 * seen; an open-addressing table maps pair_key -> index + 1. Per pair: its
 * count (the sum of the frequencies of the words holding it) and the words
 * it was seen in (stale entries allowed: words that lost it since). A lazy
 * max-heap of (count, pair) snapshots finds the most frequent pair; an entry
 * whose count is no longer the pair's is dropped when it surfaces. So a
 * merge step costs the words it rewrites, not the whole corpus. */
typedef struct {
  uint32_t *w, n, cap;
} word_list;

typedef struct {
  int64_t count;
  uint32_t pair;
} heap_entry;

typedef struct {
  uint64_t *key;    /* (n) */
  int64_t *count;   /* (n) */
  word_list *where; /* (n) */
  uint8_t *dirty;   /* (n): count changed in the current step */
  uint32_t n, cap;
  uint32_t *index; /* (index_cap): pair index + 1, 0 = empty */
  size_t index_cap;
  heap_entry *heap;
  size_t heap_n, heap_cap;
  uint32_t *touched; /* the dirty pairs, to push after the step */
  size_t touched_n, touched_cap;
} pair_stats;

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

static void pairs_free(pair_stats *p) {
  for (uint32_t i = 0; i < p->n; i++)
    free(p->where[i].w);
  free(p->key);
  free(p->count);
  free(p->where);
  free(p->dirty);
  free(p->index);
  free(p->heap);
  free(p->touched);
}

/* Returns the index of (a, b), adding it with count 0; -1 no memory. */
static int64_t pair_index(pair_stats *p, int32_t a, int32_t b) {
  if (((size_t)p->n + 1) * 2 > p->index_cap) {
    size_t cap = p->index_cap ? p->index_cap * 2 : 4096;
    uint32_t *index = calloc(cap, sizeof *index);
    if (!index) return -1;
    for (uint32_t i = 0; i < p->n; i++) {
      size_t s = pair_slot(p->key[i], cap);
      while (index[s])
        s = (s + 1) & (cap - 1);
      index[s] = i + 1;
    }
    free(p->index);
    p->index = index;
    p->index_cap = cap;
  }
  uint64_t key = pair_key((uint32_t)a, (uint32_t)b);
  size_t s = pair_slot(key, p->index_cap);
  for (; p->index[s]; s = (s + 1) & (p->index_cap - 1))
    if (p->key[p->index[s] - 1] == key) return p->index[s] - 1;
  if (p->n == p->cap) {
    size_t cap = p->cap ? p->cap * 2 : 4096;
    uint64_t *k = realloc(p->key, cap * sizeof *k);
    if (k) p->key = k;
    int64_t *c = realloc(p->count, cap * sizeof *c);
    if (c) p->count = c;
    word_list *wl = realloc(p->where, cap * sizeof *wl);
    if (wl) p->where = wl;
    uint8_t *d = realloc(p->dirty, cap);
    if (d) p->dirty = d;
    if (!k || !c || !wl || !d) return -1;
    p->cap = (uint32_t)cap;
  }
  uint32_t i = p->n++;
  p->key[i] = key;
  p->count[i] = 0;
  p->where[i] = (word_list){0};
  p->dirty[i] = 0;
  p->index[s] = i + 1;
  return i;
}

/* Adds sign * freq of word wi to every adjacent pair of it; on +1 also
 * records the word in each pair's list. -1 when out of memory. */
static int pairs_of_word(pair_stats *p, const words *w, uint32_t wi, int sign) {
  const int32_t *x = w->sym + w->start[wi];
  for (uint32_t k = 0; k + 1 < w->len[wi]; k++) {
    int64_t i = pair_index(p, x[k], x[k + 1]);
    if (i < 0) return -1;
    p->count[i] += sign * w->freq[wi];
    word_list *l = &p->where[i];
    if (sign > 0 && (l->n == 0 || l->w[l->n - 1] != wi)) {
      size_t cap = l->cap;
      if (grow(&l->w, &cap, (size_t)l->n + 1, sizeof *l->w)) return -1;
      l->cap = (uint32_t)cap;
      l->w[l->n++] = wi;
    }
    if (!p->dirty[i]) {
      if (grow(&p->touched, &p->touched_cap, p->touched_n + 1,
               sizeof *p->touched))
        return -1;
      p->touched[p->touched_n++] = (uint32_t)i;
      p->dirty[i] = 1;
    }
  }
  return 0;
}

/* Heap order: higher count first, then the lower pair key. */
static int heap_before(const pair_stats *p, heap_entry x, heap_entry y) {
  return x.count > y.count ||
         (x.count == y.count && p->key[x.pair] < p->key[y.pair]);
}

static int heap_push(pair_stats *p, heap_entry e) {
  if (grow(&p->heap, &p->heap_cap, p->heap_n + 1, sizeof *p->heap)) return -1;
  size_t i = p->heap_n++;
  while (i && heap_before(p, e, p->heap[(i - 1) / 2])) {
    p->heap[i] = p->heap[(i - 1) / 2];
    i = (i - 1) / 2;
  }
  p->heap[i] = e;
  return 0;
}

static void heap_pop(pair_stats *p) {
  heap_entry e = p->heap[--p->heap_n];
  size_t i = 0;
  for (;;) {
    size_t c = 2 * i + 1;
    if (c >= p->heap_n) break;
    if (c + 1 < p->heap_n && heap_before(p, p->heap[c + 1], p->heap[c])) c++;
    if (!heap_before(p, p->heap[c], e)) break;
    p->heap[i] = p->heap[c];
    i = c;
  }
  if (p->heap_n) p->heap[i] = e;
}

/* Pushes the current count of every pair changed in this step (those that
 * can still be merged: count >= 2); rebuilds the heap when stale entries
 * outnumber live pairs four to one. */
static int heap_refresh(pair_stats *p) {
  if (p->heap_n > 4 * (size_t)p->n + 4096) {
    p->heap_n = 0;
    for (uint32_t i = 0; i < p->n; i++)
      if (p->count[i] >= 2 && !p->dirty[i] &&
          heap_push(p, (heap_entry){p->count[i], i}))
        return -1;
  }
  for (size_t t = 0; t < p->touched_n; t++) {
    uint32_t i = p->touched[t];
    p->dirty[i] = 0;
    if (p->count[i] >= 2 && heap_push(p, (heap_entry){p->count[i], i}))
      return -1;
  }
  p->touched_n = 0;
  return 0;
}

/* The most frequent pair that occurs at least twice, ties to the lowest
 * (left, right); -1 when there is none. */
static int64_t heap_best(pair_stats *p) {
  while (p->heap_n) {
    heap_entry e = p->heap[0];
    if (e.count == p->count[e.pair]) return e.pair;
    heap_pop(p); /* stale */
  }
  return -1;
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
  pair_stats p = {0};
  int n_want = vocab - PL_TOK_FIRST_MERGE, n = 0;
  uint32_t *merges = malloc(sizeof *merges * 2 * (size_t)(n_want ? n_want : 1));
  int rc = PL_EENV;
  if (!merges) goto done;
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
    if (pairs_of_word(&p, &w, i, +1)) goto done;
  if (heap_refresh(&p)) goto done;

  for (; n < n_want; n++) {
    int64_t best = heap_best(&p);
    if (best < 0) break;
    int32_t a = (int32_t)(p.key[best] >> 32);
    int32_t b = (int32_t)(p.key[best] & 0xffffffffu);
    int32_t id = PL_TOK_FIRST_MERGE + n;
    merges[2 * n] = (uint32_t)a;
    merges[2 * n + 1] = (uint32_t)b;
    /* Rewrite every word that still holds (a, b): take its pairs out,
     * merge left to right, put the new pairs back. (a, b) ends at count 0,
     * so its word list is done with. */
    word_list todo = p.where[best];
    p.where[best] = (word_list){0};
    for (uint32_t t = 0; t < todo.n; t++) {
      uint32_t i = todo.w[t];
      int32_t *x = w.sym + w.start[i];
      uint32_t len = w.len[i], k = 0;
      while (k + 1 < len && !(x[k] == a && x[k + 1] == b))
        k++;
      if (k + 1 >= len) continue; /* a stale entry */
      if (pairs_of_word(&p, &w, i, -1)) {
        free(todo.w);
        goto done;
      }
      uint32_t o = k;
      for (; k < len; k++) {
        if (k + 1 < len && x[k] == a && x[k + 1] == b) {
          x[o++] = id;
          k++;
        } else {
          x[o++] = x[k];
        }
      }
      w.len[i] = o;
      if (pairs_of_word(&p, &w, i, +1)) {
        free(todo.w);
        goto done;
      }
    }
    free(todo.w);
    if (heap_refresh(&p)) goto done;
  }
  rc = pltok_build(out, merges, n, "tokenizer", why, why_len);
  merges = NULL;
done:
  if (rc == PL_EENV && !*out)
    pltok_fail(why, why_len, PL_EENV,
               "tokenizer: out of memory while training");
  free(merges);
  pairs_free(&p);
  words_free(&w);
  return rc;
}
