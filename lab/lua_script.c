/*
 * lab/lua_script.c — the Lua the lab runs that is configuration, not a
 * reward formula: campaign files (lab/campaign.c) and seed scripts, the
 * generators that turn kernels/seeds/ into configurations (lua/corpus.lua
 * for `kernlab corpus`, lua/search_space.lua for `kernlab search`).
 *
 * Both run in the reward scripts' sandbox (lab_lua_open, reward.h's
 * rw_sandbox_open): base, string, table and math only, no files, no
 * environment, no clock, no randomness (a configuration must give the same
 * run twice), a memory cap, and an instruction budget and wall deadline
 * per call that pcall cannot swallow. These scripts are the user's own
 * configuration, not hostile code, but a broken one (an endless loop, even
 * one inside pcall; a finalizer that never returns; a string.rep of an
 * empty string a billion times) must end in a message naming the file and
 * line, never a hang or an abort: the weaker state they had before let a
 * pcall loop hang `kernlab run` for good.
 *
 * A seed script's only window on the disk is kl.seed(name), which returns
 * the text of one file of the seeds folder; names are restricted to
 * [a-z0-9_.] (every byte of the Lua string: no NUL) so "../" cannot leave
 * it. What generate() returns is checked before anyone prints or writes
 * it: a list without holes, variant names that are file names, labels
 * without control bytes, holdout_fraction a number.
 */
#include "lab/lab.h"

#include <errno.h>
#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

rw_script *lab_lua_open(const char *path, const char *kind,
                        long long max_instructions, char *why, size_t whylen) {
  rw_limits lim = {LAB_LUA_MEM_BYTES, max_instructions, LAB_LUA_WALL_MS,
                   LAB_LUA_PATTERN_STEPS};
  return rw_sandbox_open(path, kind, &lim, why, whylen);
}

/* ---- seed scripts ---- */

#define SEED_SCRIPT_MAX_INSTRUCTIONS 200000000LL
/* A seed script is source text; 4 MiB is far past any real one. */
#define SEED_SCRIPT_MAX_BYTES (4u << 20)

/* kl.seed(name): the text of <seeds_dir>/<name>; seeds_dir is upvalue 1.
 * Every byte of the Lua string is checked, so "01_naive.cu\0/../x" (which
 * C would read as "01_naive.cu") is refused too; a refused name is shown
 * with what a terminal would act on replaced. */
static int lua_seed(lua_State *L) {
  size_t nlen;
  const char *name = luaL_checklstring(L, 1, &nlen);
  const char *dir = lua_tostring(L, lua_upvalueindex(1));
  int bad = !nlen || !strcmp(name, ".") || !strcmp(name, "..");
  for (size_t i = 0; i < nlen; i++)
    bad |= !(name[i] == '_' || name[i] == '.' ||
             (name[i] >= '0' && name[i] <= '9') ||
             (name[i] >= 'a' && name[i] <= 'z'));
  if (bad) {
    char shown[160];
    for (size_t i = 0; i < nlen && i + 1 < sizeof shown; i++)
      shown[i] = name[i] >= 0x20 && name[i] < 0x7f ? name[i] : '?';
    shown[nlen < sizeof shown ? nlen : sizeof shown - 1] = 0;
    return luaL_error(L,
                      "kl.seed: '%s' is not a seed file name (expected "
                      "a-z, 0-9, '_' and '.', no NUL)",
                      shown);
  }
  char path[1200], why[600];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  char *src;
  size_t len;
  if (kl_source_load(path, &src, &len, why, sizeof why) != KL_OK)
    return luaL_error(L, "kl.seed: %s", why);
  lua_pushlstring(L, src, len);
  free(src);
  return 1;
}

int lab_lua_field(lua_State *L, int idx, const char *key) {
  idx = lua_absindex(L, idx);
  lua_pushstring(L, key);
  return lua_rawget(L, idx);
}

/* t[key] of the table at idx as a string, or NULL (not a string). The
 * pointer lives as long as the table does. */
static const char *field_string(lua_State *L, int idx, const char *key,
                                size_t *len) {
  lab_lua_field(L, idx, key);
  const char *s =
      lua_type(L, -1) == LUA_TSTRING ? lua_tolstring(L, -1, len) : NULL;
  lua_pop(L, 1);
  return s;
}

/* A variant's name is a file name (the corpus's train/NAME.cu) and a line
 * of `kernlab search --list`: letters, digits, '_', '-', '+' and '.', not
 * starting with '.' (so no "..", no '/', no control bytes). Checked here
 * so that every seed script's caller (corpus, search) gets it. */
static int variant_name_ok(const char *name, size_t len) {
  if (!len || name[0] == '.') return 0;
  for (size_t i = 0; i < len; i++) {
    char c = name[i];
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
          (c >= '0' && c <= '9') || c == '_' || c == '-' || c == '+' ||
          c == '.'))
      return 0;
  }
  return 1;
}

/* A configuration label (a column of the corpus's MANIFEST.tsv, a holdout
 * name): any bytes but C0 controls, DEL and NUL. */
static int label_ok(const char *s, size_t len) {
  if (!len) return 0;
  for (size_t i = 0; i < len; i++)
    if ((unsigned char)s[i] < 0x20 || s[i] == 0x7f) return 0;
  return 1;
}

/* The number of entries of the list at idx, read raw (no metamethod runs
 * outside a protected call): entries 1..n, every one present. lua_rawlen
 * alone gives a border, any border, so {a, nil, b} could pass as {a} and
 * silently lose b. Returns n, or -1 with why naming the first missing
 * entry ("path: variant 2 is missing ...", item "variant"), or more than
 * max entries. */
static long long list_length(lua_State *L, int idx, long long max,
                             const char *path, const char *item, char *why,
                             size_t whylen) {
  idx = lua_absindex(L, idx);
  lua_Integer last = 0;
  lua_pushnil(L);
  while (lua_next(L, idx)) {
    lua_pop(L, 1); /* the value */
    if (lua_isinteger(L, -1) && lua_tointeger(L, -1) > last)
      last = lua_tointeger(L, -1);
  }
  lua_Integer upto = last < max + 1 ? last : max + 1;
  for (lua_Integer i = 1; i <= upto; i++) {
    int t = lua_rawgeti(L, idx, i);
    lua_pop(L, 1);
    if (t == LUA_TNIL) {
      snprintf(why, whylen,
               "%s: %s %lld is missing (the list goes on to %lld); expected "
               "a list without holes",
               path, item, (long long)i, (long long)last);
      return -1;
    }
  }
  if (last > max) {
    snprintf(why, whylen, "%s: %lld %ss; expected at most %lld", path,
             (long long)last, item, max);
    return -1;
  }
  return last;
}

/* Caps on a script's list: each variant's source is copied out of Lua
 * (whose memory cap does not count the copies), and a search evaluates
 * every variant, seconds each. */
#define MAX_VARIANTS 65536
#define MAX_VARIANT_BYTES ((size_t)256 << 20)

typedef struct named {
  const char *name;
  int index;
} named;

static int by_name(const void *a, const void *b) {
  const named *x = a, *y = b;
  int c = strcmp(x->name, y->name);
  return c ? c : (x->index > y->index) - (x->index < y->index);
}

/* The first variant (in list order) whose name an earlier one has: its
 * index, with *earlier set; -1 when the names are unique, -2 when out of
 * memory. */
static int first_duplicate(const lab_seed_variant *v, int n, int *earlier) {
  named *ix = malloc(sizeof *ix * (size_t)(n > 0 ? n : 1));
  if (!ix) return -2;
  for (int i = 0; i < n; i++)
    ix[i] = (named){v[i].name, i};
  qsort(ix, (size_t)n, sizeof *ix, by_name);
  int later = -1;
  for (int k = 1; k < n; k++)
    if (!strcmp(ix[k].name, ix[k - 1].name) &&
        (later < 0 || ix[k].index < later)) {
      later = ix[k].index;
      *earlier = ix[k - 1].index;
    }
  free(ix);
  return later;
}

/* Copies the list at the top of the stack into a fresh array. */
static int read_variants(lua_State *L, const char *path, lab_seed_variant **out,
                         int *n, char *why, size_t whylen) {
  long long len =
      list_length(L, -1, MAX_VARIANTS, path, "variant", why, whylen);
  if (len < 0) return -1;
  int count = (int)len;
  size_t bytes = 0;
  lab_seed_variant *v = calloc((size_t)(count > 0 ? count : 1), sizeof *v);
  if (!v) {
    snprintf(why, whylen, "%s: out of memory for %d variants", path, count);
    return -1;
  }
  for (int i = 0; i < count; i++) {
    lua_rawgeti(L, -1, i + 1);
    const char *name = NULL, *config = NULL, *src = NULL;
    size_t nlen = 0, clen = 0, len = 0;
    if (lua_istable(L, -1)) {
      name = field_string(L, -1, "name", &nlen);
      config = field_string(L, -1, "config", &clen);
      src = field_string(L, -1, "source", &len);
      if (!config) config = name, clen = nlen;
    }
    int bad_name = name && src &&
                   (nlen >= sizeof v[i].name || !variant_name_ok(name, nlen));
    const char *bad =
        !name || !src ? "expected {name = string, config = "
                        "string (optional), source = string}"
        : bad_name    ? "name: expected letters, digits, '_', '-', '+' and "
                        "'.', not starting with '.', under 128 bytes (a file "
                        "name)"
        : !clen || clen >= sizeof v[i].config || !label_ok(config, clen)
            ? "config: expected a non-empty string under 128 bytes, no "
              "control bytes"
            : NULL;
    char big[96];
    if (!bad && (bytes += len) > MAX_VARIANT_BYTES) {
      snprintf(big, sizeof big,
               "the sources so far pass %zu MiB; expected fewer or smaller "
               "variants",
               MAX_VARIANT_BYTES >> 20);
      bad = big;
    }
    if (!bad && !(v[i].source = malloc(len + 1)))
      bad = "out of memory for its source";
    if (bad) {
      char shown[64] = ""; /* a bad name as a terminal may show it */
      if (bad_name) lab_printable(name, nlen, shown, sizeof shown);
      snprintf(why, whylen, "%s: variant %d: %s%s%s%s", path, i + 1, bad,
               bad_name ? "; got '" : "", shown, bad_name ? "'" : "");
      if (bad_name && strlen(name) != nlen)
        snprintf(why + strlen(why), whylen - strlen(why),
                 " (a NUL byte at offset %zu)", strlen(name));
      lua_pop(L, 1);
      lab_seed_variants_free(v, i + 1);
      return -1;
    }
    memcpy(v[i].source, src, len);
    v[i].source[len] = 0;
    v[i].len = len;
    memcpy(v[i].name, name, nlen + 1);
    memcpy(v[i].config, config, clen + 1);
    lua_pop(L, 1);
  }
  /* unique names: sorted, not pairwise (a generated space may be large) */
  int j = 0, i = first_duplicate(v, count, &j);
  if (i != -1) {
    if (i == -2)
      snprintf(why, whylen, "%s: out of memory for %d variants", path, count);
    else
      snprintf(why, whylen,
               "%s: variant %d: name '%.128s' is variant %d's too; expected "
               "unique names",
               path, i + 1, v[i].name, j + 1);
    lab_seed_variants_free(v, count);
    return -1;
  }
  *out = v;
  *n = count;
  return 0;
}

/* The holdout list at the top of the stack (nil: none) into split. */
static int read_holdout(lua_State *L, const char *path, lab_seed_split *split,
                        char *why, size_t whylen) {
  if (lua_isnil(L, -1)) return 0;
  /* raw reads: no metamethod runs outside a protected call */
  long long count = lua_istable(L, -1)
                        ? list_length(L, -1, LAB_HOLDOUT_MAX, path,
                                      "holdout name", why, whylen)
                        : 0;
  if (count < 0) return -1;
  if (count < 1) {
    snprintf(why, whylen,
             "%s: holdout: expected a list of 1 to %d configuration names",
             path, LAB_HOLDOUT_MAX);
    return -1;
  }
  for (int i = 0; i < (int)count; i++) {
    lua_rawgeti(L, -1, i + 1);
    size_t len = 0;
    const char *name =
        lua_type(L, -1) == LUA_TSTRING ? lua_tolstring(L, -1, &len) : NULL;
    if (!name || len >= sizeof split->names[0] || !label_ok(name, len)) {
      lua_pop(L, 1);
      snprintf(why, whylen,
               "%s: holdout[%d]: expected a configuration name (a non-empty "
               "string under 128 bytes, no control bytes)",
               path, i + 1);
      return -1;
    }
    memcpy(split->names[i], name, len + 1);
    lua_pop(L, 1);
  }
  split->n_names = (int)count;
  return 0;
}

int lab_seed_script_run(const char *path, const char *seeds_dir,
                        lab_seed_variant **out, int *n, lab_seed_split *split,
                        char *why, size_t whylen) {
  *out = NULL;
  *n = 0;
  lab_seed_split sp = {0};
  rw_script *S = lab_lua_open(path, "seed scripts",
                              SEED_SCRIPT_MAX_INSTRUCTIONS, why, whylen);
  if (!S) return -1;
  lua_State *L = rw_sandbox_state(S);
  int rc = -1;
  /* read here, not by luaL_loadfilex: its fopen would wait for ever on a
   * FIFO put in the script's place */
  char *text = NULL;
  size_t text_len = 0;
  FILE *fp = kl_fopen_regular(path, NULL);
  if (fp) {
    text = malloc(SEED_SCRIPT_MAX_BYTES + 1);
    text_len = text ? fread(text, 1, SEED_SCRIPT_MAX_BYTES + 1, fp) : 0;
    fclose(fp);
  }
  if (!fp || !text || text_len > SEED_SCRIPT_MAX_BYTES) {
    snprintf(why, whylen, "%s: cannot read the script: %s", path,
             !fp     ? kl_fopen_error(errno)
             : !text ? "out of memory"
                     : "larger than 4 MiB");
    free(text);
    goto done;
  }
  char chunk[1100];
  snprintf(chunk, sizeof chunk, "@%s", path); /* messages say "path:line:" */
  size_t skip = rw_chunk_skip(text, text_len);
  int st = luaL_loadbufferx(L, text + skip, text_len - skip, chunk, "t");
  free(text);
  if (st != LUA_OK) {
    /* Lua's messages start with "path:line:" except cannot-open ones,
     * which already name the file. */
    const char *msg = lua_tostring(L, -1);
    snprintf(why, whylen, "%s", msg ? msg : "cannot load the script");
    goto done;
  }
  if (rw_sandbox_call(S, 0, 1, why, whylen) != RW_OK) {
    lab_name_path(path, why, whylen); /* Lua shortens a long path */
    goto done;
  }
  if (!lua_istable(L, -1)) {
    snprintf(why, whylen, "%s: expected the script to return a table", path);
    goto done;
  }
  /* a number, not what lua_isnumber takes ("0.5", a string) */
  int ft = lab_lua_field(L, -1, "holdout_fraction");
  sp.fraction = ft == LUA_TNUMBER ? lua_tonumber(L, -1) : 0;
  lua_pop(L, 1);
  if (ft != LUA_TNIL && ft != LUA_TNUMBER) {
    snprintf(why, whylen,
             "%s: holdout_fraction: expected a number in [0, 1), got a %s",
             path, lua_typename(L, ft));
    goto done;
  }
  if (!(sp.fraction >= 0 && sp.fraction < 1)) {
    snprintf(why, whylen, "%s: holdout_fraction must be in [0, 1)", path);
    goto done;
  }
  lab_lua_field(L, -1, "holdout");
  int bad = read_holdout(L, path, &sp, why, whylen);
  lua_pop(L, 1);
  if (bad) goto done;
  if (sp.n_names && sp.fraction > 0) {
    snprintf(why, whylen,
             "%s: expected holdout (configuration names) or "
             "holdout_fraction, not both",
             path);
    goto done;
  }
  lab_lua_field(L, -1, "generate");
  if (!lua_isfunction(L, -1)) {
    snprintf(why, whylen, "%s: expected a function `generate(kl)`", path);
    goto done;
  }
  lua_newtable(L);
  lua_pushstring(L, seeds_dir);
  lua_pushcclosure(L, lua_seed, 1);
  lua_setfield(L, -2, "seed");
  if (rw_sandbox_call(S, 1, 1, why, whylen) != RW_OK) {
    lab_name_path(path, why, whylen);
    goto done;
  }
  if (!lua_istable(L, -1)) {
    snprintf(why, whylen, "%s: generate() must return a list of variants",
             path);
    goto done;
  }
  rc = read_variants(L, path, out, n, why, whylen);
  for (int j = 0; rc == 0 && j < sp.n_names; j++) {
    int i = 0;
    while (i < *n && strcmp((*out)[i].config, sp.names[j]))
      i++;
    if (i == *n) {
      snprintf(why, whylen,
               "%s: holdout names '%s', which is no variant's config", path,
               sp.names[j]);
      lab_seed_variants_free(*out, *n);
      *out = NULL;
      *n = 0;
      rc = -1;
    }
  }
  if (rc == 0 && split) *split = sp;
done:
  rw_free(S);
  return rc;
}

void lab_seed_variants_free(lab_seed_variant *v, int n) {
  for (int i = 0; v && i < n; i++)
    free(v[i].source);
  free(v);
}
