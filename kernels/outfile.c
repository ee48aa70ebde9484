/*
 * kernels/outfile.c — files written beside their names and renamed into
 * place (see kl_outfile in kernels.h).
 *
 * It lives at the bottom of the module graph because the policy (its
 * checkpoints and tokenizers), the results store and the lab's commands all
 * write files this way; one copy keeps one temporary-name rule, which the
 * lab's interrupt handler relies on to remove a half-written file when a
 * second Ctrl-C stops a command at once.
 *
 * kl_fopen_regular, the reading side's guard against a FIFO swapped in
 * for a file, lives here too: every module reads user files.
 *
 * Errors name the final path first (what the user asked for) and then the
 * temporary file where that helps to find a leftover.
 */
#include "kernels/kernels.h"

#include <errno.h>
#include <fcntl.h>
#include <dirent.h>
#include <libgen.h>
#include <signal.h>
#include <sys/statvfs.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int kl_outfile_tmpname(const char *path, char *buf, size_t cap) {
  int n = snprintf(buf, cap, "%s.tmp.%ld", path, (long)getpid());
  return n < 0 || (size_t)n >= cap ? -1 : 0;
}

static void release(kl_outfile *o) {
  free(o->path);
  free(o->tmp);
  memset(o, 0, sizeof *o);
}

int kl_outfile_open(kl_outfile *o, const char *path, char *why, size_t len) {
  memset(o, 0, sizeof *o);
  size_t cap = strlen(path) + 32;
  o->path = strdup(path);
  o->tmp = malloc(cap);
  if (!o->path || !o->tmp) {
    release(o);
    snprintf(why, len, "%s: out of memory", path);
    return -1;
  }
  kl_outfile_tmpname(path, o->tmp, cap);
  /* a file of our own: not through a link planted at the name, nor a
   * leftover of an earlier process with this pid */
  unlink(o->tmp);
  int fd =
      open(o->tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
  o->f = fd >= 0 ? fdopen(fd, "w") : NULL;
  if (!o->f && fd >= 0) close(fd);
  if (!o->f) {
    snprintf(why, len, "%s: cannot create %s: %s", path, o->tmp,
             strerror(errno));
    release(o);
    return -1;
  }
  return 0;
}

/* The rename is durable only once the folder's entry is on disk too. */
static void sync_folder(const char *path) {
  char *copy = strdup(path);
  if (!copy) return;
  int fd = open(dirname(copy), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd >= 0) {
    (void)fsync(fd);
    close(fd);
  }
  free(copy);
}

int kl_outfile_commit(kl_outfile *o, int durable, char *why, size_t len) {
  int err = kl_stream_errno(o->f);
  if (!err && durable && fsync(fileno(o->f)) != 0) err = errno;
  errno = 0; /* fclose may fail without naming why (a stream already failed) */
  if (fclose(o->f) != 0 && !err) err = errno ? errno : EIO;
  o->f = NULL;
  if (err) {
    snprintf(why, len, "%s: write failed: %s", o->path, strerror(err));
  } else if (rename(o->tmp, o->path) != 0) {
    err = errno;
    snprintf(why, len, "%s: cannot rename %s into place: %s", o->path, o->tmp,
             strerror(err));
  }
  if (err)
    unlink(o->tmp);
  else if (durable)
    sync_folder(o->path);
  release(o);
  return err ? -1 : 0;
}

void kl_outfile_abort(kl_outfile *o) {
  if (o->f) fclose(o->f);
  if (o->tmp) unlink(o->tmp);
  release(o);
}

int kl_outfile_sweep(const char *path) {
  char *a = strdup(path), *b = strdup(path);
  if (!a || !b) {
    free(a);
    free(b);
    return 0;
  }
  const char *dir = dirname(a), *base = basename(b);
  size_t blen = strlen(base);
  DIR *d = opendir(dir);
  int removed = 0;
  struct dirent *e;
  while (d && (e = readdir(d))) {
    const char *n = e->d_name;
    if (strncmp(n, base, blen) || strncmp(n + blen, ".tmp.", 5)) continue;
    /* PATH.tmp.PID, or PATH.tmp.PID.tmp.PID: a rebuild writes its copy
       beside PATH.tmp.PID, and that copy's own temporary nests the suffix */
    char *end;
    const char *at = n + blen + 5;
    long pid = strtol(at, &end, 10);
    if (end == at || pid <= 0 || pid == (long)getpid()) continue;
    if (!strncmp(end, ".tmp.", 5)) {
      char *end2;
      long pid2 = strtol(end + 5, &end2, 10);
      if (end2 == end + 5 || pid2 != pid) continue;
      end = end2;
    }
    if (*end) continue;
    if (kill((pid_t)pid, 0) == 0 || errno != ESRCH) continue; /* alive */
    char full[4200];
    snprintf(full, sizeof full, "%s/%s", dir, n);
    removed += unlink(full) == 0;
  }
  if (d) closedir(d);
  free(a);
  free(b);
  return removed;
}

FILE *kl_fopen_regular(const char *path, struct stat *st) {
  struct stat own;
  if (!st) st = &own;
  memset(st, 0, sizeof *st);
  int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return NULL;
  if (fstat(fd, st) != 0 || !S_ISREG(st->st_mode)) {
    int err = S_ISDIR(st->st_mode) ? EISDIR : EINVAL;
    close(fd);
    errno = err;
    return NULL;
  }
  int flags = fcntl(fd, F_GETFL);
  if (flags >= 0) fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
  FILE *f = fdopen(fd, "rb");
  if (!f) close(fd);
  return f;
}

const char *kl_fopen_error(int err) {
  return err == EINVAL   ? "not a regular file"
         : err == EISDIR ? "not a regular file (a folder)"
                         : strerror(err);
}

int kl_stream_errno(FILE *f) {
  errno = 0;
  if (fflush(f) == 0 && !ferror(f)) return 0;
  if (errno) return errno;
  struct stat st;
  struct statvfs vs;
  if (fstat(fileno(f), &st) == 0 && S_ISREG(st.st_mode) &&
      fstatvfs(fileno(f), &vs) == 0 && vs.f_bavail == 0)
    return ENOSPC;
  return EIO;
}
