/*
 * tests/unit/test_outfile.c — files written beside their names and renamed
 * into place (kl_outfile, kernels/outfile.c), and the interrupt handler
 * that removes such a file when a command is stopped (lab/interrupt.c,
 * linked in by tests/CMakeLists.txt).
 *
 * A real folder under /tmp; write failures come from RLIMIT_FSIZE (EFBIG,
 * with SIGXFSZ ignored) and a vanished folder; signals are raised in forked
 * children so the test's own process is never killed.
 */
#include "kernels/kernels.h"
#include "lab/lab.h"
#include "tests/unit/kltest.h"

#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static char dir[64];

static int count_entries(void) {
  DIR *d = opendir(dir);
  int n = 0;
  struct dirent *e;
  while (d && (e = readdir(d)))
    n += e->d_name[0] != '.';
  if (d) closedir(d);
  return n;
}

static void put(const char *path, const char *text) {
  FILE *f = fopen(path, "w");
  fputs(text, f);
  fclose(f);
}

static void test_commit_and_abort(void) {
  char path[128], why[512];
  snprintf(path, sizeof path, "%s/out.txt", dir);
  put(path, "old\n");
  kl_outfile o;
  CHECK(kl_outfile_open(&o, path, why, sizeof why) == 0, "open: %s", why);
  char tmp[160];
  kl_outfile_tmpname(path, tmp, sizeof tmp);
  CHECK(!strcmp(o.tmp, tmp), "the temporary name is PATH.tmp.PID: %s", o.tmp);
  fputs("new\n", o.f);
  size_t len = 0;
  char *text = kl_test_read_file(path, &len);
  CHECK(text && !strcmp(text, "old\n"), "before the commit the old file");
  free(text);
  CHECK(kl_outfile_commit(&o, 1, why, sizeof why) == 0, "commit: %s", why);
  text = kl_test_read_file(path, &len);
  CHECK(text && !strcmp(text, "new\n"), "after the commit the new file");
  free(text);
  CHECK(access(tmp, F_OK) != 0 && count_entries() == 1, "no temporary left");
  CHECK(!o.f && !o.tmp && !o.path, "commit releases o");

  CHECK(kl_outfile_open(&o, path, why, sizeof why) == 0, "open: %s", why);
  fputs("abandoned\n", o.f);
  kl_outfile_abort(&o);
  text = kl_test_read_file(path, &len);
  CHECK(text && !strcmp(text, "new\n"), "abort leaves the earlier file");
  free(text);
  CHECK(count_entries() == 1, "abort removes the temporary file");
}

static void test_failures(void) {
  char path[128], why[512];
  snprintf(path, sizeof path, "%s/no/such/folder.txt", dir);
  kl_outfile o;
  CHECK(kl_outfile_open(&o, path, why, sizeof why) == -1 && strstr(why, path) &&
            strstr(why, "cannot create") && strstr(why, "No such file"),
        "a missing folder: %s", why);

  /* a write that fails (the file-size limit): the commit says so, the
   * earlier file stays, nothing is left beside it */
  snprintf(path, sizeof path, "%s/big.txt", dir);
  put(path, "small\n");
  CHECK(kl_outfile_open(&o, path, why, sizeof why) == 0, "open: %s", why);
  struct rlimit old, lim = {4096, 4096};
  getrlimit(RLIMIT_FSIZE, &old);
  lim.rlim_max = old.rlim_max;
  void (*prev)(int) = signal(SIGXFSZ, SIG_IGN);
  setrlimit(RLIMIT_FSIZE, &lim);
  for (int i = 0; i < 2000; i++)
    fputs("0123456789\n", o.f);
  int rc = kl_outfile_commit(&o, 0, why, sizeof why);
  setrlimit(RLIMIT_FSIZE, &old);
  signal(SIGXFSZ, prev);
  CHECK(rc == -1 && strstr(why, path) && strstr(why, "write failed"),
        "a failed write: %s", why);
  size_t len = 0;
  char *text = kl_test_read_file(path, &len);
  CHECK(text && !strcmp(text, "small\n"), "the earlier file is intact");
  free(text);
  CHECK(count_entries() == 2, "no temporary left: %d entries", count_entries());

  /* the folder removed between open and commit: the rename fails */
  char sub[128];
  snprintf(sub, sizeof sub, "%s/gone", dir);
  mkdir(sub, 0755);
  snprintf(path, sizeof path, "%s/gone/x.txt", dir);
  CHECK(kl_outfile_open(&o, path, why, sizeof why) == 0, "open: %s", why);
  fputs("x\n", o.f);
  unlink(o.tmp);
  rmdir(sub);
  CHECK(kl_outfile_commit(&o, 0, why, sizeof why) == -1 &&
            strstr(why, "cannot rename"),
        "a vanished folder: %s", why);
  char small[8];
  CHECK(kl_outfile_tmpname("/a/very/long/path", small, sizeof small) == -1,
        "a name that does not fit is refused");
}

/* A child writing path through kl_outfile under the interrupt handler
 * (first NULL: at once; else the two-step mode) signals itself n times
 * and says, through its exit status, what it saw. */
static void child_interrupted(const char *path, const char *first, int n,
                              int *killed_by, int *exit_code) {
  pid_t pid = fork();
  if (pid == 0) {
    char why[512];
    kl_outfile o;
    if (kl_outfile_open(&o, path, why, sizeof why) != 0) _exit(10);
    lab_interrupt_install("test", first, o.tmp);
    fputs("partial\n", o.f);
    fflush(o.f);
    for (int i = 0; i < n; i++)
      raise(SIGINT);
    /* still here: only the flag was set, the file is still being written */
    if (!lab_interrupted()) _exit(11);
    if (access(o.tmp, F_OK) != 0) _exit(12);
    kl_outfile_abort(&o);
    lab_interrupt_uninstall();
    _exit(0);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  *killed_by = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
  *exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static void test_interrupt(void) {
  char path[128];
  snprintf(path, sizeof path, "%s/report.html", dir);
  put(path, "earlier\n");
  int sig = 0, code = 0;
  /* at once: one signal removes the temporary file and kills the child;
   * its name, PATH.tmp.CHILDPID, is unknown here, so count entries */
  child_interrupted(path, NULL, 1, &sig, &code);
  CHECK(sig == SIGINT, "at once: killed by SIGINT (sig %d, exit %d)", sig,
        code);
  CHECK(count_entries() == 3, "at once: the temporary file is removed (%d)",
        count_entries());
  /* two-step: one signal only sets the flag (the child exits 0) */
  child_interrupted(path, "finishing", 1, &sig, &code);
  CHECK(sig == 0 && code == 0, "first signal: flag only (sig %d, exit %d)", sig,
        code);
  child_interrupted(path, "finishing", 2, &sig, &code);
  CHECK(sig == SIGINT, "second signal: killed (sig %d, exit %d)", sig, code);
  CHECK(count_entries() == 3, "second signal: temporary removed (%d)",
        count_entries());
  size_t len = 0;
  char *text = kl_test_read_file(path, &len);
  CHECK(text && !strcmp(text, "earlier\n"), "the earlier file is intact");
  free(text);
}

/* lab_interrupt_hold: a second signal while held stops nothing and
 * removes nothing until the hold ends (prime's checkpoint and tokenizer
 * renames: a second Ctrl-C between them removed the new tokenizer). */
static void test_interrupt_hold(void) {
  char path[128];
  snprintf(path, sizeof path, "%s/held.txt", dir);
  int fds[2], before = count_entries();
  CHECK(pipe(fds) == 0, "pipe");
  pid_t pid = fork();
  if (pid == 0) {
    char why[512];
    kl_outfile o;
    if (kl_outfile_open(&o, path, why, sizeof why) != 0) _exit(10);
    lab_interrupt_install("test", "finishing", o.tmp);
    raise(SIGINT); /* the first: a flag */
    lab_interrupt_hold(1);
    raise(SIGINT); /* the second, held */
    raise(SIGTERM);
    /* still here, the temporary file still there: say so, then release */
    char ok = access(o.tmp, F_OK) == 0 ? 'y' : 'n';
    if (write(fds[1], &ok, 1) != 1) _exit(13);
    lab_interrupt_hold(0); /* the held stop happens here */
    _exit(0);
  }
  close(fds[1]);
  char ok = 0;
  ssize_t got = read(fds[0], &ok, 1);
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  CHECK(got == 1 && ok == 'y', "held: alive, the temporary file kept (%c)",
        ok ? ok : '-');
  CHECK(WIFSIGNALED(status), "released: the held stop ends the process (%d)",
        status);
  CHECK(count_entries() == before,
        "released: the temporary file removed (%d entries, %d before)",
        count_entries(), before);
}

/* The handler runs between any two instructions of the thread it
 * interrupts, and on whichever thread the kernel picks (the evaluator's
 * slot threads, the policy's and OpenBLAS's helpers). It keeps the errno
 * of the code it interrupted (its message to a closed stderr left EBADF
 * there), and a signal another thread takes still reaches the flag and
 * the hold (with a ThreadSanitizer build, KL_TSAN: data races on the
 * volatile sig_atomic_t flags, which order nothing between threads). The
 * first child exits 0 when all held, else a code naming the first check
 * that failed: exit, not _exit, so that a ThreadSanitizer report makes its
 * status 66. The second holds a stop taken by another thread. */
static void *take_signals(void *arg) {
  for (;;)
    pause();
  return arg;
}

/* Starts a thread that takes SIGINT and SIGTERM, which this one then
 * blocks. 0, or -1. */
static int signals_to_another_thread(void) {
  pthread_t t;
  if (pthread_create(&t, NULL, take_signals, NULL) != 0) return -1;
  sigset_t both;
  sigemptyset(&both);
  sigaddset(&both, SIGINT);
  sigaddset(&both, SIGTERM);
  return pthread_sigmask(SIG_BLOCK, &both, NULL) == 0 ? 0 : -1;
}

static void test_interrupt_threads(void) {
  char path[128];
  snprintf(path, sizeof path, "%s/threads.txt", dir);
  int before = count_entries();
  pid_t pid = fork();
  if (pid == 0) {
    char why[512];
    kl_outfile o;
    if (kl_outfile_open(&o, path, why, sizeof why) != 0) exit(10);
    lab_interrupt_install("test", "finishing", o.tmp);
    int err_fd = dup(STDERR_FILENO);
    close(STDERR_FILENO);
    errno = ERANGE;
    raise(SIGINT); /* handled on this thread before raise returns */
    int kept = errno == ERANGE;
    dup2(err_fd, STDERR_FILENO);
    close(err_fd);
    if (!kept) exit(11);
    if (!lab_interrupted()) exit(12);
    lab_interrupt_install("test", "finishing", o.tmp); /* the flag anew */
    if (signals_to_another_thread() != 0) exit(13);
    kill(getpid(), SIGINT);
    for (int i = 0; i < 500 && !lab_interrupted(); i++)
      usleep(10000);
    if (!lab_interrupted()) exit(14);
    kl_outfile_abort(&o);
    lab_interrupt_uninstall();
    exit(0);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0,
        "the handler keeps errno, and sets the flag from another thread "
        "(exit %d: 11 errno changed, 12/14 no flag, 66 a ThreadSanitizer "
        "report)",
        WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status));
  CHECK(count_entries() == before, "the temporary file aborted (%d, %d)",
        count_entries(), before);

  int fds[2];
  CHECK(pipe(fds) == 0, "pipe");
  pid = fork();
  if (pid == 0) {
    char why[512];
    kl_outfile o;
    if (kl_outfile_open(&o, path, why, sizeof why) != 0) _exit(10);
    lab_interrupt_install("test", "finishing", o.tmp);
    if (signals_to_another_thread() != 0) _exit(13);
    kill(getpid(), SIGINT); /* the first: a flag */
    for (int i = 0; i < 500 && !lab_interrupted(); i++)
      usleep(10000);
    lab_interrupt_hold(1);
    kill(getpid(), SIGINT); /* the second, held on the other thread */
    usleep(200000);
    char ok = access(o.tmp, F_OK) == 0 ? 'y' : 'n';
    if (write(fds[1], &ok, 1) != 1) _exit(14);
    sigset_t both;
    sigemptyset(&both);
    sigaddset(&both, SIGINT);
    sigaddset(&both, SIGTERM);
    /* the stop raises its signal on this thread */
    pthread_sigmask(SIG_UNBLOCK, &both, NULL);
    lab_interrupt_hold(0); /* the held stop happens here */
    _exit(0);
  }
  close(fds[1]);
  char ok = 0;
  ssize_t got = read(fds[0], &ok, 1);
  close(fds[0]);
  waitpid(pid, &status, 0);
  CHECK(got == 1 && ok == 'y',
        "held on another thread: alive, the temporary file kept (%c)",
        ok ? ok : '-');
  CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGINT,
        "released: the stop another thread held ends the process (%d)", status);
  CHECK(count_entries() == before,
        "released: the temporary file removed (%d entries, %d before)",
        count_entries(), before);
}

/* A killed writer's PATH.tmp.PID is swept; a live process's, and names
 * that only look alike, stay. */
static void test_sweep(void) {
  char path[128], dead[192], live[192], other[192], odd[192], nested[256],
      mixed[256];
  snprintf(path, sizeof path, "%s/ck.ckpt", dir);
  pid_t kid = fork();
  if (kid == 0) _exit(0);
  waitpid(kid, NULL, 0); /* its pid now names no process */
  snprintf(dead, sizeof dead, "%s.tmp.%ld", path, (long)kid);
  snprintf(live, sizeof live, "%s.tmp.%ld", path, (long)getppid());
  snprintf(other, sizeof other, "%s/ck.ckpt.tok.tmp.%ld", dir, (long)kid);
  snprintf(odd, sizeof odd, "%s.tmp.%ldx", path, (long)kid);
  /* a rebuild's copy of a copy: swept; one whose two pids differ: kept */
  snprintf(nested, sizeof nested, "%s.tmp.%ld", dead, (long)kid);
  snprintf(mixed, sizeof mixed, "%s.tmp.%ld", dead, (long)getppid());
  put(nested, "x");
  put(mixed, "x");
  put(dead, "x");
  put(live, "x");
  put(other, "x");
  put(odd, "x");
  CHECK(kl_outfile_sweep(path) == 2, "two files swept");
  CHECK(access(dead, F_OK) != 0 && access(nested, F_OK) != 0,
        "the dead writer's file and its nested copy are gone");
  CHECK(access(live, F_OK) == 0 && access(other, F_OK) == 0 &&
            access(odd, F_OK) == 0 && access(mixed, F_OK) == 0,
        "a live process's file, another output's and odd names stay");
  unlink(mixed);
  unlink(live);
  unlink(other);
  unlink(odd);
}

/* kl_fopen_regular: a file opens; a FIFO (which a plain open would wait
 * on for ever: the alarm ends the test if it does) and a folder do not. */
static void test_fopen_regular(void) {
  char path[128], fifo[128];
  snprintf(path, sizeof path, "%s/plain.txt", dir);
  snprintf(fifo, sizeof fifo, "%s/fifo", dir);
  put(path, "text\n");
  struct stat st;
  FILE *f = kl_fopen_regular(path, &st);
  char buf[16] = "";
  CHECK(f && fgets(buf, sizeof buf, f) && !strcmp(buf, "text\n") &&
            st.st_size == 5,
        "a regular file opens and reads");
  if (f) fclose(f);
  CHECK(mkfifo(fifo, 0600) == 0, "mkfifo");
  alarm(20);
  errno = 0;
  f = kl_fopen_regular(fifo, NULL);
  CHECK(!f && errno == EINVAL, "a FIFO: refused at once (errno %d)", errno);
  f = kl_fopen_regular(dir, NULL);
  CHECK(!f && errno == EISDIR, "a folder: EISDIR (errno %d)", errno);
  alarm(0);
  unlink(fifo);
  unlink(path);
}

/* kl_stream_errno: 0 when every write arrived, the device's reason when
 * one did not (/dev/full: ENOSPC). */
static void test_stream_errno(void) {
  char path[128];
  snprintf(path, sizeof path, "%s/fine.txt", dir);
  FILE *f = fopen(path, "w");
  fputs("fine\n", f);
  CHECK(kl_stream_errno(f) == 0, "a file that took every write: 0");
  fclose(f);
  unlink(path);
  f = fopen("/dev/full", "w");
  if (!f) return; /* no /dev/full here */
  fputs("lost\n", f);
  int err = kl_stream_errno(f);
  CHECK(err == ENOSPC, "/dev/full: ENOSPC, got %d", err);
  fclose(f);
}

int main(void) {
  snprintf(dir, sizeof dir, "/tmp/kl_outfile_XXXXXX");
  if (!mkdtemp(dir)) {
    perror("mkdtemp");
    return 1;
  }
  test_commit_and_abort();
  test_failures();
  test_interrupt();
  test_interrupt_hold();
  test_interrupt_threads();
  test_sweep();
  test_fopen_regular();
  test_stream_errno();
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
  return kl_test_done("test_outfile");
}
