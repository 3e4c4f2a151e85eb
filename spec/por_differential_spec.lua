--- The explorer's reduction, tested against the full search: on random
-- small scenarios (spec/fixtures/por-random/generate.lua, one per seed), a
-- search with reduction and one with --no-reduction must reach the same
-- verdict; when it is BOUNDED, the same set of end states (--end-states);
-- when VIOLATED, the reduced search's schedule must replay as VIOLATED. A
-- scenario whose full search runs out of its budget (INCONCLUSIVE) proves
-- nothing and is skipped, and counted as such.
--
-- EUTAXY_POR_SEEDS=N and EUTAXY_POR_FIRST_SEED=S run N seeds from S instead
-- of the default range. A failing seed's project is kept where the failure
-- says, with the commands that rerun it; the generator writes it again:
--   eutaxy run spec/fixtures/por-random/generate.lua SEED DIR
local process = dofile("spec/helpers/process.lua")
local generate = dofile("spec/fixtures/por-random/generate.lua")

-- Under valgrind (EUTAXY_VALGRIND, see CMakeLists.txt) every run is about 30
-- times slower: four seeds whose full searches are a few schedules each (an
-- alarm and a chain, a reset, a violation with faults, a sleep), with a
-- budget to match, still take the reduction through memcheck. (Chosen for
-- what this generator makes of them: pick others if it changes.)
local VALGRIND = os.getenv("EUTAXY_VALGRIND") ~= nil
local SEEDS = { first = 1, count = 200, budget = nil }
if VALGRIND then SEEDS = { list = { 2, 26, 82, 101 }, budget = 600000 } end
if os.getenv("EUTAXY_POR_SEEDS") then
  SEEDS = { first = math.tointeger(tonumber(os.getenv("EUTAXY_POR_FIRST_SEED") or "1")),
            count = assert(math.tointeger(tonumber(os.getenv("EUTAXY_POR_SEEDS"))), "EUTAXY_POR_SEEDS: a number") }
end
if not SEEDS.list then
  SEEDS.list = {}
  for i = 0, SEEDS.count - 1 do SEEDS.list[#SEEDS.list + 1] = SEEDS.first + i end
end
-- The reduced search should never take longer than the full one: when it
-- runs out of the budget the full one kept to, it runs again with one it
-- cannot reach before its verdict counts, so a loaded machine fails nothing.
-- (Not at once: a violation is shrunk until the budget ends.)
local RETRY_BUDGET = VALGRIND and 600000 or 60000

local sh, quote = process.sh, process.quote

local ROOT = sh("mktemp -d -t eutaxy-por.XXXXXX"):gsub("%s+$", "")

-- Starts `eutaxy check ARGS --json`; finish() waits for it and returns the
-- document (or nil), stdout, stderr and the exit code. Two started before
-- either is finished run at once.
local function start(args)
  local finish = process.start_check(args)
  return function()
    local r = finish()
    return r.doc, r.out, r.err, r.code, r.command
  end
end

local function describe_run(doc, out, err, code, command)
  return string.format("%s\n  exit %s, verdict %s%s", command, tostring(code), doc and tostring(doc.verdict) or "-",
    doc and "" or ("\n  stdout: " .. out:sub(1, 2000) .. "\n  stderr: " .. err:sub(1, 2000)))
end

local function set_of(list)
  local t = {}
  for _, x in ipairs(list or {}) do t[x] = true end
  return t
end

-- The digests in a and not in b.
local function missing(a, b)
  local in_b, out = set_of(b), {}
  for _, x in ipairs(a or {}) do if not in_b[x] then out[#out + 1] = x end end
  return out
end

local summary = { failed = 0, run = 0, skipped = 0, bounded = 0, violated = 0, fewer = 0, full = 0, reduced = 0 }

-- Runs one seed; returns nil when the searches agree (or it was skipped), else
-- what differs.
local function differential(seed, dir)
  local sim = dir .. "/por.sim.lua"
  local args = quote(sim) .. " --end-states --quiet" .. (SEEDS.budget and (" --budget-ms " .. SEEDS.budget) or "")
  local finish_full = start(args .. " --no-reduction")
  local finish_reduced = start(args)
  local full, fout, ferr, fcode, fcommand = finish_full()
  local reduced, rout, rerr, rcode, rcommand = finish_reduced()
  if reduced and reduced.verdict == "INCONCLUSIVE" and full and full.verdict ~= "INCONCLUSIVE" then
    reduced, rout, rerr, rcode, rcommand = start(args .. " --budget-ms " .. RETRY_BUDGET)()
  end
  local both = "full search: " .. describe_run(full, fout, ferr, fcode, fcommand)
    .. "\nreduced search: " .. describe_run(reduced, rout, rerr, rcode, rcommand)
  if not full or not (full.verdict == "BOUNDED" or full.verdict == "VIOLATED" or full.verdict == "INCONCLUSIVE") then
    return "the full search gave no verdict\n" .. both
  end
  if full.verdict == "INCONCLUSIVE" then
    summary.skipped = summary.skipped + 1
    return nil
  end
  summary.run = summary.run + 1
  if not reduced then return "the reduced search gave no verdict\n" .. both end
  -- the explorer says which search it ran: one of each is no comparison
  if full.counts.reduction ~= false or reduced.counts.reduction ~= true then
    return string.format("the searches ran with reduction %s and %s, not false and true\n%s",
      tostring(full.counts.reduction), tostring(reduced.counts.reduction), both)
  end
  if reduced.verdict ~= full.verdict then
    return string.format("the verdicts differ: %s without reduction, %s with it\n%s", full.verdict,
      reduced.verdict, both)
  end
  if full.verdict == "BOUNDED" then
    summary.bounded = summary.bounded + 1
    local only_full, only_reduced = missing(full.endStates, reduced.endStates),
      missing(reduced.endStates, full.endStates)
    if #only_full > 0 or #only_reduced > 0 then
      return string.format("the end states differ: %d in both searches, %d only without reduction (%s), "
        .. "%d only with it (%s)\n%s", #full.endStates - #only_full, #only_full, table.concat(only_full, " "),
        #only_reduced, table.concat(only_reduced, " "), both)
    end
    summary.full, summary.reduced = summary.full + full.counts.schedules, summary.reduced + reduced.counts.schedules
    if reduced.counts.schedules < full.counts.schedules then summary.fewer = summary.fewer + 1 end
    if reduced.counts.schedules > full.counts.schedules then
      return string.format("the reduced search ran more schedules (%d) than the full one (%d)\n%s",
        reduced.counts.schedules, full.counts.schedules, both)
    end
  else
    summary.violated = summary.violated + 1
    if type(reduced.schedule) ~= "string" then return "the reduced search's violation has no schedule\n" .. both end
    local again, aout, aerr, acode, acommand = start(quote(sim) .. " --quiet --replay " .. reduced.schedule)()
    if not again or again.verdict ~= "VIOLATED" or acode ~= 1 then
      return "the reduced search's schedule does not replay as VIOLATED\n" .. both .. "\nreplay: "
        .. describe_run(again, aout, aerr, acode, acommand)
    end
  end
  return nil
end

describe("the scenario generator", function()
  it("writes the same files for the same seed, in this process and another", function()
    local dir = ROOT .. "/same"
    sh("mkdir -p " .. quote(dir))
    for _, seed in ipairs({ 1, 7, 123456789 }) do
      local files = generate.files(seed)
      assert.are.same(files, (generate.files(seed)))
      sh(process.bin .. " run spec/fixtures/por-random/generate.lua " .. seed .. " " .. quote(dir))
      for _, name in ipairs(generate.NAMES) do
        assert.are.equal(files[name], process.read(dir .. "/" .. name), "seed " .. seed .. ": " .. name)
      end
    end
  end)

  it("writes different scenarios for different seeds", function()
    local seen, distinct = {}, 0
    for seed = 1, 40 do
      local worker = generate.files(seed)["worker.lua"]
      if not seen[worker] then distinct = distinct + 1 end
      seen[worker] = true
    end
    assert.is_true(distinct >= 38, distinct .. " distinct workers of 40")
  end)
end)

describe("the reduced search against the full one (--no-reduction)", function()
  for _, seed in ipairs(SEEDS.list) do
    it("agrees on random scenario " .. seed .. ": " .. generate.summary(generate.plan(seed)):gsub("^seed %d+: ", ""),
      function()
        local dir = ROOT .. "/seed-" .. seed
        sh("mkdir -p " .. quote(dir))
        generate.write(seed, dir)
        local why = differential(seed, dir)
        if why then
          summary.failed = summary.failed + 1
          local sim = quote(dir .. "/por.sim.lua")
          error(string.format("seed %d: %s\nThe project is kept in %s; rerun it with\n"
            .. "  %s check %s --no-reduction --end-states --json\n"
            .. "  %s check %s --end-states --json\n"
            .. "or write it again with %s run spec/fixtures/por-random/generate.lua %d DIR",
            seed, why, dir, process.bin, sim, process.bin, sim, process.bin, seed), 0)
        end
        sh("rm -rf " .. quote(dir))
      end)
  end

  it("ran enough of them to mean something, and says how many", function()
    io.stdout:write(string.format("# por differential: %d seeds, %d compared (%d BOUNDED, %d VIOLATED), "
      .. "%d skipped (full search INCONCLUSIVE); %d had fewer schedules with reduction "
      .. "(BOUNDED: %d schedules in all without it, %d with it)\n", #SEEDS.list, summary.run, summary.bounded,
      summary.violated, summary.skipped, summary.fewer, summary.full, summary.reduced))
    if #SEEDS.list >= 50 then
      assert.is_true(summary.skipped <= #SEEDS.list // 10, summary.skipped .. " skipped")
      assert.is_true(summary.bounded >= #SEEDS.list // 2, summary.bounded .. " BOUNDED")
      assert.is_true(summary.violated >= 1, "no seed VIOLATED")
    end
    -- a failing seed's project stays where its failure said
    if summary.failed == 0 then sh("rm -rf " .. quote(ROOT)) end
  end)
end)
