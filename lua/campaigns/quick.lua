--[[
lua/campaigns/quick.lua — the default campaign, built into kernlab (`kernlab run`
with no file runs the text this file had at build time):
GRPO on the CPU emulator with the primed small policy, sized to finish in
about eight minutes on two cores (30 steps of 2 groups of 8: 480
evaluations).
Measured here from the policy `kernlab prime` makes by default (the same
policy build after build: lua/corpus.lua names its held-out configurations,
and priming is deterministic given the corpus), in two runs: reward mean
1.3 -> 3.2 and 1.1 -> 2.3 from the first fifth of the steps to the last;
correct fraction 0.87 -> 0.98 and 0.87 -> 0.93; the best kernel 1.7x faster
than the priming corpus's best train kernel, timed in the same run, both
times; 95% of the exhaustive search's best reached after 277 of the 480
evaluations (second run). Rewards depend on measured times, so two runs
differ after the first step.
timeout 10: the policy also writes configurations that never finish (a
load loop whose stride is 0); a correct one runs in well under a second at
this shape. Prime the policy first:

  kernlab corpus && kernlab prime          (writes runs/policy.ckpt + .tok)
  kernlab run                              (this file)

A campaign file is Lua (base, string, table and math only) that returns a
table. Every field is optional; unknown fields are errors. Fields, types and
defaults:

  name              string   the file's name without .lua
  task              table    {M = 256, N = 256, K = 256, dtype = "fp32"}:
                             the timed target shape (kernels are also checked
                             on the evaluator's ragged shapes); a task table
                             gives all of M, N and K (dtype is optional):
                             leave the whole table out for 256x256x256
  backend           string   "cpu-emu" | "gpu" | "auto"          ("cpu-emu")
  checkpoint        string   the starting policy       ("runs/policy.ckpt")
  tokenizer         string   its tokenizer                (checkpoint..".tok")
  group_size        integer  G, completions per prompt, >= 2             (4)
  prompts_per_step  integer  groups per step                             (1)
  steps             integer  policy updates                             (10)
  sampling          table    temperature (1.0), top_p (1.0), min_p (0.1),
                             max_tokens (1024, per completion)
  grpo              table    loss_type "grpo"|"bnpo"|"dr_grpo"|"dapo" ("dapo")
                             scale_rewards "group"|"batch"|"none" ("group")
                             beta (0: no reference model; > 0: k3 KL to the
                               starting checkpoint, frozen)
                             eps_low (0.2), eps_high (0.28)
                             num_iterations (1: updates per batch)
                             mask_truncated (true: completions that hit
                               max_tokens get no loss)
  optim             table    AdamW: lr (1e-5), warmup (0 steps),
                             weight_decay (0.0), clip (1.0, global norm);
                             constant lr after warm-up
  reward            string   reward script       ("lua/reward/default.lua"),
                             hot-reloaded between steps when it changes
  seed              integer  sampling and evaluation seeds derive from it (1)
  timeout           number   seconds one candidate's runs may take before it
                             is stopped and scored `timeout`         (60)
  out               string   results file             ("runs/<name>.h5");
                             the policy is saved next to it as runs/<name>.ckpt
                             after every step
  corpus            string   the priming corpus folder        ("runs/corpus");
                             the campaign ends by timing its best train
                             kernel next to the campaign's best
  exhaustive        string   results of `kernlab search exhaustive` for this
                             campaign    ("runs/<name>-exhaustive.h5"); the
                             campaign and random search report the evaluations
                             they needed to reach 95% of its best

Relative paths are relative to the folder kernlab runs in.
]]
return {
  task = {M = 256, N = 256, K = 256},
  backend = "cpu-emu",
  checkpoint = "runs/policy.ckpt",
  group_size = 8,
  prompts_per_step = 2,
  steps = 30,
  timeout = 10,
  sampling = {temperature = 1.0, top_p = 1.0, min_p = 0.1, max_tokens = 1024},
  grpo = {loss_type = "dapo", scale_rewards = "group", beta = 0,
          eps_low = 0.2, eps_high = 0.28, num_iterations = 1,
          mask_truncated = true},
  optim = {lr = 5e-5, warmup = 0, weight_decay = 0.0, clip = 1.0},
  reward = "lua/reward/default.lua",
  seed = 1,
}
