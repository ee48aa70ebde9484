--[[
lua/reward/distance.lua — distance-based correctness: instead of a pass/fail
cliff, accuracy falls smoothly with how far the result is from the
reference, measured in decades of max_rel_err beyond the tolerance.

  d        = log10(max_rel_err / TOL), TOL = 1e-5 (KL_TOL_REL); d <= 0 is
             within tolerance.
  accuracy = 2 - 0.5 * clip(d, 0, 8): +2 within tolerance, +1.5 at 10x the
             tolerance, 0 at 10^4x, -2 at 10^8x or beyond. A near miss
             (a race that corrupts a few elements, a reduction in the wrong
             order) therefore scores above a wild miss (garbage, zeros),
             which gives GRPO a gradient towards correctness even in a group
             where nothing passes yet. Nothing measured (the run failed):
             -3, below every distance.
  pass     +1 when the kernel passed every check (the lab's per-element
             bound and every shape, not only the norm used for d).
  build    -1 when it did not compile (then accuracy is -3 too).
  speed    as in default.lua, only for a correct kernel with no flag:
             log2(baseline_us / time_us) clipped to [-0.5, 3].
  cheat    -10 per anti-cheat flag, whatever its name (default.lua prices
             flags one by one).

Order: correct (>= 2.5) > any incorrect (<= 2) > failed run (-3) >
compile error (-4).
]]

local M = {}

local TOL = 1e-5
local FLAG_PENALTY = -10

local function clip(x, lo, hi)
  if x < lo then return lo elseif x > hi then return hi end
  return x
end

function M.score(c, ctx)
  local r = { build = 0, accuracy = -3, pass = 0, speed = 0, cheat = 0 }
  local flagged = false
  for _ in pairs(c.flags) do
    r.cheat = r.cheat + FLAG_PENALTY
    flagged = true
  end
  if not c.compiled then
    r.build = -1
    return r
  end
  if c.max_rel_err then
    -- a zero error is a perfect result: give it the tolerance's score
    local d = math.log(math.max(c.max_rel_err, 1e-30) / TOL, 10)
    r.accuracy = 2 - 0.5 * clip(d, 0, 8)
  end
  if c.correct then r.pass = 1 end
  if c.correct and not flagged and c.time_us and c.baseline_us then
    r.speed = clip(math.log(c.baseline_us / c.time_us, 2), -0.5, 3)
  end
  return r
end

return M
