/*
 * kernels/scan.c — the static anti-cheat scanner: reads a candidate's text
 * and raises the static flags of kernels/flags.c (banned constructs,
 * host-path escapes, disallowed includes, file-scope mutable state, low
 * precision, size).
 *
 * How it reads the text: line splices are joined (each character keeps its
 * original line number), then one lexer pass turns it into tokens
 * (identifiers, numbers, string and character literals including raw
 * strings, punctuators) and drops comments. Every check works on tokens, so
 * a banned word in a comment or a string literal raises nothing. The one
 * exception is inline asm: when a file uses asm, its string literals are PTX
 * and are searched for %clock, %globaltimer and low-precision types.
 *
 * The checks:
 *  - names: a table of identifiers (exact, prefix or substring matches,
 *    some only when called: `write(` but not `int write = 0;`; a
 *    __device__ helper named like a banned host function is flagged too,
 *    since the emulator's g++ may resolve its calls to the host one);
 *  - punctuators: `<<<` (a device-side launch); the digraphs <% %> <: :>
 *    are read as the braces and brackets they are;
 *  - directives: #include targets (cuda_pipeline.h is allowed for its
 *    cp.async primitives; the awbarrier timed waits it brings are timer
 *    reads), #if/#ifdef/#elif on any macro the file
 *    itself never #defines (that can only be the compiler's: a branch on the
 *    compilation pass) or on any macro the emulator's compile defines (the
 *    shim's and its libc headers', listed at build time) or NVRTC does
 *    without an include (CUDART_*, CUDA_*, assert, va_*) or with
 *    cooperative_groups.h (libcu++'s NV_*, CCCL_*, C limits), `##` pasting in
 *    #define bodies (literal pastes such as cl ## ock64, parameter pastes,
 *    __VA_ARGS__ included, resolved at each call of the macro with its
 *    literal arguments; a pasting macro named without a call, called
 *    with another macro's parameters or across the end of a macro, with
 *    more than 16 pieces or 30 parameters, and a paste that builds the
 *    name of a macro of the file are flagged, unresolved), and #pragma
 *    or _Pragma other than unroll, nounroll and once (redefine_extname
 *    renames symbols);
 *  - declarations: a small scope tracker (file, namespace, class, function
 *    or lambda body, initializer) finds file-scope __device__/__managed__
 * variables that are not const, static locals and static members that are not
 *    const, file-scope variables without any CUDA qualifier (host memory on
 *    cpu-emu), functions without __device__/__global__ (host code),
 *    extern declarations other than extern __shared__, and file-scope
 *    functions declared but defined nowhere in the file (the host's).
 *    Operator functions, lambdas with noexcept(...)/decltype(...)
 *    specifiers, and declarators after a record's closing brace (with the
 *    qualifiers before its `struct`) are read as what they are; a lambda's
 *    `mutable` is not state. The qualifiers in an object-like macro of the
 *    file (`#define DI __device__ __forceinline__`) count where it is
 *    used; a function-like macro whose body declares (`G(name)` with
 *    __device__ or static in it), used at file or class scope, is flagged,
 *    since what it declares is not read.
 *
 * Not the scanner's alone: the emulator's compile turns the timer
 * builtins into an undeclared name (kernels/emu/emu_build.c), whatever
 * spelling reaches it, since a template chosen by a type that differs
 * between the compilers (blockDim's) needs no #if at all.
 *
 * Where the issue was silent: the stricter macro rules cost honest code
 * little (a CAT(a, b) called directly passes; the two-level CAT/CAT_ idiom
 * is flagged, and `#ifndef INFINITY` is too).
 *
 * Limits, on purpose (the dynamic checks and the sandbox are the backstop):
 * this is not a preprocessor. A macro whose body is an ordinary banned name
 * is caught (the body is scanned), a paste is resolved one level deep with
 * literal arguments, but a paste whose argument is itself a macro, names
 * built by templates, or constant data reinterpreted as code are not. The
 * declaration tracker is a heuristic for the C++ that kernels use, not a
 * C++ parser: unusual declarators (function pointers, attributes it does
 * not know) may be misread; it errs towards raising a flag.
 */
#define _GNU_SOURCE
#include "kernels/kernels.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Tokens check_paste may read, all macros together: an honest kernel's
 * pastes read a few thousand. */
#define KL_SCAN_PASTE_BUDGET (1 << 23)

/* ---- tokens -------------------------------------------------------------
 */

enum { T_IDENT, T_NUM, T_STR, T_PUNCT };

typedef struct token {
  int kind;
  int start, len; /* in the joined text */
  int line;       /* 1-based line in the original source */
  int dir;        /* index of the directive it belongs to, or -1 */
} token;

typedef struct directive {
  int first; /* index of the token after '#' (the directive name), or -1 */
  int end;   /* one past its last token */
  int line;
  int start, stop; /* text span after the name, to the end of the line */
  int params_end;  /* a #define's body's first token (macro_params) */
} directive;

typedef struct scanner {
  char *text;   /* joined text (splices removed), NUL-terminated */
  int *line_of; /* original line of each character of text */
  int n;        /* length of text */
  token *tok;   /* tokens */
  int ntok;
  directive *dir; /* preprocessor directives */
  int ndir;
  int *constant_var; /* token index of each read-only variable's name
                       (check_const_casts) */
  int nconstant_var;
  int *proto, nproto; /* names of file-scope functions declared without a
                         body, and with one (check_prototypes): pairs of
                         the name's token and its namespace (ns_*) */
  int *defined, ndefined;
  int *ns_parent, *ns_name, nns, ns_cap; /* namespaces: the enclosing one
                                            (-1: the global one) and the
                                            name's token (-1: unnamed) */
  int cur_ns;           /* the namespace check_declarations is in */
  int *macros, nmacros; /* the #define directives, sorted by name
                           (macro_dir) */
  long paste_work;      /* tokens read resolving pastes (check_paste) */
  kl_flags flags;
  char note[64][96]; /* first finding per bit */
  int note_line[64];
} scanner;

/* The scanner by_name and by_macro_name compare in: qsort and bsearch have
 * no context argument. One per thread: the evaluator's slot threads scan
 * candidates at once (lab/evaluator.c), and a shared pointer let one
 * thread's comparisons read another's tokens and text, freed when that
 * scan ended (an ASan heap-use-after-free in memcmp from text_cmp in a
 * `kernlab run`, a crash without ASan; tests/unit/test_scan.c). */
static _Thread_local const scanner *sort_scanner;

static int is_ident_start(int c) {
  return c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
         c == '$' || c >= 0x80;
}
static int is_ident_char(int c) {
  return is_ident_start(c) || (c >= '0' && c <= '9');
}

static void raise_flag(scanner *s, int bit, int line, const char *fmt,
                       const char *what, int whatlen) {
  /* keep the earliest finding: checks do not run in line order */
  if ((s->flags & KL_FLAG(bit)) && s->note_line[bit] <= line) return;
  s->flags |= KL_FLAG(bit);
  s->note_line[bit] = line;
  char w[64];
  if (whatlen > (int)sizeof w - 1) whatlen = (int)sizeof w - 1;
  memcpy(w, what, (size_t)whatlen);
  w[whatlen] = 0;
  /* body holds the longest format (under 80) with a 63-byte name; the note
   * may cut it, on purpose: a note is one short line. */
  char body[160];
  snprintf(body, sizeof body, fmt, w);
  snprintf(s->note[bit], sizeof s->note[bit], "line %d: %.*s", line,
           (int)sizeof s->note[bit] - 20, body);
}

static int tok_is(const scanner *s, int i, const char *word) {
  if (i < 0 || i >= s->ntok) return 0;
  const token *t = &s->tok[i];
  size_t n = strlen(word);
  return (size_t)t->len == n && !memcmp(s->text + t->start, word, n);
}

static int tok_punct(const scanner *s, int i, const char *p) {
  return i >= 0 && i < s->ntok && s->tok[i].kind == T_PUNCT && tok_is(s, i, p);
}

/* Joins line splices; line_of keeps each character's original line. */
static int join_splices(scanner *s, const char *src, size_t len) {
  s->text = malloc(len + 1);
  s->line_of = malloc((len + 1) * sizeof(int));
  if (!s->text || !s->line_of) return -1;
  int line = 1, j = 0;
  for (size_t i = 0; i < len; i++) {
    if (src[i] == '\\' && i + 1 < len && src[i + 1] == '\n') {
      i++, line++;
      continue;
    }
    if (src[i] == '\\' && i + 2 < len && src[i + 1] == '\r' &&
        src[i + 2] == '\n') {
      i += 2, line++;
      continue;
    }
    s->text[j] = src[i];
    s->line_of[j++] = line;
    if (src[i] == '\n') line++;
  }
  s->text[j] = 0;
  s->line_of[j] = line;
  s->n = j;
  return 0;
}

/* Multi-character punctuators the checks care about, longest first. */
static const char *const puncts[] = {"<<<", "##", "%:%:", "::", "->", "<<",
                                     ">>",  "%:", "==",   "!=", "<=", ">="};

/* Splits text into tokens and directives; drops comments. */
static int lex(scanner *s) {
  s->tok = malloc(((size_t)s->n + 1) * sizeof(token));
  s->dir = malloc(((size_t)s->n / 2 + 2) * sizeof(directive));
  if (!s->tok || !s->dir) return -1;
  const char *t = s->text;
  int n = s->n, i = 0, line_start = 1, cur_dir = -1;
  while (i < n) {
    int c = (unsigned char)t[i];
    if (c == '\n') {
      if (cur_dir >= 0) {
        s->dir[cur_dir].end = s->ntok;
        s->dir[cur_dir].stop = i;
      }
      cur_dir = -1;
      line_start = 1;
      i++;
      continue;
    }
    if (c == ' ' || c == '\t' || c == '\r' || c == '\f' || c == '\v') {
      i++;
      continue;
    }
    if (c == '/' && i + 1 < n && t[i + 1] == '/') {
      while (i < n && t[i] != '\n')
        i++;
      continue;
    }
    if (c == '/' && i + 1 < n && t[i + 1] == '*') {
      i += 2;
      /* A comment is one space (translation phase 3, before directives):
       * one that spans lines inside a directive does not end it, as
       * `#if /<star> newline <star>/ defined(__SSE2__)` would have it. */
      while (i < n && !(t[i] == '*' && i + 1 < n && t[i + 1] == '/')) {
        if (t[i] == '\n' && cur_dir < 0) line_start = 1;
        i++;
      }
      i = i < n ? i + 2 : n;
      continue;
    }
    token tk = {T_PUNCT, i, 1, s->line_of[i], cur_dir};
    if (is_ident_start(c)) {
      int j = i;
      while (j < n && is_ident_char((unsigned char)t[j]))
        j++;
      /* string prefixes: u8"", L"", R"delim(...)delim" */
      int plen = j - i;
      int raw = plen >= 1 && t[j - 1] == 'R' &&
                (plen == 1 || (plen == 2 && strchr("uUL", t[i])) ||
                 (plen == 3 && !strncmp(t + i, "u8", 2)));
      int prefix = (plen == 1 && strchr("uUL", t[i])) ||
                   (plen == 2 && !strncmp(t + i, "u8", 2));
      if (j < n && t[j] == '"' && raw) {
        int d = j + 1;
        while (d < n && t[d] != '(' && d - j <= 17)
          d++;
        int dlen = d - j - 1;
        int k = d + 1;
        while (k < n && !(t[k] == ')' && k + 1 + dlen < n &&
                          !memcmp(t + k + 1, t + j + 1, (size_t)dlen) &&
                          t[k + 1 + dlen] == '"'))
          k++;
        k = k < n ? k + dlen + 2 : n;
        tk.kind = T_STR, tk.len = k - i;
        s->tok[s->ntok++] = tk;
        i = k;
        line_start = 0;
        continue;
      }
      if (j < n && (t[j] == '"' || t[j] == '\'') && prefix) {
        i = j; /* lex the literal below, keeping the prefix in the token */
        c = t[i];
      } else {
        tk.kind = T_IDENT, tk.len = j - i;
        s->tok[s->ntok++] = tk;
        i = j;
        line_start = 0;
        continue;
      }
    }
    if (c == '"' || c == '\'') {
      int q = c, j = i + 1;
      while (j < n && t[j] != q && t[j] != '\n') {
        if (t[j] == '\\' && j + 1 < n) j++;
        j++;
      }
      if (j < n && t[j] == q) j++;
      tk.kind = T_STR, tk.len = j - tk.start;
      s->tok[s->ntok++] = tk;
      i = j;
      line_start = 0;
      continue;
    }
    if ((c >= '0' && c <= '9') ||
        (c == '.' && i + 1 < n && t[i + 1] >= '0' && t[i + 1] <= '9')) {
      int j = i + 1;
      while (j < n) {
        int d = (unsigned char)t[j];
        if (is_ident_char(d) || d == '.')
          j++;
        else if ((d == '+' || d == '-') && strchr("eEpP", t[j - 1]))
          j++;
        else if (d == '\'' && j + 1 < n &&
                 is_ident_char((unsigned char)t[j + 1]))
          j++; /* digit separator */
        else
          break;
      }
      tk.kind = T_NUM, tk.len = j - i;
      s->tok[s->ntok++] = tk;
      i = j;
      line_start = 0;
      continue;
    }
    for (size_t p = 0; p < sizeof puncts / sizeof puncts[0]; p++) {
      size_t pl = strlen(puncts[p]);
      if ((size_t)(n - i) >= pl && !memcmp(t + i, puncts[p], pl)) {
        tk.len = (int)pl;
        break;
      }
    }
    /* The digraphs <% %> <: :> are { } [ ] to both compilers (a kernel
     * body in <% %> hid its static locals from the scope tracker): they
     * are rewritten so in the scanner's copy. `<::` not followed by : or
     * > is `<` then `::` (C++11). */
    int digraph = -1;
    if (i + 1 < n) {
      static const char *const dg[] = {"<%", "%>", "<:", ":>"};
      for (int g = 0; g < 4; g++)
        if (t[i] == dg[g][0] && t[i + 1] == dg[g][1]) digraph = g;
      if (digraph == 2 && i + 2 < n && t[i + 2] == ':' &&
          !(i + 3 < n && (t[i + 3] == ':' || t[i + 3] == '>')))
        digraph = -1;
    }
    if (digraph >= 0) {
      s->text[i] = "{}[]"[digraph];
      s->text[i + 1] = ' ';
      tk.len = 1;
      s->tok[s->ntok++] = tk;
      i += 2;
      line_start = 0;
      continue;
    }
    int hash = (tk.len == 1 && c == '#') || (tk.len == 2 && c == '%');
    if (hash && line_start) {
      /* a directive: '#' first on its line; record the name that follows */
      directive *d = &s->dir[s->ndir];
      d->first = s->ntok;
      d->end = s->ntok;
      d->line = tk.line;
      d->start = i + tk.len;
      d->stop = n;
      cur_dir = s->ndir++;
      i += tk.len;
      line_start = 0;
      continue; /* the '#' itself is not a token */
    }
    s->tok[s->ntok++] = tk;
    i += tk.len;
    line_start = 0;
  }
  if (cur_dir >= 0) {
    s->dir[cur_dir].end = s->ntok;
    s->dir[cur_dir].stop = n;
  }
  /* The directive's name is its first token; its text starts after it. */
  for (int d = 0; d < s->ndir; d++) {
    directive *dr = &s->dir[d];
    if (dr->first < dr->end && s->tok[dr->first].kind == T_IDENT)
      dr->start = s->tok[dr->first].start + s->tok[dr->first].len;
    else
      dr->first = -1;
  }
  return 0;
}

static int dir_is(const scanner *s, int d, const char *name) {
  return s->dir[d].first >= 0 && tok_is(s, s->dir[d].first, name);
}

/* Byte order of two names, shorter first on a common prefix: the order
 * of the sorted name tables (constant_var, macros). */
static int text_cmp(const char *a, int al, const char *b, int bl) {
  int c = memcmp(a, b, (size_t)(al < bl ? al : bl));
  return c ? c : al - bl;
}

/* The name token of #define directive d. */
static const token *macro_name(const scanner *s, int d) {
  return &s->tok[s->dir[d].first + 1];
}

static int by_macro_name(const void *x, const void *y) {
  const token *a = macro_name(sort_scanner, *(const int *)x);
  const token *b = macro_name(sort_scanner, *(const int *)y);
  return text_cmp(sort_scanner->text + a->start, a->len,
                  sort_scanner->text + b->start, b->len);
}

/* Sorts the file's #define directives by name (s->macros), so that every
 * check asking whether a name is a macro of the file (pastes, #if, the
 * declarations) looks it up instead of walking the directives. */
static int index_macros(scanner *s) {
  s->macros = malloc(((size_t)s->ndir + 1) * sizeof(int));
  if (!s->macros) return -1;
  for (int d = 0; d < s->ndir; d++)
    if (dir_is(s, d, "define") && s->dir[d].first + 1 < s->dir[d].end &&
        macro_name(s, d)->kind == T_IDENT)
      s->macros[s->nmacros++] = d;
  sort_scanner = s;
  qsort(s->macros, (size_t)s->nmacros, sizeof(int), by_macro_name);
  return 0;
}

/* The #define directive of the macro named w[0..len), or -1. */
static int macro_lookup(const scanner *s, const char *w, int len) {
  int lo = 0, hi = s->nmacros - 1;
  while (lo <= hi) {
    int mid = (lo + hi) / 2;
    const token *m = macro_name(s, s->macros[mid]);
    int c = text_cmp(s->text + m->start, m->len, w, len);
    if (!c) return s->macros[mid];
    if (c < 0)
      lo = mid + 1;
    else
      hi = mid - 1;
  }
  return -1;
}

/* ---- the name table -----------------------------------------------------
 */

enum {
  M_EXACT,   /* the whole identifier */
  M_PREFIX,  /* starts with */
  M_CONTAIN, /* contains */
  M_CALL,    /* the whole identifier, called: followed by '(' */
  M_TYPE,    /* the whole identifier, used as a type (see half_as_type) */
};

typedef struct name_rule {
  const char *word;
  int mode;
  int bit;
} name_rule;

#define R_(w, m, b)                                                            \
  { w, m, KL_FLAG_##b }
static const name_rule name_rules[] = {
    /* a mutable member makes a const (read-only looking) object state */
    R_("mutable", M_EXACT, MUTABLE_DEVICE_STATE),
    R_("asm", M_EXACT, INLINE_ASM),
    R_("__asm__", M_EXACT, INLINE_ASM),
    R_("__asm", M_EXACT, INLINE_ASM),

    R_("clock", M_EXACT, TIMER_READ),
    R_("clock64", M_EXACT, TIMER_READ),
    R_("__clock", M_PREFIX, TIMER_READ),
    R_("globaltimer", M_CONTAIN, TIMER_READ),
    R_("clock_gettime", M_EXACT, TIMER_READ),
    R_("gettimeofday", M_EXACT, TIMER_READ),
    R_("timespec_get", M_EXACT, TIMER_READ),
    R_("rdtsc", M_CONTAIN, TIMER_READ),
    R_("chrono", M_EXACT, TIMER_READ),
    R_("steady_clock", M_EXACT, TIMER_READ),
    R_("system_clock", M_EXACT, TIMER_READ),
    R_("high_resolution_clock", M_EXACT, TIMER_READ),
    R_("__builtin_readcyclecounter", M_EXACT, TIMER_READ),
    /* cuda_pipeline.h brings cuda_awbarrier.h, whose timed waits spin on
     * clock64 (a wait bounded in cycles tells time) */
    R_("timed_wait", M_PREFIX, TIMER_READ),
    R_("__builtin_readsteadycounter", M_EXACT, TIMER_READ),
    R_("time", M_CALL, TIMER_READ),

    R_("printf", M_EXACT, PRINTF),
    R_("vprintf", M_EXACT, PRINTF),
    R_("fprintf", M_EXACT, PRINTF),
    R_("puts", M_EXACT, PRINTF),
    R_("putchar", M_EXACT, PRINTF),
    R_("fputs", M_EXACT, PRINTF),
    R_("fwrite", M_EXACT, PRINTF),
    R_("cout", M_EXACT, PRINTF),
    R_("cerr", M_EXACT, PRINTF),
    R_("__assertfail", M_EXACT, PRINTF),
    R_("__assert_fail", M_EXACT, PRINTF),

    R_("malloc", M_EXACT, DEVICE_MALLOC),
    R_("calloc", M_EXACT, DEVICE_MALLOC),
    R_("realloc", M_EXACT, DEVICE_MALLOC),
    R_("free", M_EXACT, DEVICE_MALLOC),
    R_("aligned_alloc", M_EXACT, DEVICE_MALLOC),
    R_("posix_memalign", M_EXACT, DEVICE_MALLOC),
    R_("memalign", M_EXACT, DEVICE_MALLOC),
    R_("alloca", M_EXACT, DEVICE_MALLOC),
    R_("reallocarray", M_EXACT, DEVICE_MALLOC),
    R_("valloc", M_EXACT, DEVICE_MALLOC),
    R_("pvalloc", M_EXACT, DEVICE_MALLOC),
    R_("__libc_", M_PREFIX, DEVICE_MALLOC), /* __libc_malloc, __libc_calloc */
    R_("strdup", M_EXACT, DEVICE_MALLOC),
    R_("strndup", M_EXACT, DEVICE_MALLOC),
    R_("asprintf", M_EXACT, DEVICE_MALLOC),
    R_("vasprintf", M_EXACT, DEVICE_MALLOC),
    R_("sbrk", M_CALL, DEVICE_MALLOC),
    R_("brk", M_CALL, DEVICE_MALLOC),
    R_("__builtin_alloca", M_PREFIX, DEVICE_MALLOC),
    R_("__nv_aligned_device_malloc", M_EXACT, DEVICE_MALLOC),
    R_("cudaMalloc", M_PREFIX, DEVICE_MALLOC),
    R_("cudaFree", M_PREFIX, DEVICE_MALLOC),
    R_("cuMemAlloc", M_PREFIX, DEVICE_MALLOC),
    R_("new", M_EXACT, DEVICE_MALLOC),
    R_("delete", M_EXACT, DEVICE_MALLOC), /* not `= delete` (see below) */

    R_("cudaStream", M_PREFIX, STREAM_OR_EVENT),
    R_("cudaEvent", M_PREFIX, STREAM_OR_EVENT),
    R_("cuStream", M_PREFIX, STREAM_OR_EVENT),
    R_("cuEvent", M_PREFIX, STREAM_OR_EVENT),
    R_("cudaMemcpyAsync", M_EXACT, STREAM_OR_EVENT),
    R_("cudaMemsetAsync", M_EXACT, STREAM_OR_EVENT),

    R_("cudaLaunch", M_PREFIX, GRAPH_OR_DYNPAR),
    R_("cuLaunch", M_PREFIX, GRAPH_OR_DYNPAR),
    R_("cudaGraph", M_PREFIX, GRAPH_OR_DYNPAR),
    R_("cuGraph", M_PREFIX, GRAPH_OR_DYNPAR),
    R_("cudaDeviceSynchronize", M_EXACT, GRAPH_OR_DYNPAR),
    R_("cudaGetParameterBuffer", M_PREFIX, GRAPH_OR_DYNPAR),

    R_("this_grid", M_EXACT, COOP_GRID_SYNC),
    R_("grid_group", M_EXACT, COOP_GRID_SYNC),
    R_("this_multi_grid", M_EXACT, COOP_GRID_SYNC),
    R_("multi_grid_group", M_EXACT, COOP_GRID_SYNC),
    R_("sync_grids", M_EXACT, COOP_GRID_SYNC),
    R_("cudaLaunchCooperativeKernel", M_PREFIX, COOP_GRID_SYNC),
    R_("cudaCG", M_PREFIX, COOP_GRID_SYNC),

    /* compiler and platform macros: only a branch on the pass needs them */
    R_("__CUDA_ARCH", M_PREFIX, COMPILE_PASS_BRANCH),
    R_("__CUDACC", M_PREFIX, COMPILE_PASS_BRANCH),
    R_("__NVCC", M_PREFIX, COMPILE_PASS_BRANCH),
    R_("__NVCOMPILER", M_PREFIX, COMPILE_PASS_BRANCH),
    R_("NV_IF_TARGET", M_EXACT, COMPILE_PASS_BRANCH),
    R_("NV_IF_ELSE_TARGET", M_EXACT, COMPILE_PASS_BRANCH),
    R_("NV_IS_HOST", M_EXACT, COMPILE_PASS_BRANCH),
    R_("NV_IS_DEVICE", M_EXACT, COMPILE_PASS_BRANCH),
    R_("NV_PROVIDES_SM", M_PREFIX, COMPILE_PASS_BRANCH),
    R_("__GNUC", M_PREFIX, COMPILE_PASS_BRANCH),
    R_("__GNUG__", M_EXACT, COMPILE_PASS_BRANCH),
    R_("__clang", M_PREFIX, COMPILE_PASS_BRANCH),
    R_("__x86_64", M_PREFIX, COMPILE_PASS_BRANCH),
    R_("__aarch64__", M_EXACT, COMPILE_PASS_BRANCH),
    R_("__linux", M_PREFIX, COMPILE_PASS_BRANCH),
    R_("__unix", M_PREFIX, COMPILE_PASS_BRANCH),
    R_("_WIN32", M_EXACT, COMPILE_PASS_BRANCH),
    R_("__STDC_HOSTED__", M_EXACT, COMPILE_PASS_BRANCH),
    R_("__has_include", M_PREFIX, COMPILE_PASS_BRANCH),
    R_("KL_EMU", M_PREFIX, COMPILE_PASS_BRANCH),
    R_("__TIME__", M_EXACT, COMPILE_PASS_BRANCH),
    R_("__DATE__", M_EXACT, COMPILE_PASS_BRANCH),
    R_("__TIMESTAMP__", M_EXACT, COMPILE_PASS_BRANCH),
    R_("__FILE__", M_EXACT, COMPILE_PASS_BRANCH),
    R_("__BASE_FILE__", M_EXACT, COMPILE_PASS_BRANCH),
    R_("__FILE_NAME__", M_EXACT, COMPILE_PASS_BRANCH),
    R_("__builtin_frame_address", M_EXACT, COMPILE_PASS_BRANCH),
    R_("__builtin_return_address", M_EXACT, COMPILE_PASS_BRANCH),
    R_("__builtin_extract_return_addr", M_EXACT, COMPILE_PASS_BRANCH),
    R_("__builtin_dwarf_cfa", M_EXACT, COMPILE_PASS_BRANCH),
    R_("__builtin_ia32_", M_PREFIX, COMPILE_PASS_BRANCH),
    R_("__builtin_cpu_", M_PREFIX, COMPILE_PASS_BRANCH),
    R_("environ", M_EXACT, COMPILE_PASS_BRANCH),
    R_("__environ", M_EXACT, COMPILE_PASS_BRANCH),
    /* host functions: only when called (a variable may be named `read`) */
    R_("open", M_CALL, COMPILE_PASS_BRANCH),
    R_("open64", M_CALL, COMPILE_PASS_BRANCH),
    R_("openat", M_CALL, COMPILE_PASS_BRANCH),
    R_("creat", M_CALL, COMPILE_PASS_BRANCH),
    R_("fopen", M_CALL, COMPILE_PASS_BRANCH),
    R_("freopen", M_CALL, COMPILE_PASS_BRANCH),
    R_("popen", M_CALL, COMPILE_PASS_BRANCH),
    R_("system", M_CALL, COMPILE_PASS_BRANCH),
    R_("execl", M_CALL, COMPILE_PASS_BRANCH),
    R_("execle", M_CALL, COMPILE_PASS_BRANCH),
    R_("execlp", M_CALL, COMPILE_PASS_BRANCH),
    R_("execv", M_CALL, COMPILE_PASS_BRANCH),
    R_("execve", M_CALL, COMPILE_PASS_BRANCH),
    R_("execvp", M_CALL, COMPILE_PASS_BRANCH),
    R_("execvpe", M_CALL, COMPILE_PASS_BRANCH),
    R_("fexecve", M_CALL, COMPILE_PASS_BRANCH),
    R_("posix_spawn", M_PREFIX, COMPILE_PASS_BRANCH),
    R_("fork", M_CALL, COMPILE_PASS_BRANCH),
    R_("vfork", M_CALL, COMPILE_PASS_BRANCH),
    R_("clone", M_CALL, COMPILE_PASS_BRANCH),
    R_("clone3", M_CALL, COMPILE_PASS_BRANCH),
    R_("socket", M_CALL, COMPILE_PASS_BRANCH),
    R_("socketpair", M_CALL, COMPILE_PASS_BRANCH),
    R_("connect", M_CALL, COMPILE_PASS_BRANCH),
    R_("bind", M_CALL, COMPILE_PASS_BRANCH),
    R_("listen", M_CALL, COMPILE_PASS_BRANCH),
    R_("accept", M_CALL, COMPILE_PASS_BRANCH),
    R_("send", M_CALL, COMPILE_PASS_BRANCH),
    R_("sendto", M_CALL, COMPILE_PASS_BRANCH),
    R_("recv", M_CALL, COMPILE_PASS_BRANCH),
    R_("recvfrom", M_CALL, COMPILE_PASS_BRANCH),
    R_("kill", M_CALL, COMPILE_PASS_BRANCH),
    R_("tgkill", M_CALL, COMPILE_PASS_BRANCH),
    R_("raise", M_CALL, COMPILE_PASS_BRANCH),
    R_("getpid", M_CALL, COMPILE_PASS_BRANCH),
    R_("getppid", M_CALL, COMPILE_PASS_BRANCH),
    R_("gettid", M_CALL, COMPILE_PASS_BRANCH),
    R_("syscall", M_CALL, COMPILE_PASS_BRANCH),
    R_("dlopen", M_CALL, COMPILE_PASS_BRANCH),
    R_("dlsym", M_CALL, COMPILE_PASS_BRANCH),
    R_("mmap", M_CALL, COMPILE_PASS_BRANCH),
    R_("munmap", M_CALL, COMPILE_PASS_BRANCH),
    R_("mprotect", M_CALL, COMPILE_PASS_BRANCH),
    R_("ptrace", M_CALL, COMPILE_PASS_BRANCH),
    R_("prctl", M_CALL, COMPILE_PASS_BRANCH),
    R_("pthread_", M_PREFIX, COMPILE_PASS_BRANCH),
    R_("signal", M_CALL, COMPILE_PASS_BRANCH),
    R_("sigaction", M_CALL, COMPILE_PASS_BRANCH),
    R_("read", M_CALL, COMPILE_PASS_BRANCH),
    R_("write", M_CALL, COMPILE_PASS_BRANCH),
    R_("pread", M_CALL, COMPILE_PASS_BRANCH),
    R_("pwrite", M_CALL, COMPILE_PASS_BRANCH),
    R_("close", M_CALL, COMPILE_PASS_BRANCH),
    R_("unlink", M_CALL, COMPILE_PASS_BRANCH),
    R_("remove", M_CALL, COMPILE_PASS_BRANCH),
    R_("rename", M_CALL, COMPILE_PASS_BRANCH),
    R_("mkdir", M_CALL, COMPILE_PASS_BRANCH),
    R_("getenv", M_CALL, COMPILE_PASS_BRANCH),
    R_("setenv", M_CALL, COMPILE_PASS_BRANCH),
    R_("putenv", M_CALL, COMPILE_PASS_BRANCH),
    R_("unsetenv", M_CALL, COMPILE_PASS_BRANCH),
    R_("clearenv", M_CALL, COMPILE_PASS_BRANCH),
    R_("secure_getenv", M_CALL, COMPILE_PASS_BRANCH),
    R_("memfd_create", M_CALL, COMPILE_PASS_BRANCH),
    R_("shmget", M_CALL, COMPILE_PASS_BRANCH),
    R_("shmat", M_CALL, COMPILE_PASS_BRANCH),
    R_("tmpfile", M_CALL, COMPILE_PASS_BRANCH),
    R_("mkstemp", M_CALL, COMPILE_PASS_BRANCH),
    R_("atexit", M_CALL, COMPILE_PASS_BRANCH),
    R_("exit", M_CALL, COMPILE_PASS_BRANCH),
    R_("_exit", M_CALL, COMPILE_PASS_BRANCH),
    R_("_Exit", M_CALL, COMPILE_PASS_BRANCH),
    R_("quick_exit", M_CALL, COMPILE_PASS_BRANCH),
    R_("abort", M_CALL, COMPILE_PASS_BRANCH),
    R_("sleep", M_CALL, COMPILE_PASS_BRANCH),
    R_("usleep", M_CALL, COMPILE_PASS_BRANCH),
    R_("nanosleep", M_CALL, COMPILE_PASS_BRANCH),
    R_("ioctl", M_CALL, COMPILE_PASS_BRANCH),
    R_("fcntl", M_CALL, COMPILE_PASS_BRANCH),
    R_("pipe", M_CALL, COMPILE_PASS_BRANCH),
    R_("dup2", M_CALL, COMPILE_PASS_BRANCH),
    R_("setjmp", M_CALL, COMPILE_PASS_BRANCH),
    R_("longjmp", M_CALL, COMPILE_PASS_BRANCH),

    R_("half", M_TYPE, PRECISION_DOWNGRADE),
    R_("half2", M_EXACT, PRECISION_DOWNGRADE),
    R_("__half", M_PREFIX, PRECISION_DOWNGRADE), /* __half, __half2, ... */
    R_("bfloat16", M_CONTAIN, PRECISION_DOWNGRADE),
    R_("bfloat162", M_CONTAIN, PRECISION_DOWNGRADE),
    R_("bf16", M_CONTAIN, PRECISION_DOWNGRADE),
    R_("2half", M_CONTAIN, PRECISION_DOWNGRADE), /* __float2half_rn ... */
    R_("half2float", M_CONTAIN, PRECISION_DOWNGRADE),
    R_("half_as", M_CONTAIN, PRECISION_DOWNGRADE),
    R_("as_half", M_CONTAIN, PRECISION_DOWNGRADE),
    R_("tf32", M_CONTAIN, PRECISION_DOWNGRADE),
    R_("fp8", M_CONTAIN, PRECISION_DOWNGRADE),
    R_("e4m3", M_CONTAIN, PRECISION_DOWNGRADE),
    R_("e5m2", M_CONTAIN, PRECISION_DOWNGRADE),
    R_("__nv_cvt", M_PREFIX, PRECISION_DOWNGRADE),
    R_("wmma", M_EXACT, PRECISION_DOWNGRADE),
    R_("nvcuda", M_EXACT, PRECISION_DOWNGRADE),
    R_("__hadd", M_PREFIX, PRECISION_DOWNGRADE),
    R_("__hsub", M_PREFIX, PRECISION_DOWNGRADE),
    R_("__hmul", M_PREFIX, PRECISION_DOWNGRADE),
    R_("__hdiv", M_PREFIX, PRECISION_DOWNGRADE),
    R_("__hfma", M_PREFIX, PRECISION_DOWNGRADE),
    R_("__hneg", M_PREFIX, PRECISION_DOWNGRADE),
    R_("__hmax", M_PREFIX, PRECISION_DOWNGRADE),
    R_("__hmin", M_PREFIX, PRECISION_DOWNGRADE),
};
#undef R_

/* `half` is a type when followed by a declarator or used in a cast or a
 * template argument: `half x`, `half*`, `half(`, `<half>`, `(half)`. A
 * variable named half (`k < half;`) is not. */
static int half_as_type(const scanner *s, int i) {
  int nx = i + 1;
  if (nx < s->ntok) {
    const token *t = &s->tok[nx];
    if (t->kind == T_IDENT) return 1;
    if (tok_punct(s, nx, "*") || tok_punct(s, nx, "&") ||
        tok_punct(s, nx, "::") || tok_punct(s, nx, "("))
      return 1;
    /* a template argument, <half> or <float, half>; `half > 0` in a loop
     * over halves is a comparison */
    if (tok_punct(s, nx, ">"))
      return tok_punct(s, i - 1, "<") || tok_punct(s, i - 1, ",");
    if (tok_punct(s, nx, ")") && tok_punct(s, i - 1, "(")) return 1;
  }
  return 0;
}

/* 1 if the `mutable` at token i follows a lambda's parameters, `[...](...)
 * mutable`: its captured copies live for one call of the lambda, not
 * across launches (a class member's `mutable` is still flagged, even after
 * an attribute's parentheses). */
static int lambda_mutable(const scanner *s, int i) {
  if (!tok_punct(s, i - 1, ")")) return 0;
  int depth = 0;
  for (int q = i - 1; q >= 0 && q >= i - 4096; q--) {
    if (tok_punct(s, q, ")")) depth++;
    if (tok_punct(s, q, "(") && --depth == 0) return tok_punct(s, q - 1, "]");
  }
  return 0;
}

static void check_name_as(scanner *s, const char *w, int len, const char *full,
                          int flen, int line, int i);

/* Applies the name table to w[0..len). i: its token (context for M_CALL and
 * M_TYPE), or -1 for a name built by pasting (counted as called). */
static void check_name(scanner *s, const char *w, int len, int line, int i) {
  /* GCC's __builtin_ spelling of a library function is that function
   * (__builtin_malloc, __builtin_printf, __builtin_exit): g++ calls the
   * host's, NVRTC refuses it, and a template chosen by blockDim's type
   * keeps it from NVRTC (tests/cheats/memo_builtin_malloc.cu, the third
   * review). The rules see it under both names. */
  if (len > 10 && !memcmp(w, "__builtin_", 10)) {
    check_name_as(s, w + 10, len - 10, w, len, line, i);
    if (len > 11 && w[10] == '_') /* __builtin___memcpy_chk */
      check_name_as(s, w + 11, len - 11, w, len, line, i);
  }
  check_name_as(s, w, len, w, len, line, i);
}

/* Applies the name table to w[0..len); the note names full[0..flen). */
static void check_name_as(scanner *s, const char *w, int len, const char *full,
                          int flen, int line, int i) {
  for (size_t r = 0; r < sizeof name_rules / sizeof name_rules[0]; r++) {
    const name_rule *nr = &name_rules[r];
    int wl = (int)strlen(nr->word), hit = 0;
    switch (nr->mode) {
    case M_EXACT:
      hit = wl == len && !memcmp(w, nr->word, (size_t)len);
      break;
    case M_PREFIX:
      hit = len >= wl && !memcmp(w, nr->word, (size_t)wl);
      break;
    case M_CONTAIN:
      for (int k = 0; k + wl <= len && !hit; k++)
        hit = !memcmp(w + k, nr->word, (size_t)wl);
      break;
    case M_CALL:
      hit = wl == len && !memcmp(w, nr->word, (size_t)len);
      /* Called, or named in parentheses: `(getenv)("X")` calls it too.
       * A __device__ function of the same name does not clear it: the
       * emulator's g++ sees the host one as well and may pick it (a
       * template getenv(T) loses to glibc's getenv(const char*)), so a
       * helper named like a host function is flagged with it. */
      if (hit && i >= 0)
        hit = (tok_punct(s, i + 1, "(") ||
               (tok_punct(s, i + 1, ")") && tok_punct(s, i - 1, "("))) &&
              !tok_punct(s, i - 1, ".") && !tok_punct(s, i - 1, "->");
      break;
    case M_TYPE:
      hit = wl == len && !memcmp(w, nr->word, (size_t)len);
      if (hit && i >= 0) hit = half_as_type(s, i);
      break;
    }
    if (hit && nr->bit == KL_FLAG_DEVICE_MALLOC && i >= 0 &&
        tok_is(s, i, "delete") && tok_punct(s, i - 1, "="))
      hit = 0; /* a deleted function, not a delete expression */
    if (hit && i >= 0 && tok_is(s, i, "mutable") && lambda_mutable(s, i))
      hit = 0;
    /* a branch on the CUDA compiler: say what to do instead */
    int cuda_macro =
        nr->bit == KL_FLAG_COMPILE_PASS_BRANCH &&
        (!strncmp(nr->word, "__CUDA", 6) || !strncmp(nr->word, "__NVC", 5) ||
         !strncmp(nr->word, "NV_", 3));
    if (hit)
      raise_flag(s, nr->bit, line,
                 cuda_macro ? "%s (sm_90 is the only target: write one path)"
                            : "%s",
                 full, flen);
  }
  /* cuda*/ /*cu* runtime and driver API (cudaMemcpy, cuModuleGetGlobal) */
  if ((len > 4 && !memcmp(w, "cuda", 4) && w[4] >= 'A' && w[4] <= 'Z') ||
      (len > 3 && w[0] == 'c' && w[1] == 'u' && w[2] >= 'A' && w[2] <= 'Z' &&
       w[3] >= 'a' && w[3] <= 'z'))
    raise_flag(s, KL_FLAG_RUNTIME_API, line, "%s", full, flen);
}

/* ---- directives ---------------------------------------------------------
 */

static int macro_lookup(const scanner *s, const char *w, int len);

/* 1 if the file #defines this name anywhere. */
static int file_defines(const scanner *s, const char *w, int len) {
  return macro_lookup(s, w, len) >= 0;
}

static void check_include(scanner *s, int d) {
  const directive *dr = &s->dir[d];
  const char *p = s->text + dr->start, *end = s->text + dr->stop;
  while (p < end && (*p == ' ' || *p == '\t'))
    p++;
  char close = *p == '<' ? '>' : (*p == '"' ? '"' : 0);
  const char *q = close ? memchr(p + 1, close, (size_t)(end - p - 1)) : NULL;
  int ok = 0;
  if (q && dir_is(s, d, "include"))
    ok = kl_include_allowed(p + 1, (size_t)(q - p - 1));
  if (!ok) {
    int wl = (int)(end - p);
    raise_flag(s, KL_FLAG_DISALLOWED_INCLUDE, dr->line, "#include %s", p,
               wl > 40 ? 40 : wl);
  }
}

/* Every macro the emulator's compile defines once the shim is included
 * (its own, and its libc headers': EOF, NAN, M_PI, INT32_MAX ...), listed
 * at build time by the same compiler (cmake/shim_macros.cmake). */
extern const char *const kl_shim_macro_names[];
extern const int kl_shim_macro_count;

/* Macros the emulator's shim (kernels/emu/cuda_shim.h) defines and NVRTC
 * does not: an #if on one is a compiler-pass branch, whatever the file
 * #defines (`#if 0 #define EOF #endif`, then `#ifdef EOF`, was a branch
 * only g++ took; an adversarial review found it). */
static int shim_macro(const char *w, int len) {
  static const char *const names[] = {"threadIdx", "blockIdx",     "blockDim",
                                      "gridDim",   "warpSize",     "KL_VEC2",
                                      "KL_VEC4",   "KL_ATOMIC_INT"};
  if (len > 6 && !memcmp(w, "KL_EMU", 6)) return 1;
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
    if ((int)strlen(names[i]) == len && !memcmp(names[i], w, (size_t)len))
      return 1;
  for (int i = 0; i < kl_shim_macro_count; i++)
    if (!strncmp(kl_shim_macro_names[i], w, (size_t)len) &&
        kl_shim_macro_names[i][len] == 0)
      return 1;
  /* and the other way: names NVRTC predefines with no include (its
   * built-in runtime header's), which g++ with the shim does not (the
   * second review probed them from libnvrtc) */
  static const char *const nvrtc[] = {"assert",    "va_arg",       "va_start",
                                      "va_copy",   "va_end",       "CUDARTAPI",
                                      "CUDART_CB", "CUDART_DEVICE"};
  for (size_t i = 0; i < sizeof nvrtc / sizeof nvrtc[0]; i++)
    if ((int)strlen(nvrtc[i]) == len && !memcmp(nvrtc[i], w, (size_t)len))
      return 1;
  /* and what cooperative_groups.h defines under NVRTC and the emulator's
   * does not: libcu++'s (nv/target's NV_*, CCCL_*, LIBCUDACXX_*) and the
   * C library limits it supplies itself, found with grep over
   * include/cooperative_groups* and include/cccl/{cuda,nv} of CUDA 13.0 */
  static const char *const libcuxx[] = {
      "CHAR_BIT",  "CHAR_MAX",    "CHAR_MIN",   "SCHAR_MAX",   "SCHAR_MIN",
      "UCHAR_MAX", "SHRT_MAX",    "SHRT_MIN",   "USHRT_MAX",   "INT_MAX",
      "INT_MIN",   "UINT_MAX",    "LONG_MAX",   "LONG_MIN",    "ULONG_MAX",
      "LLONG_MAX", "LLONG_MIN",   "ULLONG_MAX", "INFINITY",    "NAN",
      "offsetof",  "LOAD_ENVREG", "SIZE_MAX",   "PTRDIFF_MAX", "PTRDIFF_MIN"};
  for (size_t i = 0; i < sizeof libcuxx / sizeof libcuxx[0]; i++)
    if ((int)strlen(libcuxx[i]) == len && !memcmp(libcuxx[i], w, (size_t)len))
      return 1;
  /* the <stdint.h> names (INT8_C, UINT_FAST16_MAX, INTPTR_MIN ...) and FP_*
   * classes, which libcu++ defines as well */
  int stdint =
      (len > 3 && !memcmp(w, "INT", 3)) || (len > 4 && !memcmp(w, "UINT", 4));
  if (stdint && ((len > 2 && !memcmp(w + len - 2, "_C", 2)) ||
                 (len > 4 && (!memcmp(w + len - 4, "_MAX", 4) ||
                              !memcmp(w + len - 4, "_MIN", 4)))))
    return 1;
  return (len > 5 && !memcmp(w, "CUDA_", 5)) ||
         (len > 7 && !memcmp(w, "CUDART_", 7)) ||
         (len > 9 && !memcmp(w, "CUDARTAPI", 9)) ||
         (len > 3 && !memcmp(w, "NV_", 3)) ||
         (len > 5 && !memcmp(w, "CCCL_", 5)) ||
         (len > 11 && !memcmp(w, "LIBCUDACXX_", 11)) ||
         (len > 3 && !memcmp(w, "FP_", 3));
}

/* Directive d is an include guard around the whole file: the first
 * directive, `#ifndef NAME`, then `#define NAME`, and the last directive an
 * #endif. Only around the whole file: a "guard" on a name one compiler
 * predefines (__SSE2__) around part of it would hide that part from that
 * compiler, while a compiler that skips the whole file finds no kernel. */
static int include_guard(const scanner *s, int d, const char *w, int len) {
  if (d != 0 || !dir_is(s, d, "ifndef") || d + 1 >= s->ndir ||
      !dir_is(s, d + 1, "define") || !dir_is(s, s->ndir - 1, "endif"))
    return 0;
  /* the #endif that closes it must be the last directive: `#ifndef
   * __EDG__ ... #endif` around part of the file, then another group
   * ending the file, passed once (the second review) */
  int depth = 0;
  for (int e = 0; e < s->ndir; e++) {
    if (dir_is(s, e, "if") || dir_is(s, e, "ifdef") || dir_is(s, e, "ifndef"))
      depth++;
    else if (dir_is(s, e, "endif") && --depth == 0 && e != s->ndir - 1)
      return 0;
  }
  int nt = s->dir[d + 1].first + 1;
  return nt < s->dir[d + 1].end && s->tok[nt].len == len &&
         !memcmp(s->text + s->tok[nt].start, w, (size_t)len);
}

/* #if/#ifdef/#ifndef/#elif...: a macro the file never defines can only be
 * the compiler's or the platform's, so the branch depends on the pass. */
static void check_conditional(scanner *s, int d) {
  const directive *dr = &s->dir[d];
  for (int i = dr->first + 1; i < dr->end; i++) {
    const token *t = &s->tok[i];
    if (t->kind != T_IDENT) continue;
    const char *w = s->text + t->start;
    if (tok_is(s, i, "defined") || tok_is(s, i, "true") ||
        tok_is(s, i, "false"))
      continue;
    /* a reserved name (__X, _X), or a macro only the emulator's shim
     * defines, is the compiler's whatever the file says: a #define of it
     * in a dead branch must not make it look the file's. An include guard
     * (#ifndef X then #define X) is the file's own, reserved or not. */
    int reserved = (w[0] == '_' && t->len > 1 &&
                    (w[1] == '_' || (w[1] >= 'A' && w[1] <= 'Z'))) ||
                   shim_macro(w, t->len);
    if (reserved && include_guard(s, d, w, t->len)) continue;
    if (reserved || !file_defines(s, w, t->len))
      raise_flag(s, KL_FLAG_COMPILE_PASS_BRANCH, t->line,
                 "#if on %s (never #defined here, or a reserved name)", w,
                 t->len);
  }
}

/* A name built by a paste: the names table, and the storage keywords the
 * declaration checks look for (they read tokens before macros expand, so
 * `S(tic) float memo[...]` with `S(x) sta##x` would be a plain local). */
static void check_pasted(scanner *s, const char *w, int wl, int line) {
  check_name(s, w, wl, line, -1);
  /* a built macro name is expanded with what follows it: CAT(CA, T2)(clo,
   * ck64) calls the pasting macro CAT2 under a name no call search finds
   * (the second adversarial review) */
  if (file_defines(s, w, wl))
    raise_flag(s, KL_FLAG_COMPILE_PASS_BRANCH, line,
               "a paste builds the macro name %s: what it expands to is "
               "unchecked",
               w, wl);
  static const char *const state[] = {"static", "thread_local", "mutable",
                                      "__managed__"};
  for (size_t k = 0; k < sizeof state / sizeof state[0]; k++)
    if ((int)strlen(state[k]) == wl && !memcmp(w, state[k], (size_t)wl))
      raise_flag(s, KL_FLAG_MUTABLE_DEVICE_STATE, line,
                 "a paste builds the keyword %s", w, wl);
  if ((wl == 6 && !memcmp(w, "extern", 6)) ||
      (wl == 8 && !memcmp(w, "__host__", 8)))
    raise_flag(s, KL_FLAG_COMPILE_PASS_BRANCH, line,
               "a paste builds the keyword %s", w, wl);
}

/* A function-like macro's '(' right after its name: its token, or -1 for
 * an object-like macro. */
static int macro_params_end(const scanner *s, int d) {
  int name = s->dir[d].first + 1;
  return name + 1 < s->dir[d].end && tok_punct(s, name + 1, "(") &&
                 s->tok[name + 1].start == s->tok[name].start + s->tok[name].len
             ? name + 1
             : -1;
}

/* The parameters of the function-like macro #defined by directive d:
 * their names (pname, plen; at most 32) and their count, or -1 for an
 * object-like macro. A variadic macro's last parameter (`...`, named
 * __VA_ARGS__, or GNU's `args...`) takes the rest of the arguments:
 * *variadic is then 1. dir[d].params_end is the body's first token. */
static int macro_params(scanner *s, int d, const char **pname, int *plen,
                        int *variadic) {
  directive *dr = &s->dir[d];
  int name = dr->first + 1, np = 0;
  *variadic = 0;
  dr->params_end = name + 1;
  if (name >= dr->end || macro_params_end(s, d) < 0) return -1;
  int i = name + 2;
  for (; i < dr->end && !tok_punct(s, i, ")"); i++) {
    if (s->tok[i].kind == T_IDENT && np < 32) {
      pname[np] = s->text + s->tok[i].start;
      plen[np++] = s->tok[i].len;
    } else if (tok_punct(s, i, ".") && !*variadic && np < 32) {
      *variadic = 1;
      if (s->tok[i - 1].kind != T_IDENT) {
        pname[np] = "__VA_ARGS__";
        plen[np++] = 11;
      }
    }
  }
  dr->params_end = i + 1;
  s->paste_work += i - name; /* check_paste's budget: see there */
  return np;
}

/* 1 if token j is in a #define's body (or its name). */
static int in_define(const scanner *s, int j) {
  return s->tok[j].dir >= 0 && dir_is(s, s->tok[j].dir, "define");
}

/* A pasting macro used in a way check_paste does not follow: through
 * another macro, whose own arguments would have to be expanded first. */
static void unresolved_paste(scanner *s, const token *name, int line,
                             const char *how) {
  char w[64];
  int wl = snprintf(w, sizeof w, "%.*s %s", name->len > 32 ? 32 : name->len,
                    s->text + name->start, how);
  raise_flag(s, KL_FLAG_COMPILE_PASS_BRANCH, line,
             "the pasting macro %s: the names it builds are unchecked", w,
             wl < (int)sizeof w ? wl : (int)sizeof w - 1);
}

/* Token pasting: `a ## b ## c` in a #define body. Literal pieces are joined
 * and checked at once; chains with parameters are joined again at each
 * invocation of the macro with its (literal) arguments. */
static void check_paste(scanner *s, int d) {
  const directive *dr = &s->dir[d];
  int name = dr->first + 1, body = name + 1;
  if (name >= dr->end || s->tok[name].kind != T_IDENT) return;
  const token *nt = &s->tok[name];
  const char *pname[33];
  int plen[33], variadic, np = macro_params(s, d, pname, plen, &variadic);
  if (np >= 0) body = s->dir[d].params_end;
  for (int i = body; i < dr->end; i++) {
    if (!(tok_punct(s, i, "##") || tok_punct(s, i, "%:%:"))) continue;
    /* the chain around this ##: back to its first piece, forward to its
     * last; handled once, from its first ## */
    int a = i - 1;
    if (a - 1 >= body &&
        (tok_punct(s, a - 1, "##") || tok_punct(s, a - 1, "%:%:")))
      continue;
    int pieces[16], npc = 0, more = 0;
    for (int k = a; k < dr->end; k += 2) {
      if (npc == 16) { /* pieces past 16 were dropped from the name */
        more = 1;
        break;
      }
      pieces[npc++] = k;
      if (!(k + 1 < dr->end &&
            (tok_punct(s, k + 1, "##") || tok_punct(s, k + 1, "%:%:"))))
        break;
    }
    if (more || np >= 31) {
      unresolved_paste(s, nt, s->tok[a].line,
                       more ? "pastes more than 16 pieces"
                            : "has more than 30 parameters");
      return;
    }
    /* which pieces are parameters (argument index), -1 for literal text */
    int argi[16], any_param = 0;
    for (int k = 0; k < npc; k++) {
      argi[k] = -1;
      for (int p = 0; p < np; p++)
        if (s->tok[pieces[k]].len == plen[p] &&
            !memcmp(s->text + s->tok[pieces[k]].start, pname[p],
                    (size_t)plen[p]))
          argi[k] = p, any_param = 1;
    }
    char buf[256];
    if (!any_param) {
      int bl = 0;
      for (int k = 0; k < npc; k++) {
        const token *t = &s->tok[pieces[k]];
        if (bl + t->len < (int)sizeof buf)
          memcpy(buf + bl, s->text + t->start, (size_t)t->len), bl += t->len;
      }
      check_pasted(s, buf, bl, s->tok[a].line);
      continue;
    }
    /* every invocation NAME( args ) outside this directive. Chains times
     * invocations times argument lengths can be made cubic in the file's
     * size (and an unclosed `NAME(` reads to its end): past a budget no
     * honest kernel comes near, the names left unbuilt are a flag. */
    for (int j = 0; j + 1 < s->ntok; j++) {
      if (++s->paste_work > KL_SCAN_PASTE_BUDGET) {
        char w[48];
        int wl = snprintf(w, sizeof w, "%d tokens", KL_SCAN_PASTE_BUDGET);
        raise_flag(s, KL_FLAG_COMPILE_PASS_BRANCH, s->tok[a].line,
                   "macro pastes past the scanner's budget (%s): the names "
                   "they build are unchecked",
                   w, wl);
        return;
      }
      if (s->tok[j].dir == d || s->tok[j].kind != T_IDENT ||
          s->tok[j].len != nt->len ||
          memcmp(s->text + s->tok[j].start, s->text + nt->start,
                 (size_t)nt->len))
        continue;
      if (!tok_punct(s, j + 1, "(")) {
        /* named, not called: an alias (#define J CAT), or an argument of
         * another macro that calls it (ID(CAT)(clo, ck64)) */
        if (s->tok[j].dir < 0 || in_define(s, j)) {
          unresolved_paste(s, nt, s->tok[j].line, "is named without a call");
          return;
        }
        continue;
      }
      int argstart[32], argend[32], na = 0, depth = 0, k = j + 2;
      argstart[0] = k;
      for (; k < s->ntok && ++s->paste_work <= KL_SCAN_PASTE_BUDGET; k++) {
        if (tok_punct(s, k, "(")) depth++;
        if (tok_punct(s, k, ")") && depth-- == 0) break;
        if (tok_punct(s, k, ",") && depth == 0 && na < 31) {
          argend[na++] = k;
          argstart[na] = k + 1;
        }
      }
      argend[na++] = k;
      /* a call opened in a macro's body and closed outside it (#define
       * KEEP CAT(sta, then KEEP tic)): its arguments are not all here */
      if (s->tok[j].dir >= 0 &&
          (k >= s->ntok || s->tok[k].dir != s->tok[j].dir)) {
        unresolved_paste(s, nt, s->tok[j].line,
                         "is called across the end of a macro");
        return;
      }
      /* called in another macro's body: resolved with the arguments
       * written there, unless one of them is that macro's parameter */
      if (in_define(s, j)) {
        const char *on[33];
        int ol[33], ov, on_n = macro_params(s, s->tok[j].dir, on, ol, &ov);
        for (int m = j + 2; m < k; m++)
          for (int p = 0; p < on_n; p++)
            if (s->tok[m].len == ol[p] &&
                !memcmp(s->text + s->tok[m].start, on[p], (size_t)ol[p])) {
              unresolved_paste(s, nt, s->tok[j].line,
                               "is called with another macro's parameter");
              return;
            }
      }
      int bl = 0;
      for (int q = 0; q < npc; q++) {
        int from = pieces[q], to = pieces[q] + 1;
        if (argi[q] >= 0) {
          if (argi[q] >= na) continue;
          from = argstart[argi[q]], to = argend[argi[q]];
          if (variadic && argi[q] == np - 1) to = argend[na - 1];
        }
        for (int m = from; m < to; m++) {
          const token *t = &s->tok[m];
          if (bl + t->len < (int)sizeof buf)
            memcpy(buf + bl, s->text + t->start, (size_t)t->len), bl += t->len;
        }
      }
      check_pasted(s, buf, bl, s->tok[j].line);
    }
  }
}

/* A #define whose body declares storage (`#define KEEP static`): the
 * declaration checks read tokens before macros are expanded, so `KEEP
 * float memo[...]` would pass as a plain local. `static` followed by inline,
 * const or constexpr is a function or a constant, not state. */
static void check_storage_macro(scanner *s, int d) {
  const directive *dr = &s->dir[d];
  for (int i = dr->first + 2; i < dr->end; i++) {
    if (s->tok[i].kind != T_IDENT) continue;
    int state = tok_is(s, i, "thread_local") || tok_is(s, i, "mutable") ||
                tok_is(s, i, "__managed__");
    if (tok_is(s, i, "static")) { /* `static __device__ __forceinline__`
                                       declares functions, not storage */
      state = 1;
      for (int q = i + 1; q < dr->end && state; q++)
        state =
            !(tok_is(s, q, "inline") || tok_is(s, q, "__inline__") ||
              tok_is(s, q, "__forceinline__") || tok_is(s, q, "__noinline__") ||
              tok_is(s, q, "const") || tok_is(s, q, "constexpr"));
    }
    if (state) {
      raise_flag(s, KL_FLAG_MUTABLE_DEVICE_STATE, s->tok[i].line,
                 "a macro that declares storage (%s)",
                 s->text + s->tok[i].start, s->tok[i].len);
      return;
    }
  }
}

/* #pragma and _Pragma("..."): only unroll, nounroll and once. The others
 * reach the compilers' back ends: `redefine_extname kl_get malloc` made a
 * __device__ prototype the host's malloc (and free), a heap memo kept
 * across launches with no name the table knows; `weak`, `push_macro`,
 * `GCC optimize` and `GCC poison` change what the other checks read.
 * text[0..len) is the pragma's text after the word pragma. */
static void check_pragma(scanner *s, const char *text, int len, int line) {
  static const char *const allowed[] = {"unroll", "nounroll", "once"};
  int i = 0;
  while (i < len && (text[i] == ' ' || text[i] == '\t'))
    i++;
  int w = i;
  while (w < len && is_ident_char((unsigned char)text[w]))
    w++;
  for (size_t k = 0; k < sizeof allowed / sizeof allowed[0]; k++)
    if ((int)strlen(allowed[k]) == w - i &&
        !memcmp(text + i, allowed[k], (size_t)(w - i)))
      return;
  raise_flag(s, KL_FLAG_COMPILE_PASS_BRANCH, line,
             "#pragma %s (only unroll, nounroll and once are allowed)",
             text + i, w - i > 0 ? w - i : 0);
}

/* _Pragma("...") and MSVC's __pragma(...) in code or in a macro body. */
static void check_pragma_operators(scanner *s) {
  for (int i = 0; i < s->ntok; i++) {
    if (!tok_is(s, i, "_Pragma") && !tok_is(s, i, "__pragma")) continue;
    int j = i + 1;
    if (tok_punct(s, j, "(")) j++;
    const token *t = &s->tok[j < s->ntok ? j : i];
    if (j < s->ntok && t->kind == T_STR) {
      const char *q = memchr(s->text + t->start, '"', (size_t)t->len);
      int off = q ? (int)(q - (s->text + t->start)) + 1 : t->len;
      check_pragma(s, s->text + t->start + off, t->len - off, t->line);
    } else {
      raise_flag(s, KL_FLAG_COMPILE_PASS_BRANCH, s->tok[i].line,
                 "%s without a literal string", s->text + s->tok[i].start,
                 s->tok[i].len);
    }
  }
}

static void check_directives(scanner *s) {
  for (int d = 0; d < s->ndir; d++) {
    if (s->dir[d].first < 0) continue;
    if (dir_is(s, d, "include") || dir_is(s, d, "include_next") ||
        dir_is(s, d, "import") || dir_is(s, d, "embed"))
      check_include(s, d);
    else if (dir_is(s, d, "if") || dir_is(s, d, "ifdef") ||
             dir_is(s, d, "ifndef") || dir_is(s, d, "elif") ||
             dir_is(s, d, "elifdef") || dir_is(s, d, "elifndef"))
      check_conditional(s, d);
    else if (dir_is(s, d, "define")) {
      check_paste(s, d);
      check_storage_macro(s, d);
    } else if (dir_is(s, d, "pragma")) {
      const directive *dr = &s->dir[d];
      if (memmem(s->text + dr->start, (size_t)(dr->stop - dr->start),
                 "dependency", 10))
        raise_flag(s, KL_FLAG_DISALLOWED_INCLUDE, dr->line, "%s",
                   "#pragma dependency", 18);
      check_pragma(s, s->text + dr->start, dr->stop - dr->start, dr->line);
    }
  }
}

/* ---- declarations -------------------------------------------------------
 */

enum { SC_FILE, SC_CLASS, SC_CODE, SC_INIT };

/* Identifiers whose parentheses are attributes, not a declarator. */
static int is_attribute_word(const scanner *s, int i) {
  static const char *const words[] = {
      "__align__",  "__launch_bounds__", "__attribute__", "alignas",
      "__declspec", "decltype",          "__maxnreg__",   "__cluster_dims__",
      "sizeof",     "alignof",           "noexcept",      "static_assert",
      "operator"};
  for (size_t k = 0; k < sizeof words / sizeof words[0]; k++)
    if (tok_is(s, i, words[k])) return 1;
  return 0;
}

typedef struct decl {
  int device, managed, global, host, shared, constant, is_static, is_extern;
  int is_const;   /* the declared object itself is const/constexpr */
  int spec_const; /* its specifiers say const (see declarator) */
  int constexpr_;
  int skip;     /* typedef, using, static_assert, template instantiation */
  int record;   /* struct, class, union or enum keyword */
  int eq;       /* index of the first '=' at paren depth 0, or -1 */
  int fn_paren; /* index of the declarator's '(', or -1 */
  int name;     /* token of the declared name (best guess), or -1 */
  int nparen;   /* '(' outside attributes */
} decl;

/* The #define directive of the macro named by token i, or -1. */
static int macro_dir(const scanner *s, int i) {
  if (s->tok[i].kind != T_IDENT) return -1;
  return macro_lookup(s, s->text + s->tok[i].start, s->tok[i].len);
}

/* A word that makes a declaration more than a plain local or member. */
static int qualifier_word(const scanner *s, int i) {
  static const char *const words[] = {
      "__device__",   "__managed__", "__global__", "__host__",    "__shared__",
      "__constant__", "static",      "extern",     "thread_local"};
  for (size_t k = 0; k < sizeof words / sizeof words[0]; k++)
    if (tok_is(s, i, words[k])) return 1;
  return 0;
}

/* Sets the qualifier dc gets from the word at token i. */
static void qualify(const scanner *s, int i, decl *dc) {
  if (tok_is(s, i, "__device__")) dc->device = 1;
  if (tok_is(s, i, "__managed__")) dc->managed = 1;
  if (tok_is(s, i, "__global__")) dc->global = 1;
  if (tok_is(s, i, "__host__")) dc->host = 1;
  if (tok_is(s, i, "__shared__")) dc->shared = 1;
  if (tok_is(s, i, "__constant__")) dc->constant = 1;
  if (tok_is(s, i, "static")) dc->is_static = 1;
  if (tok_is(s, i, "extern")) dc->is_extern = 1;
  if (tok_is(s, i, "constexpr") || tok_is(s, i, "consteval") ||
      tok_is(s, i, "constinit"))
    dc->constexpr_ = 1;
}

/* One declarator of a declaration (read_decl): the declared object is const
 * when a `const` follows its last `*`, or, with no `*`, when the
 * declaration's specifiers say const (a `const` before the first `*` of
 * the first declarator). */
typedef struct declarator {
  int star, konst; /* last `*` and `const` before its '=', or -1 */
  int eq;          /* its '=' was seen */
  int ident;       /* it holds an identifier */
} declarator;

/* Ends declarator g; clears *all_const if g's object is not const. */
static void end_declarator(declarator *g, int spec_const, int *any,
                           int *all_const) {
  if (g->ident) {
    *any = 1;
    if (!(g->konst > g->star || (g->star < 0 && spec_const))) *all_const = 0;
  }
  g->star = g->konst = -1;
  g->eq = g->ident = 0;
}

/* The next token after i that is code (not in a directive), or ntok. */
static int next_code(const scanner *s, int i) {
  for (i++; i < s->ntok && s->tok[i].dir >= 0; i++)
    ;
  return i;
}

/* 1 if the '{' at token b opens the body of the function whose parameters
 * open at token paren. A variable with a braced initializer reads the
 * same way when its declarator is in parentheses or follows an empty
 * macro's call, `__device__ unsigned long long (memo){0};` or `E() memo{0}`,
 * and was taken for a function (the third review). It is not a body when
 * the parentheses follow a type keyword, when something other than a
 * function's suffixes (const, noexcept(...), -> or : and anything after)
 * stands between them and the '{', or when they hold one name alone and a
 * ';' or ',' follows the closing '}' (a body needs neither). */
static int function_body(const scanner *s, int paren, int b) {
  static const char *const types[] = {"void",   "bool",     "char",  "short",
                                      "int",    "long",     "float", "double",
                                      "signed", "unsigned", "auto"};
  static const char *const suffixes[] = {
      "const",       "volatile",         "noexcept",
      "throw",       "override",         "final",
      "try",         "__attribute__",    "__launch_bounds__",
      "__maxnreg__", "__cluster_dims__", "requires"};
  for (size_t k = 0; k < sizeof types / sizeof types[0]; k++)
    if (tok_is(s, paren - 1, types[k])) return 0;
  int depth = 0, close = -1, names = 0;
  for (int i = paren; i < b && close < 0; i++) {
    if (tok_punct(s, i, "(")) depth++;
    if (tok_punct(s, i, ")") && --depth == 0) close = i;
    if (depth == 1 && s->tok[i].kind == T_IDENT) names++;
  }
  if (close < 0) return 1;
  for (int i = close + 1; i < b; i++) {
    if (tok_punct(s, i, "->") || tok_punct(s, i, ":")) break;
    if (s->tok[i].kind == T_IDENT) {
      int ok = 0;
      for (size_t k = 0; k < sizeof suffixes / sizeof suffixes[0]; k++)
        ok |= tok_is(s, i, suffixes[k]);
      if (!ok) return 0;
    } else if (tok_punct(s, i, "(")) { /* noexcept(...), __attribute__(()) */
      int d = 0;
      for (; i < b; i++) {
        if (tok_punct(s, i, "(")) d++;
        if (tok_punct(s, i, ")") && --d == 0) break;
      }
    } else if (!tok_punct(s, i, "&")) {
      return 0; /* `(memo)[]{...}`, `(memo) = {...}` */
    }
  }
  if (names != 1) return 1;
  int depth2 = 0, after = -1;
  for (int i = b; i < s->ntok; i = next_code(s, i)) {
    if (tok_punct(s, i, "{")) depth2++;
    if (tok_punct(s, i, "}") && --depth2 == 0) {
      after = next_code(s, i);
      break;
    }
  }
  return !(after >= 0 &&
           (tok_punct(s, after, ";") || tok_punct(s, after, ",")));
}

/* Reads tokens [a, b) into dc; spec_const: they continue a declaration
 * whose specifiers say const (record_declaration). */
static void read_decl(const scanner *s, int a, int b, int spec_const,
                      decl *dc) {
  memset(dc, 0, sizeof *dc);
  dc->eq = dc->fn_paren = dc->name = -1;
  int depth = 0;
  /* template arguments and array bounds before the initializer: a `const`
   * or `*` there is not the declared object's (`__device__ Memo<const int>
   * memo;` was read as a const variable, the third review) */
  int angle = 0, brack = 0;
  /* each declarator's constness: `__device__ Memo *const p = 0, memo;`
   * declares a mutable memo, and passed as const once (the third review) */
  declarator g = {-1, -1, 0, 0};
  int first = !spec_const, any = 0, all_const = 1;
  for (int i = a; i < b; i++) {
    const token *t = &s->tok[i];
    if (t->kind == T_PUNCT) {
      if (!g.eq && depth == 0) {
        if (tok_punct(s, i, "["))
          brack++;
        else if (tok_punct(s, i, "]") && brack > 0)
          brack--;
        else if (tok_punct(s, i, "<") && !brack)
          angle++;
        else if (tok_punct(s, i, ">") && angle > 0)
          angle--;
        else if (tok_punct(s, i, ">>"))
          angle = angle > 2 ? angle - 2 : 0;
      }
      if (tok_punct(s, i, "(")) {
        int attr = i > a && is_attribute_word(s, i - 1);
        if (depth == 0 && !attr) {
          dc->nparen++;
          if (dc->fn_paren < 0 && dc->eq < 0 && i - 1 > a &&
              s->tok[i - 1].kind == T_IDENT)
            dc->fn_paren = i, dc->name = i - 1;
        }
        depth++;
      } else if (tok_punct(s, i, ")")) {
        depth--;
      } else if (depth == 0 && tok_punct(s, i, "=")) {
        if (dc->eq < 0) dc->eq = i;
        g.eq = 1;
      } else if (depth == 0 && !angle && !brack && tok_punct(s, i, ",")) {
        end_declarator(&g, spec_const, &any, &all_const);
        first = 0;
      } else if (depth == 0 && !angle && !brack && tok_punct(s, i, "*") &&
                 !g.eq) {
        g.star = i;
      }
      continue;
    }
    if (t->kind != T_IDENT) continue;
    /* operator+(...), operator()(...), operator float(): a function whose
     * name is not an identifier before its '(' (its static locals went
     * unseen, and at file scope it was taken for a variable) */
    if (depth == 0 && dc->eq < 0 && dc->fn_paren < 0 &&
        tok_is(s, i, "operator")) {
      int j = i + 1;
      if (tok_punct(s, j, "(") && tok_punct(s, j + 1, ")")) j += 2;
      while (j < b && !tok_punct(s, j, "("))
        j++;
      if (j < b) {
        dc->fn_paren = j, dc->name = i;
        dc->nparen++;
        depth++;
        i = j;
        continue;
      }
    }
    if (depth == 0 && dc->eq < 0 && dc->fn_paren < 0) dc->name = i;
    qualify(s, i, dc);
    /* an object-like macro of the file's (`#define DI __device__
     * __forceinline__`, `#define KEEP static`): its body's qualifiers are
     * this declaration's (one level) */
    int md = macro_dir(s, i);
    if (md >= 0 && macro_params_end(s, md) < 0)
      for (int q = s->dir[md].first + 2; q < s->dir[md].end; q++)
        qualify(s, q, dc);
    if (!g.eq && depth == 0 && !angle && !brack) {
      g.ident = 1;
      if (tok_is(s, i, "const")) {
        g.konst = i;
        if (first && g.star < 0) spec_const = 1;
      }
    }
    if (i == a && (tok_is(s, i, "typedef") || tok_is(s, i, "using") ||
                   tok_is(s, i, "static_assert") || tok_is(s, i, "friend") ||
                   tok_is(s, i, "namespace") || tok_is(s, i, "return")))
      dc->skip = 1;
    if (i == a && tok_is(s, i, "template") && !tok_punct(s, i + 1, "<"))
      dc->skip = 1; /* explicit instantiation */
    if (tok_is(s, i, "struct") || tok_is(s, i, "class") ||
        tok_is(s, i, "union") || tok_is(s, i, "enum"))
      dc->record = 1;
  }
  end_declarator(&g, spec_const, &any, &all_const);
  if (dc->fn_paren >= 0 && b < s->ntok && tok_punct(s, b, "{") &&
      !function_body(s, dc->fn_paren, b))
    for (int i = dc->fn_paren; i < b;
         i++) { /* a variable, braced-initialised */
      if (s->tok[i].kind == T_IDENT) dc->name = i;
      dc->fn_paren = -1;
    }
  dc->is_const = dc->constexpr_ || (any && all_const);
  dc->spec_const = dc->constexpr_ || spec_const;
}

/* Records the name declared by tokens [a, b) as read-only storage that
 * outlives a launch (check_const_casts). */
static void note_const_var(scanner *s, int a, int b) {
  int nm_tok = -1;
  for (int i = a; i < b; i++) {
    if (tok_punct(s, i, "[") || tok_punct(s, i, "=") || tok_punct(s, i, ";") ||
        tok_punct(s, i, "{") || tok_punct(s, i, "("))
      break;
    if (s->tok[i].kind == T_IDENT) nm_tok = i;
  }
  if (nm_tok >= 0) s->constant_var[s->nconstant_var++] = nm_tok;
}

static void judge(scanner *s, int scope, decl dc, int a, int b, int var);

static void declaration(scanner *s, int scope, int a, int b) {
  if (a >= b) return;
  /* `G(launches);` or `DEVFN(bump) { static ... }` at file or class scope,
   * G and DEVFN macros of the file's that declare (their bodies hold
   * __device__, static ...): what they declare is not read here, so it is
   * flagged (the second review: a __device__ global, and a function whose
   * body was taken for an initializer) */
  int md = scope == SC_FILE || scope == SC_CLASS ? macro_dir(s, a) : -1;
  if (md >= 0 && macro_params_end(s, md) >= 0)
    for (int q = s->dir[md].first + 2; q < s->dir[md].end; q++)
      if (qualifier_word(s, q)) {
        raise_flag(s, KL_FLAG_MUTABLE_DEVICE_STATE, s->tok[a].line,
                   "the macro %s declares here (what it declares is not "
                   "read)",
                   s->text + s->tok[a].start, s->tok[a].len);
        return;
      }
  decl dc;
  read_decl(s, a, b, 0, &dc);
  judge(s, scope, dc, a, b, 0);
}

/* The declarators after an unnamed (or named) record's closing brace,
 * tokens [a, b), with the qualifiers of the statement that opened it,
 * tokens [qa, qb): `__device__ struct { int n; } memo;` declares memo
 * __device__, and `static struct {...} m;` a static local (each passed
 * unseen once: the qualifiers stayed with the record). The same after a
 * braced initializer: `static T* const p{nullptr}, memo;` declares memo
 * static (the third review); a const of the specifiers only is each
 * declarator's. */
static void record_declaration(scanner *s, int scope, int qa, int qb, int a,
                               int b) {
  if (a >= b) return;
  decl q, dc;
  read_decl(s, qa, qb, 0, &q);
  read_decl(s, a, b, q.spec_const, &dc);
  if (q.skip) return; /* typedef struct {...} name; */
  dc.device |= q.device, dc.managed |= q.managed, dc.host |= q.host;
  dc.shared |= q.shared, dc.constant |= q.constant;
  dc.is_static |= q.is_static, dc.is_extern |= q.is_extern;
  dc.constexpr_ |= q.constexpr_;
  dc.is_const |= q.constexpr_;
  dc.record = 0;
  judge(s, scope, dc, a, b, 1);
}

/* 1 if tokens [a, b) only name a record: `struct S;`, `template <class T>
 * struct Box;`, `enum class E : int;`: the last record keyword, its name,
 * and nothing after but an enum's base. `__device__ struct Memo memo;`
 * declares a variable with the keyword in its type, and passed as a bare
 * record once (the third review). */
static int bare_record(const scanner *s, int a, int b) {
  int q = b - 1;
  while (q >= a && !(tok_is(s, q, "struct") || tok_is(s, q, "class") ||
                     tok_is(s, q, "union") || tok_is(s, q, "enum")))
    q--;
  if (q < a || q + 1 >= b || s->tok[q + 1].kind != T_IDENT) return 0;
  return q + 2 == b || tok_punct(s, q + 2, ":");
}

/* A namespace named by token name (-1: unnamed) inside namespace parent;
 * -2 when the table is full: a namespace equal to none (a prototype there
 * matches no definition, which errs towards a flag). */
static int new_ns(scanner *s, int parent, int name) {
  if (s->nns >= s->ns_cap || parent == -2) return -2;
  s->ns_parent[s->nns] = parent;
  s->ns_name[s->nns] = name;
  return s->nns++;
}

/* The namespace a file-scope function named by token i belongs to: the one
 * it is declared in, and then its qualifiers (`other::f`, `S::f`), so
 * that `__device__ int f(0);` is not taken for defined by a function f of
 * another namespace (the third review). */
static int qualified_ns(scanner *s, int i) {
  int q = i, first = i;
  while (q >= 2 && tok_punct(s, q - 1, "::") && s->tok[q - 2].kind == T_IDENT)
    q -= 2;
  first = q;
  int ns = tok_punct(s, first - 1, "::") ? -1 : s->cur_ns; /* ::f */
  for (q = first; q < i; q += 2)
    ns = new_ns(s, ns, q);
  return ns;
}

/* 1 if namespaces p and q are the same: the same names outwards. */
static int same_ns(const scanner *s, int p, int q) {
  if (p == -2 || q == -2) return 0;
  for (; p != q; p = s->ns_parent[p], q = s->ns_parent[q]) {
    if (p < 0 || q < 0) return 0;
    int a = s->ns_name[p], b = s->ns_name[q];
    if ((a < 0) != (b < 0)) return 0;
    if (a >= 0 && text_cmp(s->text + s->tok[a].start, s->tok[a].len,
                           s->text + s->tok[b].start, s->tok[b].len))
      return 0;
  }
  return 1;
}

/* The rules, on a declaration read into dc from tokens [a, b); var: it is
 * a variable whatever its length (a record's declarators). */
static void judge(scanner *s, int scope, decl dc, int a, int b, int var) {
  if (dc.skip) return;
  int line = s->tok[a].line;
  const char *nm = dc.name >= 0 ? s->text + s->tok[dc.name].start : "?";
  int nl = dc.name >= 0 ? s->tok[dc.name].len : 1;
  int is_fn = dc.fn_paren >= 0;

  if (scope == SC_FILE) {
    if (is_fn && dc.name >= 0 && !dc.constexpr_) {
      int ns = qualified_ns(s, dc.name);
      if (b < s->ntok && tok_punct(s, b, "{")) {
        s->defined[2 * s->ndefined] = dc.name;
        s->defined[2 * s->ndefined++ + 1] = ns;
      } else if (!(dc.eq >= 0 && (tok_is(s, dc.eq + 1, "delete") ||
                                  tok_is(s, dc.eq + 1, "default")))) {
        s->proto[2 * s->nproto] = dc.name;
        s->proto[2 * s->nproto++ + 1] = ns;
      }
    }
    if (is_fn) {
      if (dc.host && !dc.device)
        raise_flag(s, KL_FLAG_COMPILE_PASS_BRANCH, line, "__host__ function %s",
                   nm, nl);
      else if (!dc.device && !dc.global && !dc.constexpr_)
        raise_flag(s, KL_FLAG_COMPILE_PASS_BRANCH, line,
                   "host function %s (no __device__)", nm, nl);
      return;
    }
    if (dc.record && dc.eq < 0 && bare_record(s, a, b)) return;
    if (dc.is_extern && !dc.shared && dc.eq < 0)
      raise_flag(s, KL_FLAG_COMPILE_PASS_BRANCH, line,
                 "extern declaration of %s", nm, nl);
    if (dc.constant || dc.is_const) { /* its name: the identifier before
                                         '[', '=', ';' or '{' */
      note_const_var(s, a, b);
    }
    if (dc.shared || dc.constant || dc.is_const) return;
    if (dc.device || dc.managed)
      raise_flag(s, KL_FLAG_MUTABLE_DEVICE_STATE, line,
                 "mutable __device__ variable %s", nm, nl);
    else if ((var || b - a >= 2) && dc.nparen == 0 && !dc.record)
      raise_flag(s, KL_FLAG_MUTABLE_DEVICE_STATE, line,
                 "file-scope variable %s (host memory on cpu-emu)", nm, nl);
    return;
  }
  if (scope == SC_CLASS) {
    if (dc.is_static && !is_fn && dc.is_const) note_const_var(s, a, b);
    if (dc.is_static && !is_fn && !dc.is_const)
      raise_flag(s, KL_FLAG_MUTABLE_DEVICE_STATE, line, "static member %s", nm,
                 nl);
    return;
  }
  if (scope == SC_CODE) {
    if (dc.is_static && !dc.shared && dc.is_const) note_const_var(s, a, b);
    if (dc.is_static && !dc.shared && !dc.is_const)
      raise_flag(s, KL_FLAG_MUTABLE_DEVICE_STATE, line, "static local %s", nm,
                 nl);
    if (dc.is_extern && !dc.shared)
      raise_flag(s, KL_FLAG_COMPILE_PASS_BRANCH, line,
                 "extern declaration of %s", nm, nl);
  }
}

/* The code token (an index into idx) of the bracket matching the closing
 * one at k (`]` or `)`), searching back to `from`; -1 if none. */
static int match_back(const scanner *s, const int *idx, int from, int k) {
  const char *close = tok_punct(s, idx[k], "]") ? "]" : ")";
  const char *open = close[0] == ']' ? "[" : "(";
  int depth = 0;
  for (int q = k; q >= from; q--) {
    if (tok_punct(s, idx[q], close)) depth++;
    if (tok_punct(s, idx[q], open) && --depth == 0) return q;
  }
  return -1;
}

/* 1 if the `{` at code token k opens a lambda's body: the statement before
 * it (code tokens from..k-1) ends in `[captures]`, `(params)`, specifiers
 * (mutable, __device__ ...) or a trailing return type. A lambda's body is
 * code wherever it appears (an initializer, a call's argument), so its
 * static locals are static locals. `[` after a name or `]` is an array
 * declarator, not a lambda's captures. */
static int lambda_body(const scanner *s, const int *idx, int from, int k) {
  int q = k - 1;
  /* back over specifiers and a trailing return type to `)` or `]`; the
   * parentheses of noexcept(...), decltype(...), throw(...) and
   * __attribute__((...)) are specifiers too (`[]() noexcept(true) {` hid
   * its body's static locals) */
  while (q >= from && !tok_punct(s, idx[q], "]")) {
    if (tok_punct(s, idx[q], ")")) {
      int open = match_back(s, idx, from, q);
      if (open - 1 < from || !(tok_is(s, idx[open - 1], "noexcept") ||
                               tok_is(s, idx[open - 1], "decltype") ||
                               tok_is(s, idx[open - 1], "throw") ||
                               tok_is(s, idx[open - 1], "__attribute__")))
        break;
      q = open - 1; /* the specifier's word, read below */
    }
    const token *t = &s->tok[idx[q]];
    if (t->kind != T_IDENT &&
        !(tok_punct(s, idx[q], "->") || tok_punct(s, idx[q], "*") ||
          tok_punct(s, idx[q], "&") || tok_punct(s, idx[q], "::") ||
          tok_punct(s, idx[q], "<") || tok_punct(s, idx[q], ">") ||
          tok_punct(s, idx[q], ",")))
      return 0;
    q--;
  }
  if (q < from) return 0;
  if (tok_punct(s, idx[q], ")")) { /* the parameters, then the captures */
    q = match_back(s, idx, from, q) - 1;
    while (q >= from && s->tok[idx[q]].kind == T_IDENT &&
           (tok_is(s, idx[q], "__device__") || tok_is(s, idx[q], "__host__")))
      q--;
    if (q < from || !tok_punct(s, idx[q], "]")) return 0;
  }
  int open = match_back(s, idx, from, q);
  if (open < 0) return 0;
  if (open == from) return 1;
  const token *before = &s->tok[idx[open - 1]];
  if (before->kind == T_IDENT) return tok_is(s, idx[open - 1], "return");
  return !tok_punct(s, idx[open - 1], "]") && !tok_punct(s, idx[open - 1], ")");
}

/* Walks the tokens outside directives, tracking scopes, and hands every
 * declaration-shaped statement to declaration(). */
static int check_declarations(scanner *s) {
  int cap = s->ntok + 1;
  int *stack = malloc((size_t)cap * sizeof(int));
  int *idx = malloc((size_t)cap * sizeof(int));
  /* for a record's scope: its statement's first token and its '{' */
  int *rec = malloc((size_t)cap * sizeof(int));
  int *rec_qb = malloc((size_t)cap * sizeof(int));
  /* 1 where that '{' is an initializer: its statement's qualifiers go on
   * to the declarators after its '}' only when a ',' follows */
  int *rec_init = malloc((size_t)cap * sizeof(int));
  s->constant_var = malloc((size_t)cap * sizeof(int));
  s->proto = malloc((size_t)cap * 2 * sizeof(int));
  s->defined = malloc((size_t)cap * 2 * sizeof(int));
  /* a namespace per `namespace` token and per qualifier of a name */
  s->ns_cap = cap;
  s->ns_parent = malloc((size_t)cap * sizeof(int));
  s->ns_name = malloc((size_t)cap * sizeof(int));
  int *nsid = malloc((size_t)cap * sizeof(int)); /* each scope's */
  if (!stack || !idx || !rec || !rec_qb || !rec_init || !s->constant_var ||
      !s->proto || !s->defined || !s->ns_parent || !s->ns_name || !nsid) {
    free(nsid);
    free(stack);
    free(idx);
    free(rec);
    free(rec_qb);
    free(rec_init);
    return -1;
  }
  /* the tokens that are code, in order */
  int nc = 0;
  for (int i = 0; i < s->ntok; i++)
    if (s->tok[i].dir < 0) idx[nc++] = i;
  int sp = 0, start = 0;
  stack[0] = SC_FILE;
  rec[0] = -1;
  rec_init[0] = 0;
  nsid[0] = -1;
  /* a record just closed: its statement's qualifiers [pend_a, pend_b)
   * apply to the declarators that follow its '}' */
  int pend_a = -1, pend_b = -1;
#define TK(k) idx[k]
  for (int k = 0; k < nc; k++) {
    int i = TK(k), scope = stack[sp];
    s->cur_ns = nsid[sp];
    if (pend_a >= 0 && start < k && scope != SC_INIT &&
        (tok_punct(s, i, ";") || tok_punct(s, i, "{"))) {
      int end = tok_punct(s, i, ";") ? TK(k - 1) + 1 : i;
      record_declaration(s, scope, pend_a, pend_b, TK(start), end);
      if (sp + 1 < cap && tok_punct(s, i, "{")) { /* `, b{1}, memo` */
        stack[++sp] = SC_INIT, nsid[sp] = nsid[sp - 1];
        rec[sp] = pend_a, rec_qb[sp] = pend_b, rec_init[sp] = 1;
      }
      pend_a = -1;
      start = k + 1;
      continue;
    }
    if (tok_punct(s, i, ";") || tok_punct(s, i, "{") || tok_punct(s, i, "}"))
      pend_a = -1;
    if (tok_punct(s, i, ";")) {
      if (scope != SC_INIT && start < k)
        declaration(s, scope, TK(start), TK(k - 1) + 1);
      start = k + 1;
    } else if (tok_punct(s, i, "{")) {
      int next = SC_CODE, rec_a = -1, rec_b = -1, init = 0, ns_in = nsid[sp];
      if (start < k && lambda_body(s, idx, start, k)) {
        if (scope != SC_INIT) /* auto f = [...](...) {: the variable */
          declaration(s, scope, TK(start), i);
        next = SC_CODE;
      } else if (scope == SC_INIT) {
        next = SC_INIT;
      } else if (start < k) {
        int a = TK(start), b = i; /* the statement before the brace */
        decl dc;
        read_decl(s, a, b, 0, &dc);
        int ns = 0, ext_block = 0;
        for (int q = a; q < b; q++)
          if (tok_is(s, q, "namespace")) ns = 1;
        if (tok_is(s, a, "extern") && b - a == 2 && s->tok[a + 1].kind == T_STR)
          ext_block = 1;
        if ((ns || ext_block) && scope == SC_FILE) {
          next = SC_FILE;
          /* `namespace a {`, `namespace a::b {`, `namespace {` */
          int named = 0;
          for (int q = a; ns && q < b; q++)
            if (s->tok[q].kind == T_IDENT && !tok_is(s, q, "namespace") &&
                !tok_is(s, q, "inline"))
              ns_in = new_ns(s, ns_in, q), named = 1;
          if (ns && !named) ns_in = new_ns(s, ns_in, -1);
        } else if (dc.eq >= 0) {
          declaration(s, scope, a, b);
          next = SC_INIT;
          init = 1;
        } else if (dc.fn_paren >= 0) {
          declaration(s, scope, a, b);
          next = SC_CODE;
        } else if (dc.record) {
          next = SC_CLASS;
          rec_a = a, rec_b = b;
        } else if (scope == SC_CODE) {
          /* else {, do {, if (...) { through a macro, or a braced
           * initializer: `static unsigned long long launches{0};` was read
           * as a nested block, its static unseen (the third review). Read
           * as a declaration either way; what follows stays code. */
          declaration(s, scope, a, b);
          next = SC_CODE;
          init = 1;
        } else {
          declaration(s, scope, a, b); /* braced initializer: T x{...} */
          next = SC_INIT;
          init = 1;
        }
        /* not a brace inside a call's parentheses, `p = f({1, 2}, 3)` */
        int open = 0;
        for (int q = a; q < b; q++)
          open += tok_punct(s, q, "(") - tok_punct(s, q, ")");
        if (init && !open) rec_a = a, rec_b = b;
      }
      if (sp + 1 < cap) {
        stack[++sp] = next;
        nsid[sp] = ns_in;
        rec[sp] = rec_a;
        rec_qb[sp] = rec_b;
        rec_init[sp] = init;
      }
      start = k + 1;
    } else if (tok_punct(s, i, "}")) {
      if (sp > 0) {
        if (rec[sp] >= 0 &&
            (!rec_init[sp] || (k + 1 < nc && tok_punct(s, TK(k + 1), ","))))
          pend_a = rec[sp], pend_b = rec_qb[sp];
        sp--;
      }
      start = k + 1;
    }
  }
#undef TK
  free(stack);
  free(idx);
  free(rec);
  free(rec_qb);
  free(rec_init);
  free(nsid);
  return 0;
}

/* ---- inline asm text ----------------------------------------------------
 */

/* In a file that uses asm, string literals are PTX: look for clocks and
 * low-precision instructions there too. */
static void check_asm_strings(scanner *s) {
  static const struct {
    const char *pat;
    int bit;
  } pats[] = {
      {"globaltimer", KL_FLAG_TIMER_READ},
      {"%clock", KL_FLAG_TIMER_READ},
      {".f16", KL_FLAG_PRECISION_DOWNGRADE},
      {".bf16", KL_FLAG_PRECISION_DOWNGRADE},
      {".tf32", KL_FLAG_PRECISION_DOWNGRADE},
      {".e4m3", KL_FLAG_PRECISION_DOWNGRADE},
      {".e5m2", KL_FLAG_PRECISION_DOWNGRADE},
      {"mma", KL_FLAG_PRECISION_DOWNGRADE},
  };
  for (int i = 0; i < s->ntok; i++) {
    const token *t = &s->tok[i];
    if (t->kind != T_STR) continue;
    for (size_t p = 0; p < sizeof pats / sizeof pats[0]; p++) {
      const char *hit = memmem(s->text + t->start, (size_t)t->len, pats[p].pat,
                               strlen(pats[p].pat));
      if (hit)
        raise_flag(s, pats[p].bit, t->line, "asm \"...%s...\"", pats[p].pat,
                   (int)strlen(pats[p].pat));
    }
  }
}

/* ---- entry point --------------------------------------------------------
 */

/* Read-only storage that outlives a launch: __constant__ variables (plain
 * memory on cpu-emu, where the shim drops the qualifier), file-scope
 * const variables, static const locals and members. A const object of a
 * class with a user-provided constructor is not in read-only memory on
 * either backend, so a cast that drops const (C-style to a pointer or
 * reference, const_cast, reinterpret_cast) is a way to write it: a memo
 * kept between launches. A cast to a pointer to const reads only. */
static int by_name(const void *x, const void *y) {
  const token *a = &sort_scanner->tok[*(const int *)x];
  const token *b = &sort_scanner->tok[*(const int *)y];
  return text_cmp(sort_scanner->text + a->start, a->len,
                  sort_scanner->text + b->start, b->len);
}

/* 1 if the cast type in tokens [a, b) points (or refers) to const: a
 * `const` before its last `*` or `&`. */
static int cast_to_const(const scanner *s, int a, int b) {
  int last = -1;
  for (int q = a; q < b; q++)
    if (tok_punct(s, q, "*") || tok_punct(s, q, "&")) last = q;
  for (int q = a; q < last; q++)
    if (tok_is(s, q, "const")) return 1;
  return 0;
}

static void check_const_casts(scanner *s) {
  if (s->nconstant_var == 0) return;
  sort_scanner = s;
  qsort(s->constant_var, (size_t)s->nconstant_var, sizeof(int), by_name);
  for (int i = 0; i < s->ntok; i++) {
    const token *t = &s->tok[i];
    if (t->kind != T_IDENT || t->dir >= 0) continue;
    int key = i;
    const int *hit = bsearch(&key, s->constant_var, (size_t)s->nconstant_var,
                             sizeof(int), by_name);
    if (!hit) continue;
    int declared_here = 0; /* the declaration's own name is no use */
    for (const int *h = hit; h >= s->constant_var && !by_name(h, &key); h--)
      declared_here |= *h == i;
    for (const int *h = hit;
         h < s->constant_var + s->nconstant_var && !by_name(h, &key); h++)
      declared_here |= *h == i;
    if (declared_here) continue;
    /* (T*)name, (T*)&name, (T*)(&name), (T&)name */
    int j = i - 1;
    while (j >= 0 && (tok_punct(s, j, "&") || tok_punct(s, j, "(")))
      j--;
    int cast = 0;
    if (j >= 1 && tok_punct(s, j, ")") &&
        (tok_punct(s, j - 1, "*") || tok_punct(s, j - 1, "&"))) {
      int depth = 0, open = -1;
      for (int q = j; q >= 0 && q >= j - 64; q--) {
        if (tok_punct(s, q, ")")) depth++;
        if (tok_punct(s, q, "(") && --depth == 0) {
          open = q;
          break;
        }
      }
      cast = open < 0 || !cast_to_const(s, open + 1, j);
    }
    for (int b = i - 1; b >= 0 && b >= i - 8 && !cast; b--) {
      if (!tok_is(s, b, "const_cast") && !tok_is(s, b, "reinterpret_cast"))
        continue;
      int close = b + 2;
      while (close < i && !tok_punct(s, close, ">"))
        close++;
      cast = !tok_punct(s, b + 1, "<") || !cast_to_const(s, b + 2, close);
    }
    if (cast)
      raise_flag(s, KL_FLAG_MUTABLE_DEVICE_STATE, t->line,
                 "a cast drops const from %s (a writable memo)",
                 s->text + t->start, t->len);
  }
}

/* A file-scope function declared here and defined nowhere here is
 * somebody else's: NVRTC refuses to call one, while the emulator's linker
 * binds it to the host's (`extern "C" __device__ void *kl_get(size_t);`
 * under a pragma, or any libc function the name table does not know). A
 * declaration read as a function that is a variable, `__device__ int
 * n(0);`, is flagged by the same rule. */
static void check_prototypes(scanner *s) {
  if (s->nproto == 0) return;
  sort_scanner = s;
  qsort(s->defined, (size_t)s->ndefined, 2 * sizeof(int), by_name);
  for (int i = 0; i < s->nproto; i++) {
    const int *pr = &s->proto[2 * i];
    const int *hit = s->ndefined ? bsearch(pr, s->defined, (size_t)s->ndefined,
                                           2 * sizeof(int), by_name)
                                 : NULL;
    /* a definition of that name in the same namespace: the run of equal
     * names around hit */
    int found = 0;
    for (const int *h = hit; h && h >= s->defined && !by_name(h, pr) && !found;
         h -= 2)
      found = same_ns(s, h[1], pr[1]);
    for (const int *h = hit;
         h && h < s->defined + 2 * s->ndefined && !by_name(h, pr) && !found;
         h += 2)
      found = same_ns(s, h[1], pr[1]);
    if (found) continue;
    const token *t = &s->tok[pr[0]];
    raise_flag(s, KL_FLAG_COMPILE_PASS_BRANCH, t->line,
               "%s is declared but not defined here (a host symbol)",
               s->text + t->start, t->len);
  }
}

kl_flags kl_scan(const char *src, size_t len, char *detail, size_t detail_len) {
  scanner s;
  memset(&s, 0, sizeof s);
  if (detail && detail_len) detail[0] = 0;
  if (len > KL_SCAN_OVERSIZE_BYTES) {
    char w[48];
    int wl =
        snprintf(w, sizeof w, "%zu bytes > %d", len, KL_SCAN_OVERSIZE_BYTES);
    raise_flag(&s, KL_FLAG_OVERSIZE_SOURCE, 1, "%s", w, wl);
  }
  if (join_splices(&s, src, len) == 0 && lex(&s) == 0 &&
      index_macros(&s) == 0 && check_declarations(&s) == 0) {
    for (int i = 0; i < s.ntok; i++) {
      const token *t = &s.tok[i];
      int d = t->dir;
      if (d >= 0 && !(dir_is(&s, d, "define") || dir_is(&s, d, "if") ||
                      dir_is(&s, d, "ifdef") || dir_is(&s, d, "ifndef") ||
                      dir_is(&s, d, "elif") || dir_is(&s, d, "elifdef") ||
                      dir_is(&s, d, "elifndef") || dir_is(&s, d, "undef")))
        continue; /* include targets, pragmas, #error text */
      if (t->kind == T_IDENT)
        check_name(&s, s.text + t->start, t->len, t->line, i);
      else if (tok_punct(&s, i, "<<<"))
        raise_flag(&s, KL_FLAG_GRAPH_OR_DYNPAR, t->line, "%s", "<<<", 3);
    }
    check_directives(&s);
    check_pragma_operators(&s);
    check_const_casts(&s);
    check_prototypes(&s);
    if (s.flags & KL_FLAG(KL_FLAG_INLINE_ASM)) check_asm_strings(&s);
  }
  if (detail && detail_len) {
    size_t o = 0;
    for (int bit = 0; bit < 64; bit++) {
      if (!(s.flags & KL_FLAG(bit))) continue;
      const char *name = kl_flag_name(bit);
      int w = snprintf(detail + o, detail_len - o, "%s%s: %s", o ? "; " : "",
                       name ? name : "?", s.note[bit]);
      if (w < 0 || (size_t)w >= detail_len - o) break;
      o += (size_t)w;
    }
  }
  free(s.text);
  free(s.line_of);
  free(s.tok);
  free(s.dir);
  free(s.constant_var);
  free(s.proto);
  free(s.defined);
  free(s.ns_parent);
  free(s.ns_name);
  free(s.macros);
  return s.flags;
}
