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

#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static volatile sig_atomic_t requested; /* the first signal's number */
static char first_msg[512], second_msg[512];
/* files a second signal removes: written beside their final names */
#define MAX_TMP 4
static char tmp_path[MAX_TMP][PATH_MAX];
static volatile sig_atomic_t n_tmp;
static size_t first_len, second_len;
static struct sigaction old_int, old_term;
static int installed;
static volatile sig_atomic_t at_once; /* no work to save: the first stops */

/* lab_interrupt_hold: a stop that must wait, and the signal that asked */
static volatile sig_atomic_t holding, held_sig;

static void stop_now(int sig);

static void on_signal(int sig) {
  if (!requested && !at_once) {
    requested = sig;
    if (write(STDERR_FILENO, first_msg, first_len) < 0) {
      /* nothing to do: stderr is gone */
    }
    return;
  }
  if (holding) { /* whichever thread took it: the stop waits */
    held_sig = sig;
    return;
  }
  stop_now(sig);
}

static void stop_now(int sig) {
  if (write(STDERR_FILENO, second_msg, second_len) < 0) {
    /* as above */
  }
  for (int i = 0; i < n_tmp; i++)
    unlink(tmp_path[i]);
  kl_emu_kill_compiles(); /* their own process groups: not killed with us */
  signal(sig, SIG_DFL);
  raise(sig); /* blocked until the handler returns, then the default */
}

void lab_interrupt_install(const char *cmd, const char *first,
                           const char *tmp) {
  requested = 0;
  at_once = first == NULL;
  snprintf(first_msg, sizeof first_msg,
           "\n%s: interrupted: %s (interrupt again to stop at once)\n", cmd,
           first ? first : "");
  snprintf(second_msg, sizeof second_msg, "\n%s: interrupted%s: stopping now\n",
           cmd, first ? " again" : "");
  first_len = strlen(first_msg);
  second_len = strlen(second_msg);
  n_tmp = 0;
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
  if (n_tmp >= MAX_TMP || strlen(tmp) >= sizeof tmp_path[0]) return;
  /* the slot is complete before the handler may count it */
  snprintf(tmp_path[n_tmp], sizeof tmp_path[n_tmp], "%s", tmp);
  n_tmp = n_tmp + 1;
}

int lab_interrupted(void) {
  return requested;
}

void lab_interrupt_hold(int on) {
  if (on) {
    held_sig = 0;
    holding = 1;
    return;
  }
  holding = 0;
  if (held_sig) stop_now(held_sig);
}

void lab_interrupt_uninstall(void) {
  if (!installed) return;
  sigaction(SIGINT, &old_int, NULL);
  sigaction(SIGTERM, &old_term, NULL);
  installed = 0;
  n_tmp = 0;
}
