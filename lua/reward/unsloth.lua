--[[
lua/reward/unsloth.lua — the four reward functions of Unsloth's gpt-oss GRPO
notebook ("Make faster kernels with Reinforcement Learning",
unslothai/notebooks nb/gpt-oss-(20B)-GRPO.ipynb), translated to kernlab.
TRL sums them; so does the lab. Source of the numbers:
shared/research/mission-anchors.md, A1.

The notebook's "kernel" is a pure-Python matmul(A, B) on lists, timed
against numpy on the CPU. Here it is a CUDA kernel timed against the naive
seed. Where each of its measurements maps:

  function_works     "a function was extracted and parses"   -> it compiled
                     "create_locked_down_function raises"    -> it compiled
                                                                but broke the
                                                                contract
                                                                (bad_signature,
                                                                bad_geometry)
                     -2 / -0.5 / +1, as in the notebook.
  no_cheating        the notebook's AST import check is our anti-cheat
                     flags. +1 clean, -20 otherwise ("Penalize heavily!").
                     As in the notebook, "no function extracted" and "does
                     not parse" (check_only_stdlib_imports fails on a
                     SyntaxError) also get -20: here, a kernel that did not
                     compile.
  correctness_check  0 when it did not build; -2 when running it failed
                     (our timeout / crash / sandbox kill: the notebook's
                     "the call raises"); else two bucketed terms, each
                     -3 .. +3 (total -6 .. +6):
                       amax term: the notebook's amax = max(pred - real)
                         (signed); ours is max_abs_err (absolute, stricter).
                       MSE term: we do not measure an MSE; max_rel_err
                         (||C - R||_F / ||R||_F) plays its role.
                     Buckets: >= 3 -> -3; >= 2 -> -2.5; >= 1 -> -2;
                     >= 0.5 -> -1; >= 100 eps' -> 0; >= eps' -> +1; else +3.
                     The notebook's eps' is 100 * float64 epsilon (its
                     checks are float64); the task here is fp32, so eps' is
                     100 * float32 epsilon = 1.19e-5, which is also about
                     our tolerance KL_TOL_REL (1e-5). A run with no error
                     measured gets the notebook's (5, 5) difference: -6.
  speed_check        0 when it did not build. Else, with t = time_us and
                     b = baseline_us: t >= b -> -(t / b) / 100,
                     t < b -> +(b / t) / 100, clipped to [-10, 10].
                     As in the notebook there is no correctness gate (a
                     wrong kernel is still paid for speed; that is the
                     notebook's "exception-as-speed" gap, kept on purpose so
                     the comparison is honest). Unlike the notebook, a run
                     that failed has no time here, so it gets 0.

Compare with lua/reward/default.lua, which gates speed on correctness and
prices each flag separately.
]]

local M = {}

local EPS = 100 * 2 ^ -23 -- eps' for fp32: 100 * FLT_EPSILON

-- the notebook's bucket ladder for one error measure
local function bucket(err)
  if err >= 3 then return -3.0
  elseif err >= 2 then return -2.5
  elseif err >= 1 then return -2.0
  elseif err >= 0.5 then return -1.0
  elseif err >= 100 * EPS then return 0.0
  elseif err >= EPS then return 1.0
  else return 3.0 end
end

local function any_flag(c)
  return next(c.flags) ~= nil
end

local CONTRACT_FAILURE = { bad_signature = true, bad_geometry = true }
local RAN = { ok = true, wrong = true }

function M.score(c, ctx)
  local r = {}

  -- function_works
  if CONTRACT_FAILURE[c.status] then
    r.function_works = -0.5
  elseif not c.compiled then
    r.function_works = -2.0
  else
    r.function_works = 1.0
  end

  -- no_cheating
  if not c.compiled or any_flag(c) then
    r.no_cheating = -20.0
  else
    r.no_cheating = 1.0
  end

  -- correctness_check
  if not c.compiled or CONTRACT_FAILURE[c.status] then
    r.correctness_check = 0.0
  elseif not RAN[c.status] then
    r.correctness_check = -2.0
  elseif c.max_abs_err == nil or c.max_rel_err == nil then
    r.correctness_check = bucket(5) + bucket(5)
  else
    r.correctness_check = bucket(c.max_abs_err) + bucket(c.max_rel_err)
  end

  -- speed_check
  local speed = 0.0
  if c.compiled and c.time_us and c.baseline_us then
    local t, b = c.time_us, c.baseline_us
    if t >= b then speed = -(t / b) / 100 else speed = (b / t) / 100 end
    speed = math.max(-10.0, math.min(10.0, speed))
  end
  r.speed_check = speed
  return r
end

return M
