--- The checker's CPU meter when it watches turns instead of counting every
-- VM instruction (host/sandbox.c): a turn still running at two ticks of the
-- thread's CPU time, or one whose charged work spends its budget, stops its
-- run, and the run is run again with every instruction counted, as is every
-- later one. The report must be the one a check that counts every
-- instruction gives (EUTAXY_CPU_TICK_US=0); counts.runsCountedAgain says
-- whether a run was run again.
--
-- The bad-input suite's project and its small CPU limit (2 million
-- instructions, so that a loop stops in milliseconds, also under valgrind):
-- EUTAXY_CPU_WATCH_MIN=1 watches turns of that limit, which the checker
-- would otherwise count.
local process = dofile("spec/helpers/process.lua")
local reports = dofile("spec/helpers/reports.lua")
local cjson = require "cjson"

local DIR = "spec/fixtures/bad/"
local LIMITS = "EUTAXY_CPU_LIMIT=2000000 EUTAXY_MEM_LIMIT=16 "
local COUNTED = LIMITS .. "EUTAXY_CPU_TICK_US=0 "
local WATCHED = LIMITS .. "EUTAXY_CPU_TICK_US=1000 EUTAXY_CPU_WATCH_MIN=1 "

-- What differs between the two by design: the wall clock, and the worlds a
-- run run again builds.
local DROPPED = { "elapsedMs", "worldsBuilt", "runsRewound", "runsReused", "runsCountedAgain" }

-- Under valgrind (EUTAXY_VALGRIND) a whole tree of short turns takes
-- minutes: the lease pool's violation is found in three runs, its repair
-- explores its whole tree in the plain and sanitizer passes only.
local VALGRIND = os.getenv("EUTAXY_VALGRIND") ~= nil

local function check(env, file)
  -- no budget: the verdict may not hang on how fast the machine is
  local command = env .. process.bin .. " check " .. file .. " --json --budget-ms 600000"
  local out, err, code = process.run(command)
  local ok, doc = pcall(cjson.decode, out)
  assert(ok and type(doc) == "table" and type(doc.counts) == "table", command .. ": no report\n" .. out .. err)
  return doc, code
end

-- Both checks of file; the watched one's runsCountedAgain.
local function agree(file, watched_env)
  local counted, counted_code = check(COUNTED, file)
  local watched, watched_code = check(watched_env or WATCHED, file)
  local again = watched.counts.runsCountedAgain
  assert.are.equal(0, counted.counts.runsCountedAgain)
  assert.are.equal(counted_code, watched_code)
  for _, field in ipairs(DROPPED) do
    counted.counts[field], watched.counts[field] = nil, nil
  end
  local diff = reports.differences(counted, watched, "counted", "watched")
  assert(#diff == 0, file .. ": the watched check reports otherwise:\n  " .. table.concat(diff, "\n  "))
  return again
end

describe("eutaxy check watching turns instead of counting", function()
  it("runs a loop in an RPC method again counted: the same violation, at the same instruction", function()
    assert.are.equal(1, agree(DIR .. "loop_rpc.sim.lua"))
  end)

  it("runs a loop in the worker's fetch again counted", function()
    assert.are.equal(1, agree(DIR .. "loop_fetch.sim.lua"))
  end)

  it("runs a loop in an alarm again counted", function()
    assert.are.equal(1, agree(DIR .. "loop_alarm.sim.lua"))
  end)

  it("runs a turn whose charged work spends its budget again counted, though it ran no time at all", function()
    assert.are.equal(1, agree(DIR .. "rep_rpc.sim.lua"))
  end)

  it("keeps for charged work only what the instructions it may run uncounted leave of the budget", function()
    -- watched only at 1,500,000 and above: a turn of the limit of 2,000,000
    -- may charge 500,000 uncounted; this one charges 1,000,000 and fails
    local reserve = LIMITS .. "EUTAXY_CPU_TICK_US=1000 EUTAXY_CPU_WATCH_MIN=1500000 "
    assert.are.equal(1, agree(DIR .. "concat_rpc.sim.lua", reserve))
  end)

  it("reports what a counted check does on a table grown to the memory limit", function()
    agree(DIR .. "hog_rpc.sim.lua")
  end)

  it("refuses a tick or a least limit that is not a whole number, naming the variable", function()
    local out, err, code = process.run("EUTAXY_CPU_TICK_US=5ms " .. process.bin .. " check " .. DIR .. "loop_rpc.sim.lua")
    assert.are.equal(2, code, out .. err)
    assert.are.equal("eutaxy check: EUTAXY_CPU_TICK_US must be a whole number from 0 to 1000000, got \"5ms\"\n", err)
    out, err, code = process.run("EUTAXY_CPU_WATCH_MIN=-1 " .. process.bin .. " check " .. DIR .. "loop_rpc.sim.lua")
    assert.are.equal(2, code, out .. err)
    assert.is_truthy(err:find("EUTAXY_CPU_WATCH_MIN must be a whole number from 1 to ", 1, true), err)
  end)

  it("reports what a counted check does on scenarios of short turns", function()
    agree("scenarios/lease-pool/leases.sim.lua")
    if not VALGRIND then agree("scenarios/lease-pool/leases.fixed.sim.lua") end
  end)
end)
