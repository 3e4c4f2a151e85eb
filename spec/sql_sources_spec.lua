--- SQLite's clock and random source inside a check: 'now' (julianday('now'),
-- a column's DEFAULT CURRENT_TIMESTAMP) is the object's virtual time, and
-- random() and randomblob() draw from the run's PRNG, so two processes
-- checking spec/fixtures/sql-sources write the same rows, restored or with
-- --no-restore. Before, SQLite read the machine's clock and a PRNG it
-- seeded from /dev/urandom.
local process = dofile("spec/helpers/process.lua")
local reports = dofile("spec/helpers/reports.lua")

local FILE = "spec/fixtures/sql-sources/log.sim.lua"
local DROPPED = { "elapsedMs", "worldsBuilt", "runsRewound", "runsReused", "runsCountedAgain" }

local function check(extra)
  local r = process.start_check(FILE .. " --end-states" .. (extra or ""))()
  assert.is_table(r.doc, r.command .. ": no report\n" .. r.out .. r.err)
  return r.doc, r.code
end

describe("SQL's clock and random source in a check", function()
  it("are the object's virtual time and the run's PRNG, the same in every process and mode", function()
    local a, code = check()
    assert.are.equal("BOUNDED", a.verdict, a.message)
    assert.are.equal(0, code)
    assert.is_true(#a.endStates >= 3, "end states: " .. #a.endStates)
    local b = check()
    local c = check(" --no-restore")
    local why = {}
    reports.differences(reports.comparable(a, DROPPED), reports.comparable(b, DROPPED), "first process",
      "second process", why)
    reports.differences(reports.comparable(a, DROPPED), reports.comparable(c, DROPPED), "restored",
      "with --no-restore", why)
    assert.are.equal(0, #why, table.concat(why, "\n"))
  end)

  it("leave a schedule's rows as every run of it writes them", function()
    local doc = check(" --check-determinism")
    assert.are.equal("BOUNDED", doc.verdict, doc.message)
  end)
end)
