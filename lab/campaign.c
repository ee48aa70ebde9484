/*
 * lab/campaign.c — campaign files: a Lua file that returns a table, read
 * into a lab_campaign with every default filled in and every field checked.
 *
 * The file runs in a plain Lua state with only the base, string, table and
 * math libraries (so a campaign can compute values, e.g. steps = 4 * 25,
 * but cannot read files or the environment) and an instruction budget
 * against accidental infinite loops. It is trusted configuration, not a
 * sandboxed script like a reward formula. Unknown fields are errors, so a
 * typo ("group_sise") does not silently fall back to a default. The file
 * is text: a NUL byte in it is refused, naming its offset, and strings
 * are compared with their Lua length ("gpu\0x" is no "gpu"). Messages
 * name the file and the field: "quick.lua: grpo.loss_type: expected one of
 * grpo|bnpo|dr_grpo|dapo, got 'foo'". The fields, their types and defaults
 * are documented at the top of lua/campaigns/quick.lua.
 *
 * `corpus` and `exhaustive` name the two baselines a campaign is compared
 * with (lab/compare.c): the priming corpus folder and the results file of
 * `kernlab search exhaustive`. Neither has to exist: the comparison says
 * when one is missing, so they are not checked here. `kernlab search` loads
 * a campaign with LAB_CAMPAIGN_NO_POLICY: it samples no policy, so a
 * missing checkpoint or tokenizer is not an error there.
 *
 * lab_campaign_from_text reads a campaign from the text a results file
 * keeps in its config attribute, with no file it names checked (they may
 * have moved since): `kernlab run --resume` takes the task of a file that
 * holds no candidates yet from there.
 *
 * Not here: running the campaign (lab/run_cmd.c).
 */
#include "lab/lab.h"

#include <errno.h>
#include <lauxlib.h>
#include <lua.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define CAMPAIGN_MAX_INSTRUCTIONS 100000000LL

typedef struct parser {
  lua_State *L;
  const char *file;
  char *why;
  size_t whylen;
  int failed; /* the first error wins */
} parser;

static void fail(parser *p, const char *field, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void fail(parser *p, const char *field, const char *fmt, ...) {
  if (p->failed) return;
  p->failed = 1;
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  /* a long path keeps its end (the file's name), so that the field and
   * the reason still fit */
  size_t fl = strlen(p->file);
  snprintf(p->why, p->whylen, "%s%s: %s: %s", fl > 300 ? "..." : "",
           fl > 300 ? p->file + fl - 300 : p->file, field, msg);
}

/* What a value is, for messages: its type and, for short scalars, itself. */
static void describe(lua_State *L, int idx, char *out, size_t n) {
  int t = lua_type(L, idx);
  if (t == LUA_TSTRING) {
    /* as a terminal may show it; a NUL inside is said, not hidden */
    size_t len;
    const char *s = lua_tolstring(L, idx, &len);
    char shown[40];
    lab_printable(s, len, shown, sizeof shown);
    if (strlen(s) != len)
      snprintf(out, n, "'%s' (with a NUL byte at offset %zu)", shown,
               strlen(s));
    else
      snprintf(out, n, "'%s'", shown);
  } else if (t == LUA_TNUMBER && lua_isinteger(L, idx))
    snprintf(out, n, "%lld", (long long)lua_tointeger(L, idx));
  else if (t == LUA_TNUMBER && isnan(lua_tonumber(L, idx)))
    /* as written (0/0): %g says "-nan", x86's NaN having its sign bit set,
     * which a NaN given in a campaign does not mean */
    snprintf(out, n, "nan");
  else if (t == LUA_TNUMBER)
    snprintf(out, n, "%g", lua_tonumber(L, idx));
  else
    snprintf(out, n, "%s", lua_typename(L, t));
}

static void field_name(char *out, size_t n, const char *prefix,
                       const char *key) {
  if (prefix)
    snprintf(out, n, "%.40s.%.50s", prefix, key);
  else
    snprintf(out, n, "%.90s", key);
}

/* Pushes t[key] (t at absolute index tidx) and returns its type, raw
 * (lab_lua_field). */
static int push_field(parser *p, int tidx, const char *key) {
  return lab_lua_field(p->L, tidx, key);
}

static void get_num(parser *p, int tidx, const char *prefix, const char *key,
                    double lo, double hi, double *out) {
  char f[96], got[96];
  field_name(f, sizeof f, prefix, key);
  int t = push_field(p, tidx, key);
  if (t != LUA_TNIL) {
    double v = lua_tonumber(p->L, -1);
    describe(p->L, -1, got, sizeof got);
    if (t != LUA_TNUMBER)
      fail(p, f, "expected a number, got %s", got);
    else if (!(v >= lo && v <= hi))
      fail(p, f, "expected a number in [%g, %g], got %s", lo, hi, got);
    else
      *out = v;
  }
  lua_pop(p->L, 1);
}

static void get_int(parser *p, int tidx, const char *prefix, const char *key,
                    long long lo, long long hi, long long *out) {
  char f[96], got[96];
  field_name(f, sizeof f, prefix, key);
  int t = push_field(p, tidx, key);
  if (t != LUA_TNIL) {
    describe(p->L, -1, got, sizeof got);
    int isint = 0;
    lua_Integer v = lua_tointegerx(p->L, -1, &isint);
    /* the range either way: "expected an integer, got nan" did not say
     * which would do */
    if (t != LUA_TNUMBER || !isint || v < lo || v > hi)
      fail(p, f, "expected an integer in [%lld, %lld], got %s", lo, hi, got);
    else
      *out = v;
  }
  lua_pop(p->L, 1);
}

static void get_str(parser *p, int tidx, const char *prefix, const char *key,
                    char *out, size_t n) {
  char f[96], got[96];
  field_name(f, sizeof f, prefix, key);
  int t = push_field(p, tidx, key);
  if (t != LUA_TNIL) {
    describe(p->L, -1, got, sizeof got);
    size_t len = 0;
    const char *s = t == LUA_TSTRING ? lua_tolstring(p->L, -1, &len) : NULL;
    if (!s)
      fail(p, f, "expected a string, got %s", got);
    else if (len == 0 || len >= n || strlen(s) != len)
      fail(p, f, "expected a non-empty string under %zu bytes", n);
    else
      memcpy(out, s, len + 1);
  }
  lua_pop(p->L, 1);
}

static void get_bool(parser *p, int tidx, const char *prefix, const char *key,
                     int *out) {
  char f[96], got[96];
  field_name(f, sizeof f, prefix, key);
  int t = push_field(p, tidx, key);
  if (t != LUA_TNIL) {
    describe(p->L, -1, got, sizeof got);
    if (t != LUA_TBOOLEAN)
      fail(p, f, "expected a boolean, got %s", got);
    else
      *out = lua_toboolean(p->L, -1);
  }
  lua_pop(p->L, 1);
}

/* names: "a|b|c"; *out becomes the index of the match. */
static void get_enum(parser *p, int tidx, const char *prefix, const char *key,
                     const char *names, int *out) {
  char f[96], got[96], v[64];
  field_name(f, sizeof f, prefix, key);
  int t = push_field(p, tidx, key);
  if (t != LUA_TNIL) {
    describe(p->L, -1, got, sizeof got);
    /* the Lua length: "gpu\0x" is not "gpu" */
    size_t len = 0;
    const char *s = t == LUA_TSTRING ? lua_tolstring(p->L, -1, &len) : NULL;
    int found = -1;
    if (s && len < sizeof v && strlen(s) == len) {
      snprintf(v, sizeof v, "%s", s);
      const char *q = names;
      for (int i = 0; *q; i++) {
        const char *bar = strchr(q, '|');
        size_t l = bar ? (size_t)(bar - q) : strlen(q);
        if (strlen(v) == l && !strncmp(q, v, l)) found = i;
        q += l + (bar ? 1 : 0);
      }
    }
    if (found < 0)
      fail(p, f, "expected one of %s, got %s", names, got);
    else
      *out = found;
  }
  lua_pop(p->L, 1);
}

/* Pushes the sub-table t[key] and returns its absolute index, or 0 (nothing
 * pushed) when it is nil or not a table (then an error is recorded). */
static int push_table(parser *p, int tidx, const char *key) {
  char got[96];
  int t = push_field(p, tidx, key);
  if (t == LUA_TTABLE) return lua_gettop(p->L);
  if (t != LUA_TNIL) {
    describe(p->L, -1, got, sizeof got);
    fail(p, key, "expected a table, got %s", got);
  }
  lua_pop(p->L, 1);
  return 0;
}

/* Every key of the table at tidx must be one of allowed ("a|b|c"). */
static void check_keys(parser *p, int tidx, const char *prefix,
                       const char *allowed) {
  lua_pushnil(p->L);
  while (lua_next(p->L, tidx)) {
    lua_pop(p->L, 1); /* the value */
    char got[96];
    describe(p->L, -1, got, sizeof got);
    size_t klen = 0; /* the Lua length: "name\0x" is no "name" */
    const char *k = lua_type(p->L, -1) == LUA_TSTRING
                        ? lua_tolstring(p->L, -1, &klen)
                        : NULL;
    int ok = 0;
    for (const char *q = allowed; k && *q;) {
      const char *bar = strchr(q, '|');
      size_t l = bar ? (size_t)(bar - q) : strlen(q);
      if (klen == l && !memcmp(q, k, l)) ok = 1;
      q += l + (bar ? 1 : 0);
    }
    if (!ok) {
      char f[96], shown[64];
      if (k) lab_printable(k, klen, shown, sizeof shown);
      field_name(f, sizeof f, prefix, k && strlen(k) == klen ? shown : got);
      fail(p, f, "unknown field (expected one of %s)", allowed);
      lua_pop(p->L, 1);
      return;
    }
  }
}

static char *read_all(const char *path, char *why, size_t whylen) {
  FILE *f = kl_fopen_regular(path, NULL); /* a FIFO would block fopen */
  if (!f) {
    snprintf(why, whylen, "%s: cannot open the campaign file: %s", path,
             kl_fopen_error(errno));
    return NULL;
  }
  size_t cap = 4096, n = 0;
  char *buf = malloc(cap);
  for (size_t got; buf && (got = fread(buf + n, 1, cap - n - 1, f)) > 0;) {
    n += got;
    /* full: grow while what was read fits the 1 MiB limit (a file of
     * 1 MiB - 1 bytes once filled the last buffer and was refused) */
    if (n + 1 == cap) {
      char *nb = n <= (1u << 20) ? realloc(buf, cap *= 2) : NULL;
      if (!nb) free(buf);
      buf = nb;
    }
  }
  fclose(f);
  if (buf && n > (1u << 20)) {
    free(buf);
    buf = NULL;
  }
  if (!buf) {
    snprintf(why, whylen, "%s: larger than 1 MiB (or out of memory)", path);
    return NULL;
  }
  if (buf) buf[n] = 0;
  /* Lua would read up to the end, but the text is kept as a C string (the
   * results file's config): a NUL would cut it there, and what follows be
   * run yet never recorded. A campaign file is text: refused. */
  const char *nul = buf ? memchr(buf, 0, n) : NULL;
  if (nul) {
    snprintf(why, whylen,
             "%s: a NUL byte at offset %zu; expected a text file (Lua "
             "source)",
             path, (size_t)(nul - buf));
    free(buf);
    buf = NULL;
  }
  return buf;
}

static void check_readable(parser *p, const char *field, const char *path,
                           const char *hint) {
  if (p->failed || access(path, R_OK) == 0) return;
  fail(p, field, "cannot read '%s': %s%s", path, strerror(errno), hint);
}

static int parse_campaign(lab_campaign *c, int flags, char *why, size_t whylen);

int lab_campaign_load(const char *path, lab_campaign *c, char *why,
                      size_t whylen) {
  return lab_campaign_load_flags(path, 0, c, why, whylen);
}

int lab_campaign_load_flags(const char *path, int flags, lab_campaign *c,
                            char *why, size_t whylen) {
  memset(c, 0, sizeof *c);
  if (!path) { /* the embedded default */
    snprintf(c->path, sizeof c->path, "lua/campaigns/quick.lua (built in)");
    snprintf(c->name, sizeof c->name, "quick");
    c->text = strdup(lab_quick_campaign);
    if (!c->text) {
      snprintf(why, whylen, "out of memory");
      return LAB_EXIT_ENV;
    }
  } else {
    /* every message starts with the path: one of a kilobyte left no room
     * for the field and the reason (the campaign-file review), and
     * c->path would hold it cut */
    if (strlen(path) >= sizeof c->path) {
      snprintf(why, whylen,
               "the campaign file's path is %zu bytes long (at most %zu): "
               "%.60s...; move the file, or run it from nearer its folder",
               strlen(path), sizeof c->path - 1, path);
      return LAB_EXIT_USAGE;
    }
    snprintf(c->path, sizeof c->path, "%s", path);
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    snprintf(c->name, sizeof c->name, "%s", base);
    size_t nl = strlen(c->name);
    if (nl > 4 && !strcmp(c->name + nl - 4, ".lua")) c->name[nl - 4] = 0;
    c->text = read_all(path, why, whylen);
    if (!c->text) return LAB_EXIT_USAGE;
  }
  return parse_campaign(c, flags, why, whylen);
}

int lab_campaign_from_text(const char *label, const char *text, lab_campaign *c,
                           char *why, size_t whylen) {
  memset(c, 0, sizeof *c);
  snprintf(c->path, sizeof c->path, "%s", label);
  snprintf(c->name, sizeof c->name, "campaign");
  c->text = strdup(text);
  if (!c->text) {
    snprintf(why, whylen, "out of memory");
    return LAB_EXIT_ENV;
  }
  return parse_campaign(c, LAB_CAMPAIGN_NO_POLICY | LAB_CAMPAIGN_NO_FILES, why,
                        whylen);
}

/* Runs c->text (c->path names it in messages, c->name is the default
 * name) and fills in *c as lab_campaign_load_flags says; on failure frees
 * c->text. */
static int parse_campaign(lab_campaign *c, int flags, char *why,
                          size_t whylen) {
  const char *path = c->path; /* the name messages use */

  /* Defaults (lua/campaigns/quick.lua lists them). */
  c->M = c->N = c->K = 256;
  snprintf(c->backend, sizeof c->backend, "cpu-emu");
  snprintf(c->checkpoint, sizeof c->checkpoint, "runs/policy.ckpt");
  snprintf(c->reward, sizeof c->reward, "lua/reward/default.lua");
  c->group_size = 4;
  c->prompts_per_step = 1;
  c->steps = 10;
  c->sampling = (pl_sampling){1.0f, 1.0f, 0.1f};
  c->max_tokens = 1024;
  c->grpo = pl_grpo_defaults();
  c->grpo.loss_type = PL_GRPO_LOSS_DAPO;
  c->grpo.scale_rewards = PL_GRPO_SCALE_GROUP;
  c->grpo.beta = 0;
  c->grpo.eps_low = 0.2;
  c->grpo.eps_high = 0.28;
  c->grpo.mask_truncated = 1;
  c->num_iterations = 1;
  c->lr = 1e-5f;
  c->warmup = 0;
  c->weight_decay = 0;
  c->clip = 1.0f;
  c->seed = 1;
  c->timeout_s = 60;

  rw_script *S = lab_lua_open(path, "campaign files", CAMPAIGN_MAX_INSTRUCTIONS,
                              why, whylen);
  if (!S) {
    free(c->text);
    c->text = NULL;
    return LAB_EXIT_ENV;
  }
  lua_State *L = rw_sandbox_state(S);

  parser P = {L, path, why, whylen, 0};
  parser *p = &P;
  int rc = LAB_EXIT_USAGE;
  char chunk[1100];
  snprintf(chunk, sizeof chunk, "@%s", path);
  size_t text_len = strlen(c->text), skip = rw_chunk_skip(c->text, text_len);
  if (luaL_loadbufferx(L, c->text + skip, text_len - skip, chunk, "t") !=
      LUA_OK) {
    /* Lua's message starts with "path:line:", except a memory error's. */
    const char *msg = lua_tostring(L, -1);
    if (!msg) msg = "error object is not a string";
    if (strncmp(msg, path, strlen(path)))
      snprintf(why, whylen, "%s: %s", path, msg);
    else
      snprintf(why, whylen, "%s", msg);
    goto done;
  }
  /* rw_sandbox_call's message names the file and line */
  if (rw_sandbox_call(S, 0, 1, why, whylen) != RW_OK) {
    lab_name_path(path, why, whylen); /* Lua shortens a long path */
    goto done;
  }
  if (!lua_istable(L, 1)) {
    char got[96];
    describe(L, 1, got, sizeof got);
    snprintf(why, whylen,
             "%s: the file must return a table of campaign fields, got %s",
             path, got);
    goto done;
  }
  check_keys(p, 1, NULL,
             "name|task|backend|checkpoint|tokenizer|group_size|"
             "prompts_per_step|steps|sampling|grpo|optim|reward|seed|out|"
             "corpus|exhaustive|timeout");
  get_str(p, 1, NULL, "name", c->name, sizeof c->name);
  /* the name makes runs/NAME.h5 and runs/NAME-exhaustive.h5: one file-name
   * part, not a path that climbs or makes folders */
  int bad_name = !c->name[0];
  for (const char *q = c->name; *q; q++)
    bad_name |= *q == '/' || (unsigned char)*q < 0x20 || *q == 0x7f;
  if (bad_name) {
    char shown[160];
    lab_printable(c->name, strlen(c->name), shown, sizeof shown);
    fail(p, "name",
         "expected a file-name part (it names runs/NAME.h5: no '/', no "
         "control characters), got '%s'",
         shown);
  }

  long long v;
  double d;
  int t;
  if ((t = push_table(p, 1, "task"))) {
    check_keys(p, t, "task", "M|N|K|dtype");
    /* A task is one shape: {M = 64, N = 64} ran 64x64x256, K taken from
     * the default shape without a word. Left out whole, task is the
     * default 256x256x256; given, it names all three. */
    static const char *const dims[] = {"M", "N", "K"};
    for (int i = 0; i < 3; i++) {
      if (push_field(p, t, dims[i]) == LUA_TNIL) {
        char f[96];
        field_name(f, sizeof f, "task", dims[i]);
        fail(p, f,
             "missing; a task table gives M, N and K (integers in [1, "
             "65536]), or leave task out for 256x256x256");
      }
      lua_pop(L, 1);
    }
    v = c->M, get_int(p, t, "task", "M", 1, 65536, &v), c->M = (int)v;
    v = c->N, get_int(p, t, "task", "N", 1, 65536, &v), c->N = (int)v;
    v = c->K, get_int(p, t, "task", "K", 1, 65536, &v), c->K = (int)v;
    int dt = 0;
    get_enum(p, t, "task", "dtype", "fp32", &dt);
    lua_pop(L, 1);
  }
  if ((long long)c->M * c->K > (1LL << 28) ||
      (long long)c->K * c->N > (1LL << 28) ||
      (long long)c->M * c->N > (1LL << 28))
    fail(p, "task", "each matrix must have at most 2^28 elements");
  int be = 0;
  get_enum(p, 1, NULL, "backend", "cpu-emu|gpu|auto", &be);
  snprintf(c->backend, sizeof c->backend, "%s",
           be == 0   ? "cpu-emu"
           : be == 1 ? "gpu"
                     : "auto");
  /* room for the default tokenizer CKPT.tok: a longer checkpoint's was cut
   * to another name */
  get_str(p, 1, NULL, "checkpoint", c->checkpoint,
          sizeof c->tokenizer - strlen(".tok"));
  snprintf(c->tokenizer, sizeof c->tokenizer, "%.1019s.tok", c->checkpoint);
  get_str(p, 1, NULL, "tokenizer", c->tokenizer, sizeof c->tokenizer);
  v = c->group_size,
  get_int(p, 1, NULL, "group_size", 2, LAB_MAX_GROUP_SIZE, &v);
  c->group_size = (int)v;
  v = c->prompts_per_step, get_int(p, 1, NULL, "prompts_per_step", 1, 256, &v);
  c->prompts_per_step = (int)v;
  v = c->steps, get_int(p, 1, NULL, "steps", 1, 1000000, &v);
  c->steps = (int)v;
  get_num(p, 1, NULL, "timeout", 0.5, 3600, &c->timeout_s);
  if ((t = push_table(p, 1, "sampling"))) {
    check_keys(p, t, "sampling", "temperature|top_p|min_p|max_tokens");
    d = c->sampling.temperature;
    get_num(p, t, "sampling", "temperature", 0, 100, &d);
    c->sampling.temperature = (float)d;
    d = c->sampling.top_p, get_num(p, t, "sampling", "top_p", 1e-6, 1, &d);
    c->sampling.top_p = (float)d;
    d = c->sampling.min_p, get_num(p, t, "sampling", "min_p", 0, 1, &d);
    c->sampling.min_p = (float)d;
    v = c->max_tokens, get_int(p, t, "sampling", "max_tokens", 1, 1 << 20, &v);
    c->max_tokens = (int)v;
    lua_pop(L, 1);
  }
  if ((t = push_table(p, 1, "grpo"))) {
    check_keys(p, t, "grpo",
               "loss_type|scale_rewards|beta|eps_low|eps_high|"
               "num_iterations|mask_truncated");
    get_enum(p, t, "grpo", "loss_type", "grpo|bnpo|dr_grpo|dapo",
             &c->grpo.loss_type);
    get_enum(p, t, "grpo", "scale_rewards", "group|batch|none",
             &c->grpo.scale_rewards);
    get_num(p, t, "grpo", "beta", 0, 1e6, &c->grpo.beta);
    get_num(p, t, "grpo", "eps_low", 0, 1, &c->grpo.eps_low);
    if (c->grpo.eps_low == 1) /* the clip range 1 - eps_low must be > 0 */
      fail(p, "grpo.eps_low", "expected a number in [0, 1), got 1");
    get_num(p, t, "grpo", "eps_high", 0, 100, &c->grpo.eps_high);
    v = c->num_iterations;
    get_int(p, t, "grpo", "num_iterations", 1, 64, &v);
    c->num_iterations = (int)v;
    get_bool(p, t, "grpo", "mask_truncated", &c->grpo.mask_truncated);
    lua_pop(L, 1);
  }
  c->grpo.max_completion_length = c->max_tokens;
  if ((t = push_table(p, 1, "optim"))) {
    check_keys(p, t, "optim", "lr|warmup|weight_decay|clip");
    d = c->lr, get_num(p, t, "optim", "lr", 0, 1, &d), c->lr = (float)d;
    v = c->warmup, get_int(p, t, "optim", "warmup", 0, 1000000, &v);
    c->warmup = (int)v;
    d = c->weight_decay, get_num(p, t, "optim", "weight_decay", 0, 10, &d);
    c->weight_decay = (float)d;
    d = c->clip, get_num(p, t, "optim", "clip", 0, 1e9, &d);
    c->clip = (float)d;
    lua_pop(L, 1);
  }
  /* the schedule warms up within the campaign (policy/adamw.c refuses
   * more, and only after the baseline was timed) */
  if (c->warmup > c->steps)
    fail(p, "optim.warmup", "%d exceeds steps (%d); expected 0..%d", c->warmup,
         c->steps, c->steps);
  get_str(p, 1, NULL, "reward", c->reward, sizeof c->reward);
  v = (long long)c->seed, get_int(p, 1, NULL, "seed", 0, 1LL << 62, &v);
  c->seed = (uint64_t)v;
  snprintf(c->out, sizeof c->out, "runs/%s.h5", c->name);
  get_str(p, 1, NULL, "out", c->out, sizeof c->out);
  snprintf(c->corpus, sizeof c->corpus, "runs/corpus");
  get_str(p, 1, NULL, "corpus", c->corpus, sizeof c->corpus);
  snprintf(c->exhaustive, sizeof c->exhaustive, "runs/%.900s-exhaustive.h5",
           c->name);
  get_str(p, 1, NULL, "exhaustive", c->exhaustive, sizeof c->exhaustive);

  char w[256];
  if (!p->failed && pl_sampling_validate(&c->sampling, w, sizeof w) != PL_OK)
    fail(p, "sampling", "%s", w);
  if (!p->failed && pl_grpo_config_check(&c->grpo, w, sizeof w) != PL_OK)
    fail(p, "grpo", "%s", w);
  char hint[1200];
  snprintf(hint, sizeof hint, " (prime one with `kernlab prime --out %.1000s`)",
           c->checkpoint);
  if (!(flags & LAB_CAMPAIGN_NO_POLICY)) {
    check_readable(p, "checkpoint", c->checkpoint, hint);
    /* the prime hint only for the default pairing: following it for a
     * tokenizer named on its own would replace the checkpoint there */
    char tok_default[1100];
    snprintf(tok_default, sizeof tok_default, "%s.tok", c->checkpoint);
    check_readable(p, "tokenizer", c->tokenizer,
                   strcmp(c->tokenizer, tok_default) ? "" : hint);
  }
  if (!(flags & LAB_CAMPAIGN_NO_FILES))
    check_readable(p, "reward", c->reward, "");
  if (!p->failed) rc = 0;
done:
  rw_free(S);
  if (rc) {
    free(c->text);
    c->text = NULL;
    /* the script's own error text (error("\27[2J ...")) and the path go
     * to a terminal: control bytes as '?' (campaign-file review) */
    char *clean = whylen ? malloc(whylen) : NULL;
    if (clean) {
      snprintf(why, whylen, "%s",
               lab_printable(why, strlen(why), clean, whylen));
      free(clean);
    }
  }
  return rc;
}

int lab_campaign_set_out(lab_campaign *c, const char *out, char *why,
                         size_t whylen) {
  /* cut at 1023 bytes, a long --out put the results and the checkpoint in
   * files named after part of a folder above it */
  if (strlen(out) >= sizeof c->out) {
    snprintf(why, whylen,
             "--out is %zu bytes long (at most %zu): %.60s...; name a "
             "shorter path",
             strlen(out), sizeof c->out - 1, out);
    return LAB_EXIT_USAGE;
  }
  snprintf(c->out, sizeof c->out, "%s", out);
  return 0;
}

void lab_campaign_free(lab_campaign *c) {
  free(c->text);
  c->text = NULL;
}
