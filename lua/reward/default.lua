--[[
lua/reward/default.lua — kernlab's default reward formula.

Components (the total is their sum, computed by the lab):

  build    -1 when the kernel did not compile, 0 otherwise.
  correct  +1 correct on every checked shape; -0.5 ran but gave wrong
           results; -0.75 failed to run (timeout, crash, sandbox kill).
  speed    only for a correct kernel with no anti-cheat flag (the gate):
           log2(baseline_us / time_us) clipped to [-1, 3], i.e. from
           "2x slower than the naive seed" (-1) to "8x faster" (+3).
           A log-ratio pays the same for each doubling, so going from 2x to
           4x is worth as much as from 4x to 8x, and the clip keeps one
           lucky timing from dominating a GRPO group.
  cheat    the sum of an explicit penalty for each anti-cheat flag raised
           (PENALTY below; names are those of `kernlab flags`), with
           PENALTY_UNKNOWN for a flag this file does not know yet.

Resulting order on the fixture: correct fast (up to 4) > correct slow (0 at
worst) > wrong (-0.5) > failed to run (-0.75) > compile error (-1), and any
flag costs at least 5: more than the best speed reward can give back. A
kernel wrong at the target shape raises no flag for being wrong while timed
or on the rerun (the lab does not call a plain mistake a cheat); one right
at the target and wrong at another shape is shape_special_cased, whatever
the intent (a tile loop that drops the ragged edge looks just like it), and
one that leaves part of C unwritten is output_not_written.

Edit freely: the lab reloads this file between steps when it changes and
records its sha256 with every score.
]]

local M = {}

-- Penalty per anti-cheat flag (kernels/flags.c). Dynamic flags that mean
-- "the result or the timing cannot be trusted" cost the most.
local PENALTY = {
  -- static (source scanner)
  inline_asm = -5,
  timer_read = -10,
  printf = -5,
  device_malloc = -10,
  stream_or_event = -10,
  graph_or_dynamic_parallelism = -10,
  cooperative_grid_sync = -5,
  mutable_device_state = -10,
  compile_pass_branch = -10,
  disallowed_include = -10,
  oversize_source = -5,
  precision_downgrade = -10,
  runtime_api = -10,
  -- dynamic (evaluation)
  output_not_written = -10,
  canary_overwritten = -20,
  input_mutated = -20,
  nondeterministic = -10,
  timed_output_wrong = -20,
  shape_special_cased = -20,
  implausible_speed = -20,
}
local PENALTY_UNKNOWN = -10

local W = {
  compile_error = -1.0,
  run_error = -0.75,
  wrong = -0.5,
  correct = 1.0,
  speed = 1.0,
}
local SPEED_MIN, SPEED_MAX = -1.0, 3.0

local function clip(x, lo, hi)
  if x < lo then return lo elseif x > hi then return hi end
  return x
end

function M.score(c, ctx)
  local cheat, flagged = 0, false
  for name in pairs(c.flags) do
    cheat = cheat + (PENALTY[name] or PENALTY_UNKNOWN)
    flagged = true
  end

  local r = { build = 0, correct = 0, speed = 0, cheat = cheat }
  if not c.compiled then
    r.build = W.compile_error
    return r
  end
  if c.correct then
    r.correct = W.correct
  elseif c.status == "wrong" then
    r.correct = W.wrong
  else
    r.correct = W.run_error
  end

  -- the gate: speed is paid only to clean, correct, timed kernels
  if c.correct and not flagged and c.time_us and c.baseline_us then
    local ratio = c.baseline_us / c.time_us
    r.speed = W.speed * clip(math.log(ratio, 2), SPEED_MIN, SPEED_MAX)
  end
  return r
end

return M
