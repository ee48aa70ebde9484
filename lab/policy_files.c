/*
 * lab/policy_files.c — a checkpoint and its tokenizer, loaded as a pair for
 * `kernlab run` and `kernlab generate` (lab_tok_load, lab_load_model).
 *
 * `kernlab prime` saves the checkpoint X.ckpt, then renames the tokenizer it
 * wrote as X.ckpt.tok.tmp.PID to X.ckpt.tok. Interrupts wait for both
 * renames, but a SIGKILL (or a power cut) between the two leaves the new
 * checkpoint beside the old tokenizer, or beside none on a first save. The
 * right tokenizer still exists, under its temporary name; the checkpoint
 * records its sha256. So where a tokenizer is missing or does not match its
 * checkpoint, the message names such a leftover whose hash is the one the
 * checkpoint records, and says to rename it. Nothing is renamed here: the
 * lab does not move a user's files on a guess, and the hash makes the
 * advice certain.
 */
#include "lab/lab.h"

#include <dirent.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* Leftovers looked at: a folder of thousands of them is not ours to scan. */
#define LEFTOVERS_MAX 16

/* 1 when name is base ".tmp." followed by digits only (kl_outfile_tmpname's
 * names). */
static int is_leftover(const char *name, const char *base) {
  size_t bl = strlen(base);
  if (strncmp(name, base, bl) || strncmp(name + bl, ".tmp.", 5)) return 0;
  const char *d = name + bl + 5;
  if (!*d) return 0;
  for (; *d; d++)
    if (*d < '0' || *d > '9') return 0;
  return 1;
}

/* Writes to found (cap bytes) the path of a regular file TOK.tmp.PID beside
 * tok_path whose tokenizer has sha256 want; 0 when one is found. */
static int find_leftover(const char *tok_path, const char *want, char *found,
                         size_t cap) {
  char *d = strdup(tok_path), *b = strdup(tok_path);
  int rc = -1;
  DIR *dir = NULL;
  if (!d || !b) goto out;
  const char *folder = dirname(d), *base = basename(b);
  if (!(dir = opendir(folder))) goto out;
  int looked = 0;
  for (struct dirent *e; rc && looked < LEFTOVERS_MAX && (e = readdir(dir));) {
    if (!is_leftover(e->d_name, base)) continue;
    looked++;
    int n = snprintf(found, cap, "%s/%s", folder, e->d_name);
    struct stat st;
    if (n < 0 || (size_t)n >= cap || lstat(found, &st) || !S_ISREG(st.st_mode))
      continue;
    pl_tokenizer *t = NULL;
    char ignored[256];
    if (pl_tok_load(&t, found, ignored, sizeof ignored) != PL_OK) continue;
    if (!strcmp(pl_tok_hash(t), want)) rc = 0;
    pl_tok_free(t);
  }
out:
  if (dir) closedir(dir);
  free(d), free(b);
  return rc;
}

/* Appends the advice to why when a leftover of tok_path holds the
 * tokenizer with sha256 want. */
static void leftover_hint(const char *tok_path, const char *want, char *why,
                          size_t whylen) {
  char found[4200];
  if (find_leftover(tok_path, want, found, sizeof found)) return;
  size_t n = strlen(why);
  snprintf(why + n, whylen - n,
           ". %s holds the checkpoint's tokenizer: a kernlab prime stopped "
           "between saving the checkpoint and renaming its tokenizer left "
           "it; rename it to %s",
           found, tok_path);
}

int lab_tok_load(pl_tokenizer **tok, const char *tok_path,
                 const char *ckpt_path, char *why, size_t whylen) {
  int rc = pl_tok_load(tok, tok_path, why, whylen);
  struct stat st;
  pl_ckpt_header h;
  char ignored[256];
  /* only a tokenizer missing (or a folder in its place): a file that is
   * there but broken is what the message already says */
  if (rc && ckpt_path && (stat(tok_path, &st) != 0 || S_ISDIR(st.st_mode)) &&
      pl_ckpt_peek(ckpt_path, &h, ignored, sizeof ignored) == PL_OK)
    leftover_hint(tok_path, h.tokenizer_sha256, why, whylen);
  return rc;
}

int lab_load_model(pl_model *m, pl_ckpt_header *h, const char *path,
                   const pl_tokenizer *tok, const char *tok_path, float **m_out,
                   float **v_out, char *why, size_t whylen) {
  float *params = NULL;
  int rc = pl_ckpt_load(path, h, &params, m_out, v_out, why, whylen);
  if (rc) return rc;
  rc = pl_ckpt_check_tokenizer(h, pl_tok_hash(tok), why, whylen);
  if (rc && tok_path) leftover_hint(tok_path, h->tokenizer_sha256, why, whylen);
  if (!rc) rc = pl_model_init(m, &h->config, 0, why, whylen);
  /* kernlab prime sizes the vocab to the tokenizer's: a larger one could
   * sample ids the tokenizer cannot decode, mid-campaign */
  if (!rc && h->config.vocab != pl_tok_vocab_size(tok)) {
    snprintf(why, whylen,
             "%s: model vocab %d, but the tokenizer has %d tokens (a "
             "primed checkpoint has exactly its tokenizer's)",
             path, h->config.vocab, pl_tok_vocab_size(tok));
    pl_model_free(m);
    rc = PL_EINPUT;
  }
  if (!rc) memcpy(m->params_memory, params, m->num_params * sizeof(float));
  free(params);
  if (rc && m_out) free(*m_out), *m_out = NULL;
  if (rc && v_out) free(*v_out), *v_out = NULL;
  return rc;
}
