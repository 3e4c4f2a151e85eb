--- The restorer (host/lcheck.c: one world kept for the whole search and
-- rewound to a checkpoint before each run; and host/explore.c's reuse: a
-- run of the tree that the sweep ran already played back from the sweep's
-- log of it, not run), tested against building every run's world from
-- scratch and running every run (--no-restore): the two must write the same
-- --json report, field for field, on every example scenario, on random
-- scenarios (spec/fixtures/por-random/generate.lua, one per seed) with
-- reduction, with --no-reduction and with --check-determinism, and on the
-- replay of a violation's schedule.
--
-- What may differ, and is removed before the reports are compared:
--   counts.elapsedMs, counts.elapsedMsSum   the wall clock (the sum is in
--                                           merged reports only)
--   counts.runsCountedAgain                 a run of turns watched, not
--                                           counted, run again counted
--                                           because one ran long: the
--                                           machine's speed decides
--   counts.worldsBuilt, counts.runsRewound, the restorer's own counts,
--   counts.runsReused                       asserted on their own: a
--                                           restored search of more than
--                                           one run rewound at least once,
--                                           --no-restore builds a world
--                                           for every run, rewinds none and
--                                           plays none back, and the
--                                           restored checks played back some
-- Everything else (verdict, schedule, counts, coverage, violation, rows,
-- trace, timeline, faults, end states, fingerprint) must be equal. Every
-- search gets a budget it cannot reach: a budget that ran out in one mode
-- only would make the counts differ for the clock's sake.
--
-- EUTAXY_RESTORE_SEEDS=N and EUTAXY_RESTORE_FIRST_SEED=S run N seeds from
-- S instead of the default 60 from 1 (the sanitizer build runs 10, see
-- CMakeLists.txt). A failing seed's project is kept where the failure says,
-- with the commands that rerun it.
local process = dofile("spec/helpers/process.lua")
local reports = dofile("spec/helpers/reports.lua")
local generate = dofile("spec/fixtures/por-random/generate.lua")

local NO_BUDGET = " --budget-ms 600000"

-- Under valgrind (EUTAXY_VALGRIND, see CMakeLists.txt) every run is about 30
-- times slower: three small scenarios (a BOUNDED one of 5 runs, its planted
-- twin with a shrunk violation, a fixed one whose sometimes probe is looked
-- at between turns) and two seeds (26: BOUNDED in 7 runs with a reset
-- fault; 82: VIOLATED in 5 runs with faults, then shrunk) still take the
-- restorer through memcheck.
local VALGRIND = os.getenv("EUTAXY_VALGRIND") ~= nil
local SEEDS = { first = 1, count = 60 }
if VALGRIND then SEEDS = { list = { 26, 82 } } end
if os.getenv("EUTAXY_RESTORE_SEEDS") then
  SEEDS = { first = math.tointeger(tonumber(os.getenv("EUTAXY_RESTORE_FIRST_SEED") or "1")),
            count = assert(math.tointeger(tonumber(os.getenv("EUTAXY_RESTORE_SEEDS"))),
              "EUTAXY_RESTORE_SEEDS: a number") }
end
if not SEEDS.list then
  SEEDS.list = {}
  for i = 0, SEEDS.count - 1 do SEEDS.list[#SEEDS.list + 1] = SEEDS.first + i end
end

local sh, quote = process.sh, process.quote

local function scenario_files()
  if VALGRIND then
    return { "scenarios/alarm-double/billing.fixed.sim.lua", "scenarios/alarm-double/billing.sim.lua",
             "scenarios/never-reached/redeem.fixed.sim.lua" }
  end
  local files = {}
  for line in sh("find scenarios -name '*.sim.lua' | LC_ALL=C sort"):gmatch("[^\n]+") do files[#files + 1] = line end
  return files
end

local ROOT = sh("mktemp -d -t eutaxy-restore.XXXXXX"):gsub("%s+$", "")

-- ---- running both modes -------------------------------------------------

-- Starts `eutaxy check ARGS --json` (process.start_check).
local start = process.start_check

-- The same check restored and with --no-restore, the two at once.
local function both(args)
  local finish_restored = start(args)
  local finish_rebuilt = start(args .. " --no-restore")
  return finish_restored(), finish_rebuilt()
end

local EXIT = { BOUNDED = 0, VIOLATED = 1, NONDETERMINISTIC = 1, INCONCLUSIVE = 3 }

local DROPPED = { "elapsedMs", "elapsedMsSum", "worldsBuilt", "runsRewound", "runsReused", "runsCountedAgain" }

local function comparable(doc) return reports.comparable(doc, DROPPED) end

local show = reports.show

local function describe_run(r)
  return string.format("%s\n  exit %s, verdict %s%s", r.command, tostring(r.code),
    r.doc and tostring(r.doc.verdict) or "-",
    r.doc and "" or ("\n  stdout: " .. r.out:sub(1, 2000) .. "\n  stderr: " .. r.err:sub(1, 2000)))
end

local summary = { checks = 0, runs = 0, rewound = 0, built = 0, reused = 0, replays = 0, determinism = 0,
                  verdicts = {} }

-- Nil when the restored check r and the rebuilt one n agree, else why not.
local function disagreement(r, n)
  local both_runs = "restored: " .. describe_run(r) .. "\nrebuilt: " .. describe_run(n)
  if not r.doc or not n.doc then return "a check gave no report\n" .. both_runs end
  local rc, nc = r.doc.counts or {}, n.doc.counts or {}
  local why = {}
  if r.code ~= n.code then why[#why + 1] = string.format("exit %s restored, %s with --no-restore", r.code, n.code) end
  -- the same wrong exit in both modes is no agreement (valgrind's 99 is one)
  for _, run in ipairs({ r, n }) do
    if run.code ~= EXIT[run.doc.verdict] then
      why[#why + 1] = string.format("exit %s after %s: %s", run.code, show(run.doc.verdict), run.command)
    end
  end
  reports.differences(comparable(r.doc), comparable(n.doc), "restored", "with --no-restore", why)
  if (rc.runs or 0) > 1 and not ((rc.runsRewound or 0) > 0) then
    why[#why + 1] = string.format("the restored check ran %d runs and rewound none (counts.runsRewound %s)",
      rc.runs, show(rc.runsRewound))
  end
  if not ((rc.worldsBuilt or 0) >= 1) then
    why[#why + 1] = "the restored check built no world (counts.worldsBuilt " .. show(rc.worldsBuilt) .. ")"
  end
  if nc.runsRewound ~= 0 or not ((nc.worldsBuilt or 0) >= (nc.runs or 0)) then
    why[#why + 1] = string.format("--no-restore kept a world: counts.worldsBuilt %s for %s runs, counts.runsRewound %s",
      show(nc.worldsBuilt), show(nc.runs), show(nc.runsRewound))
  end
  if nc.runsReused ~= 0 then
    why[#why + 1] = "--no-restore played runs back: counts.runsReused " .. show(nc.runsReused)
  end
  if #why > 0 then return table.concat(why, "\n") .. "\n" .. both_runs end
  summary.checks = summary.checks + 1
  summary.runs = summary.runs + (rc.runs or 0)
  summary.rewound = summary.rewound + rc.runsRewound
  summary.built = summary.built + rc.worldsBuilt
  summary.reused = summary.reused + (rc.runsReused or 0)
  summary.verdicts[r.doc.verdict] = (summary.verdicts[r.doc.verdict] or 0) + 1
  return nil
end

-- What went wrong (found: a list of paragraphs), raised at once, so one
-- scenario reports every comparison that failed, not only the first.
local function settle(found, where)
  if #found > 0 then
    error(where .. ": the restored check and --no-restore differ\n" .. table.concat(found, "\n\n"), 0)
  end
end

-- Runs ARGS in both modes; notes in found what differs (under the heading
-- what); returns the restored run.
local function compare(args, what, found)
  local r, n = both(args)
  local why = disagreement(r, n)
  if why then found[#found + 1] = what .. ":\n" .. why end
  return r
end

-- The replay of a violation's schedule, in both modes.
local function compare_replay(file, doc, found)
  if type(doc.schedule) ~= "string" then
    found[#found + 1] = "a violation without a schedule"
    return
  end
  local r = compare(quote(file) .. " --replay " .. doc.schedule, "--replay " .. doc.schedule, found)
  if r.doc and r.doc.verdict ~= "VIOLATED" then
    found[#found + 1] = "its schedule replays as " .. tostring(r.doc.verdict) .. ": " .. describe_run(r)
  end
  summary.replays = summary.replays + 1
end

-- The check with --check-determinism, in both modes: every schedule run
-- rewound and again in a world built for it must agree.
local function compare_determinism(file, found)
  local r = compare(quote(file) .. " --check-determinism" .. NO_BUDGET, "--check-determinism", found)
  if not r.doc or r.doc.verdict == "NONDETERMINISTIC" then
    found[#found + 1] = "--check-determinism: a rewound run and a fresh one differ\n" .. describe_run(r)
  end
  summary.determinism = summary.determinism + 1
  return r
end

-- ---- the specs -------------------------------------------------------------

describe("the restored check against --no-restore on the example scenarios", function()
  for _, file in ipairs(scenario_files()) do
    it("writes the same report for " .. file, function()
      local found = {}
      local r = compare(quote(file) .. NO_BUDGET, "the search", found)
      if r.doc and r.doc.verdict == "VIOLATED" then compare_replay(file, r.doc, found) end
      settle(found, file)
    end)
  end
end)

-- An object that remembers in a weak table: the collector decides its
-- answer, so a world built for a run must collect as the kept world does.
-- With 500 and 1000 the old pace of built worlds (less often) kept the
-- first order where the kept world's had let it go. Not under valgrind,
-- where it would take a minute and its memory is the same as elsewhere.
describe("the restored check against --no-restore where a weak table shows the collector", function()
  for _, junk in ipairs(VALGRIND and {} or { 400, 500, 1000 }) do
    local file = "spec/fixtures/weak-gc/weak" .. junk .. ".sim.lua"
    it("writes the same report for " .. file .. ", and each run again in a world built for it agrees", function()
      local found = {}
      local r = compare(quote(file) .. NO_BUDGET, "the search", found)
      if r.doc and r.doc.verdict == "VIOLATED" then compare_replay(file, r.doc, found) end
      compare_determinism(file, found)
      settle(found, file)
    end)
  end
end)

-- An object that meets its memory limit in most runs: the kept world's
-- databases hold more than a built world's (the checkpoints' journals),
-- so each such run is run again in a world built for it, and the kept
-- world is built again after it; the report is --no-restore's all the same.
-- Not under valgrind, as the weak tables above.
describe("the restored check against --no-restore where an object meets its memory limit", function()
  local file = "spec/fixtures/limit-met/tally.sim.lua"
  if VALGRIND then return end
  it("writes the same report for " .. file .. ", each run that met the limit run again in a built world", function()
    local found = {}
    local r = compare(quote(file) .. NO_BUDGET, "the search", found)
    settle(found, file)
    local c = r.doc.counts
    assert.is_true(c.worldsBuilt > c.runsRewound + 2,
      string.format("%d worlds built and %d runs rewound in %d runs: no run met the limit again in a built world",
        c.worldsBuilt, c.runsRewound, c.runs))
  end)
end)

describe("the restored check against --no-restore on random scenarios", function()
  for i, seed in ipairs(SEEDS.list) do
    -- every fifth seed also without reduction, and every fifth (another)
    -- with --check-determinism, which runs each schedule again in a world
    -- built for it and compares: a rewound run with a fresh one
    local full, twice = i % 5 == 1, i % 5 == 2
    local title = generate.summary(generate.plan(seed)):gsub("^seed %d+: ", "")
    it("writes the same report for random scenario " .. seed
      .. (full and " (and with --no-reduction)" or twice and " (and with --check-determinism)" or "")
      .. ": " .. title, function()
      local dir = ROOT .. "/seed-" .. seed
      local sim = dir .. "/por.sim.lua"
      local found = {}
      sh("mkdir -p " .. quote(dir))
      generate.write(seed, dir)
      local r = compare(quote(sim) .. " --end-states" .. NO_BUDGET, "the search", found)
      if r.doc and r.doc.verdict == "VIOLATED" then compare_replay(sim, r.doc, found) end
      if full then
        r = compare(quote(sim) .. " --end-states --no-reduction" .. NO_BUDGET, "--no-reduction", found)
        if r.doc and r.doc.counts and r.doc.counts.reduction ~= false then
          found[#found + 1] = "--no-reduction ran with reduction " .. show(r.doc.counts.reduction)
        end
      end
      if twice then compare_determinism(sim, found) end
      settle(found, string.format("seed %d (the project is kept in %s; or write it again with "
        .. "%s run spec/fixtures/por-random/generate.lua %d DIR)", seed, dir, process.bin, seed))
      sh("rm -rf " .. quote(dir))
    end)
  end

  it("compared enough to mean something, and says how much", function()
    local verdicts = {}
    for v, k in pairs(summary.verdicts) do verdicts[#verdicts + 1] = k .. " " .. v end
    table.sort(verdicts)
    io.stdout:write(string.format("# restore: %d checks agreed (%s), %d with --check-determinism, %d replays; "
      .. "restored, %d runs in all: %d rewound, %d played back, %d worlds built\n", summary.checks,
      table.concat(verdicts, ", "), summary.determinism, summary.replays, summary.runs, summary.rewound,
      summary.reused, summary.built))
    -- the fixed lease pool alone plays back every run of its sweep
    if not VALGRIND then assert.is_true(summary.reused > 0, "no run was played back") end
    if #SEEDS.list >= 50 then
      assert.is_true((summary.verdicts.VIOLATED or 0) >= 5, "few checks VIOLATED")
      assert.is_true(summary.rewound >= summary.runs // 2, summary.rewound .. " of " .. summary.runs .. " rewound")
    end
    -- a failing seed's project stays where its failure said
    local _, _, kept = process.run("ls " .. quote(ROOT) .. " | grep -q seed-")
    if kept ~= 0 then sh("rm -rf " .. quote(ROOT)) end
  end)
end)
