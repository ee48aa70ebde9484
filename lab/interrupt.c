/*
 * lab/interrupt.c — Ctrl-C (SIGINT) and SIGTERM for the long commands.
 *
 * A user who interrupts a campaign wants it to stop soon and keep what it
 * did. Stopping at once would throw away the step in flight, whose
 * candidates may have taken minutes to sample and time; so the first
 * signal only asks: it sets a flag the command reads between units of
 * work (lab_interrupted; `kernlab run` reads it after each step is
 * recorded and checkpointed), and says on stderr what will happen. The
 * second signal stops at once, by the signal's default action (the shell
 * sees the process killed by SIGINT, as it expects), after removing the
 * temporary files the command named (a checkpoint or a new results file
 * being written beside its final name), so no stray file outlives it; what was
 * recorded before stays readable, and `--resume` continues from it.
 *
 * A command with nothing worth finishing (export, report: writing one file
 * from another) installs with no first message: the first signal removes
 * its temporary file and stops at once.
 *
 * The sandbox workers and host compilers are in process groups of their
 * own (sandbox/supervisor.c, kernels/emu/emu_build.c), so a terminal's
 * Ctrl-C reaches the lab alone: a candidate being timed is not killed by
 * it and recorded as a crash. When the lab stops at once it kills the host
 * compiles in flight (kl_emu_kill_compiles), which would otherwise run on
 * orphaned; the workers end by themselves when the lab is gone.
 *
 * The handler does only what is async-signal-safe (write, unlink, signal,
 * raise) and is installed with SA_RESTART, so the lab's reads and writes
 * go on where they were; the loops that poll or wait already retry on
 * EINTR.
 */
#include "lab/lab.h"

#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* The handler runs on whichever thread the kernel picks (the evaluator's
 * slot threads, the policy's and OpenBLAS's helpers, not only the thread
 * that installed it), so the flags it shares are lock-free atomics, not
 * volatile sig_atomic_t, which orders nothing between threads: a path in
 * tmp_path is complete before the handler on another core counts it
 * (release on n_tmp, acquire in the handler). Atomic builtins on int are
 * lock-free and async-signal-safe. */
static int requested; /* the first signal's number */
static char first_msg[512], second_msg[512];
/* files a second signal removes: written beside their final names */
#define MAX_TMP 4
static char tmp_path[MAX_TMP][PATH_MAX];
static int n_tmp;
static size_t first_len, second_len;
static struct sigaction old_int, old_term;
static int installed;
static int at_once; /* no work to save: the first stops */

/* lab_interrupt_hold: a stop that must wait, and the signal that asked */
static int holding, held_sig;

#define LOAD(x) __atomic_load_n(&(x), __ATOMIC_SEQ_CST)
#define STORE(x, v) __atomic_store_n(&(x), (v), __ATOMIC_SEQ_CST)

static void stop_now(int sig);

static void on_signal(int sig) {
  int saved = errno; /* write and unlink may set it under the code we
                      * interrupted, which may be about to read its own */
  int none = 0;
  /* the first, even when two come at once on two threads */
  if (!LOAD(at_once) &&
      __atomic_compare_exchange_n(&requested, &none, sig, 0, __ATOMIC_SEQ_CST,
                                  __ATOMIC_SEQ_CST)) {
    if (write(STDERR_FILENO, first_msg, first_len) < 0) {
      /* nothing to do: stderr is gone */
    }
    errno = saved;
    return;
  }
  if (LOAD(holding)) { /* the stop waits for lab_interrupt_hold(0) */
    STORE(held_sig, sig);
    /* On another thread than the holder's, the hold may have ended
     * between the two: then its end may have read held_sig before this
     * stored it, and whichever takes it stops. */
    if (LOAD(holding) ||
        !(sig = __atomic_exchange_n(&held_sig, 0, __ATOMIC_SEQ_CST))) {
      errno = saved;
      return;
    }
  }
  stop_now(sig); /* its raise takes effect when this returns */
  errno = saved;
}

static void stop_now(int sig) {
  if (write(STDERR_FILENO, second_msg, second_len) < 0) {
    /* as above */
  }
  int n = __atomic_load_n(&n_tmp, __ATOMIC_ACQUIRE);
  for (int i = 0; i < n; i++)
    unlink(tmp_path[i]);
  kl_emu_kill_compiles(); /* their own process groups: not killed with us */
  signal(sig, SIG_DFL);
  raise(sig); /* blocked until the handler returns, then the default */
}

void lab_interrupt_install(const char *cmd, const char *first,
                           const char *tmp) {
  snprintf(first_msg, sizeof first_msg,
           "\n%s: interrupted: %s (interrupt again to stop at once)\n", cmd,
           first ? first : "");
  snprintf(second_msg, sizeof second_msg, "\n%s: interrupted%s: stopping now\n",
           cmd, first ? " again" : "");
  first_len = strlen(first_msg);
  second_len = strlen(second_msg);
  /* the messages are written before the stores a handler reads first */
  STORE(at_once, first == NULL);
  STORE(n_tmp, 0);
  STORE(requested, 0);
  if (tmp) lab_interrupt_also_remove(tmp);
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_signal;
  sa.sa_flags = SA_RESTART;
  sigemptyset(&sa.sa_mask);
  if (!installed) {
    sigaction(SIGINT, &sa, &old_int);
    sigaction(SIGTERM, &sa, &old_term);
    installed = 1;
  }
}

void lab_interrupt_also_remove(const char *tmp) {
  /* a name cut short would be another file's (in 1200 bytes, a prefix of
   * a long --out could name a file of the folders above it) */
  int n = LOAD(n_tmp);
  if (n >= MAX_TMP || strlen(tmp) >= sizeof tmp_path[0]) return;
  /* the slot is complete before the handler may count it */
  snprintf(tmp_path[n], sizeof tmp_path[n], "%s", tmp);
  __atomic_store_n(&n_tmp, n + 1, __ATOMIC_RELEASE);
}

int lab_interrupted(void) {
  return LOAD(requested);
}

void lab_interrupt_hold(int on) {
  if (on) {
    STORE(held_sig, 0);
    STORE(holding, 1);
    return;
  }
  STORE(holding, 0);
  /* taken, not read: a handler on another thread that saw the hold end
   * takes it too, and only one of the two stops */
  int sig = __atomic_exchange_n(&held_sig, 0, __ATOMIC_SEQ_CST);
  if (sig) stop_now(sig);
}

void lab_interrupt_uninstall(void) {
  if (!installed) return;
  sigaction(SIGINT, &old_int, NULL);
  sigaction(SIGTERM, &old_term, NULL);
  installed = 0;
  STORE(n_tmp, 0);
}
