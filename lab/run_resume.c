/*
 * lab/run_resume.c — what `kernlab run --resume` continues from, and what a
 * stopped run says to continue it: the results file an earlier run of the
 * campaign left (read before anything is loaded, and refused when another
 * campaign, eval or search wrote it), that run's checkpoint (taken only
 * when the run id ties it to the file), and the --resume command an
 * interrupted run prints. Apart from the set-up and step loop of
 * lab/run_cmd.c, which take what these found (a prior, a step to start at),
 * so that the rules for what may be continued read in one place.
 *
 * --resume: the /steps records say how many steps are complete, the
 * checkpoint RUN.ckpt says which policy (its header's step). The loop
 * restarts at the checkpoint's step; for any step already (partly)
 * recorded it skips the candidates and the step record already in the
 * file, so nothing is recorded twice. Restored exactly: parameters, AdamW
 * moments and step count, the step counter, the reference model (reloaded
 * from the campaign's checkpoint), the best time so far. Re-derived, not
 * restored: the RNG (sampling and evaluation seeds are functions of seed,
 * step and group, so a resumed step samples what the killed one would
 * have, up to BLAS summation order).
 * The baseline is the file's: the one its first step record holds, said on
 * the start line ("baseline (naive seed): X us, from RUN.h5's records"),
 * and given to every new record, so a campaign's records are all against
 * one baseline. It was timed again at each resume: the file then held
 * records against several baselines (and its step lines compared the
 * best time, perhaps an earlier run's, with the new one), and at 1024^3 the
 * timing took ~30 s of every resume. It is timed afresh only where the file
 * has no record with a baseline, or its records were timed on another
 * backend or device (the file's device attribute; a campaign of backend
 * auto resumed on a machine without its GPU): the start line says which.
 * A file an older kernlab resumed holds several: the first is kept, and a
 * note counts the others.
 * A step killed after its records but before its checkpoint is run again
 * without recording (its evaluation timings may differ, so its update is
 * close to, not exactly, the lost one).
 * Candidates `kernlab eval --out` appended to the campaign's file (step
 * -1; eval takes only the file's shape) are kept and are no part of the
 * run: no step's, and not the best time so far (a hand-written kernel
 * evaluated there is not the policy's). They were refused as "written by
 * another campaign (step differs)".
 * A file that holds no step's candidate yet (a run stopped before its
 * first record) is checked by what it was started with: the task and group
 * shape of its config attribute, read as a campaign
 * (lab_campaign_from_text), and its seed attribute; it took any campaign.
 * --resume needs the results file: one that does not exist is refused
 * (exit 2), not started afresh. A typo in --out ran a whole new campaign
 * beside the one meant, said only by one stderr line among the step lines;
 * neither the help nor the README offers --resume as "continue or start",
 * and a run killed before it made its file recorded nothing, so running it
 * again without --resume loses nothing.
 */
#include "lab/lab.h"
#include "lab/run_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* As lab_run's FAIL, in a function that returns the exit code: prints
 * "kernlab run: MESSAGE" on stderr and returns code. */
#define RUN_FAIL(code, ...)                                                    \
  do {                                                                         \
    fprintf(stderr, "kernlab run: " __VA_ARGS__);                              \
    fputc('\n', stderr);                                                       \
    return (code);                                                             \
  } while (0)

uint64_t lab_new_run_id(void) {
  uint64_t id = 0;
  FILE *f = fopen("/dev/urandom", "rb");
  if (f) {
    if (fread(&id, sizeof id, 1, f) != 1) id = 0;
    fclose(f);
  }
  if (!id) /* no /dev/urandom: the clock and the pid, mixed */
    id = lab_derive_seed((uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32), 0,
                         0, 9);
  return id ? id : 1;
}

/* The step of a candidate `kernlab eval --out` appended (lab/eval.c). */
enum { EVAL_STEP = -1 };

/* Reads what an earlier run of camp left in the results file at path into
 * *pr, refusing a file that another campaign (task, seed or group shape),
 * `kernlab eval` or `kernlab search` wrote. Returns 0, or an exit code with
 * why (starting with the path). */
static int read_prior(const char *path, const lab_campaign *camp, prior *pr,
                      char *why, size_t whylen) {
  int code = 0, steps = camp->steps;
  res_reader *r = res_open_read(path, &code, why, whylen);
  if (!r) return code == RES_EENV ? LAB_EXIT_ENV : LAB_EXIT_USAGE;
  /* The file must be this campaign's: the same task, seed and group
   * shape, or the resumed steps would be compared and scored against
   * candidates of another one. (Other edits, such as more steps or a new
   * learning rate, are a campaign continued, and allowed.) */
  /* eval and search files hold candidates of no campaign step (eval's
   * have step -1; a search's evaluations are one step of its own): a run
   * resumed into one took the search's step for its own step 0 */
  const char *config = res_attr(r, "config");
  const char *writer = !strcmp(config, "kernlab eval") ? "kernlab eval"
                       : !strncmp(config, "-- kernlab search ", 18)
                           ? "kernlab search"
                           : NULL;
  if (writer) {
    snprintf(why, whylen,
             "%s was written by %s, not by a campaign run: --resume continues "
             "a run's own file; use --out for a new file",
             path, writer);
    res_reader_close(r);
    return LAB_EXIT_USAGE;
  }
  /* the task as a dtype and shape, not as a string: files from before the
   * MxNxK names call a cube's task "fp32_256" (res_task_canonical), and
   * the same campaign's file was refused as another task's */
  char task[RES_TASK_LEN], held[RES_TASK_LEN];
  snprintf(task, sizeof task, "fp32_%dx%dx%d", camp->M, camp->N, camp->K);
  for (int64_t i = 0; i < res_count(r); i++) {
    const res_candidate *c = res_get(r, i);
    res_task_canonical(c->task, held, sizeof held);
    /* `kernlab eval --out` into the campaign's file (step -1, at the
     * campaign's shape: eval refuses another) is no step of the run: kept,
     * and left out of what the loop continues from (read below) */
    const char *differs = strcmp(held, task)     ? "task"
                          : c->step == EVAL_STEP ? NULL
                          : c->step < 0          ? "step"
                          : c->group >= camp->prompts_per_step
                              ? "prompts_per_step"
                          : c->sample >= camp->group_size ? "group_size"
                                                          : NULL;
    if (differs) {
      snprintf(why, whylen,
               "%s was written by another campaign: its candidate %lld has "
               "task %s, group %d, sample %d, where this campaign has task "
               "%s, %d prompts of %d samples (%s differs); use --out for a "
               "new file",
               path, (long long)i, c->task, (int)c->group, (int)c->sample, task,
               camp->prompts_per_step, camp->group_size, differs);
      res_reader_close(r);
      return LAB_EXIT_USAGE;
    }
  }
  /* A file that holds no step's candidate yet (a run stopped before its
   * first record, perhaps with evals added since) names its campaign only
   * in its config attribute, the campaign's text: read as a campaign, its
   * task and group shape are checked as the records' would be. Any shape
   * was taken, and the file's config then described a campaign other
   * than the one its records came from. A text this kernlab cannot read
   * (an older one's fields) is said, and the file taken. */
  int64_t run_records = 0;
  for (int64_t i = 0; i < res_count(r); i++)
    run_records += res_get(r, i) && res_get(r, i)->step >= 0;
  if (run_records == 0) {
    lab_campaign was;
    char label[1100], whynot[1024];
    snprintf(label, sizeof label, "%s's config", path);
    int ex = lab_campaign_from_text(label, config, &was, whynot, sizeof whynot);
    if (ex == LAB_EXIT_ENV) {
      snprintf(why, whylen, "%s", whynot);
      res_reader_close(r);
      return ex;
    }
    if (ex) {
      fprintf(stderr,
              "kernlab run: --resume: note: %s holds no candidates of a step "
              "and its campaign text does not load here (%s): its task is "
              "not checked\n",
              path, whynot);
    } else {
      char was_task[RES_TASK_LEN];
      snprintf(was_task, sizeof was_task, "fp32_%dx%dx%d", was.M, was.N, was.K);
      const char *differs = strcmp(was_task, task) ? "task"
                            : was.prompts_per_step != camp->prompts_per_step
                                ? "prompts_per_step"
                            : was.group_size != camp->group_size ? "group_size"
                                                                 : NULL;
      if (differs)
        snprintf(why, whylen,
                 "%s was written by another campaign: it holds no candidates "
                 "of a step yet, and the campaign it was started with (its "
                 "config attribute) has task %s, %d prompts of %d samples, "
                 "where this campaign has task %s, %d prompts of %d samples "
                 "(%s differs); remove it to start afresh, or use --out for "
                 "a new file",
                 path, was_task, was.prompts_per_step, was.group_size, task,
                 camp->prompts_per_step, camp->group_size, differs);
      lab_campaign_free(&was);
      if (differs) {
        res_reader_close(r);
        return LAB_EXIT_USAGE;
      }
    }
  }
  /* the seed is a root attribute: checked in a file without records too */
  if (res_seed(r) != camp->seed) {
    snprintf(why, whylen,
             "%s was written by another campaign: its seed is %llu, this one "
             "has seed %llu; %suse --out for a new file",
             path, (unsigned long long)res_seed(r),
             (unsigned long long)camp->seed,
             run_records ? ""
                         : "it holds no candidates of a step yet: "
                           "remove it to start afresh, or ");
    res_reader_close(r);
    return LAB_EXIT_USAGE;
  }
  pr->steps_done = res_step_count(r);
  pr->candidates = res_count(r);
  pr->config_edited = strcmp(res_attr(r, "config"), camp->text) != 0;
  pr->run_id = strtoull(res_attr(r, "run_id"), NULL, 16); /* "": 0 */
  snprintf(pr->checkpoint_sha256, sizeof pr->checkpoint_sha256, "%s",
           res_attr(r, "checkpoint_sha256"));
  for (int64_t i = 0; i < pr->steps_done; i++) {
    const res_step *s = res_get_step(r, i);
    if (s && s->wall_s > pr->wall_s) pr->wall_s = s->wall_s;
  }
  int per_step = camp->prompts_per_step * camp->group_size;
  for (int64_t i = 0; i < res_count(r); i++) {
    const res_candidate *c = res_get(r, i);
    if (!c) continue;
    if (c->step >= 0 && c->step < steps) pr->recorded[c->step]++;
    int64_t k = (int64_t)c->group * camp->group_size + c->sample;
    if (c->step == pr->steps_done && c->group >= 0 && c->sample >= 0 &&
        k < per_step) {
      pr->file_reward[k] = c->reward;
      pr->file_correct[k] = c->correct;
      pr->file_has[k] = 1;
    }
    /* the best as the step loop keeps it: the policy's kernels (not one
     * a user evaluated into the file), correct, timed, unflagged (a
     * resumed run's step lines took a flagged kernel's time; the report
     * review) */
    if (c->step >= 0 && c->correct && c->time_us > 0 && !c->flags &&
        (pr->best_time_us < 0 || c->time_us < pr->best_time_us))
      pr->best_time_us = c->time_us;
    /* the campaign's baseline: its first run record's (an eval's is
     * eval's own, timed apart) */
    if (c->step >= 0 && c->baseline_us > 0) {
      if (pr->baseline.us <= 0) {
        pr->baseline.us = c->baseline_us;
        snprintf(pr->baseline.backend, sizeof pr->baseline.backend, "%s",
                 c->backend);
      } else if (c->baseline_us != pr->baseline.us) {
        pr->baseline_others++;
      }
    }
  }
  snprintf(pr->baseline.device, sizeof pr->baseline.device, "%s",
           res_attr(r, "device"));
  res_reader_close(r);
  /* a finished step holds prompts x group_size candidates */
  for (int64_t s = 0; s < pr->steps_done && s < steps; s++)
    if (pr->recorded[s] != per_step) {
      snprintf(why, whylen,
               "%s was written by another campaign: its step %lld holds %lld "
               "candidates, this campaign's steps hold %d (%d prompts of %d "
               "samples); use --out for a new file",
               path, (long long)s, (long long)pr->recorded[s], per_step,
               camp->prompts_per_step, camp->group_size);
      return LAB_EXIT_USAGE;
    }
  return 0;
}

int lab_resume_check(const lab_campaign *c, const char *ckpt_out, int resume,
                     prior *pr, int *have_out) {
  /* read_prior's messages name the path (up to 1023 bytes) and more */
  char why[2048];
  *have_out = access(c->out, F_OK) == 0;
  if (*have_out && !resume)
    RUN_FAIL(LAB_EXIT_USAGE,
             "%s already exists: pass --resume to continue that campaign, or "
             "--out for a new file",
             c->out);
  /* the run saves its policy beside its results: never onto the policy it
   * starts from (out = "pol.h5" with checkpoint = "pol.ckpt") */
  struct stat st_in, st_out;
  if (stat(c->checkpoint, &st_in) == 0 && stat(ckpt_out, &st_out) == 0 &&
      st_in.st_dev == st_out.st_dev && st_in.st_ino == st_out.st_ino)
    RUN_FAIL(LAB_EXIT_USAGE,
             "the run's checkpoint %s (its results %s with .ckpt) is the "
             "campaign's starting checkpoint %s: the run would overwrite the "
             "policy it starts from; choose another out",
             ckpt_out, c->out, c->checkpoint);
  /* a checkpoint without its results: an earlier run's, whose results
   * were removed; neither overwritten nor continued without them */
  if (!*have_out && access(ckpt_out, F_OK) == 0)
    RUN_FAIL(
        LAB_EXIT_USAGE,
        "%s exists but its results file %s does not: remove the checkpoint "
        "to start this output afresh, or pass --out for a new file",
        ckpt_out, c->out);
  if (resume && *have_out) {
    int ex = read_prior(c->out, c, pr, why, sizeof why);
    if (ex) RUN_FAIL(ex, "--resume: %s", why);
  } else if (resume) {
    RUN_FAIL(LAB_EXIT_USAGE,
             "--resume: %s does not exist; nothing to resume (run without "
             "--resume to start the campaign there)",
             c->out);
  }
  return 0;
}

int lab_resume_policy(int resume, int have_ckpt, const lab_campaign *c,
                      const char *ckpt_out, const prior *pr,
                      const pl_tokenizer *tok, pl_model *model,
                      pl_ckpt_header *h, float **ck_m, float **ck_v,
                      int *start_step) {
  char why[1024];
  int rc;
  *start_step = 0;
  /* The starting checkpoint is still read on --resume where the run's own
   * checkpoint does not replace it (nothing checkpointed yet) and, with a
   * KL term, as the reference model: it must be the file the run started
   * from. A re-primed one (same tokenizer, other weights) was taken without
   * a word, the KL then measured against another model. Step 1 recorded
   * but not checkpointed runs again from it too (below). */
  int rerun_step1 = resume && !have_ckpt && pr->steps_done == 1;
  int from_start =
      rerun_step1 || !(pr->steps_done > 0 || (resume && have_ckpt));
  if (pr->checkpoint_sha256[0] && (from_start || c->grpo.beta > 0) &&
      strcmp(pr->checkpoint_sha256, h->sha256) != 0)
    RUN_FAIL(LAB_EXIT_USAGE,
             "--resume: %s is not the checkpoint this run started from "
             "(sha256 %.16s... when %s was created, %.16s... now): %s would "
             "be another model's. Put the starting checkpoint back, or start "
             "a new run with another --out",
             c->checkpoint, pr->checkpoint_sha256, c->out, h->sha256,
             from_start ? "the steps run again from it"
                        : "the KL term's reference (grpo.beta > 0)");
  if (rerun_step1) {
    /* killed after step 1's records, before its checkpoint: the policy
     * before step 1 is the campaign's checkpoint, the caller's model */
    fprintf(stderr,
            "kernlab run: --resume: no %s: step 1 was recorded but not "
            "checkpointed; it runs again from %s, without recording\n",
            ckpt_out, c->checkpoint);
  } else if (pr->steps_done > 0 || (resume && have_ckpt)) {
    /* Continue from the campaign's own checkpoint. */
    pl_model_free(model);
    memset(model, 0, sizeof *model);
    rc = lab_load_model(model, h, ckpt_out, tok, NULL, ck_m, ck_v, why,
                        sizeof why);
    if (rc)
      RUN_FAIL(lab_pl_exit(rc), "--resume: %s (%lld steps are recorded in %s)",
               why, (long long)pr->steps_done, c->out);
    /* a file that names its run (every one this kernlab writes) takes
     * only that run's checkpoints: another campaign's, or prime's, can
     * have the same step count */
    if (pr->run_id && h->run_id != pr->run_id)
      RUN_FAIL(LAB_EXIT_USAGE,
               "--resume: %s is not the checkpoint of the run %s records (its "
               "run id is %016llx, the file's %016llx%s); pass --out for a new "
               "file",
               ckpt_out, c->out, (unsigned long long)h->run_id,
               (unsigned long long)pr->run_id,
               h->run_id ? "" : ": written by prime or an older kernlab");
    if ((int64_t)h->step > pr->steps_done ||
        (int64_t)h->step + 1 < pr->steps_done)
      RUN_FAIL(
          LAB_EXIT_USAGE,
          "--resume: %s is at step %llu but %s records %lld steps; they are "
          "not from the same campaign",
          ckpt_out, (unsigned long long)h->step, c->out,
          (long long)pr->steps_done);
    *start_step = (int)h->step;
  }
  return 0;
}

/* Appends " WORD" to buf (cap bytes in all), single-quoted for a POSIX
 * shell unless it is made only of characters no shell treats specially. */
static void append_shell_word(char *buf, size_t cap, const char *w) {
  size_t n = strlen(buf);
  int plain = w[0] != 0;
  for (const char *p = w; *p; p++)
    if (!strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                "0123456789_-./,:=+@%",
                *p))
      plain = 0;
  if (n + 1 < cap) buf[n++] = ' ';
  if (!plain && n + 1 < cap) buf[n++] = '\'';
  for (const char *p = w; *p && n + 5 < cap; p++) {
    if (!plain && *p == '\'') { /* ' ends the quote, \' is one, ' resumes */
      memcpy(buf + n, "'\\''", 4);
      n += 4;
    } else {
      buf[n++] = *p;
    }
  }
  if (!plain && n + 1 < cap) buf[n++] = '\'';
  buf[n < cap ? n : cap - 1] = 0;
}

void lab_print_interrupted(int argc, char **argv, int resume, int stopped_at,
                           int steps, const char *out, const char *ckpt_out) {
  /* the command as it was given (every flag, quoted for a shell), with
   * --resume */
  char again[4096] = "kernlab";
  for (int i = 0; i < argc; i++)
    append_shell_word(again, sizeof again, argv[i]);
  if (!resume) append_shell_word(again, sizeof again, "--resume");
  /* stopped before its first step's checkpoint was saved (Ctrl-C while it
   * loaded, or a --resume re-running a step that lost its own): none is
   * named, since none is there; the line said "checkpoint RUN.ckpt" */
  const char *ckpt = ckpt_out ? "checkpoint " : "no checkpoint written yet";
  if (!ckpt_out) ckpt_out = "";
  if (stopped_at < steps)
    printf("interrupted: %d of %d steps done; results %s, %s%s\n"
           "continue with: %s\n",
           stopped_at, steps, out, ckpt, ckpt_out, again);
  else
    printf("interrupted: all %d steps done (the comparison with the "
           "baselines is skipped); results %s, %s%s\n",
           steps, out, ckpt, ckpt_out);
}
