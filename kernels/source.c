/*
 * kernels/source.c — checks on a candidate's text before anything compiles
 * it, and the contract check appended to every compiled source.
 *
 * Loading rejects what is not a source file (missing, a folder, empty, over
 * KL_MAX_SOURCE_BYTES). Validation rejects NUL bytes, invalid UTF-8, a
 * leading byte-order mark, a lone CR or a backslash-blanks-newline (line
 * ends that g++ and NVRTC read differently), any #include (or #include_next,
 * #import, #embed, digraph and trigraph spellings, spliced lines, comments or
 * form feeds around the '#') whose target is not a literal name on the
 * allowlist, `#pragma GCC dependency`, texts that never mention the
 * entry point or KL_LAUNCH, and what cooperative_groups.h and libcu++
 * offer beyond the subset kernlab runs on both backends (unsupported[]
 * below, each with the reason it gives).
 * The policy's text is untrusted: these checks are what keeps a host file
 * from being pulled into a compile, before any sandbox is involved.
 *
 * Not here: banned constructs (asm, clocks, printf ...), which the anti-cheat
 * scanner flags rather than rejects.
 */
#define _GNU_SOURCE
#include "kernels/kernels.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int kl_include_allowed(const char *name, size_t len) {
  /* walks KL_INCLUDE_ALLOWLIST's ", "-separated names */
  for (const char *p = KL_INCLUDE_ALLOWLIST; *p;) {
    size_t n = strcspn(p, ",");
    if (n == len && !memcmp(p, name, len)) return 1;
    p += n;
    p += strspn(p, ", ");
  }
  return 0;
}

/* Appended to every candidate before compiling (NVRTC and the emulator): a
 * wrong signature becomes a compile error that names the contract. */
const char kl_contract_check[] =
    "namespace kl_contract {\n"
    "template <class A, class B> struct same { enum { value = 0 }; };\n"
    "template <class A> struct same<A, A> { enum { value = 1 }; };\n"
    "}\n"
    "static_assert(kl_contract::same<decltype(&matmul), void (*)(const float "
    "*, const float *, float *, int, int, int)>::value, \"kl_contract: "
    "matmul must be extern \\\"C\\\" __global__ void matmul(const float* A, "
    "const float* B, float* C, int M, int N, int K)\");\n";

int kl_source_load(const char *path, char **src, size_t *len, char *why,
                   size_t whylen) {
  *src = NULL;
  *len = 0;
  struct stat st;
  if (stat(path, &st) != 0) {
    snprintf(why, whylen, "%s: cannot read: %s", path, strerror(errno));
    return KL_EINPUT;
  }
  if (S_ISDIR(st.st_mode)) {
    snprintf(why, whylen, "%s: is a directory, expected a .cu file", path);
    return KL_EINPUT;
  }
  if (!S_ISREG(st.st_mode)) {
    snprintf(why, whylen, "%s: not a regular file", path);
    return KL_EINPUT;
  }
  if (st.st_size == 0) {
    snprintf(why, whylen, "%s: empty file, expected CUDA source", path);
    return KL_EINPUT;
  }
  if (st.st_size > KL_MAX_SOURCE_BYTES) {
    snprintf(why, whylen, "%s: %lld bytes, larger than the %d-byte limit", path,
             (long long)st.st_size, KL_MAX_SOURCE_BYTES);
    return KL_EINPUT;
  }
  FILE *f = kl_fopen_regular(path, NULL); /* swapped for a FIFO? no wait */
  if (!f) {
    snprintf(why, whylen, "%s: cannot open: %s", path, kl_fopen_error(errno));
    return KL_EINPUT;
  }
  char *p = malloc((size_t)st.st_size + 1);
  size_t n = p ? fread(p, 1, (size_t)st.st_size, f) : 0;
  fclose(f);
  if (!p || n != (size_t)st.st_size) {
    free(p);
    snprintf(why, whylen, "%s: short read", path);
    return KL_EINPUT;
  }
  p[n] = 0;
  *src = p;
  *len = n;
  return KL_OK;
}

/* Returns the offset of the first invalid UTF-8 sequence, or -1. */
static long utf8_invalid_at(const unsigned char *s, size_t n) {
  size_t i = 0;
  while (i < n) {
    unsigned c = s[i];
    size_t need;
    unsigned min;
    if (c < 0x80) {
      i++;
      continue;
    } else if ((c & 0xe0) == 0xc0) {
      need = 1, min = 0x80, c &= 0x1f;
    } else if ((c & 0xf0) == 0xe0) {
      need = 2, min = 0x800, c &= 0x0f;
    } else if ((c & 0xf8) == 0xf0) {
      need = 3, min = 0x10000, c &= 0x07;
    } else {
      return (long)i;
    }
    if (i + need >= n) return (long)i;
    for (size_t k = 1; k <= need; k++) {
      if ((s[i + k] & 0xc0) != 0x80) return (long)i;
      c = (c << 6) | (s[i + k] & 0x3f);
    }
    if (c < min || c > 0x10ffff || (c >= 0xd800 && c <= 0xdfff)) return (long)i;
    i += need + 1;
  }
  return -1;
}

/* Copy of src with line splices joined (the newlines they removed put
 * back after the logical line, so line numbers stay right); *len gets its
 * length. */
char *kl_source_join_splices(const char *src, size_t n, size_t *len) {
  char *joined = malloc(n + 1);
  if (!joined) return NULL;
  size_t j = 0, nl_pending = 0;
  for (size_t i = 0; i < n; i++) {
    if (src[i] == '\\' && i + 1 < n && src[i + 1] == '\n') {
      i++;
      nl_pending++;
      continue;
    }
    if (src[i] == '\\' && i + 2 < n && src[i + 1] == '\r' &&
        src[i + 2] == '\n') {
      i += 2;
      nl_pending++;
      continue;
    }
    /* (a lone CR never gets here: kl_source_validate refuses it first) */
    joined[j++] = src[i];
    if (src[i] == '\n') {
      /* Re-emit the spliced newlines after the logical line ends. */
      for (; nl_pending; nl_pending--)
        joined[j++] = '\n';
    }
  }
  joined[j] = 0;
  *len = j;
  return joined;
}

/* Copy of joined (j bytes) with comments replaced by a space (newlines
 * kept). String literals are kept. A lexer this small misreads some C++
 * (digit separators, raw strings), so the directive check also reads the
 * text with its comments: see kl_source_validate. */
static char *strip_comments(const char *joined, size_t j) {
  char *out = malloc(j + 1);
  if (!out) return NULL;
  size_t o = 0;
  for (size_t i = 0; i < j;) {
    if (joined[i] == '/' && joined[i + 1] == '/') {
      while (i < j && joined[i] != '\n')
        i++;
      out[o++] = ' ';
    } else if (joined[i] == '/' && joined[i + 1] == '*') {
      i += 2;
      while (i < j && !(joined[i] == '*' && joined[i + 1] == '/')) {
        if (joined[i] == '\n') out[o++] = '\n';
        i++;
      }
      i = i < j ? i + 2 : j;
      out[o++] = ' ';
    } else if (joined[i] == '"' || joined[i] == '\'') {
      char q = joined[i];
      out[o++] = joined[i++];
      while (i < j && joined[i] != q && joined[i] != '\n') {
        if (joined[i] == '\\' && i + 1 < j) out[o++] = joined[i++];
        out[o++] = joined[i++];
      }
      if (i < j && joined[i] == q) out[o++] = joined[i++];
    } else {
      out[o++] = joined[i++];
    }
  }
  out[o] = 0;
  return out;
}

static int is_word_char(char c) {
  return c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
         (c >= '0' && c <= '9');
}

/* 1 if `word` occurs as a whole identifier followed (after blanks) by '('. */
static int has_call_like(const char *text, const char *word) {
  size_t n = strlen(word);
  for (const char *p = strstr(text, word); p; p = strstr(p + 1, word)) {
    if (p > text && is_word_char(p[-1])) continue;
    const char *q = p + n;
    while (*q == ' ' || *q == '\t' || *q == '\n' || *q == '\r')
      q++;
    if (*q == '(') return 1;
  }
  return 0;
}

/* The preprocessor's white space inside a directive: blanks, form feed,
 * vertical tab, a CR; and comments, each one space (phase 3), a block
 * comment across lines too. Returns the first byte past them. */
static const char *skip_blank(const char *p) {
  for (;;) {
    if (*p == ' ' || *p == '\t' || *p == '\f' || *p == '\v' || *p == '\r') {
      p++;
    } else if (p[0] == '/' && p[1] == '*') {
      const char *end = strstr(p + 2, "*/");
      p = end ? end + 2 : p + strlen(p);
    } else {
      return p;
    }
  }
}

/* Checks every preprocessor directive of text (with or without its
 * comments: kl_source_validate reads both). */
static int check_directives(const char *text, char *why, size_t whylen) {
  int line = 1;
  for (const char *l = text; *l;) {
    const char *p = skip_blank(l);
    int directive = 0;
    if (*p == '#')
      directive = 1, p++;
    else if (p[0] == '%' && p[1] == ':')
      directive = 1, p += 2;
    /* a trigraph: C++17 compilers ignore it; refused as one all the same */
    else if (p[0] == '?' && p[1] == '?' && p[2] == '=')
      directive = 1, p += 3;
    if (directive) {
      p = skip_blank(p);
      const char *name = p;
      while (is_word_char(*p))
        p++;
      size_t nlen = (size_t)(p - name);
      int is_include = (nlen == 7 && !strncmp(name, "include", 7)) ||
                       (nlen == 12 && !strncmp(name, "include_next", 12)) ||
                       (nlen == 6 && !strncmp(name, "import", 6)) ||
                       (nlen == 5 && !strncmp(name, "embed", 5));
      if (is_include) {
        p = skip_blank(p);
        char close = *p == '<' ? '>' : (*p == '"' ? '"' : 0);
        const char *end = close ? strchr(p + 1, close) : NULL;
        const char *eol = strchr(p, '\n');
        if (!close || !end || (eol && end > eol)) {
          snprintf(why, whylen,
                   "line %d: #%.*s must name a header literally "
                   "(allowed: " KL_INCLUDE_ALLOWLIST ")",
                   line, (int)nlen, name);
          return KL_EINPUT;
        }
        size_t hlen = (size_t)(end - p - 1);
        if (nlen != 7 || !kl_include_allowed(p + 1, hlen)) {
          snprintf(why, whylen,
                   "line %d: #%.*s %c%.*s%c is not allowed "
                   "(allowed: " KL_INCLUDE_ALLOWLIST ")",
                   line, (int)nlen, name, *p, (int)(hlen > 80 ? 80 : hlen),
                   p + 1, close);
          return KL_EINPUT;
        }
      } else if (nlen == 6 && !strncmp(name, "pragma", 6)) {
        const char *eol = strchr(p, '\n');
        size_t rest = eol ? (size_t)(eol - p) : strlen(p);
        if (memmem(p, rest, "dependency", 10)) {
          snprintf(why, whylen,
                   "line %d: #pragma ... dependency names a host file", line);
          return KL_EINPUT;
        }
      }
    }
    const char *eol = strchr(l, '\n');
    if (!eol) break;
    l = eol + 1;
    line++;
  }
  return KL_OK;
}

/* ---- cooperative groups beyond the supported subset ----
 * cooperative_groups.h compiles whole under NVRTC, but the harness and the
 * emulator (kernels/emu/cg_shim.h) support its block and tile level only:
 * thread_block, thread_block_tile<N> (N <= 32), tiled_partition<N>,
 * this_thread, sync/thread_rank/group_size, and cg::reduce. The rest is
 * refused here, before either compiler sees it, with the reason, so that a
 * kernel is refused alike on both backends instead of failing on one. */
typedef struct unsupported {
  const char *name; /* an identifier, or the start of one (U_PREFIX) */
  int when;         /* U_* bits */
  const char *what, *why;
} unsupported;
enum {
  U_CG = 1,    /* only where the text names cooperative_groups */
  U_PREFIX = 2 /* every identifier that starts with name */
};

#define GRID_WHY                                                               \
  "it needs a cooperative launch (cudaLaunchCooperativeKernel), and the "      \
  "harness launches every kernel plainly: grid.sync() would hang or fault"
#define COALESCED_WHY                                                          \
  "groups formed by which threads are converged at run time are not "          \
  "supported (use tiled_partition<N>)"
#define LIBCUXX_WHY                                                            \
  "the cpu-emu backend has no libcu++, and its clocks and timed waits read "   \
  "timers"
#define RUNTIME_WHY                                                            \
  "groups sized at run time are not supported (use thread_block, or "          \
  "tiled_partition<N> for a thread_block_tile<N>)"
static const unsupported unsupported_names[] = {
    {"this_grid", 0, "cooperative_groups::this_grid (grid-wide group)",
     GRID_WHY},
    {"grid_group", 0, "cooperative_groups::grid_group (grid-wide group)",
     GRID_WHY},
    {"this_multi_grid", 0, "cooperative_groups::this_multi_grid", GRID_WHY},
    {"multi_grid_group", 0, "cooperative_groups::multi_grid_group", GRID_WHY},
    {"this_cluster", 0, "cooperative_groups::this_cluster (cluster group)",
     "thread block clusters need a cluster launch, which the harness does "
     "not make"},
    {"cluster_group", 0, "cooperative_groups::cluster_group",
     "thread block clusters need a cluster launch, which the harness does "
     "not make"},
    /* the bare name, not only `cuda::`: `namespace c = cuda;` would reach
     * it under another name, so a variable called cuda is refused too, and
     * the message says why */
    {"cuda", 0,
     "the name cuda (libcu++'s namespace cuda::, which cooperative_groups.h "
     "brings along; reserved in any use, since an alias would reach it)",
     LIBCUXX_WHY},
    /* its namespace and internals by their macros and reserved names */
    {"_CUDA_", U_PREFIX, "libcu++'s _CUDA_* names", LIBCUXX_WHY},
    {"_LIBCUDACXX", U_PREFIX, "libcu++'s _LIBCUDACXX* names", LIBCUXX_WHY},
    {"_CCCL", U_PREFIX, "libcu++'s _CCCL* names", LIBCUXX_WHY},
    {"__cccl", U_PREFIX, "libcu++'s __cccl* names", LIBCUXX_WHY},
    {"__libcpp", U_PREFIX, "libcu++'s __libcpp* names", LIBCUXX_WHY},
    {"thread_scope", U_CG, "cooperative groups' thread_scope (libcu++'s)",
     LIBCUXX_WHY},
    {"_CG_", U_PREFIX | U_CG, "cooperative_groups.h's _CG_* macros",
     "the header's internals are not part of its API"},
    {"memcpy_async", U_CG, "cooperative_groups::memcpy_async",
     "group-wide asynchronous copies are not emulated (cuda_pipeline.h's "
     "__pipeline_memcpy_async is)"},
    {"wait_prior", U_CG, "cooperative_groups::wait_prior",
     "it waits for cooperative_groups::memcpy_async, which is not supported"},
    {"coalesced_threads", U_CG, "cooperative_groups::coalesced_threads",
     COALESCED_WHY},
    {"coalesced_group", U_CG, "cooperative_groups::coalesced_group",
     COALESCED_WHY},
    {"labeled_partition", U_CG, "cooperative_groups::labeled_partition",
     COALESCED_WHY},
    {"binary_partition", U_CG, "cooperative_groups::binary_partition",
     COALESCED_WHY},
    {"thread_group", U_CG, "cooperative_groups::thread_group", RUNTIME_WHY},
    {"block_tile_memory", U_CG, "cooperative_groups::block_tile_memory",
     "tiles of more than 32 threads are not supported"},
    {"barrier_arrive", U_CG, "thread_block::barrier_arrive",
     "split arrive/wait barriers are not supported (use sync())"},
    {"barrier_wait", U_CG, "thread_block::barrier_wait",
     "split arrive/wait barriers are not supported (use sync())"},
    {"match_any", U_CG, "thread_block_tile::match_any",
     "match collectives are not emulated"},
    {"match_all", U_CG, "thread_block_tile::match_all",
     "match collectives are not emulated"},
    {"reduce_update_async", U_CG, "cooperative_groups::reduce_update_async",
     "asynchronous reductions are not supported (use cg::reduce)"},
    {"reduce_store_async", U_CG, "cooperative_groups::reduce_store_async",
     "asynchronous reductions are not supported (use cg::reduce)"},
    {"invoke_one", U_CG, "cooperative_groups::invoke_one",
     "it elects a thread by run-time convergence, which is not emulated"},
    {"invoke_one_broadcast", U_CG, "cooperative_groups::invoke_one_broadcast",
     "it elects a thread by run-time convergence, which is not emulated"},
    {"details", U_CG, "cooperative_groups::details",
     "the header's internals are not part of its API"},
};

/* The first non-blank byte at or after p. */
static const char *skip_space(const char *p) {
  while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r' || *p == '\f' ||
         *p == '\v')
    p++;
  return p;
}

/* What follows `tiled_partition` or `thread_block_tile` at p: refuses the
 * run-time tiled_partition(g, n) and a literal size other than 1, 2, 4, 8,
 * 16 or 32 (a size given by a name is left to the compilers' checks).
 * Returns KL_OK or KL_EINPUT. */
static int check_tile_size(const char *w, size_t n, const char *p, int line,
                           char *why, size_t whylen) {
  p = skip_space(p);
  if (*p != '<') {
    if (n == 15 && *p == '(') {
      snprintf(why, whylen,
               "line %d: cooperative_groups::tiled_partition(g, n) is not "
               "supported: " RUNTIME_WHY,
               line);
      return KL_EINPUT;
    }
    return KL_OK;
  }
  p = skip_space(p + 1);
  if (*p < '0' || *p > '9') return KL_OK;
  char *end;
  unsigned long size = strtoul(p, &end, 0);
  while (*end == 'u' || *end == 'U' || *end == 'l' || *end == 'L')
    end++;
  end = (char *)skip_space(end);
  if ((*end == '>' || *end == ',') && (size > 32 || (size & (size - 1)))) {
    snprintf(why, whylen,
             "line %d: %.*s<%lu> is not supported: tiles of 1, 2, 4, 8, 16 "
             "or 32 threads are (tiles of several warps are not)",
             line, (int)n, w, size);
    return KL_EINPUT;
  }
  return KL_OK;
}

/* Refuses the identifiers of unsupported_names in text (comments gone;
 * string and character literals skipped). Returns KL_OK or KL_EINPUT. */
static int check_unsupported(const char *text, char *why, size_t whylen) {
  int cg = strstr(text, "cooperative_groups") != NULL;
  int line = 1;
  for (const char *p = text; *p;) {
    if (*p == '\n') {
      line++, p++;
    } else if (*p == '"' ||
               (*p == '\'' && (p == text || !is_word_char(p[-1])))) {
      char q = *p++; /* a literal; a ' after a digit is a separator */
      while (*p && *p != q && *p != '\n')
        p += p[0] == '\\' && p[1] ? 2 : 1;
      if (*p == q) p++;
    } else if (is_word_char(*p) && (*p < '0' || *p > '9')) {
      const char *w = p;
      while (is_word_char(*p))
        p++;
      size_t n = (size_t)(p - w);
      for (size_t i = 0;
           i < sizeof unsupported_names / sizeof *unsupported_names; i++) {
        const unsupported *u = &unsupported_names[i];
        size_t un = strlen(u->name);
        if (((u->when & U_CG) && !cg) || un > n ||
            (un < n && !(u->when & U_PREFIX)) || memcmp(u->name, w, un))
          continue;
        if (u->when & U_PREFIX)
          snprintf(why, whylen, "line %d: %.*s (%s) is not supported: %s", line,
                   (int)(n > 60 ? 60 : n), w, u->what, u->why);
        else
          snprintf(why, whylen, "line %d: %s is not supported: %s", line,
                   u->what, u->why);
        return KL_EINPUT;
      }
      /* cg::wait(g) (memcpy_async's), not a name of the kernel's own */
      const char *after = skip_space(p);
      if (cg && n == 4 && !memcmp(w, "wait", 4) &&
          (*after == '(' || (w >= text + 2 && w[-1] == ':' && w[-2] == ':'))) {
        snprintf(why, whylen,
                 "line %d: cooperative_groups::wait is not supported: it waits "
                 "for cooperative_groups::memcpy_async, which is not",
                 line);
        return KL_EINPUT;
      }
      if (cg &&
          ((n == 15 && !memcmp(w, "tiled_partition", n)) ||
           (n == 17 && !memcmp(w, "thread_block_tile", n))) &&
          check_tile_size(w, n, p, line, why, whylen) != KL_OK)
        return KL_EINPUT;
    } else if (is_word_char(*p)) {
      while (is_word_char(*p)) /* a number, suffix and all */
        p++;
    } else {
      p++;
    }
  }
  return KL_OK;
}

int kl_source_validate(const char *src, size_t len, char *why, size_t whylen) {
  if (len == 0) {
    snprintf(why, whylen, "empty source");
    return KL_EINPUT;
  }
  if (len > KL_MAX_SOURCE_BYTES) {
    snprintf(why, whylen, "source is %zu bytes, over the %d-byte limit", len,
             KL_MAX_SOURCE_BYTES);
    return KL_EINPUT;
  }
  const char *nul = memchr(src, 0, len);
  if (nul) {
    snprintf(why, whylen, "NUL byte at offset %zu: expected text",
             (size_t)(nul - src));
    return KL_EINPUT;
  }
  if (len >= 3 && !memcmp(src, "\xEF\xBB\xBF", 3)) {
    /* NVRTC reads it as a stray token, the scanner as an identifier */
    snprintf(why, whylen,
             "starts with a UTF-8 byte-order mark: save the file without it");
    return KL_EINPUT;
  }
  /* Line ends that compilers read differently: g++ ends a line (and a //
   * comment) at a lone CR where NVRTC sees a blank, and splices a
   * backslash followed by blanks before the newline where NVRTC does not.
   * Either lets text reach one compiler and not the other (or the checks
   * below): refused, an honest kernel has neither. */
  for (size_t i = 0; i < len; i++) {
    if (src[i] == '\r' && (i + 1 >= len || src[i + 1] != '\n')) {
      snprintf(why, whylen,
               "a carriage return not followed by a newline at byte offset "
               "%zu (compilers disagree on where that line ends); expected "
               "LF or CRLF line ends",
               i);
      return KL_EINPUT;
    }
    if (src[i] == '\\') {
      size_t j = i + 1;
      while (j < len && (src[j] == ' ' || src[j] == '\t' || src[j] == '\f' ||
                         src[j] == '\v'))
        j++;
      if (j > i + 1 && j < len && (src[j] == '\n' || src[j] == '\r')) {
        snprintf(why, whylen,
                 "a backslash followed by blanks before the end of a line at "
                 "byte offset %zu (g++ splices the lines, NVRTC does not); "
                 "expected the backslash last on its line, or none",
                 i);
        return KL_EINPUT;
      }
    }
  }
  long bad = utf8_invalid_at((const unsigned char *)src, len);
  if (bad >= 0) {
    snprintf(why, whylen, "invalid UTF-8 at byte offset %ld", bad);
    return KL_EINPUT;
  }
  size_t jlen = 0;
  char *joined = kl_source_join_splices(src, len, &jlen);
  char *text = joined ? strip_comments(joined, jlen) : NULL;
  if (!text) {
    free(joined);
    snprintf(why, whylen, "out of memory");
    return KL_EINPUT;
  }
  /* The directives as the small lexer reads them (comments gone), and as
   * written (comments in): a text the lexer misreads (a digit separator
   * or a raw string taken for a quote, its "comment" hiding a real
   * #include) is caught by the second; an include in a real comment is
   * refused too, which costs a writer nothing. */
  int rc = check_directives(text, why, whylen);
  if (rc == KL_OK) rc = check_directives(joined, why, whylen);
  free(joined);
  if (rc == KL_OK) rc = check_unsupported(text, why, whylen);
  if (rc == KL_OK && !has_call_like(text, "matmul")) {
    snprintf(why, whylen,
             "no `matmul` function: the entry point must be extern \"C\" "
             "__global__ void matmul(const float* A, const float* B, float* "
             "C, int M, int N, int K)");
    rc = KL_EINPUT;
  }
  if (rc == KL_OK && !has_call_like(text, "KL_LAUNCH")) {
    snprintf(why, whylen,
             "no KL_LAUNCH(block_x, block_y, tile_rows, tile_cols, "
             "dyn_smem_bytes); declaration: the harness needs the launch "
             "geometry");
    rc = KL_EINPUT;
  }
  free(text);
  return rc;
}

int kl_launch_validate(const kl_launch *g, char *why, size_t whylen) {
  long threads = (long)g->block_x * (long)g->block_y;
  if (g->block_x < 1 || g->block_y < 1 || threads > 1024) {
    snprintf(why, whylen,
             "KL_LAUNCH block (%d, %d) has %ld threads: expected 1 to 1024",
             g->block_x, g->block_y, threads);
    return KL_EINPUT;
  }
  if (g->tile_rows < 1 || g->tile_cols < 1) {
    snprintf(why, whylen,
             "KL_LAUNCH tile (%d rows, %d cols): expected both >= 1",
             g->tile_rows, g->tile_cols);
    return KL_EINPUT;
  }
  if (g->dyn_smem_bytes < 0 || g->dyn_smem_bytes > 227 * 1024) {
    snprintf(why, whylen,
             "KL_LAUNCH dyn_smem_bytes %d: expected 0 to 232448 (227 KiB, the "
             "sm_90 limit per block)",
             g->dyn_smem_bytes);
    return KL_EINPUT;
  }
  return KL_OK;
}
