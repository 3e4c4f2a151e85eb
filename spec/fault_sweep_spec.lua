--- The sweep `eutaxy check` runs before its tree: every fault point tried
-- with every kind it offers, one schedule each, so that a search the budget
-- cuts short has still tried them all.
local check = dofile("spec/helpers/check.lua")

-- The fanout shop with batchDelayMs = 0: its full search (--no-reduction)
-- runs for many minutes, its sweep for well under a second.
local OUTBOX = "bench/check/outbox/outbox.sim.lua"

describe("the fault sweep", function()
  it("has tried every kind at every point it offered with a fault left when the budget ends the search", function()
    if os.getenv("EUTAXY_VALGRIND") then return end  -- a budget of seconds is the sweep's alone there
    local doc, code = check.json(OUTBOX .. " --no-reduction --budget-ms 8000")
    assert.are.equal(3, code)
    assert.are.equal("INCONCLUSIVE", doc.verdict)
    assert.is_true(doc.counts.sweepRuns > 0)
    local kinds = {}
    for _, row in ipairs(doc.coverage) do
      for _, k in ipairs(row.tried) do kinds[k] = true end
      -- what was never tried was only ever offered once the run's one fault was spent
      if #row.untried > 0 then
        assert.are.equal("the run's faults were spent: maxFaultsPerRun", row.whyUntried, row.point)
      end
    end
    for _, k in ipairs(doc.faultKinds) do assert.is_true(kinds[k], k .. " never tried") end
  end)

  it("counts no schedule twice: the tree skips what the sweep ran", function()
    local reduced = check.json("scenarios/lease-pool/leases.fixed.sim.lua" .. check.NO_BUDGET)
    local full = check.json("scenarios/lease-pool/leases.fixed.sim.lua" .. check.NO_BUDGET .. " --no-reduction")
    assert.is_true(reduced.counts.sweepRuns > 0)
    -- the full tree of the fixed lease pool has 25 schedules, whichever part ran them
    assert.is_true(full.counts.sweepRuns > 0)
    assert.are.equal(25, full.counts.schedules)
    assert.are.equal(17, reduced.counts.schedules)
  end)
end)
