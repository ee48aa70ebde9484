/*
 * kernels/cache.c — the on-disk artifact cache (compiled cubins, emulator
 * shared objects) under one folder, keyed by sha256 hex strings.
 *
 * Entries written through kl_cache_put carry a 44-byte header so that a read
 * can tell a whole entry from a damaged one:
 *
 *   offset 0   "KLC1"                       magic, 4 bytes
 *   offset 4   payload length               uint64, little-endian
 *   offset 12  sha256(payload)              32 bytes
 *   offset 44  payload
 *
 * A truncated, extended or bit-flipped entry fails the check and is a miss,
 * never wrong data. Writes go to a temporary file in the same folder and are
 * renamed into place, so readers see either the old entry or the new one.
 *
 * What it deliberately does not do: evict (the folder grows until someone
 * deletes it), lock (two writers of one key both produce the same bytes, and
 * rename makes the last one win), or fsync (a crash can lose an entry, which
 * only costs a recompile; the checksum catches a half-written one).
 */
#include "kernels/kernels.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define KL_CACHE_MAGIC "KLC1"
#define KL_CACHE_HEADER 44
/* Entries larger than this are treated as corrupt rather than read. */
#define KL_CACHE_MAX_PAYLOAD ((uint64_t)1 << 30)

static char kl_cache_folder[4096];
static pthread_once_t kl_cache_once = PTHREAD_ONCE_INIT;

/* mkdir -p: creates every missing component of path. Returns 0 on success
 * or when the folder already exists. */
static int kl_mkdirs(const char *path, mode_t mode) {
  char buf[sizeof kl_cache_folder];
  size_t n = strlen(path);
  if (n == 0 || n >= sizeof buf) return -1;
  memcpy(buf, path, n + 1);
  for (size_t i = 1; i <= n; i++) {
    if (buf[i] != '/' && buf[i] != '\0') continue;
    char saved = buf[i];
    buf[i] = '\0';
    if (mkdir(buf, mode) != 0 && errno != EEXIST) return -1;
    buf[i] = saved;
  }
  struct stat st;
  return (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) ? 0 : -1;
}

/* Picks the folder from the environment (see kernels.h) and creates it. */
static void kl_cache_init(void) {
  const char *env = getenv("KERNLAB_CACHE");
  const char *xdg = getenv("XDG_CACHE_HOME");
  const char *home = getenv("HOME");
  int n = -1;
  if (env && *env)
    n = snprintf(kl_cache_folder, sizeof kl_cache_folder, "%s", env);
  else if (xdg && *xdg)
    n = snprintf(kl_cache_folder, sizeof kl_cache_folder, "%s/kernlab", xdg);
  else if (home && *home)
    n = snprintf(kl_cache_folder, sizeof kl_cache_folder, "%s/.cache/kernlab",
                 home);
  if (n < 0 || (size_t)n >= sizeof kl_cache_folder ||
      kl_mkdirs(kl_cache_folder, 0755) != 0) {
    snprintf(kl_cache_folder, sizeof kl_cache_folder, "/tmp/kernlab-cache-%lu",
             (unsigned long)getuid());
    (void)kl_mkdirs(kl_cache_folder, 0700);
  }
  /* Absolute, so that artifacts can be loaded by path from a sandboxed
   * worker that may not ask for its working folder. */
  char real[PATH_MAX];
  if (kl_cache_folder[0] != '/' && realpath(kl_cache_folder, real))
    snprintf(kl_cache_folder, sizeof kl_cache_folder, "%s", real);
}

/* The cache folder; decided and created on the first call of the process
 * (later changes to the environment are ignored). Never NULL. */
const char *kl_cache_dir(void) {
  pthread_once(&kl_cache_once, kl_cache_init);
  return kl_cache_folder;
}

/* Entry names must stay inside the folder: no separators, no "..". */
static int kl_cache_name_ok(const char *key, const char *suffix) {
  if (!key || !*key) return 0;
  if (strchr(key, '/') || (suffix && strchr(suffix, '/'))) return 0;
  if (strstr(key, "..") || (suffix && strstr(suffix, ".."))) return 0;
  return 1;
}

/* Path of entry key+suffix in the cache folder. The folder exists (unless it
 * could not be created); the file itself is written by the caller, who
 * should also write it atomically. An over-long path is truncated to "". */
void kl_cache_path(const char *key, const char *suffix, char *path,
                   size_t pathlen) {
  if (pathlen == 0) return;
  int n = snprintf(path, pathlen, "%s/%s%s", kl_cache_dir(), key,
                   suffix ? suffix : "");
  if (n < 0 || (size_t)n >= pathlen) path[0] = '\0';
}

static void kl_put_u64le(uint8_t *p, uint64_t v) {
  for (int i = 0; i < 8; i++)
    p[i] = (uint8_t)(v >> (8 * i));
}

static uint64_t kl_get_u64le(const uint8_t *p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; i++)
    v |= (uint64_t)p[i] << (8 * i);
  return v;
}

/* Reads exactly len bytes; returns 0 on success. */
static int kl_read_all(int fd, void *buf, size_t len) {
  uint8_t *p = buf;
  while (len > 0) {
    ssize_t r = read(fd, p, len);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return -1;
    p += r;
    len -= (size_t)r;
  }
  return 0;
}

/* Writes exactly len bytes; returns 0 on success. */
static int kl_write_all(int fd, const void *buf, size_t len) {
  const uint8_t *p = buf;
  while (len > 0) {
    ssize_t w = write(fd, p, len);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return -1;
    p += w;
    len -= (size_t)w;
  }
  return 0;
}

/* Reads and verifies entry key+suffix. Returns 1 with *data a malloc'd copy
 * of the payload (owned by the caller; one extra NUL byte follows it, not
 * counted in *len) on a hit; 0 on a miss, which includes a missing,
 * unreadable, truncated or corrupt entry. */
int kl_cache_get(const char *key, const char *suffix, uint8_t **data,
                 size_t *len) {
  char path[4352];
  *data = NULL;
  *len = 0;
  if (!kl_cache_name_ok(key, suffix)) return 0;
  kl_cache_path(key, suffix, path, sizeof path);
  if (!path[0]) return 0;
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  uint8_t head[KL_CACHE_HEADER];
  struct stat st;
  uint8_t *buf = NULL;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) ||
      st.st_size < KL_CACHE_HEADER || kl_read_all(fd, head, sizeof head) != 0)
    goto miss;
  uint64_t n = kl_get_u64le(head + 4);
  if (memcmp(head, KL_CACHE_MAGIC, 4) != 0 || n > KL_CACHE_MAX_PAYLOAD ||
      (uint64_t)st.st_size != KL_CACHE_HEADER + n)
    goto miss;
  buf = malloc((size_t)n + 1);
  if (!buf || kl_read_all(fd, buf, (size_t)n) != 0) goto miss;
  buf[n] = 0;
  kl_sha256_ctx ctx;
  uint8_t digest[32];
  kl_sha256_init(&ctx);
  kl_sha256_update(&ctx, buf, (size_t)n);
  kl_sha256_final(&ctx, digest);
  if (memcmp(digest, head + 12, 32) != 0) goto miss;
  close(fd);
  *data = buf;
  *len = (size_t)n;
  return 1;
miss:
  free(buf);
  close(fd);
  return 0;
}

/* Writes entry key+suffix atomically: header and payload go to a temporary
 * file in the cache folder, which is then renamed over the entry. Returns 1
 * on success, 0 on any failure (the temporary file is removed). */
int kl_cache_put(const char *key, const char *suffix, const void *data,
                 size_t len) {
  char path[4352], tmp[4400];
  if (!kl_cache_name_ok(key, suffix) || (uint64_t)len > KL_CACHE_MAX_PAYLOAD)
    return 0;
  kl_cache_path(key, suffix, path, sizeof path);
  if (!path[0]) return 0;
  int n = snprintf(tmp, sizeof tmp, "%s.tmp.XXXXXX", path);
  if (n < 0 || (size_t)n >= sizeof tmp) return 0;
  int fd = mkstemp(tmp);
  if (fd < 0) return 0;
  uint8_t head[KL_CACHE_HEADER];
  memcpy(head, KL_CACHE_MAGIC, 4);
  kl_put_u64le(head + 4, (uint64_t)len);
  kl_sha256_ctx ctx;
  kl_sha256_init(&ctx);
  kl_sha256_update(&ctx, data, len);
  kl_sha256_final(&ctx, head + 12);
  /* mkstemp creates 0600; entries are as readable as other cache files. */
  (void)fchmod(fd, 0644);
  int ok = kl_write_all(fd, head, sizeof head) == 0 &&
           kl_write_all(fd, data, len) == 0;
  if (close(fd) != 0) ok = 0;
  if (ok && rename(tmp, path) != 0) ok = 0;
  if (!ok) unlink(tmp);
  return ok;
}
