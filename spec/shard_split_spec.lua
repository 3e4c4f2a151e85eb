--- How `eutaxy check --shard K/N` splits a search: each shard about 1/N of
-- the runs, and together exactly the schedules of one search, reduced or not.
local check = dofile("spec/helpers/check.lua")

-- The counts are checked on the fixed lease pool and the fanout shop, the
-- balance on wide-small, which has enough fault sets to balance; under
-- valgrind (EUTAXY_VALGRIND, see CMakeLists.txt) that one is too slow.
local valgrind = os.getenv("EUTAXY_VALGRIND") ~= nil
local LEASES = "scenarios/lease-pool/leases.fixed.sim.lua"
local SHOP = "scenarios/fanout/orders.fixed.sim.lua"
local WIDE = "bench/check/wide/wide-small.sim.lua"
local DISJOINT = "bench/check/por/disjoint.sim.lua"

local function shards(file, n, extra)
  local docs = {}
  for k = 1, n do
    local doc, code = check.json(file .. " --shard " .. k .. "/" .. n .. check.NO_BUDGET .. (extra or ""))
    assert.are.equal(0, code)
    assert.are.equal("BOUNDED", doc.verdict)
    docs[k] = doc
  end
  return docs
end

local function total(docs, field)
  local sum = 0
  for _, d in ipairs(docs) do sum = sum + d.counts[field] end
  return sum
end

describe("eutaxy check --shard K/N", function()
  it("counts in three reduced shards exactly the schedules of one reduced search", function()
    for _, file in ipairs(valgrind and { LEASES } or { LEASES, SHOP }) do
      local whole = check.json(file .. check.NO_BUDGET)
      assert.are.equal(whole.counts.schedules, total(shards(file, 3), "schedules"))
    end
  end)

  it("counts in three full shards exactly the schedules of one full search", function()
    local full = check.json(LEASES .. check.NO_BUDGET .. " --no-reduction")
    assert.are.equal(full.counts.schedules, total(shards(LEASES, 3, " --no-reduction"), "schedules"))
  end)

  it("gives each of four shards of the wide scenario its quarter of the runs, within 25%", function()
    if valgrind then return end
    local docs = shards(WIDE, 4)
    local mean = total(docs, "runs") / 4
    for k, d in ipairs(docs) do
      assert.is_true(math.abs(d.counts.runs - mean) <= 0.25 * mean,
        ("shard %d/4 ran %d runs, the mean is %.0f"):format(k, d.counts.runs, mean))
    end
  end)

  it("splits a scenario without faults by subtrees, each reduced, covering the whole", function()
    local docs = shards(DISJOINT, 2)
    local one = check.json(DISJOINT .. check.NO_BUDGET)
    assert.is_true(total(docs, "schedules") >= one.counts.schedules)
    assert.is_true(total(docs, "splitRuns") > 0)
  end)
end)
