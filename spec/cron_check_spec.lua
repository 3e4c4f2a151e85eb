--- `eutaxy check` with cron triggers: crons fire in virtual time, as many
-- as bounds.cronsPerRun lets a run have, each firing a fault point of its
-- own (cron-fail, cron-lost), and the example's race between a sweeper and
-- a request is found; its repair is BOUNDED.
local C = dofile("spec/helpers/check.lua")

local FIX = "spec/fixtures/cron/check/"
local SWEEP = "scenarios/cron-sweep/holds.sim.lua"
local SWEEP_FIXED = "scenarios/cron-sweep/holds.fixed.sim.lua"
local check, check_json, trace_section = C.run, C.json, C.trace_section

local function scenario_file(text)
  local path = FIX .. "tmp_" .. tostring(os.time()) .. "_" .. math.random(1e9) .. ".sim.lua"
  local f = assert(io.open(path, "w"))
  f:write(text)
  f:close()
  return path
end

describe("eutaxy check with crons", function()
  it("sees a one-minute cron 60 times in a virtual hour (cronsPerRun 64 with a quarter-hour cron)", function()
    local out, err, code = check(FIX .. "hour.sim.lua --check-determinism" .. C.NO_BUDGET)
    assert.are.equal(0, code, out .. err)
    assert.matches("^BOUNDED  cron%-hour", out)
    -- the quarter-hour cron ties with the minute one four times: both orders each time
    assert.matches("16 schedules", out)
    assert.matches("cronsPerRun 64\n", out)
  end)

  it("fires each cron once, when first due, when cronsPerRun is left out", function()
    local out, err, code = check(FIX .. "once.sim.lua" .. C.NO_BUDGET)
    assert.are.equal(0, code, out .. err)
    assert.matches("cronsPerRun each cron once\n", out)
  end)

  it("runs a firing again after cron-lost, and says so in the trace", function()
    local out, err, code = check(FIX .. "faults.sim.lua" .. C.NO_BUDGET)
    assert.are.equal(1, code, out .. err)
    assert.matches("Invariant one%-tick%-per%-firing is violated: %* %* %* %* %* due 1767225660000 ticked twice", out)
    assert.is_true(C.has_line(out, "  cron-lost at cron-1#1"), out)
    local trace = trace_section(out)
    assert.matches("cron%-1#1  its outcome is lost: it will run again", trace)
    assert.matches("62%.000s  cron%-1#2  fires: %* %* %* %* %*, due 2026%-01%-01T00:01:00Z %(retry 1%)", trace)
  end)

  it("retries a firing after cron-fail, 2 s later, with the time it was due", function()
    local doc, code = check_json(FIX .. "fail_only.sim.lua" .. C.NO_BUDGET)
    assert.are.equal(0, code)
    assert.are.equal("BOUNDED", doc.verdict)
    assert.are.same({ "a-retry-ticks-late" }, doc.reached)
    assert.are.same({ "cron-fail" }, C.find_point(doc.coverage, "cron-1").tried)
  end)

  it("offers cron-fail and cron-lost only to a worker with crons", function()
    local doc = check_json(SWEEP_FIXED .. C.NO_BUDGET)
    assert.are.same({ "cron-fail", "cron-lost" }, C.find_point(doc.coverage, "cron-1").tried)
    assert.are.equal(2, doc.bounds.cronsPerRun)
    local leases = check_json("scenarios/lease-pool/leases.fixed.sim.lua" .. C.NO_BUDGET)
    for _, k in ipairs(leases.faultKinds) do assert.is_nil(k:find("^cron"), k) end
    assert.is_nil(leases.bounds.cronsPerRun)
  end)

  it("refuses a cronsPerRun out of range, with the file and line", function()
    for _, bad in ipairs({ "0", "100001", "1.5" }) do
      local path = scenario_file(('return require("eutaxy.check").variant("once.sim.lua", { bounds = { cronsPerRun = %s } })\n')
        :format(bad))
      local out, err, code = check(path)
      os.remove(path)
      assert.are.equal(2, code, out .. err)
      assert.matches("bounds%.cronsPerRun must be", err)
    end
  end)
end)

describe("eutaxy check on the cron-sweep example", function()
  it("finds the sweeper's release racing a confirmation, with no fault", function()
    local out, err, code = check(SWEEP .. C.NO_BUDGET)
    assert.are.equal(1, code, out .. err)
    assert.matches("Invariant every%-order%-keeps%-its%-hold is violated: seat a%-1 was ordered, but its hold is gone", out)
    assert.is_true(C.has_line(out, "  no fault: the events' interleaving alone"), out)
    local trace = trace_section(out)
    local asks = trace:find('cron%-1#1  calls DO:INVENTORY%(inventory%) "expired"')
    local confirms = trace:find("req%-2>INVENTORY%.confirm  returned true")
    local releases = trace:find('cron%-1#1  calls DO:INVENTORY%(inventory%) "release", { "a%-1" }')
    assert.is_truthy(asks and confirms and releases, trace)
    assert.is_true(asks < confirms and confirms < releases, trace)
  end)

  it("replays the violation byte for byte", function()
    local out = check(SWEEP .. C.NO_BUDGET)
    local schedule = out:match("%-%-replay (%S+)\n?$")
    local a = check(SWEEP .. " --replay " .. schedule)
    local b = check(SWEEP .. " --replay " .. schedule)
    assert.are.equal(a, b)
    assert.matches("^VIOLATED  holds", a)
  end)

  it("finds the repair BOUNDED under every fault kind, the sweep reached", function()
    local doc, code = check_json(SWEEP_FIXED .. " --check-determinism" .. C.NO_BUDGET)
    assert.are.equal(0, code)
    assert.are.equal("BOUNDED", doc.verdict)
    assert.are.same({ "a-hold-is-swept" }, doc.reached)
    assert.is_truthy(C.find_point(doc.coverage, "cron-1 while the worker waits for effect #0 (DO:INVENTORY expired)"))
  end)
end)
