/*
 * tests/unit/json_min.h — the smallest JSON reader that reads the golden
 * files of the tests: objects, arrays, numbers (strtod), strings (escapes
 * kept as written except \" and \\, enough for keys and labels), true,
 * false, null. A parse builds a tree of jm_node; jm_free releases it.
 * Not for untrusted input at scale: recursion depth is capped at 64, and
 * errors report only the byte offset.
 */
#ifndef KL_JSON_MIN_H
#define KL_JSON_MIN_H
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { JM_NULL, JM_BOOL, JM_NUM, JM_STR, JM_ARR, JM_OBJ };

typedef struct jm_node {
  int type;
  double num;             /* JM_NUM, JM_BOOL (0/1) */
  char *str;              /* JM_STR */
  int n;                  /* JM_ARR / JM_OBJ: number of items */
  struct jm_node **items; /* (n) values */
  char **keys;            /* (n) JM_OBJ keys, in file order */
} jm_node;

typedef struct {
  const char *s;
  size_t pos, len;
} jm_parser;

static inline jm_node *jm_value(jm_parser *p, int depth);

static inline void jm_ws(jm_parser *p) {
  while (p->pos < p->len && isspace((unsigned char)p->s[p->pos]))
    p->pos++;
}

static inline int jm_eat(jm_parser *p, char c) {
  jm_ws(p);
  if (p->pos < p->len && p->s[p->pos] == c) {
    p->pos++;
    return 1;
  }
  return 0;
}

static inline char *jm_string(jm_parser *p) {
  if (!jm_eat(p, '"')) return NULL;
  char *out = malloc(p->len - p->pos + 1);
  size_t k = 0;
  while (p->pos < p->len && p->s[p->pos] != '"') {
    char c = p->s[p->pos++];
    if (c == '\\' && p->pos < p->len) c = p->s[p->pos++];
    out[k++] = c;
  }
  if (p->pos >= p->len) {
    free(out);
    return NULL;
  }
  p->pos++; /* closing quote */
  out[k] = '\0';
  return out;
}

/* Appends to an array or object node (key NULL for arrays). */
static inline void jm_push(jm_node *n, char *key, jm_node *v) {
  n->items = realloc(n->items, (size_t)(n->n + 1) * sizeof *n->items);
  n->keys = realloc(n->keys, (size_t)(n->n + 1) * sizeof *n->keys);
  n->items[n->n] = v;
  n->keys[n->n] = key;
  n->n++;
}

static inline void jm_free(jm_node *n) {
  if (!n) return;
  for (int i = 0; i < n->n; i++) {
    jm_free(n->items[i]);
    free(n->keys[i]);
  }
  free(n->items);
  free(n->keys);
  free(n->str);
  free(n);
}

static inline jm_node *jm_value(jm_parser *p, int depth) {
  jm_ws(p);
  if (p->pos >= p->len || depth > 64) return NULL;
  jm_node *n = calloc(1, sizeof *n);
  char c = p->s[p->pos];
  if (c == '{' || c == '[') {
    int obj = c == '{';
    n->type = obj ? JM_OBJ : JM_ARR;
    p->pos++;
    if (jm_eat(p, obj ? '}' : ']')) return n;
    do {
      char *key = NULL;
      if (obj && (!(key = jm_string(p)) || !jm_eat(p, ':'))) {
        free(key);
        goto fail;
      }
      jm_node *v = jm_value(p, depth + 1);
      if (!v) {
        free(key);
        goto fail;
      }
      jm_push(n, key, v);
    } while (jm_eat(p, ','));
    if (!jm_eat(p, obj ? '}' : ']')) goto fail;
  } else if (c == '"') {
    n->type = JM_STR;
    if (!(n->str = jm_string(p))) goto fail;
  } else if (!strncmp(p->s + p->pos, "true", 4) ||
             !strncmp(p->s + p->pos, "false", 5)) {
    n->type = JM_BOOL;
    n->num = c == 't';
    p->pos += c == 't' ? 4 : 5;
  } else if (!strncmp(p->s + p->pos, "null", 4)) {
    p->pos += 4;
  } else {
    char *end;
    n->type = JM_NUM;
    n->num = strtod(p->s + p->pos, &end);
    if (end == p->s + p->pos) goto fail;
    p->pos = (size_t)(end - p->s);
  }
  return n;
fail:
  jm_free(n);
  return NULL;
}

/* Parses a NUL-terminated text; NULL (and *err_pos set) when it is not one
 * JSON value. The caller frees the tree with jm_free. */
static inline jm_node *jm_parse(const char *text, size_t *err_pos) {
  jm_parser p = {text, 0, strlen(text)};
  jm_node *n = jm_value(&p, 0);
  jm_ws(&p);
  if (n && p.pos != p.len) {
    jm_free(n);
    n = NULL;
  }
  if (!n && err_pos) *err_pos = p.pos;
  return n;
}

/* Reads and parses a whole file; NULL on I/O or syntax errors (message on
 * stderr naming the file). */
static inline jm_node *jm_parse_file(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    fprintf(stderr, "%s: cannot open\n", path);
    return NULL;
  }
  fseek(f, 0, SEEK_END);
  long size = ftell(f);
  fseek(f, 0, SEEK_SET);
  if (size < 0) {
    fclose(f);
    fprintf(stderr, "%s: cannot read\n", path);
    return NULL;
  }
  char *buf = malloc((size_t)size + 1);
  size_t got = fread(buf, 1, (size_t)size, f);
  fclose(f);
  buf[got] = '\0';
  size_t at = 0;
  jm_node *n = jm_parse(buf, &at);
  if (!n) fprintf(stderr, "%s: not valid JSON near byte %zu\n", path, at);
  free(buf);
  return n;
}

/* The value of key in an object, or NULL. */
static inline const jm_node *jm_get(const jm_node *o, const char *key) {
  if (!o || o->type != JM_OBJ) return NULL;
  for (int i = 0; i < o->n; i++)
    if (!strcmp(o->keys[i], key)) return o->items[i];
  return NULL;
}

/* Item i of an array, or NULL. */
static inline const jm_node *jm_at(const jm_node *a, int i) {
  if (!a || a->type != JM_ARR || i < 0 || i >= a->n) return NULL;
  return a->items[i];
}
#endif
