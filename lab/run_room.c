/*
 * lab/run_room.c — what a campaign needs before its first step, checked
 * before any sampling or evaluation (lab/run_cmd.c calls both):
 *   - memory for the update: a step's update runs the whole batch at once,
 *     so a campaign whose batch cannot fit this machine's memory (the CPU
 *     policy) or the device's (a device's) is refused now, not after a
 *     step of sampling and evaluation (group_size 64 and max_tokens 4096
 *     wanted 170 MB per sample; 1024 x 256 samples are allowed by the
 *     fields' own ranges);
 *   - disk for a checkpoint: each is written whole beside the old one
 *     before the rename, so the folder needs room for one as large as the
 *     one there, or as the campaign's starting one, which holds the same
 *     parameters and optimiser state. A disk that fills later is still
 *     reported when the save fails.
 */
#include "lab/run_internal.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

int lab_run_room_update(lab_policy *pol, const lab_campaign *c, int T,
                        char *why, size_t whylen) {
  const int G = c->group_size, P = c->prompts_per_step, n_cand = G * P;
  double need = 0, room = 0;
  char reason[256];
  if (lab_policy_batch_room(pol, n_cand, T, &need, &room, reason,
                            sizeof reason)) {
    snprintf(why, whylen, "policy device: %s", reason);
    return LAB_EXIT_ENV;
  }
  if (room <= 0 || need <= room) return LAB_EXIT_OK;
  char has[96];
  snprintf(has, sizeof has,
           pol->ctx ? "the %.3g GB free on the policy's device"
                    : "this machine's %.3g GB",
           room / 1e9);
  snprintf(why, whylen,
           "%s: a step's update needs ~%.3g GB of activations (%d samples: "
           "group_size %d x prompts_per_step %d, of up to %d tokens: "
           "sampling.max_tokens %d, max_seq %d), more than %s; use a smaller "
           "group_size, prompts_per_step or sampling.max_tokens",
           c->path, need / 1e9, n_cand, G, P, T, c->max_tokens,
           pol->m->cfg.max_seq, has);
  return LAB_EXIT_USAGE;
}

int lab_run_room_checkpoint(const char *ckpt_out, const char *start_ckpt,
                            char *why, size_t whylen) {
  struct stat cs;
  struct statvfs vs;
  char folder[1100];
  snprintf(folder, sizeof folder, "%s", ckpt_out);
  char *slash = strrchr(folder, '/');
  if (slash)
    slash[slash == folder ? 1 : 0] = 0;
  else
    snprintf(folder, sizeof folder, ".");
  if (statvfs(folder, &vs) != 0) return LAB_EXIT_OK; /* said at the save */
  /* root may write into the blocks reserved for it (f_bfree); others only
   * into f_bavail */
  uint64_t room =
      (uint64_t)(geteuid() == 0 ? vs.f_bfree : vs.f_bavail) * vs.f_frsize;
  if ((stat(ckpt_out, &cs) == 0 || stat(start_ckpt, &cs) == 0) &&
      room < (uint64_t)cs.st_size) {
    snprintf(why, whylen,
             "%s: %llu bytes free in its folder, a checkpoint needs %llu: "
             "free some space first",
             ckpt_out, (unsigned long long)room,
             (unsigned long long)cs.st_size);
    return LAB_EXIT_ENV;
  }
  return LAB_EXIT_OK;
}
