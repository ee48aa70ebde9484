/*
 * results/recover.c — resuming a file whose writer was killed.
 *
 * Such a file still carries the superblock's "open for SWMR write" mark and
 * its stored end-of-allocation may lag the bytes actually written. Opening
 * it read-write (even with the mark cleared, as `h5clear -s` does) lets
 * HDF5 truncate the file to that stale end on close, which loses the last
 * records: the crash test caught exactly that. So a writer never reopens a
 * crashed file in place. It reads it the way every reader does (SWMR read,
 * records up to the first bad crc), writes the valid content into a fresh
 * file next to it, and renames that over the original. A kill during the
 * rebuild leaves the original untouched. The cost is one copy of the file
 * per resume after a crash; a cleanly closed file is reopened in place.
 */
#include "results/internal.h"

#include "kernels/kernels.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int res__rebuild(const char *path, int *lock_fd, char *why, size_t whylen) {
  int code = RES_OK;
  res_reader *r = res_open_read(path, &code, why, whylen);
  if (!r) return code;
  /* A rebuild keeps what a reader reads: past damage that is not a
   * crash's it would drop records for good. */
  if (res__reader_damage(r)[0]) {
    snprintf(why, whylen,
             "%s: %s; rebuilding this killed writer's file to append would "
             "drop them: " RES_DAMAGE_HINT,
             path, res__reader_damage(r));
    res_reader_close(r);
    return RES_EINPUT;
  }
  const char *flags[RES_MAX_FLAGS];
  int n_flags =
      res_flag_count(r) < RES_MAX_FLAGS ? res_flag_count(r) : RES_MAX_FLAGS;
  for (int i = 0; i < n_flags; i++)
    flags[i] = res_flag_name(r, i);
  int k = res_component_count(r);
  const char **names = calloc((size_t)(k ? k : 1), sizeof *names);
  double *values = calloc((size_t)(k ? k : 1), sizeof *values);
  const char **row_names = calloc((size_t)(k ? k : 1), sizeof *row_names);
  if (!names || !values || !row_names) {
    snprintf(why, whylen, "out of memory");
    code = RES_EENV;
    goto out;
  }
  for (int j = 0; j < k; j++)
    names[j] = res_component_name(r, j);
  res_campaign_meta meta = {
      .config = res_attr(r, "config"),
      .reward_script = res_attr(r, "reward_script"),
      .reward_sha256 = res_attr(r, "reward_sha256"),
      .device = res_attr(r, "device"),
      .backend = res_attr(r, "backend"),
      .kernlab_version = res_attr(r, "kernlab_version"),
      .nvrtc_version = res_attr(r, "nvrtc_version"),
      .driver_version = res_attr(r, "driver_version"),
      /* the run's id: --resume matches its checkpoints by it */
      .run_id = res_attr(r, "run_id")[0] ? res_attr(r, "run_id") : NULL,
      .checkpoint_sha256 = res_attr(r, "checkpoint_sha256")[0]
                               ? res_attr(r, "checkpoint_sha256")
                               : NULL,
      .seed = res_seed(r),
      .flag_names = flags,
      .n_flags = n_flags,
      .component_names = names,
      .n_components = k,
  };
  char tmp[4200];
  kl_outfile_tmpname(path, tmp, sizeof tmp); /* a second Ctrl-C removes it */
  unlink(tmp);
  res__created_override = res_attr(r, "created");
  res_file *f = res_open_append(tmp, &meta, &code, why, whylen);
  res__created_override = NULL;
  if (!f) goto out;
  res__set_noflush(f, 1);
  for (int64_t id = 0; id < res_count(r) && code == RES_OK; id++) {
    char *src = NULL;
    size_t len = 0;
    double *samples = NULL;
    int ns = 0, nc = 0;
    const double *comp = res_components(r, id);
    for (int j = 0; j < k; j++)
      if (comp && !isnan(comp[j])) {
        row_names[nc] = names[j];
        values[nc++] = comp[j];
      }
    code = res_source(r, id, &src, &len, why, whylen);
    if (code == RES_OK) code = res_timings(r, id, &samples, &ns, why, whylen);
    if (code == RES_OK)
      code = res_append_candidate(f, res_get(r, id), src, len, samples, ns,
                                  row_names, values, nc, NULL, why, whylen);
    free(src);
    free(samples);
  }
  for (int64_t s = 0; s < res_step_count(r) && code == RES_OK; s++)
    code = res_append_step(f, res_get_step(r, s), why, whylen);
  int close_rc = res_close(f, why, whylen);
  if (code == RES_OK) code = close_rc;
  /* locked before it replaces the original: no second writer can take
   * the new file between the rename and the caller's reopen */
  if (code == RES_OK) code = res__take_lock(tmp, lock_fd, why, whylen);
  if (code == RES_OK && rename(tmp, path) != 0) {
    snprintf(why, whylen, "%s: cannot replace it with its rebuilt copy %s: %s",
             path, tmp, strerror(errno));
    code = RES_EENV;
    close(*lock_fd);
    *lock_fd = -1;
  }
  if (code != RES_OK) unlink(tmp);
out:
  free(names);
  free(values);
  free(row_names);
  res_reader_close(r);
  return code;
}
