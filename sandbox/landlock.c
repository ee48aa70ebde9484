/*
 * sandbox/landlock.c — what the host compiler may see of the file system.
 *
 * The host-compile worker runs the C++ compiler on candidate text, and the
 * compiler reads whatever a file name in that text asks for: the scanner
 * refuses `#include` of anything but three CUDA headers, but the assembler
 * still honours `asm(".incbin \"PATH\"")`, which copies any file the lab's
 * user can read (keys in the home folder, /proc/self/environ with the lab's
 * tokens) into the module the candidate then runs with. Namespaces (user +
 * net) hide no file, so a Landlock ruleset does: from here on, the compiler
 * and its passes may read and execute only the toolchain (/usr, /lib*,
 * /bin, /sbin, the compiler's own prefix, the loader's cache and the
 * alternatives links), read and write /dev/null, and do anything inside the
 * build folder (where TMPDIR points); every other open fails with EACCES,
 * which the assembler reports as a compile error. Landlock stacks, needs
 * no privilege and holds across exec.
 *
 * Where the kernel has no Landlock (before 5.13, or disabled, or gVisor)
 * the compile goes on as before, unrestricted in what it reads:
 * sbx_landlock_abi() says which, and `kernlab sandbox --explain` prints it.
 */
#define _GNU_SOURCE
#include "sandbox/sandbox_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/landlock.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifndef SYS_landlock_create_ruleset
#define SYS_landlock_create_ruleset 444
#define SYS_landlock_add_rule 445
#define SYS_landlock_restrict_self 446
#endif

/* Rights by the ABI version that introduced them (older headers may lack
 * the names). */
#define LL_V1 ((1ull << 13) - 1)  /* EXECUTE .. MAKE_SYM */
#define LL_REFER (1ull << 13)     /* ABI 2 */
#define LL_TRUNCATE (1ull << 14)  /* ABI 3 */
#define LL_IOCTL_DEV (1ull << 15) /* ABI 5 */
#define LL_EXECUTE (1ull << 0)
#define LL_WRITE_FILE (1ull << 1)
#define LL_READ_FILE (1ull << 2)
#define LL_READ_DIR (1ull << 3)

int sbx_landlock_abi(void) {
  long v = syscall(SYS_landlock_create_ruleset, NULL, 0,
                   LANDLOCK_CREATE_RULESET_VERSION);
  return v > 0 ? (int)v : 0;
}

/* The rights a ruleset of this ABI handles: all it knows, so that nothing
 * it can restrict is left open. */
static uint64_t handled_rights(int abi) {
  uint64_t h = LL_V1;
  if (abi >= 2) h |= LL_REFER;
  if (abi >= 3) h |= LL_TRUNCATE;
  if (abi >= 5) h |= LL_IOCTL_DEV;
  return h;
}

/* Adds path with rights (masked to what a file may carry when it is not a
 * folder). A path that does not exist is skipped: 0. */
static int allow(int ruleset, const char *path, uint64_t rights,
                 uint64_t handled, char *why, size_t whylen) {
  int fd = open(path, O_PATH | O_CLOEXEC);
  if (fd < 0) return 0;
  struct stat st;
  if (fstat(fd, &st) == 0 && !S_ISDIR(st.st_mode))
    rights &=
        LL_EXECUTE | LL_WRITE_FILE | LL_READ_FILE | LL_TRUNCATE | LL_IOCTL_DEV;
  struct landlock_path_beneath_attr pb;
  memset(&pb, 0, sizeof pb);
  pb.allowed_access = rights & handled;
  pb.parent_fd = fd;
  long rc = syscall(SYS_landlock_add_rule, ruleset, LANDLOCK_RULE_PATH_BENEATH,
                    &pb, 0);
  int err = errno;
  close(fd);
  if (rc != 0) {
    snprintf(why, whylen, "landlock: cannot allow %s: %s", path, strerror(err));
    return -1;
  }
  return 0;
}

/* The folder two levels above the program `name` (as execvp finds it on
 * PATH when it has no slash), resolved through its links: /usr/bin/c++ ->
 * /usr/bin/x86_64-linux-gnu-g++-12 -> /usr. Into out; 0 if found. */
static int tool_prefix(const char *name, char *out, size_t n) {
  char cand[PATH_MAX], real[PATH_MAX];
  int found = 0;
  if (strchr(name, '/')) {
    found = realpath(name, real) != NULL;
  } else {
    const char *p = getenv("PATH");
    for (p = p ? p : "/usr/bin:/bin"; !found && p;) {
      const char *colon = strchr(p, ':');
      int len = colon ? (int)(colon - p) : (int)strlen(p);
      snprintf(cand, sizeof cand, "%.*s/%s", len, len ? p : ".", name);
      found = access(cand, X_OK) == 0 && realpath(cand, real);
      p = colon ? colon + 1 : NULL;
    }
  }
  if (!found) return -1;
  for (int up = 0; up < 2; up++) {
    char *slash = strrchr(real, '/');
    if (slash && slash != real) *slash = 0;
  }
  snprintf(out, n, "%s", real);
  return 0;
}

int sbx_landlock_toolchain(const char *build_dir, const char *compiler,
                           char *why, size_t whylen) {
  int abi = sbx_landlock_abi();
  if (abi <= 0) {
    snprintf(why, whylen, "landlock: not available in this kernel");
    return 0;
  }
  uint64_t handled = handled_rights(abi);
  struct landlock_ruleset_attr ra;
  memset(&ra, 0, sizeof ra);
  ra.handled_access_fs = handled;
  /* the first field is all an ABI-1 kernel knows; later fields stay 0 */
  int ruleset = (int)syscall(SYS_landlock_create_ruleset, &ra,
                             sizeof ra.handled_access_fs, 0);
  if (ruleset < 0) {
    snprintf(why, whylen, "landlock: cannot create a ruleset: %s",
             strerror(errno));
    return -1;
  }
  static const char *const toolchain[] = {
      "/usr", "/lib",  "/lib64",           "/lib32",           "/libx32",
      "/bin", "/sbin", "/etc/ld.so.cache", "/etc/alternatives"};
  uint64_t rx = LL_EXECUTE | LL_READ_FILE | LL_READ_DIR;
  int rc = 0;
  for (size_t i = 0; rc == 0 && i < sizeof toolchain / sizeof *toolchain; i++)
    rc = allow(ruleset, toolchain[i], rx, handled, why, whylen);
  char prefix[PATH_MAX];
  if (rc == 0 && compiler && tool_prefix(compiler, prefix, sizeof prefix) == 0)
    rc = allow(ruleset, prefix, rx, handled, why, whylen);
  if (rc == 0)
    rc = allow(ruleset, "/dev/null", LL_READ_FILE | LL_WRITE_FILE | LL_TRUNCATE,
               handled, why, whylen);
  if (rc == 0) rc = allow(ruleset, build_dir, handled, handled, why, whylen);
  if (rc == 0 && prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) {
    snprintf(why, whylen, "landlock: no_new_privs: %s", strerror(errno));
    rc = -1;
  }
  if (rc == 0 && syscall(SYS_landlock_restrict_self, ruleset, 0) != 0) {
    snprintf(why, whylen, "landlock: cannot restrict this process: %s",
             strerror(errno));
    rc = -1;
  }
  close(ruleset);
  return rc == 0 ? abi : -1;
}
