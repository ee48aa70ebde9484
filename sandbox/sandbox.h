/*
 * sandbox/sandbox.h — the one public header of the sandbox module.
 *
 * Confines processes that touch candidate code. A profile is data: a
 * readable table of syscalls with an action and the reason, plus rlimits,
 * printed by `kernlab sandbox --explain` and installed with libseccomp.
 * Syscalls outside a profile's allowlist trap: the SIGSYS handler records
 * the syscall number in a report slot the supervisor reads, then ends the
 * process, so the supervisor can say `killed:seccomp:<syscall>`.
 *
 * This first slice confines the cpu-emu run child (profile `run-cpu-emu`).
 * The exec'd worker pool, the compile and host-compile profiles, the pidfd
 * watchdog and the GPU profile are the rest of the sandbox issue.
 *
 * Prefix: sbx_.
 */
#ifndef SANDBOX_SANDBOX_H
#define SANDBOX_SANDBOX_H

#include <stddef.h>
#include <stdio.h>

typedef enum sbx_profile_id {
  SBX_RUN_CPU_EMU = 0,
  SBX_PROFILE_COUNT
} sbx_profile_id;

/* Exit status a confined process ends with after a trapped syscall. */
#define SBX_TRAP_EXIT 97

/* Confines the calling process (and threads it starts later): namespaces
 * where the kernel allows (user + net), rlimits, then the seccomp filter.
 * trap_slot, if not NULL, is where the SIGSYS handler writes the number of
 * a forbidden syscall (shared memory the supervisor reads). Returns 0, or -1
 * with why filled. Call it in the child after fork, before candidate code. */
int sbx_confine(sbx_profile_id id, volatile int *trap_slot, char *why,
                size_t whylen);

/* Name of syscall number nr on this architecture ("openat"), or "?". */
const char *sbx_syscall_name(int nr);

/* Prints every profile: its allowlist with reasons, what it denies and why,
 * its rlimits. With pfc, also the compiled filter in libseccomp's
 * pseudo-filter-code form. Returns 0, or -1 if a filter could not be
 * built. */
int sbx_explain(FILE *out, int pfc);

#endif
