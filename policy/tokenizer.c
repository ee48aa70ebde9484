/*
 * policy/tokenizer.c — the policy's byte-level BPE tokenizer: ids, the
 * pre-split rules, encoding, decoding, and the .tok file format. Training
 * is in policy/tokenizer_train.c.
 *
 * Ids. 0..255 are the bytes themselves, so every byte string encodes and
 * decodes back exactly (NUL and invalid UTF-8 included). 256..258 are the
 * special tokens <|pad|>, <|bos|>, <|eos|>; they are never produced by
 * encoding text (the caller adds them), so a kernel that contains the text
 * "<|eos|>" cannot end itself early. From 259 on, one id per merge in rank
 * order: merge r glues ids (left, right) into id 259 + r.
 *
 * Pre-split. Before BPE, text is cut into chunks and merges never cross a
 * chunk boundary (as GPT-2 does; the rules here are tuned for C-like code):
 *   - an identifier run: [A-Za-z0-9_] and every byte >= 0x80 (so UTF-8
 *     sequences stay together), with at most one leading space;
 *   - a punctuation run: anything else that is not whitespace (control
 *     bytes and NUL included), with at most one leading space;
 *   - a whitespace run; when it is longer than one byte, ends in a space and
 *     is followed by a non-space, its last space goes to the next chunk
 *     ("\n    for" -> "\n   ", " for"), so " for" is one token everywhere;
 *   - no chunk is longer than PL_TOK_MAX_CHUNK (64) bytes: longer runs are
 *     cut every 64 bytes. This bounds encoding work per chunk (O(64^2)) and
 *     the length of any token.
 * Chunks concatenate back to the input, so the split loses nothing. The
 * rules are pinned by the file's `pretokenizer` field (1 = these rules).
 *
 * Training counts the distinct chunks of the corpus with their frequencies,
 * then repeatedly merges the most frequent adjacent pair (ties: the lowest
 * (left, right) ids) in every chunk. Pair counts are kept incrementally:
 * only pairs that occur at least twice are stored, each with the chunks it
 * occurs in, in a max-heap of exact counts, so a merge costs only the
 * chunks it rewrites and memory stays within about 9x the corpus
 * (policy/tokenizer_train.c says why). It stops at the requested
 * vocabulary or when no pair occurs twice. Encoding replays the merges by rank
 * within each chunk (lowest rank first, every occurrence left to right), which
 * reproduces exactly what training did. Both are deterministic.
 *
 * The .tok file (little-endian):
 *   header, 16 x uint32 (64 bytes):
 *     [0] magic "KLTK"   [1] version (1)      [2] vocab size V
 *     [3] merges (V-259) [4] special tokens (3)
 *     [5] pad id (256)   [6] bos id (257)     [7] eos id (258)
 *     [8] pretokenizer (1) [9] max chunk (64) [10..15] zero
 *   merges: (V - 259) x (uint32 left, uint32 right), in rank order
 *   sha256 (32 bytes) of everything before it.
 * pl_tok_hash is that sha256 in hex: the identity of a tokenizer, which
 * checkpoints store (`head -c -32 F.tok | sha256sum` prints it too).
 *
 * Not here: training (policy/tokenizer_train.c), reading corpus folders
 * (lab/tokenizer_cmd.c), regex-driven pre-tokenizers, Unicode classes
 * beyond "byte >= 0x80 is a letter".
 */
#include "policy/policy.h"
#include "policy/tokenizer_internal.h"

#include "kernels/kernels.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

enum {
  TOK_MAGIC = 0x4b544c4bu, /* "KLTK" read as a little-endian uint32 */
  TOK_HEADER_WORDS = 16,
  TOK_HEADER_BYTES = TOK_HEADER_WORDS * 4,
  TOK_PRETOKENIZER = 1,
  TOK_N_SPECIAL = 3,
};

static const char *const special_names[TOK_N_SPECIAL] = {"<|pad|>", "<|bos|>",
                                                         "<|eos|>"};

struct pl_tokenizer {
  int vocab;           /* PL_TOK_FIRST_MERGE + n_merges */
  int n_merges;        /* ranks 0..n_merges-1 */
  uint32_t *merges;    /* (n_merges, 2): left, right */
  uint32_t *piece_off; /* (vocab + 1): offsets of each id's bytes */
  uint8_t *piece;      /* the bytes of every id, concatenated */
  uint64_t *rank_key;  /* pair -> rank table: keys (left<<32 | right) */
  int32_t *rank_val;   /* ... and ranks; cap slots, open addressing */
  size_t rank_cap;     /* a power of two */
  char hash[65];       /* sha256 of the serialised content, hex */
};

int pltok_fail(char *why, size_t why_len, int code, const char *fmt, ...) {
  if (why && why_len) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, why_len, fmt, ap);
    va_end(ap);
  }
  return code;
}

/* ---- pre-split ---- */

enum { CLS_SPACE, CLS_WORD, CLS_PUNCT };

static int byte_class(uint8_t c) {
  if (c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f')
    return CLS_SPACE;
  if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
      (c >= '0' && c <= '9') || c == '_' || c >= 0x80)
    return CLS_WORD;
  return CLS_PUNCT;
}

/* Returns the end (exclusive) of the chunk of s[0..n) that starts at i < n,
 * by the rules in the file comment. Looks at most PL_TOK_MAX_CHUNK + 1
 * bytes ahead, so splitting is linear even in one long run. */
size_t pltok_chunk_end(const uint8_t *s, size_t n, size_t i) {
  size_t j = i, limit = n - i > PL_TOK_MAX_CHUNK ? i + PL_TOK_MAX_CHUNK + 1 : n;
  int c = byte_class(s[i]);
  if (s[i] == ' ' && i + 1 < n && byte_class(s[i + 1]) != CLS_SPACE) {
    c = byte_class(s[i + 1]);
    j = i + 1;
  }
  while (j < limit && byte_class(s[j]) == c)
    j++;
  if (j - i > PL_TOK_MAX_CHUNK) return i + PL_TOK_MAX_CHUNK; /* a long run */
  /* The run ended inside the window: s[j] (if any) is of another class. */
  if (c == CLS_SPACE && j < n && j - i >= 2 && s[j - 1] == ' ') j--;
  return j;
}

/* ---- building a tokenizer from its merges ---- */

void pl_tok_free(pl_tokenizer *t) {
  if (!t) return;
  free(t->merges);
  free(t->piece_off);
  free(t->piece);
  free(t->rank_key);
  free(t->rank_val);
  free(t);
}

/* Writes the serialised form (header, merges, sha256) of n merges into a
 * new buffer; returns NULL when out of memory. The caller frees it. */
static uint8_t *serialise(const uint32_t *merges, int n, size_t *len) {
  size_t body = TOK_HEADER_BYTES + (size_t)n * 8;
  uint8_t *b = calloc(1, body + 32);
  if (!b) return NULL;
  uint32_t h[TOK_HEADER_WORDS] = {TOK_MAGIC,
                                  PL_TOK_FORMAT_VERSION,
                                  (uint32_t)(PL_TOK_FIRST_MERGE + n),
                                  (uint32_t)n,
                                  TOK_N_SPECIAL,
                                  PL_TOK_PAD,
                                  PL_TOK_BOS,
                                  PL_TOK_EOS,
                                  TOK_PRETOKENIZER,
                                  PL_TOK_MAX_CHUNK};
  for (int i = 0; i < TOK_HEADER_WORDS; i++)
    for (int k = 0; k < 4; k++)
      b[4 * i + k] = (uint8_t)(h[i] >> (8 * k));
  for (size_t i = 0; i < (size_t)n * 2; i++)
    for (int k = 0; k < 4; k++)
      b[TOK_HEADER_BYTES + 4 * i + k] = (uint8_t)(merges[i] >> (8 * k));
  kl_sha256_ctx c;
  kl_sha256_init(&c);
  kl_sha256_update(&c, b, body);
  kl_sha256_final(&c, b + body);
  *len = body + 32;
  return b;
}

/* Builds a tokenizer from n merges (ownership of merges passes to it, also
 * on failure). Checks that every merge uses bytes or earlier merges, no pair
 * repeats, and no token exceeds PL_TOK_MAX_CHUNK bytes; name prefixes the
 * message. */
int pltok_build(pl_tokenizer **out, uint32_t *merges, int n, const char *name,
                char *why, size_t why_len) {
  *out = NULL;
  pl_tokenizer *t = calloc(1, sizeof *t);
  if (!t) {
    free(merges);
    return pltok_fail(why, why_len, PL_EENV, "%s: out of memory", name);
  }
  t->merges = merges;
  t->n_merges = n;
  t->vocab = PL_TOK_FIRST_MERGE + n;
  t->rank_cap = 16;
  while (t->rank_cap < (size_t)n * 2)
    t->rank_cap *= 2;
  t->piece_off = malloc(sizeof *t->piece_off * ((size_t)t->vocab + 1));
  t->piece = malloc((size_t)t->vocab * PL_TOK_MAX_CHUNK);
  t->rank_key = malloc(sizeof *t->rank_key * t->rank_cap);
  t->rank_val = malloc(sizeof *t->rank_val * t->rank_cap);
  if (!t->piece_off || !t->piece || !t->rank_key || !t->rank_val) {
    pl_tok_free(t);
    return pltok_fail(why, why_len, PL_EENV, "%s: out of memory", name);
  }
  memset(t->rank_key, 0xff, sizeof *t->rank_key * t->rank_cap);

  /* The bytes of each id: bytes, special names, then left + right. */
  uint32_t off = 0;
  for (int id = 0; id < 256; id++) {
    t->piece_off[id] = off;
    t->piece[off++] = (uint8_t)id;
  }
  for (int s = 0; s < TOK_N_SPECIAL; s++) {
    t->piece_off[256 + s] = off;
    size_t l = strlen(special_names[s]);
    memcpy(t->piece + off, special_names[s], l);
    off += (uint32_t)l;
  }
  for (int r = 0; r < n; r++) {
    uint32_t id = (uint32_t)(PL_TOK_FIRST_MERGE + r);
    t->piece_off[id] = off;
    for (int side = 0; side < 2; side++) {
      uint32_t x = merges[2 * r + side];
      if (x >= id || (x >= 256 && x < PL_TOK_FIRST_MERGE)) {
        pl_tok_free(t);
        return pltok_fail(
            why, why_len, PL_EINPUT,
            "%s: inconsistent merges: merge %d (id %u) uses id %u, "
            "expected a byte (0..255) or an earlier merge (259..%u)",
            name, r, id, x, id - 1);
      }
    }
    uint32_t a = merges[2 * r], b = merges[2 * r + 1];
    /* piece_off[x + 1] is set for every x < id: the start of id x + 1,
     * or the provisional end written below. */
    uint32_t la = t->piece_off[a + 1] - t->piece_off[a];
    uint32_t lb = t->piece_off[b + 1] - t->piece_off[b];
    if (la + lb > PL_TOK_MAX_CHUNK) {
      pl_tok_free(t);
      return pltok_fail(
          why, why_len, PL_EINPUT,
          "%s: inconsistent merges: merge %d (id %u) makes a token "
          "of %u bytes, expected at most %d",
          name, r, id, la + lb, PL_TOK_MAX_CHUNK);
    }
    memmove(t->piece + off, t->piece + t->piece_off[a], la);
    memmove(t->piece + off + la, t->piece + t->piece_off[b], lb);
    off += la + lb;
    t->piece_off[id + 1] = off; /* provisional end; see above */

    uint64_t key = pair_key(a, b);
    size_t slot = pair_slot(key, t->rank_cap);
    while (t->rank_key[slot] != PAIR_EMPTY && t->rank_key[slot] != key)
      slot = (slot + 1) & (t->rank_cap - 1);
    if (t->rank_key[slot] == key) {
      int earlier = t->rank_val[slot];
      pl_tok_free(t);
      return pltok_fail(
          why, why_len, PL_EINPUT,
          "%s: inconsistent merges: merge %d repeats the pair (%u, "
          "%u) of merge %d",
          name, r, a, b, earlier);
    }
    t->rank_key[slot] = key;
    t->rank_val[slot] = r;
  }
  t->piece_off[t->vocab] = off;

  size_t len;
  uint8_t *buf = serialise(merges, n, &len);
  if (!buf) {
    pl_tok_free(t);
    return pltok_fail(why, why_len, PL_EENV, "%s: out of memory", name);
  }
  static const char hexd[] = "0123456789abcdef";
  for (int i = 0; i < 32; i++) {
    t->hash[2 * i] = hexd[buf[len - 32 + i] >> 4];
    t->hash[2 * i + 1] = hexd[buf[len - 32 + i] & 15];
  }
  t->hash[64] = 0;
  free(buf);
  *out = t;
  return PL_OK;
}

/* ---- accessors ---- */

int pl_tok_vocab_size(const pl_tokenizer *t) {
  return t->vocab;
}

const char *pl_tok_hash(const pl_tokenizer *t) {
  return t->hash;
}

const char *pl_tok_piece(const pl_tokenizer *t, int32_t id, size_t *len) {
  if (id < 0 || id >= t->vocab) return NULL;
  *len = t->piece_off[id + 1] - t->piece_off[id];
  return (const char *)t->piece + t->piece_off[id];
}

/* ---- encode / decode ---- */

static int32_t rank_of(const pl_tokenizer *t, int32_t a, int32_t b) {
  uint64_t key = pair_key((uint32_t)a, (uint32_t)b);
  size_t slot = pair_slot(key, t->rank_cap);
  while (t->rank_key[slot] != PAIR_EMPTY) {
    if (t->rank_key[slot] == key) return t->rank_val[slot];
    slot = (slot + 1) & (t->rank_cap - 1);
  }
  return -1;
}

/* Encodes one chunk s[0..n), n <= PL_TOK_MAX_CHUNK, into out; returns the
 * count. Each round applies the lowest-rank merge present, to every
 * occurrence left to right, as training did. */
static size_t encode_chunk(const pl_tokenizer *t, const uint8_t *s, size_t n,
                           int32_t *out) {
  for (size_t i = 0; i < n; i++)
    out[i] = s[i];
  while (n >= 2) {
    int32_t best = -1;
    for (size_t i = 0; i + 1 < n; i++) {
      int32_t r = rank_of(t, out[i], out[i + 1]);
      if (r >= 0 && (best < 0 || r < best)) best = r;
    }
    if (best < 0) break;
    int32_t a = (int32_t)t->merges[2 * best],
            b = (int32_t)t->merges[2 * best + 1];
    size_t w = 0;
    for (size_t i = 0; i < n; i++) {
      if (i + 1 < n && out[i] == a && out[i + 1] == b) {
        out[w++] = PL_TOK_FIRST_MERGE + best;
        i++;
      } else {
        out[w++] = out[i];
      }
    }
    n = w;
  }
  return n;
}

int pl_tok_encode(const pl_tokenizer *t, const void *bytes, size_t n,
                  int32_t **ids, size_t *n_ids, char *why, size_t why_len) {
  const uint8_t *s = bytes;
  *ids = malloc(sizeof **ids * (n ? n : 1)); /* never more ids than bytes */
  *n_ids = 0;
  if (!*ids) return pltok_fail(why, why_len, PL_EENV, "encode: out of memory");
  size_t k = 0;
  for (size_t i = 0; i < n;) {
    size_t e = pltok_chunk_end(s, n, i);
    k += encode_chunk(t, s + i, e - i, *ids + k);
    i = e;
  }
  *n_ids = k;
  return PL_OK;
}

int pl_tok_decode(const pl_tokenizer *t, const int32_t *ids, size_t n,
                  char **out, size_t *out_len, char *why, size_t why_len) {
  *out = NULL;
  *out_len = 0;
  size_t len = 0;
  for (size_t i = 0; i < n; i++) {
    if (ids[i] < 0 || ids[i] >= t->vocab)
      return pltok_fail(why, why_len, PL_EINPUT,
                        "decode: token %zu is id %d, expected 0..%d (vocab %d)",
                        i, (int)ids[i], t->vocab - 1, t->vocab);
    len += t->piece_off[ids[i] + 1] - t->piece_off[ids[i]];
  }
  char *s = malloc(len + 1);
  if (!s) return pltok_fail(why, why_len, PL_EENV, "decode: out of memory");
  size_t w = 0;
  for (size_t i = 0; i < n; i++) {
    size_t l = t->piece_off[ids[i] + 1] - t->piece_off[ids[i]];
    memcpy(s + w, t->piece + t->piece_off[ids[i]], l);
    w += l;
  }
  s[w] = 0;
  *out = s;
  *out_len = w;
  return PL_OK;
}

/* ---- files ---- */

int pl_tok_serialize(const pl_tokenizer *t, uint8_t **buf, size_t *len) {
  *buf = serialise(t->merges, t->n_merges, len);
  return *buf ? PL_OK : PL_EENV;
}

static uint32_t rd32(const uint8_t *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
         (uint32_t)p[3] << 24;
}

int pl_tok_parse(pl_tokenizer **out, const void *data, size_t len,
                 const char *name, char *why, size_t why_len) {
  const uint8_t *b = data;
  *out = NULL;
  if (len < 4 || rd32(b) != TOK_MAGIC) {
    char m[20] = "";
    for (size_t i = 0; i < 4 && i < len; i++)
      snprintf(m + strlen(m), sizeof m - strlen(m),
               b[i] >= 32 && b[i] < 127 ? "%c" : "\\x%02x", b[i]);
    return pltok_fail(
        why, why_len, PL_EINPUT,
        "%s: not a kernlab tokenizer: magic is '%s', expected 'KLTK'", name, m);
  }
  if (len < 8)
    return pltok_fail(why, why_len, PL_EINPUT,
                      "%s: truncated: %zu bytes, expected a %d-byte header",
                      name, len, TOK_HEADER_BYTES);
  uint32_t version = rd32(b + 4);
  if (version > PL_TOK_FORMAT_VERSION)
    return pltok_fail(
        why, why_len, PL_EINPUT,
        "%s: tokenizer format version %u is newer than this kernlab "
        "reads (%d); rebuild kernlab or retrain the tokenizer",
        name, version, PL_TOK_FORMAT_VERSION);
  if (version != PL_TOK_FORMAT_VERSION)
    return pltok_fail(why, why_len, PL_EINPUT,
                      "%s: tokenizer format version %u, expected %d", name,
                      version, PL_TOK_FORMAT_VERSION);
  if (len < TOK_HEADER_BYTES + 32)
    return pltok_fail(
        why, why_len, PL_EINPUT,
        "%s: truncated: %zu bytes, expected at least %d (header and "
        "checksum)",
        name, len, TOK_HEADER_BYTES + 32);
  uint32_t n_merges = rd32(b + 12);
  uint64_t want = TOK_HEADER_BYTES + (uint64_t)n_merges * 8 + 32;
  uint8_t digest[32];
  kl_sha256_ctx c;
  kl_sha256_init(&c);
  kl_sha256_update(&c, b, len - 32);
  kl_sha256_final(&c, digest);
  if (memcmp(digest, b + len - 32, 32) != 0) {
    if (n_merges <= PL_TOK_MAX_VOCAB && len < want)
      return pltok_fail(
          why, why_len, PL_EINPUT,
          "%s: truncated or corrupted: %zu bytes, the header's %u "
          "merges need %llu, and the checksum does not match",
          name, len, n_merges, (unsigned long long)want);
    if (n_merges <= PL_TOK_MAX_VOCAB && len > want)
      return pltok_fail(
          why, why_len, PL_EINPUT,
          "%s: %zu bytes, the header's %u merges need %llu (extra "
          "bytes at the end?), and the checksum does not match",
          name, len, n_merges, (unsigned long long)want);
    return pltok_fail(
        why, why_len, PL_EINPUT,
        "%s: checksum mismatch: the content's sha256 does not match "
        "the one stored at the end (file corrupted)",
        name);
  }
  /* The checksum holds: what is wrong now was written that way. */
  static const struct {
    int word;
    uint32_t want;
    const char *field;
  } fixed[] = {{4, TOK_N_SPECIAL, "special tokens"},
               {5, PL_TOK_PAD, "pad id"},
               {6, PL_TOK_BOS, "bos id"},
               {7, PL_TOK_EOS, "eos id"},
               {8, TOK_PRETOKENIZER, "pretokenizer"},
               {9, PL_TOK_MAX_CHUNK, "max chunk"}};
  for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++)
    if (rd32(b + 4 * fixed[i].word) != fixed[i].want)
      return pltok_fail(
          why, why_len, PL_EINPUT, "%s: header field %s is %u, expected %u",
          name, fixed[i].field, rd32(b + 4 * fixed[i].word), fixed[i].want);
  for (int i = 10; i < TOK_HEADER_WORDS; i++)
    if (rd32(b + 4 * i))
      return pltok_fail(why, why_len, PL_EINPUT,
                        "%s: header word %d is %u, expected 0 (reserved)", name,
                        i, rd32(b + 4 * i));
  if (n_merges > PL_TOK_MAX_VOCAB - PL_TOK_FIRST_MERGE)
    return pltok_fail(why, why_len, PL_EINPUT,
                      "%s: header says %u merges, expected at most %d", name,
                      n_merges, PL_TOK_MAX_VOCAB - PL_TOK_FIRST_MERGE);
  if (len != want)
    return pltok_fail(why, why_len, PL_EINPUT,
                      "%s: header says %u merges, which take %llu bytes; the "
                      "file has %zu (cut short or with bytes appended)",
                      name, n_merges, (unsigned long long)want, len);
  uint32_t v = rd32(b + 8);
  if (v != PL_TOK_FIRST_MERGE + n_merges)
    return pltok_fail(why, why_len, PL_EINPUT,
                      "%s: header says vocab %u, expected %u (259 + %u merges)",
                      name, v, PL_TOK_FIRST_MERGE + n_merges, n_merges);
  uint32_t *merges = malloc(sizeof *merges * 2 * (n_merges ? n_merges : 1));
  if (!merges)
    return pltok_fail(why, why_len, PL_EENV, "%s: out of memory", name);
  for (size_t i = 0; i < (size_t)n_merges * 2; i++)
    merges[i] = rd32(b + TOK_HEADER_BYTES + 4 * i);
  return pltok_build(out, merges, (int)n_merges, name, why, why_len);
}

int pl_tok_save(const pl_tokenizer *t, const char *path, char *why,
                size_t why_len) {
  uint8_t *buf;
  size_t len;
  if (pl_tok_serialize(t, &buf, &len))
    return pltok_fail(why, why_len, PL_EENV, "%s: out of memory", path);
  /* Written next to path and renamed into place, as checkpoints are: a
   * kill mid-write leaves the old file (or none), never a torn one that
   * a later `kernlab prime --out` would refuse to replace. */
  struct stat st;
  if (lstat(path, &st) == 0 && !S_ISREG(st.st_mode)) {
    free(buf);
    return pltok_fail(why, why_len, PL_EINPUT,
                      "%s: exists and is not a regular file; a tokenizer "
                      "replaces only a file",
                      path);
  }
  kl_outfile out;
  char err[1400];
  if (kl_outfile_open(&out, path, err, sizeof err) != 0) {
    free(buf);
    return pltok_fail(why, why_len, PL_EENV, "%s", err);
  }
  size_t wrote = fwrite(buf, 1, len, out.f);
  free(buf);
  if (wrote != len) {
    int e = errno ? errno : EIO;
    kl_outfile_abort(&out);
    return pltok_fail(why, why_len, PL_EENV, "%s: write failed: %s", path,
                      strerror(e));
  }
  if (kl_outfile_commit(&out, 0, err, sizeof err) != 0)
    return pltok_fail(why, why_len, PL_EENV, "%s", err);
  return PL_OK;
}

int pl_tok_load(pl_tokenizer **out, const char *path, char *why,
                size_t why_len) {
  *out = NULL;
  /* never a wait: a FIFO would block a plain open for ever */
  FILE *f = kl_fopen_regular(path, NULL);
  if (!f)
    return pltok_fail(why, why_len, PL_EINPUT, "%s: cannot open: %s", path,
                      kl_fopen_error(errno));
  /* A tokenizer is at most 64 + 8 * 65536 + 32 bytes; read one byte more
   * to notice a longer file. */
  size_t cap = TOK_HEADER_BYTES + 8 * (size_t)PL_TOK_MAX_VOCAB + 32 + 1;
  uint8_t *buf = malloc(cap);
  if (!buf) {
    fclose(f);
    return pltok_fail(why, why_len, PL_EENV, "%s: out of memory", path);
  }
  size_t len = fread(buf, 1, cap, f);
  int bad = ferror(f);
  fclose(f);
  int rc;
  if (bad)
    rc = pltok_fail(why, why_len, PL_EINPUT, "%s: read error", path);
  else if (len == cap && !memcmp(buf, "KLTK", 4)) /* else: say bad magic */
    rc = pltok_fail(why, why_len, PL_EINPUT,
                    "%s: larger than any tokenizer (%zu bytes at most)", path,
                    cap - 1);
  else
    rc = pl_tok_parse(out, buf, len, path, why, why_len);
  free(buf);
  return rc;
}
