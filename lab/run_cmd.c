/*
 * lab/run_cmd.c — `kernlab run CAMPAIGN.lua [--out RUN.h5] [--resume]
 * [--policy-device cpu|gpu|auto] [--policy-dtype fp32|bf16]
 * [--policy-matmul RUN.h5]`: the GRPO
 * campaign loop.
 *
 * One step, for each of prompts_per_step groups of G completions:
 *   prompt      <|bos|> + the tokens of lab_prompt_header() (what priming
 *               trained on), the same prompt for every group;
 *   sample      pl_generate: G completions of up to max_tokens, one RNG
 *               stream per row, seed derived from (campaign seed, step,
 *               group);
 *   extract     each completion up to <|eos|>, decoded, is the candidate's
 *               source (a garbage completion is a candidate too: it fails to
 *               compile and gets the reward for that);
 *   evaluate    kl_eval_source at the task's shape on the campaign's
 *               backend, by the evaluator of `kernlab search` (lab/
 *               evaluator.c: one long-lived thread per sandbox slot, jobs =
 *               cores, serving a queue): a completion is queued the moment
 *               its row stops (pl_generate_notify, lab/run_queue.c), so
 *               evaluation overlaps the sampling of the rest of the step.
 *               On two cores with the emulator they share the CPU; with a
 *               GPU backend (or more cores) the overlap is real time saved;
 *   reward      rw_score_group per group (ctx = the task and the group;
 *               lab_score_groups, as search scores); the reward script is
 *               hot-reloaded between steps (rw_reload);
 *   advantages  pl_grpo_advantages over the step's groups;
 *   update      one (B = groups*G, T) batch of prompt + completion tokens,
 *               padded with <|pad|>, targets only on completion tokens;
 *               logp = -losses of a forward with targets; pl_grpo_loss with
 *               old_logp = the sampler's log-probs (at temperature 1; see
 *               below), d loss/d logp through pl_model_backward_weighted,
 *               then AdamW; num_iterations updates on the same batch;
 *               none when no candidate was scored, or every advantage is
 *               0 and beta is 0 (lab_update_has_signal: no gradient);
 *   record      every candidate (step, group, sample, reward components;
 *               lab_record_candidate), then one /steps record
 *               (lab_step_stats_of: over the candidates the file holds,
 *               so a resumed step's killed-run records count with their
 *               recorded rewards; and the update's), then the checkpoint
 *               (parameters and AdamW state) next to the results file:
 *               RUN.h5 -> RUN.ckpt.
 * One line per step on stdout: step, reward mean/max, correct fraction,
 * best correct time so far and its speed-up over the baseline, KL, clip,
 * loss, sampling tokens/s, ETA.
 *
 * Reference model: with grpo.beta > 0 the campaign's starting checkpoint is
 * loaded a second time, frozen, for the k3 KL term.
 *
 * Temperature: the trainer's logits are at temperature 1 (see
 * pl_model_backward_weighted), so the sampler's log-probs are the old
 * log-probs only when sampling.temperature is 1; otherwise the first
 * iteration's own log-probs are (rho = 1 on it, TRL's num_iterations = 1
 * case).
 *
 * --resume (lab/run_resume.c): continues a stopped run from its results
 * file and checkpoint, recording nothing twice.
 *
 * Interrupting (Ctrl-C or SIGTERM, lab/interrupt.c): the step in flight
 * finishes, is recorded and checkpointed, then the run stops with the
 * summary, without the comparison against the baselines, and exits 130
 * (128 + SIGINT, as a shell reports an interrupted command), naming the
 * --resume command that continues it. Before the first step a run stops
 * without starting one, and says it has no checkpoint yet (its line named
 * RUN.ckpt as if written). A second interrupt stops at once, as a kill
 * would: --resume copes with that too.
 *
 * On a terminal a progress bar (step, sampled and evaluated candidates,
 * ETA) is redrawn in place under the step lines; otherwise only the step
 * lines are printed.
 *
 * --policy-device (lab/policy_device.h): where the policy samples and
 * trains. cpu (the default): the C code of policy/; gpu: the policy's CUDA
 * runtime (pcuda_generate, the pcuda model and AdamW), exit 3 with the
 * reason when no device answers; auto: the device when one answers, else
 * the CPU, saying so on stderr. The checkpoint is written from the CPU model
 * either way (the device's parameters and AdamW state are copied back first).
 * --policy-dtype bf16 (a device only): sampling and training with bf16 GEMM
 * operands and fp32 master weights (the reference model's too).
 *
 * --policy-matmul RUN.h5 (lab/policy_matmul.c): the policy's GEMMs, sampling
 * and training, through the best correct, unflagged kernel of a finished
 * campaign's results, checked against the default path before the first
 * step (exit 2 when it disagrees); on the
 * CPU that is the emulator, slow, for tests with a tiny model.
 *
 * Not here (yet): several task shapes per campaign.
 */
#include "lab/lab.h"
#include "lab/policy_device.h"
#include "lab/run_internal.h"

#include "sandbox/sandbox.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char synopsis[] =
    "usage: kernlab run [CAMPAIGN.lua] [--out RUN.h5] [--resume]\n"
    "                   [--policy-device cpu|gpu|auto] [--policy-dtype "
    "fp32|bf16]\n"
    "                   [--policy-matmul RUN.h5]\n"
    "  (without a file: the built-in default, lua/campaigns/quick.lua as it\n"
    "   was when kernlab was built)\n";

/* ---- model loading ---- */

int lab_pl_exit(int rc) {
  return rc == PL_EENV ? LAB_EXIT_ENV : LAB_EXIT_USAGE;
}

/* A step's scores: each candidate's components, the rewards, the
 * advantages. */
static void free_scores(rw_components *comps, int n, double *rewards,
                        float *adv) {
  for (int k = 0; comps && k < n; k++)
    rw_components_free(&comps[k]);
  free(rewards), free(adv), free(comps);
}

/* ---- the command ---- */

int lab_run(int argc, char **argv) {
  const char *campaign_path = NULL, *out_arg = NULL, *policy_matmul = NULL;
  int resume = 0, policy_device = LAB_POLICY_CPU;
  int policy_dtype = PCUDA_DTYPE_FP32;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--resume")) {
      resume = 1;
    } else if (!strcmp(argv[i], "--policy-device") && i + 1 < argc) {
      policy_device = lab_policy_device_parse(argv[++i]);
      if (policy_device < 0) {
        fprintf(stderr,
                "kernlab run: --policy-device '%s': expected cpu, gpu or "
                "auto\n%s",
                argv[i], synopsis);
        return LAB_EXIT_USAGE;
      }
    } else if (!strcmp(argv[i], "--policy-dtype") && i + 1 < argc) {
      policy_dtype = lab_policy_dtype_parse(argv[++i]);
      if (policy_dtype < 0) {
        fprintf(stderr,
                "kernlab run: --policy-dtype '%s': expected fp32 or bf16\n%s",
                argv[i], synopsis);
        return LAB_EXIT_USAGE;
      }
    } else if (!strcmp(argv[i], "--out") && i + 1 < argc) {
      out_arg = argv[++i];
    } else if (!strcmp(argv[i], "--policy-matmul") && i + 1 < argc) {
      policy_matmul = argv[++i];
    } else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
      fputs(synopsis, stdout);
      return LAB_EXIT_OK;
    } else if (i + 1 == argc && (!strcmp(argv[i], "--out") ||
                                 !strcmp(argv[i], "--policy-device") ||
                                 !strcmp(argv[i], "--policy-dtype") ||
                                 !strcmp(argv[i], "--policy-matmul"))) {
      fprintf(stderr, "kernlab run: missing value after %s\n%s", argv[i],
              synopsis);
      return LAB_EXIT_USAGE;
    } else if (argv[i][0] == '-' || campaign_path) {
      fprintf(stderr, "kernlab run: unexpected argument '%s'\n%s", argv[i],
              synopsis);
      return LAB_EXIT_USAGE;
    } else {
      campaign_path = argv[i];
    }
  }

  char why[1024];
  lab_campaign c;
  int ex = lab_campaign_load(campaign_path, &c, why, sizeof why);
  if (ex) {
    fprintf(stderr, "kernlab run: %s\n", why);
    return ex;
  }
  if ((out_arg && lab_campaign_set_out(&c, out_arg, why, sizeof why)) ||
      lab_out_path_ok(c.out, out_arg ? "--out" : "the campaign's out", why,
                      sizeof why)) {
    fprintf(stderr, "kernlab run: %s\n", why);
    lab_campaign_free(&c);
    return LAB_EXIT_USAGE;
  }
  char ckpt_out[1100], ckpt_tmp[1200];
  {
    size_t l = strlen(c.out);
    int h5 = l > 3 && !strcmp(c.out + l - 3, ".h5");
    snprintf(ckpt_out, sizeof ckpt_out, "%.*s.ckpt", (int)(h5 ? l - 3 : l),
             c.out);
  }
  /* its name is longer than the out's when that has no .h5: a name the
   * out's check let pass failed at the first checkpoint save */
  if (lab_out_path_ok(ckpt_out, "the checkpoint beside the results,", why,
                      sizeof why)) {
    fprintf(stderr, "kernlab run: %s\n", why);
    lab_campaign_free(&c);
    return LAB_EXIT_USAGE;
  }
  /* From here on an interrupt lets the step in flight finish (the loop
   * reads the flag between steps); a second one removes the checkpoint
   * pl_ckpt_save may be writing beside its name (kl_outfile_tmpname) and
   * stops. */
  kl_outfile_tmpname(ckpt_out, ckpt_tmp, sizeof ckpt_tmp);
  lab_interrupt_install("kernlab run",
                        "the step in flight finishes and is recorded, then "
                        "the run stops",
                        ckpt_tmp);
  /* and a new results file, created beside its name (results/store.c), or
   * the copy a killed writer's file is rebuilt into (results/recover.c) */
  char out_tmp[sizeof c.out + 32];
  kl_outfile_tmpname(c.out, out_tmp, sizeof out_tmp);
  lab_interrupt_also_remove(out_tmp);
  const int G = c.group_size, P = c.prompts_per_step, n_cand = G * P;

  /* Everything a run needs is allocated or loaded before the first step, so
   * a bad file is reported before any compute. */
  pl_tokenizer *tok = NULL;
  pl_model model, ref;
  memset(&model, 0, sizeof model);
  memset(&ref, 0, sizeof ref);
  pl_adamw opt;
  memset(&opt, 0, sizeof opt);
  lab_policy pol; /* where the policy computes: the CPU or a device */
  memset(&pol, 0, sizeof pol);
  lab_matmul *mm = NULL; /* --policy-matmul */
  rw_script *script = NULL;
  res_file *store = NULL;
  lab_evaluator ev;
  memset(&ev, 0, sizeof ev);
  /* The step's completions: items[k].label points at labels[k], and
   * items[k].src is the decoded text, owned here. */
  lab_eval_item *items = NULL;
  uint8_t *correct = NULL; /* (n_cand) a step's correctness, as recorded */
  char(*labels)[48] = NULL;
  pl_generation *gens = NULL;
  int32_t *prompt = NULL, *hdr_ids = NULL;
  prior pr = {.best_time_us = -1, .baseline = {-1, "", ""}};
  float *ck_m = NULL, *ck_v = NULL;
  int rc;
  progress prog = {isatty(STDOUT_FILENO), 0, c.steps, n_cand, 0, 0, 0, 0};

  int exit_code = LAB_EXIT_OK;
#define FAIL(code, ...)                                                        \
  do {                                                                         \
    fprintf(stderr, "kernlab run: " __VA_ARGS__);                              \
    fputc('\n', stderr);                                                       \
    exit_code = (code);                                                        \
    goto cleanup;                                                              \
  } while (0)

  pr.recorded = calloc((size_t)c.steps, sizeof *pr.recorded);
  pr.file_reward = calloc((size_t)n_cand, sizeof *pr.file_reward);
  pr.file_correct = calloc((size_t)n_cand, 1);
  pr.file_has = calloc((size_t)n_cand, 1);
  items = calloc((size_t)n_cand, sizeof *items);
  correct = calloc((size_t)n_cand, 1);
  labels = calloc((size_t)n_cand, sizeof *labels);
  gens = calloc((size_t)P, sizeof *gens);
  if (!pr.recorded || !pr.file_reward || !pr.file_correct || !pr.file_has ||
      !items || !correct || !labels || !gens)
    FAIL(LAB_EXIT_ENV, "out of memory");

  /* what is at the output already, and --resume's checks of it
   * (lab/run_resume.c) */
  int have_out = 0;
  ex = lab_resume_check(&c, ckpt_out, resume, &pr, &have_out);
  if (ex) {
    exit_code = ex;
    goto cleanup;
  }
  /* The checkpoint is written after each step by creating ckpt_tmp and
   * renaming it, and a new run's results file is created beside it: the
   * folder is made (runs/ in a fresh clone) and the create tried now, so a
   * folder that cannot be made, or a read-only or full one, is reported
   * before anything is loaded or computed (it was made after the model was
   * loaded and the baseline timed, ~30 s at 1024^3). --resume opens the
   * results for appending, which needs no folder write, so this is what
   * tests it (unless every step is recorded: then nothing will be
   * written). */
  int perr = !have_out || pr.steps_done < c.steps
                 ? lab_prepare_out(ckpt_out, why, sizeof why)
                 : 0;
  if (perr != 0)
    FAIL(lab_out_exit(perr), "the %s: %s", have_out ? "checkpoint" : "output",
         why);

  ex = lab_policy_open(policy_device, policy_dtype, policy_matmul != NULL,
                       "kernlab run", &pol.ctx, &policy_dtype, why, sizeof why);
  if (ex) FAIL(ex, "%s", why);
  rc = lab_tok_load(&tok, c.tokenizer, c.checkpoint, why, sizeof why);
  if (rc) FAIL(lab_pl_exit(rc), "tokenizer: %s", why);
  pl_ckpt_header h;
  rc = lab_load_model(&model, &h, c.checkpoint, tok, c.tokenizer, NULL, NULL,
                      why, sizeof why);
  if (rc) FAIL(lab_pl_exit(rc), "checkpoint: %s", why);
  /* the starting checkpoint's hash, for a new file's checkpoint_sha256 (h
   * becomes the run's own checkpoint's header on --resume) */
  char start_sha[sizeof h.sha256];
  memcpy(start_sha, h.sha256, sizeof start_sha);
  int start_step = 0;
  /* whether ckpt_out holds this run's policy: the one --resume continues
   * (lab_resume_check refused any other), then each step's once saved */
  int have_ckpt = access(ckpt_out, F_OK) == 0;
  /* --resume: the policy of the file's run (lab/run_resume.c) */
  ex = lab_resume_policy(resume, have_ckpt, &c, ckpt_out, &pr, tok, &model, &h,
                         &ck_m, &ck_v, &start_step);
  if (ex) {
    exit_code = ex;
    goto cleanup;
  }
  if (c.grpo.beta > 0) {
    pl_ckpt_header rh;
    rc = lab_load_model(&ref, &rh, c.checkpoint, tok, NULL, NULL, NULL, why,
                        sizeof why);
    if (rc) FAIL(lab_pl_exit(rc), "reference model: %s", why);
  }
  pl_adamw_config oc = pl_adamw_defaults();
  oc.lr = c.lr;
  oc.weight_decay = c.weight_decay;
  oc.grad_clip = c.clip;
  oc.warmup_steps = c.warmup * c.num_iterations;
  oc.total_steps = c.steps * c.num_iterations;
  oc.final_lr_frac = 1.0f; /* constant after warm-up */
  rc = pl_adamw_init(&opt, &model, &oc, why, sizeof why);
  if (rc) FAIL(lab_pl_exit(rc), "optimiser: %s", why);
  if (ck_m && ck_v && start_step > 0) {
    memcpy(opt.m, ck_m, opt.n * sizeof(float));
    memcpy(opt.v, ck_v, opt.n * sizeof(float));
    opt.step = (int64_t)h.opt_step;
  }
  if (lab_policy_init(&pol, pol.ctx, policy_dtype, &model, &opt,
                      c.grpo.beta > 0 ? &ref : NULL, why, sizeof why))
    FAIL(LAB_EXIT_ENV, "policy device: %s", why);
  if (policy_matmul) {
    kl_emu_set_launcher(sbx_host_compile_launcher());
    /* the trainer's token rows: each candidate's row holds at most
     * max_seq tokens; in 64 bits (2048 x 2^20 wraps an int) */
    int per_row =
        c.max_tokens < model.cfg.max_seq ? c.max_tokens : model.cfg.max_seq;
    ex =
        lab_policy_matmul_open(policy_matmul, pol.ctx, &model.cfg,
                               (int64_t)n_cand * per_row, &mm, why, sizeof why);
    if (ex) FAIL(ex, "%s", why);
    fprintf(stderr, "kernlab run: policy GEMMs through %s\n",
            lab_policy_matmul_describe(mm));
  }

  script = rw_load(c.reward, NULL, why, sizeof why);
  if (!script || rw_validate(script, why, sizeof why) != RW_OK)
    FAIL(LAB_EXIT_USAGE, "reward %s: %s", c.reward, why);

  /* The prompt: <|bos|> + the task header priming used. */
  const char *header = lab_prompt_header();
  size_t n_hdr = 0;
  rc = pl_tok_encode(tok, header, strlen(header), &hdr_ids, &n_hdr, why,
                     sizeof why);
  if (rc) FAIL(LAB_EXIT_ENV, "%s", why);
  int plen = (int)n_hdr + 1;
  prompt = malloc(sizeof *prompt * (size_t)plen);
  if (!prompt) FAIL(LAB_EXIT_ENV, "out of memory");
  prompt[0] = PL_TOK_BOS;
  memcpy(prompt + 1, hdr_ids, n_hdr * sizeof *hdr_ids);
  if (plen >= h.config.max_seq)
    FAIL(LAB_EXIT_USAGE, "%s: the prompt (%d tokens) does not fit max_seq %d",
         c.checkpoint, plen, h.config.max_seq);
  /* Memory for a step's update (lab/run_room.c), before any sampling. */
  {
    int T = plen + c.max_tokens < h.config.max_seq ? plen + c.max_tokens
                                                   : h.config.max_seq;
    ex = lab_run_room_update(&pol, &c, T, why, sizeof why);
    if (ex) FAIL(ex, "%s", why);
  }

  /* The evaluator (lab/evaluator.c, as `kernlab search` uses it): backend,
   * sandbox slots, options, baseline, and the queue its slot threads
   * serve. */
  rc = lab_evaluator_start(&ev, &c, n_cand, lab_derive_seed(c.seed, -1, 0, 0),
                           have_out ? &pr.baseline : NULL, why, sizeof why);
  if (rc) FAIL(rc, "%s", why);
  const char *backend = ev.backend, *task = ev.task;
  /* the policy shares the candidates' device: its work takes the GPU lock */
  const int hold_gpu = pol.ctx && !strcmp(backend, "gpu");
  double baseline = ev.baseline_us;
  kl_eval_options opts = ev.opts;

  /* The results file (its folder made above). */
  /* what a killed run left half-written beside them (its checkpoint of
   * 20 MB and more, a results file it was creating) goes */
  if (kl_outfile_sweep(ckpt_out) + kl_outfile_sweep(c.out) > 0)
    fprintf(stderr,
            "kernlab run: removed the temporary files a killed kernlab left "
            "beside %s\n",
            ckpt_out);
  /* Disk for a checkpoint (lab/run_room.c), before the first step. */
  if (start_step < c.steps) {
    ex = lab_run_room_checkpoint(ckpt_out, c.checkpoint, why, sizeof why);
    if (ex) FAIL(ex, "%s", why);
  }
  int code = 0;
  /* the run's id: the file's (0 for one from before ids: its checkpoints
   * carry 0 too), or a new one for a new file */
  uint64_t run_id = have_out ? pr.run_id : lab_new_run_id();
  char run_id_s[17];
  snprintf(run_id_s, sizeof run_id_s, "%016llx", (unsigned long long)run_id);
  store = lab_results_open(c.out, !have_out, c.text, c.reward, script, backend,
                           c.seed, run_id_s, start_sha, &code, why, sizeof why);
  if (!store) FAIL(code, "%s", why);
  /* what --resume read at the start must still be the file's: another
   * run on the same output may have written it while this one set up */
  if (have_out && (res_file_count(store) != pr.candidates ||
                   res_file_step_count(store) != pr.steps_done))
    FAIL(LAB_EXIT_ENV,
         "%s changed while this run set up (%lld candidates and %lld steps "
         "at the start, %lld and %lld now): is another kernlab run writing "
         "it?",
         c.out, (long long)pr.candidates, (long long)pr.steps_done,
         (long long)res_file_count(store),
         (long long)res_file_step_count(store));

  int cores = (int)sysconf(_SC_NPROCESSORS_ONLN);
  if (cores < 1) cores = 1;
  pl_set_num_threads(cores);
  printf("campaign %s: %s %s, G %d x %d prompt(s), %d steps, model d %d x %d "
         "layers (%zu parameters), reward %s\n",
         c.name, backend, task, G, P, c.steps, h.config.d_model,
         h.config.n_layers, model.num_params, c.reward);
  char base_s[48] = "none (see the warning above)";
  if (baseline >= 0) snprintf(base_s, sizeof base_s, "%.1f us", baseline);
  /* where a resumed campaign's baseline came from: its records', or timed
   * again, and why */
  char from[1600] = "";
  if (ev.baseline_reused)
    snprintf(from, sizeof from, ", from %s's records", c.out);
  else if (ev.baseline_note[0])
    snprintf(from, sizeof from, ", timed again: %s's records hold one %s",
             c.out, ev.baseline_note);
  printf("baseline (%s): %s%s%s; results %s, checkpoint %s\n",
         !strcmp(backend, "gpu") ? "cuBLAS SGEMM" : "naive seed", base_s,
         !strcmp(backend, "cpu-emu") && baseline >= 0
             ? " (CPU-emulator time, not GPU)"
             : "",
         from, c.out, ckpt_out);
  if (ev.baseline_reused && pr.baseline_others > 0)
    printf("note: %lld of %s's step records hold another baseline (timed "
           "again by an earlier --resume); the first record's is kept\n",
           (long long)pr.baseline_others, c.out);
  if (start_step >= c.steps)
    printf("nothing to do: the campaign has %d steps and %lld are recorded\n",
           c.steps, (long long)pr.steps_done);
  else if (start_step > 0)
    printf("resuming at step %d (%lld steps recorded)\n", start_step + 1,
           (long long)pr.steps_done);
  /* edits other than the task, seed and group shape (lab_resume_check refuses
   * those) continue the campaign: said, since they change what the rest of
   * the file means (the file's config keeps the text it was started with) */
  if (pr.config_edited && start_step < c.steps)
    printf("note: %s is not the campaign text %s was started with (its "
           "config attribute); the edits apply from step %d on\n",
           campaign_path ? campaign_path : "the built-in campaign", c.out,
           start_step + 1);
  fflush(stdout);

  double best_time = pr.best_time_us, t_run = lab_now_s();
  double wall0 = pr.wall_s;
  int steps_run = 0, stopped_at = -1;
  int steps_unscored = 0; /* steps run whose every candidate went unscored */
  int steps_flat = 0;     /* steps run whose every group's rewards were equal */
  char kept_why[sizeof why] = ""; /* the last reload's failure */
  for (int step = start_step; step < c.steps; step++) {
    if (lab_interrupted()) {
      stopped_at = step;
      break;
    }
    double t_step = lab_now_s();
    if (step > start_step) {
      /* Said once per edit: a reload, a failure (its reason names the
       * rejected version's hash, so a later edit failing alike is said
       * again), and a file put back to the script in use after a failure.
       * A file left broken says nothing more at each step: it said
       * "still does not load" every step until it was fixed (the
       * walkthrough review). */
      int rl = rw_reload(&script, c.reward, why, sizeof why);
      if (rl == RW_RELOADED)
        printf("reward: reloaded %s (sha256 %.12s)\n", c.reward,
               rw_sha256(script));
      else if (rl == RW_KEPT_OLD && strcmp(why, kept_why))
        /* why names the file (Lua's messages and rw_validate's do) */
        printf("reward: an edit did not load: %s\n", why);
      else if (rl == RW_UNCHANGED && kept_why[0])
        printf("reward: %s is the script in use again (sha256 %.12s)\n",
               c.reward, rw_sha256(script));
      snprintf(kept_why, sizeof kept_why, "%s", rl == RW_KEPT_OLD ? why : "");
    }
    /* Sample; every row goes to the evaluation queue as soon as it stops. */
    if (lab_evaluator_begin(&ev, items, n_cand,
                            lab_derive_seed(c.seed, step, 0, 2)) != 0)
      FAIL(LAB_EXIT_ENV, "out of memory");
    prog.step = step;
    prog.sampled = prog.evaluated = 0;
    progress_draw(&prog);
    double t0 = lab_now_s();
    long gen_tokens = 0;
    row_sink sink = {&ev, items, labels, tok, step, 0, G, 0, "", &prog};
    /* The policy on the device the candidates are timed on holds the GPU
     * lock (kl_gpu_lock) while it samples each group and while it updates:
     * finished rows still go to the queue and compile, but none is timed,
     * here or in another kernlab process, while the policy's kernels run. */
    for (int g = 0; g < P; g++) {
      sink.group = g;
      if (hold_gpu) kl_gpu_lock();
      rc = lab_policy_generate(&pol, prompt, plen, G, c.max_tokens, PL_TOK_EOS,
                               &c.sampling, lab_derive_seed(c.seed, step, g, 1),
                               &gens[g], on_row_done, &sink, why, sizeof why);
      if (hold_gpu) kl_gpu_unlock();
      if (rc)
        FAIL(lab_pl_exit(rc), "step %d: %s%s", step + 1,
             strncmp(why, "sampling", 8) ? "sampling: " : "", why);
      for (int i = 0; i < G; i++)
        gen_tokens += gens[g].lengths[i];
    }
    double gen_s = lab_now_s() - t0;
    if (sink.failed)
      FAIL(LAB_EXIT_ENV, "step %d: decode: %s", step + 1, sink.why);
    double logp_sum = 0;
    for (int k = 0; k < n_cand; k++) {
      const pl_generation *gn = &gens[k / G];
      int row = k % G;
      for (int i = 0; i < gn->lengths[row]; i++)
        logp_sum += gn->logprobs[(size_t)row * gn->max_new + i];
    }
    /* Evaluate: wait for the queue (lab/evaluator.c). */
    lab_evaluator_wait(&ev, n_cand, progress_tick, &prog);
    prog.evaluated = n_cand; /* the bar's last state: the step is done */
    progress_draw(&prog);
    progress_clear(&prog);
    for (int k = 0; k < n_cand; k++)
      if (items[k].rc == KL_EENV)
        FAIL(LAB_EXIT_ENV, "step %d: evaluation: %s", step + 1,
             items[k].r.error);
    /* Reward, per group (lab_score_groups, as `kernlab search` scores). */
    double *rewards = malloc(sizeof(double) * (size_t)n_cand);
    float *adv = malloc(sizeof(float) * (size_t)n_cand);
    rw_components *comps = calloc((size_t)n_cand, sizeof *comps);
    if (!rewards || !adv || !comps) {
      free(rewards), free(adv), free(comps);
      FAIL(LAB_EXIT_ENV, "out of memory");
    }
    int failed = lab_score_groups(script, items, n_cand, G, task,
                                  &opts.shapes[0], comps, why, sizeof why);
    if (failed) {
      int unscored = 0;
      for (int k = 0; k < n_cand; k++)
        unscored += !comps[k].script_sha256[0];
      fprintf(stderr,
              "kernlab run: step %d: reward: %s%s; %d of %d candidates "
              "unscored\n",
              step + 1, why, failed > 1 ? " (and more groups)" : "", unscored,
              n_cand);
    }
    int n_correct = 0, n_scored = 0;
    for (int k = 0; k < n_cand; k++) {
      rewards[k] = comps[k].script_sha256[0] ? comps[k].total : NAN;
      n_scored += comps[k].script_sha256[0] != 0;
      n_correct += items[k].r.correct;
      const kl_result *r = &items[k].r;
      /* the best so far is a kernel of the file: a re-run step's first
       * pr.recorded[step] samples are not recorded (the file keeps those
       * of the run that was killed) */
      if (k >= pr.recorded[step] && r->correct && r->time_us > 0 && !r->flags &&
          (best_time < 0 || r->time_us < best_time))
        best_time = r->time_us;
    }
    /* Record the candidates not already in the file before the update:
     * an update that fails (out of memory for a large group) lost the
     * step's evaluations, hours of them (the campaign-file review). The
     * file then holds the step's candidates and no step record, as a kill
     * leaves it: --resume runs the step again. */
    for (int k = (int)pr.recorded[step]; k < n_cand && !exit_code; k++)
      if (lab_record_candidate(store, &items[k], &comps[k], task, step, k / G,
                               k % G, why, sizeof why) != RES_OK) {
        lab_name_path(c.out, why, sizeof why);
        fprintf(stderr, "kernlab run: %s\n", why);
        exit_code = LAB_EXIT_ENV;
      }
    if (exit_code) {
      free_scores(comps, n_cand, rewards, adv);
      goto cleanup;
    }
    rc = pl_grpo_advantages(adv, rewards, P, G, c.grpo.scale_rewards, why,
                            sizeof why);
    /* Update. */
    update_out u;
    memset(&u, 0, sizeof u);
    /* No candidate scored (the formula failed on all of them), or every
     * group's rewards equal: no signal, so no update. AdamW would still
     * move the weights along its momentum and weight decay with every
     * advantage 0. */
    int has_signal = !rc && n_scored && lab_update_has_signal(&c, adv, n_cand);
    if (!rc && !has_signal) {
      fprintf(stderr,
              "kernlab run: step %d: %s; the policy is not updated this "
              "step\n",
              step + 1,
              n_scored ? "every group's rewards are equal (every advantage "
                         "is 0): nothing to learn"
                       : "no candidate was scored");
      steps_unscored += !n_scored;
      steps_flat += n_scored != 0;
    }
    if (has_signal) {
      /* on the device: under the GPU lock too, for other kernlab
       * processes' runs (this one's are over) */
      if (hold_gpu) kl_gpu_lock();
      rc = lab_grpo_update(&c, &pol, prompt, plen, gens, P, adv, &u, why,
                           sizeof why);
      if (hold_gpu) kl_gpu_unlock();
    }
    if (rc) {
      free_scores(comps, n_cand, rewards, adv);
      FAIL(lab_pl_exit(rc),
           "step %d: update: %s; the step's candidates are recorded in %s, "
           "and --resume runs the step again",
           step + 1, why, c.out);
    }
    /* Then the step and the checkpoint (the candidates are recorded
     * before the update). */
    /* The step's statistics: of the candidates the file holds, so those a
     * killed run recorded count with their recorded rewards (a re-run's
     * timings, and so its rewards, differ). */
    n_correct = 0;
    for (int k = 0; k < n_cand; k++) {
      int from_file = step == pr.steps_done && pr.file_has[k];
      rewards[k] = from_file ? pr.file_reward[k] : rewards[k];
      correct[k] = from_file ? pr.file_correct[k] : items[k].r.correct != 0;
      n_correct += correct[k];
    }
    res_step s = {0};
    s.step = step;
    lab_step_stats_of(rewards, correct, n_cand, &s);
    free_scores(comps, n_cand, rewards, adv);
    if (exit_code) goto cleanup;

    s.kl = u.st.kl_mean;
    s.loss = u.st.loss;
    s.entropy = gen_tokens ? -logp_sum / gen_tokens : 0;
    s.clip_frac = u.st.clip_fraction;
    s.len_mean = (double)gen_tokens / n_cand;
    s.best_time_us = best_time;
    s.lr = u.lr;
    s.grad_norm = u.grad_norm;
    s.wall_s = wall0 + (lab_now_s() - t_run);
    if (step >= pr.steps_done &&
        res_append_step(store, &s, why, sizeof why) != RES_OK) {
      lab_name_path(c.out, why, sizeof why);
      FAIL(LAB_EXIT_ENV, "%s", why);
    }
    h.step = (uint64_t)step + 1;
    h.opt_step = (uint64_t)opt.step;
    h.run_id = run_id;
    /* The checkpoint there must be this run's (or none): --out x and
     * --out x.h5 name one x.ckpt, and two runs started at once would
     * replace each other's, each resuming the other's policy later. */
    pl_ckpt_header there;
    if (pl_ckpt_peek(ckpt_out, &there, why, sizeof why) == PL_OK &&
        there.run_id != run_id)
      FAIL(LAB_EXIT_ENV,
           "%s now holds the checkpoint of another run (run id %016llx, this "
           "one %016llx): two campaigns are writing it (--out x and --out "
           "x.h5 share x.ckpt); this run's step %d is recorded in %s but not "
           "checkpointed",
           ckpt_out, (unsigned long long)there.run_id,
           (unsigned long long)run_id, step + 1, c.out);
    rc = lab_policy_sync(&pol, why, sizeof why);
    /* a non-finite value in the weights or the moments: the update
     * diverged, which is the campaign's doing (its learning rate, its
     * rewards), not the checkpoint file's */
    int diverged = !rc && pl_ckpt_values_finite(
                              &h.config, model.params_memory, model.num_params,
                              opt.m, opt.v, "policy", why, sizeof why) != PL_OK;
    if (!rc && !diverged)
      rc = pl_ckpt_save(ckpt_out, &h, model.params_memory, model.num_params,
                        opt.m, opt.v, why, sizeof why);
    if (diverged)
      FAIL(LAB_EXIT_USAGE,
           "step %d: the update diverged: %s; not saved (a lower optim.lr or "
           "smaller rewards may help): %s; %s holds step %d's records",
           step + 1, why,
           access(ckpt_out, F_OK) == 0 ? "the checkpoint keeps the last policy "
                                         "saved"
                                       : "no checkpoint was written",
           c.out, step + 1);
    if (rc) FAIL(lab_pl_exit(rc), "%s", why);
    have_ckpt = 1;

    steps_run++;
    double per_step = (lab_now_s() - t_run) / steps_run;
    prog.per_step = per_step;
    char eta[32], best[64];
    lab_fmt_eta(eta, sizeof eta, per_step * (c.steps - step - 1));
    if (best_time > 0 && baseline > 0)
      snprintf(best, sizeof best, "%.1f us (%.2fx baseline speed)", best_time,
               baseline / best_time);
    else
      snprintf(best, sizeof best, "-");
    /* The loss is near 0 by construction on the first pass of a step
     * (rho = 1 and each group's advantages sum to 0; exactly so when the
     * completions are equally long), so it says little about learning: the
     * gradient norm (before clipping) does, and is 0 when every group's
     * rewards were equal (nothing to learn from: no update then). */
    char mean_s[32], max_s[32], gn[24];
    lab_fmt_num(gn, sizeof gn, "%.3g", s.grad_norm);
    printf("step %d/%d  reward mean %s max %s  correct %d/%d  best %s  "
           "kl %.4f  clip %.3f  loss %.4g  gnorm %s  %.0f tok/s  %.1fs  "
           "ETA %s%s\n",
           step + 1, c.steps,
           lab_fmt_reward(mean_s, sizeof mean_s, "%.3f", s.reward_mean),
           lab_fmt_reward(max_s, sizeof max_s, "%.3f", s.reward_max), n_correct,
           n_cand, best, s.kl, s.clip_frac, s.loss, gn,
           gen_s > 0 ? gen_tokens / gen_s : 0, lab_now_s() - t_step, eta,
           step < pr.steps_done ? "  (re-run, already recorded)" : "");
    fflush(stdout);
    for (int k = 0; k < n_cand; k++) {
      free((char *)items[k].src);
      items[k].src = NULL;
    }
    for (int g = 0; g < P; g++)
      pl_generation_free(&gens[g]);
  }

  lab_warn_unlearnt(steps_unscored, steps_flat, steps_run);

  /* Summary over the whole campaign (earlier runs included). */
  if (res_close(store, why, sizeof why) != RES_OK) {
    store = NULL;
    lab_name_path(c.out, why, sizeof why);
    FAIL(LAB_EXIT_ENV, "%s", why);
  }
  store = NULL;
  {
    res_reader *r = res_open_read(c.out, &code, why, sizeof why);
    int64_t ns = r ? res_step_count(r) : 0;
    if (ns >= 2) {
      int fifth = ns >= 5 ? (int)(ns / 5) : 1;
      double a = 0, b = 0, ca = 0, cb = 0;
      for (int i = 0; i < fifth; i++) {
        const res_step *f = res_get_step(r, i),
                       *l = res_get_step(r, ns - 1 - i);
        a += f->reward_mean, ca += f->correct_frac;
        b += l->reward_mean, cb += l->correct_frac;
      }
      printf("summary: %lld steps; reward mean, first fifth %.3f -> last "
             "fifth %.3f; correct fraction %.3f -> %.3f\n",
             (long long)ns, a / fifth, b / fifth, ca / fifth, cb / fifth);
      if (best_time > 0)
        printf("best correct kernel: %.1f us (%s), %.2fx the baseline's speed; "
               "see `kernlab top %s`\n",
               best_time, backend, baseline / best_time, c.out);
    }
    if (r) res_reader_close(r);
    fflush(stdout); /* before the comparison, which an interrupt may cut */
  }
  if (stopped_at < 0 && lab_interrupted())
    stopped_at = c.steps; /* it came during the last step */
  if (stopped_at >= 0) {
    lab_print_interrupted(argc, argv, resume, stopped_at, c.steps, c.out,
                          have_ckpt ? ckpt_out : NULL);
    exit_code = LAB_EXIT_INTERRUPTED;
    goto cleanup;
  }
  /* Every step is recorded and the file closed: an interrupt from here on
   * (during the comparison, which times the corpus) stops at once. */
  lab_interrupt_uninstall();
  /* Against the baselines: the priming corpus's best kernel, timed now on
   * a slot of its own with the campaign's options, and the evaluations it
   * took to come within 5% of exhaustive search (lab/compare.c). */
  lab_compare_print(c.out, c.exhaustive, c.corpus, &opts, stdout);
  if (mm) {
    char line[512];
    lab_policy_matmul_report(mm, line, sizeof line);
    fprintf(stderr, "kernlab run: --policy-matmul: %s\n", line);
  }

cleanup:
  progress_clear(&prog);
  if (store) res_close(store, why, sizeof why);
  lab_evaluator_stop(&ev); /* lets its threads finish what is queued */
  for (int k = 0; items && k < n_cand; k++)
    free((char *)items[k].src);
  free(items);
  free(correct);
  free(labels);
  for (int g = 0; gens && g < P; g++)
    pl_generation_free(&gens[g]);
  free(gens);
  free(prompt);
  free(hdr_ids);
  free(pr.recorded);
  free(pr.file_reward);
  free(pr.file_correct);
  free(pr.file_has);
  free(ck_m);
  free(ck_v);
  rw_free(script);
  lab_policy_matmul_close(mm); /* before the device it is installed on */
  lab_policy_close(&pol);
  pl_adamw_free(&opt);
  pl_model_free(&model);
  if (c.grpo.beta > 0) pl_model_free(&ref);
  pl_tok_free(tok);
  lab_campaign_free(&c);
  lab_interrupt_uninstall();
  return exit_code;
#undef FAIL
}
