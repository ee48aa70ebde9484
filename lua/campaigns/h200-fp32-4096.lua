--[[
lua/campaigns/h200-fp32-4096.lua — the campaign meant for a GPU: fp32
C = A*B at 4096x4096x4096, kernels compiled by NVRTC for sm_90 and timed
with CUPTI on the device against cuBLAS SGEMM. The policy itself still runs
on the CPU. Fields and defaults: lua/campaigns/quick.lua.

  kernlab run lua/campaigns/h200-fp32-4096.lua
]]
return {
  task = {M = 4096, N = 4096, K = 4096},
  backend = "gpu",
  checkpoint = "runs/policy.ckpt",
  group_size = 16,
  prompts_per_step = 1,
  steps = 200,
  sampling = {temperature = 1.0, top_p = 1.0, min_p = 0.05, max_tokens = 1536},
  grpo = {loss_type = "dapo", scale_rewards = "group", beta = 0.0,
          eps_low = 0.2, eps_high = 0.28, num_iterations = 1,
          mask_truncated = true},
  optim = {lr = 1e-5, warmup = 10, weight_decay = 0.0, clip = 1.0},
  reward = "lua/reward/default.lua",
  seed = 1,
}
