--- eutaxy.all{ f1, f2, ... }: the functions run side by side, each a task
-- of its own, so their calls are in flight at once; results come in order,
-- the first error is raised as soon as it happens, and check explores the
-- orders of their turns. Fixtures: spec/fixtures/all/.
local testing = require "eutaxy.testing"
local C = dofile("spec/helpers/check.lua")

local FIX = "spec/fixtures/all/"

describe("eutaxy.all", function()
  local world
  before_each(function()
    world = testing.world { config = FIX .. "wrangler.jsonc", seed = 1 }
    world.env.ACCOUNT:getByName("a"):deposit(3)
    world.env.ACCOUNT:getByName("b"):deposit(4)
    world.env.ACCOUNT:getByName("c"):deposit(5)
  end)
  after_each(function() world:close() end)

  it("has the calls in flight at once, and returns their results", function()
    assert.are.same({ sum = 7, ms = 5 }, world:fetch("http://localhost/sum"):json())
  end)

  it("returns each function's result in the order of the functions, nil included", function()
    assert.are.same({ "first", true, "third" }, world:fetch("http://localhost/order"):json())
  end)

  it("raises the first error as soon as it happens", function()
    local r = world:fetch("http://localhost/fail"):json()
    assert.is_false(r.ok)
    assert.matches("worker%.lua:%d+: the second failed$", r.err)
    assert.are.equal(0, r.ms)
  end)

  it("works in an object, and its branches pass the gate its invocation shut", function()
    assert.are.same({ sum = 9, ms = 5 }, world:fetch("http://localhost/nested"):json())
  end)

  it("refuses what is no list of functions", function()
    local r = world:fetch("http://localhost/bad"):json()
    assert.is_false(r.ok)
    assert.matches("eutaxy.all expects a list of functions, got string at [2]", r.err, 1, true)
  end)

  it("names each branch in the trace", function()
    world:fetch("http://localhost/sum")
    local trace = world:trace()
    assert.matches("req-1  eutaxy.all #1: 2 functions side by side", trace, 1, true)
    assert.matches('req-1 all #1.1  calls DO:ACCOUNT(a) "get"', trace, 1, true)
    assert.matches('req-1 all #1.2  calls DO:ACCOUNT(b) "get"', trace, 1, true)
  end)
end)

describe("eutaxy.all under check", function()
  it("explores both orders of two writes side by side", function()
    local doc, code = C.json(FIX .. "log.sim.lua" .. C.DETERMINISM .. C.NO_BUDGET)
    assert.are.equal(1, code)
    assert.are.equal("x-lands-first", doc.invariant)
    assert.are.equal("first: y", doc.message)
  end)

  it("makes each branch's calls fault points of their own", function()
    local doc, code = C.json(FIX .. "sum.sim.lua" .. C.DETERMINISM .. C.NO_BUDGET)
    assert.are.equal(0, code, doc.message)
    for _, point in ipairs({ "req-1 all #1.1 effect #0 (DO:ACCOUNT get)", "req-1 all #1.2 effect #0 (DO:ACCOUNT get)" }) do
      assert.are.same({ "rpc-fail", "ambiguous", "caller-crash", "overloaded" }, C.find_point(doc.coverage, point).tried)
    end
  end)

  it("gives the same end states with and without reduction", function()
    local reduced = C.json(FIX .. "sum.sim.lua --end-states" .. C.NO_BUDGET)
    local full = C.json(FIX .. "sum.sim.lua --end-states --no-reduction" .. C.NO_BUDGET)
    table.sort(reduced.endStates)
    table.sort(full.endStates)
    assert.are.same(full.endStates, reduced.endStates)
  end)
end)
