--[[
lua/search_space.lua — the template space of the search baselines.

`kernlab search random|exhaustive CAMPAIGN.lua` runs this script and
evaluates the configurations it returns exactly as `kernlab run` evaluates
the policy's kernels (same sandbox, backend, shape, reward), so a campaign
can be compared with plain search over the seeds' #define values.

The space: every seed of kernels/seeds/ with a grid of its #define values,
wider than lua/corpus.lua's (the priming corpus, which covers five seeds,
omits some tile shapes and holds the fastest ones out): all nine seeds,
rectangular block tiles, thread and warp tile variants, the split-K warp
kernel. Each grid is filtered by the constraints the seed's code relies on
(its header comment states them: how threads map onto tile loads, the warp
layout) and by what a real sm_90 block allows (<= 1024 threads, <= 48 KiB of
static shared memory, <= 128 accumulators per thread), so every entry is a
configuration a tuner who read the seed would plausibly try. Verifying them
is the search's job: one that still fails a check is recorded as incorrect.

One surface style each: the seed's own spelling. Identifiers and
indentation do not change speed; the corpus varies them only to teach the
policy structure rather than one spelling.

About 110 configurations, so that exhaustive search at the default
campaign shape (256x256x256) finishes in a few minutes on the CPU emulator
with two cores.

The API the lab gives the script (as for lua/corpus.lua):
  kl.seed(name)    the text of kernels/seeds/<name>
Returns { generate = function(kl) return { {name, source}, ... } end };
names are unique (the lab refuses duplicates).
]]

local M = {}

local MAX_THREADS, MAX_SMEM, MAX_ACC = 1024, 48 * 1024, 128

-- The seed's text with each `#define NAME ...` of values rewritten; every
-- name must be defined exactly once in the seed.
local function with_defines(text, values)
  local seen = {}
  local out = text:gsub("#define ([%w_]+) [^\n]*", function(name)
    local v = values[name]
    if v == nil then return nil end
    seen[name] = (seen[name] or 0) + 1
    return "#define " .. name .. " " .. tostring(v)
  end)
  for name in pairs(values) do
    if seen[name] ~= 1 then error("seed defines " .. name .. " " ..
        tostring(seen[name] or 0) .. " times, expected once") end
  end
  return out
end

-- "05_blocktile_2d" .. "_bm64_bn128_bk8_tm4_tn4", in the order of keys.
local function name_of(seed, keys, values)
  local name = seed:gsub("%.cu$", "")
  for _, k in ipairs(keys) do name = name .. "_" .. k:lower() .. values[k] end
  return name
end

local function divides(a, b) return a > 0 and b % a == 0 end

-- Per seed: the grid (one list of values per #define, in name order) and
-- the constraints of its code (true: plausible).
local families = {
  { seed = "01_naive.cu", keys = { "BS" }, grid = { BS = { 8, 16, 32 } },
    valid = function(v) return v.BS * v.BS <= MAX_THREADS end },
  { seed = "02_coalesced.cu", keys = { "BS" }, grid = { BS = { 8, 16, 32 } },
    valid = function(v) return v.BS * v.BS <= MAX_THREADS end },
  { seed = "03_smem_tiling.cu", keys = { "BS" }, grid = { BS = { 8, 16, 32 } },
    valid = function(v)
      return v.BS * v.BS <= MAX_THREADS and 2 * v.BS * v.BS * 4 <= MAX_SMEM
    end },
  -- 1-D blocktile: BM*BN/TM threads each load one element of the BM x BK
  -- A tile and of the BK x BN B tile, so BM*BK = BK*BN = the thread count.
  { seed = "04_blocktile_1d.cu", keys = { "BM", "BN", "BK", "TM" },
    grid = { BM = { 32, 64, 128 }, BN = { 32, 64, 128 }, BK = { 4, 8, 16 },
             TM = { 4, 8, 16 } },
    valid = function(v)
      local threads = v.BM * v.BN // v.TM
      return divides(v.TM, v.BM) and threads <= MAX_THREADS and
          v.BM * v.BK == threads and v.BK * v.BN == threads
    end },
  -- 2-D blocktile: strided loads, aStride = threads/BK rows of A and
  -- bStride = threads/BN rows of B per pass, each dividing its tile.
  { seed = "05_blocktile_2d.cu", keys = { "BM", "BN", "BK", "TM", "TN" },
    grid = { BM = { 64, 128 }, BN = { 64, 128 }, BK = { 8, 16 },
             TM = { 4, 8 }, TN = { 4, 8 } },
    valid = function(v)
      if v.TM ~= v.TN then return false end -- square thread tiles only
      local threads = (v.BM // v.TM) * (v.BN // v.TN)
      return threads <= MAX_THREADS and divides(v.BK, threads) and
          divides(threads // v.BK, v.BM) and divides(v.BN, threads) and
          divides(threads // v.BN, v.BK) and
          (v.BM + v.BN) * v.BK * 4 <= MAX_SMEM and v.TM * v.TN <= MAX_ACC
    end },
  -- Vectorized: one float4 of each tile per thread, so BM*BK/4 = BK*BN/4
  -- = the thread count; float4 register loads need TM, TN % 4 == 0.
  { seed = "06_vectorized.cu", keys = { "BM", "BN", "BK", "TM", "TN" },
    grid = { BM = { 32, 64, 128 }, BN = { 32, 64, 128 },
             BK = { 4, 8, 16, 32 }, TM = { 4, 8 }, TN = { 4, 8 } },
    valid = function(v)
      local threads = (v.BM // v.TM) * (v.BN // v.TN)
      return threads <= MAX_THREADS and v.BM * v.BK // 4 == threads and
          v.BK * v.BN // 4 == threads and (v.BM + v.BN) * v.BK * 4 <= MAX_SMEM
          and v.TM * v.TN <= MAX_ACC
    end },
}

-- Warp tiling (07, and 08 with two buffers): the seed's static_asserts
-- (32 lanes per warp sub-tile, float4 loads dividing the tiles) and the
-- register and shared-memory budget.
local function warp_valid(buffers)
  return function(v)
    if not (divides(v.WM, v.BM) and divides(v.WN, v.BN)) then return false end
    local threads = 32 * (v.BM // v.WM) * (v.BN // v.WN)
    local per_iter = 32 * v.TM * v.TN * v.WNITER
    if threads > MAX_THREADS or not divides(per_iter, v.WM * v.WN) then
      return false
    end
    local wmiter = v.WM * v.WN // per_iter
    local wsubm, wsubn = v.WM // wmiter, v.WN // v.WNITER
    return divides(wmiter, v.WM) and divides(v.WNITER, v.WN) and
        (wsubm // v.TM) * (wsubn // v.TN) == 32 and
        divides(v.TM, wsubm) and divides(v.TN, wsubn) and
        divides(threads, v.BM * v.BK // 4) and
        divides(threads, v.BK * v.BN // 4) and
        buffers * (v.BM + v.BN) * v.BK * 4 <= MAX_SMEM and
        wmiter * v.TM * v.WNITER * v.TN <= MAX_ACC
  end
end
for i, seed in ipairs({ "07_warptile.cu", "08_double_buffer.cu" }) do
  families[#families + 1] = {
    seed = seed,
    keys = { "BM", "BN", "BK", "WM", "WN", "WNITER", "TM", "TN" },
    grid = { BM = { 64, 128 }, BN = { 64, 128 }, BK = { 8, 16 },
             WM = { 32, 64 }, WN = { 32, 64 }, WNITER = { 2 },
             TM = { 4, 8 }, TN = { 4 } },
    valid = function(v)
      -- one warp-tile shape per orientation: 64x32 or 32x64
      return v.WM ~= v.WN and warp_valid(i)(v)
    end,
  }
end
-- Split-K across a warp: lane j < TC writes column j, so TC <= 32.
families[#families + 1] = {
  seed = "09_splitk_warp_reduce.cu", keys = { "WARPS", "TC" },
  grid = { WARPS = { 4, 8, 16 }, TC = { 8, 16 } },
  valid = function(v) return 32 * v.WARPS <= MAX_THREADS and v.TC <= 32 end,
}

-- Every combination of the grid's values, first key slowest.
local function combinations(keys, grid, i, acc, out)
  if i > #keys then
    local copy = {}
    for k, v in pairs(acc) do copy[k] = v end
    out[#out + 1] = copy
    return out
  end
  for _, value in ipairs(grid[keys[i]]) do
    acc[keys[i]] = value
    combinations(keys, grid, i + 1, acc, out)
  end
  return out
end

function M.generate(kl)
  local configs, names = {}, {}
  for _, fam in ipairs(families) do
    local text = kl.seed(fam.seed)
    for _, values in ipairs(combinations(fam.keys, fam.grid, 1, {}, {})) do
      if fam.valid(values) then
        local name = name_of(fam.seed, fam.keys, values)
        if names[name] then error("duplicate configuration " .. name) end
        names[name] = true
        configs[#configs + 1] = { name = name,
                                  source = with_defines(text, values) }
      end
    end
  end
  return configs
end

return M
