--- The one tree (host/explore.c, eu_search.flat: after the fault-free tree,
-- one tree at the fault cap, every run counted at its own fault count),
-- tested against the trees by fault count (--by-fault-count), on every
-- example scenario and on random ones (spec/fixtures/por-random/generate.lua).
--
-- Without reduction the two explore the same runs and must write the same
-- --json report, field for field, but for the clock and for how many runs
-- it took (counts.elapsedMs, counts.runs and the restorer's counts). With
-- reduction, each tree chooses its own representatives of the orders that
-- commute, so a BOUNDED count may differ; the verdict may not, and a
-- violation is reported as the trees by count report it (the one tree hands
-- a violation over to them), so a VIOLATED report must be the same whole.
-- Every search gets a budget it cannot reach.
local process = dofile("spec/helpers/process.lua")
local reports = dofile("spec/helpers/reports.lua")
local generate = dofile("spec/fixtures/por-random/generate.lua")

local NO_BUDGET = " --budget-ms 600000"
local VALGRIND = os.getenv("EUTAXY_VALGRIND") ~= nil
-- EUTAXY_ONE_TREE_SEEDS=N takes the first N seeds only (the sanitizer build runs 3, see CMakeLists.txt).
local SEEDS = VALGRIND and {} or { 3, 7, 11, 19, 26, 31, 42, 57, 64, 82, 91, 97 }
local wanted = math.tointeger(tonumber(os.getenv("EUTAXY_ONE_TREE_SEEDS") or ""))
while wanted and #SEEDS > wanted do SEEDS[#SEEDS] = nil end
local DROPPED = { "elapsedMs", "elapsedMsSum", "runs", "worldsBuilt", "runsRewound", "runsReused", "runsCountedAgain" }

local sh, quote, show = process.sh, process.quote, reports.show

-- Under the sanitizers (EUTAXY_ONE_TREE_SEEDS), the examples whose bound
-- allows two faults, where the one tree is grown at all (the planted one
-- VIOLATED, so handed back to the trees by count), and the lease pool,
-- where it is not; under memcheck, the planted one alone.
local function scenario_files()
  if VALGRIND then return { "scenarios/outbound-payment/payment.sim.lua" } end
  if os.getenv("EUTAXY_ONE_TREE_SEEDS") then
    return { "scenarios/lease-pool/leases.fixed.sim.lua", "scenarios/outbound-payment/payment.fixed.sim.lua",
             "scenarios/outbound-payment/payment.sim.lua" }
  end
  local files = {}
  for line in sh("find scenarios -name '*.sim.lua' | LC_ALL=C sort"):gmatch("[^\n]+") do files[#files + 1] = line end
  return files
end

local function comparable(doc) return reports.comparable(doc, DROPPED) end

local summary = { checks = 0, one = 0, by_count = 0 }

-- What differs between the one tree's check and the trees by count's, for ARGS.
local function compare(args, exact, found)
  local finish_one = process.start_check(args)
  local finish_by = process.start_check(args .. " --by-fault-count")
  local o, b = finish_one(), finish_by()
  local why = {}
  if not o.doc or not b.doc then
    found[#found + 1] = string.format("a check gave no report:\n  %s: exit %s %s\n  %s: exit %s %s", o.command,
      tostring(o.code), o.err:sub(1, 500), b.command, tostring(b.code), b.err:sub(1, 500))
    return
  end
  if o.code ~= b.code then why[#why + 1] = string.format("exit %s, %s by count", o.code, b.code) end
  if exact or o.doc.verdict == "VIOLATED" or b.doc.verdict == "VIOLATED" then
    reports.differences(comparable(o.doc), comparable(b.doc), "in one tree", "by count", why)
  elseif o.doc.verdict ~= b.doc.verdict then
    why[#why + 1] = string.format("verdict %s in one tree, %s by count", show(o.doc.verdict), show(b.doc.verdict))
  end
  if #why > 0 then
    found[#found + 1] = o.command .. "\n  " .. table.concat(why, "\n  ")
    return
  end
  summary.checks = summary.checks + 1
  if o.doc.verdict == "BOUNDED" then
    summary.one = summary.one + o.doc.counts.runs
    summary.by_count = summary.by_count + b.doc.counts.runs
  end
end

local function settle(found, where)
  if #found > 0 then error(where .. ": one tree and by fault count differ\n" .. table.concat(found, "\n\n"), 0) end
end

describe("the one tree against the trees by fault count", function()
  for _, file in ipairs(scenario_files()) do
    it("reports the same on " .. file, function()
      local found = {}
      compare(quote(file) .. " --no-reduction" .. NO_BUDGET, true, found)
      compare(quote(file) .. NO_BUDGET, false, found)
      settle(found, file)
    end)
  end

  local root = #SEEDS > 0 and sh("mktemp -d -t eutaxy-one-tree.XXXXXX"):gsub("%s+$", "") or nil
  for _, seed in ipairs(SEEDS) do
    it("reports the same on random scenario " .. seed, function()
      local dir = root .. "/seed-" .. seed
      local sim = dir .. "/por.sim.lua"
      local found = {}
      sh("mkdir -p " .. quote(dir))
      generate.write(seed, dir)
      compare(quote(sim) .. " --end-states --no-reduction" .. NO_BUDGET, true, found)
      compare(quote(sim) .. " --end-states" .. NO_BUDGET, false, found)
      settle(found, string.format("seed %d (%s run spec/fixtures/por-random/generate.lua %d DIR)", seed,
        process.bin, seed))
      sh("rm -rf " .. quote(dir))
    end)
  end

  it("ran fewer runs in one tree where the checks ended BOUNDED, and says how many", function()
    io.stdout:write(string.format("# one tree: %d checks agreed; the BOUNDED ones took %d runs in one tree, "
      .. "%d by fault count\n", summary.checks, summary.one, summary.by_count))
    assert.is_true(summary.one <= summary.by_count)
    if not VALGRIND then assert.is_true(summary.one < summary.by_count) end
    if root then sh("rm -rf " .. quote(root)) end
  end)
end)
