--- ctx.blockConcurrencyWhile(fn): while fn runs, waits included, no other
-- event reaches the object (its input gate is shut); if fn raises, the
-- object is reset; in init, fn runs once init has returned, before anything
-- is delivered. Fixtures: spec/fixtures/block/.
local testing = require "eutaxy.testing"
local C = dofile("spec/helpers/check.lua")

local FIX = "spec/fixtures/block/"

describe("ctx.blockConcurrencyWhile", function()
  local world, gate
  before_each(function()
    world = testing.world { config = FIX .. "wrangler.jsonc", seed = 1 }
    gate = world.env.GATE:getByName("g")
  end)
  after_each(function() world:close() end)

  it("lets init wait, with calls and sleeps, before the first call is delivered", function()
    local start = world:now()
    local ready, after_block, now = gate:ready()
    assert.are.equal(42, ready)
    assert.is_nil(after_block)  -- init itself went on at once
    assert.are.equal(start + 100, now)
    assert.matches("call%-1  held: init's blockConcurrencyWhile runs first", world:trace())
  end)

  it("returns what the function returns, and nests", function()
    assert.are.equal(1, gate:increment())
    assert.are.same({ "inner", "outer" }, { gate:nested() })
  end)

  it("holds the object's alarm until the function is done", function()
    local start = world:now()
    gate:ready()
    assert.are.equal(start + 150, gate:alarmLater())
    world:advance(0)
    assert.are.equal(start + 150, gate:alarmAt())
    assert.matches("DO:GATE(g)  held: DO:GATE(g) is in blockConcurrencyWhile", world:trace(), 1, true)
  end)

  it("resets the object when the function raises, its turn's writes undone", function()
    gate:increment()
    local ok, err = pcall(gate.explode, gate)
    assert.is_false(ok)
    assert.matches("exploded on purpose", tostring(err), 1, true)
    assert.is_false(world:isLive("GATE", "g"))
    assert.are.equal(1, gate:count())
    assert.are.equal(0, gate:calls())  -- what it held in memory went with the reset
  end)

  it("ends the invocation with the error even when it is caught", function()
    local ok, err = pcall(gate.explode, gate, true)
    assert.is_false(ok)
    assert.are.equal("the object was reset: blockConcurrencyWhile's function raised Error: " .. FIX
      .. "worker.lua:60: exploded on purpose", err.message)
    assert.is_true(err.remote)
    assert.is_false(world:isLive("GATE", "g"))
  end)

  it("resets an object whose function waits past 30 s, as on a call back into itself", function()
    local start = world:now()
    gate:ready()
    local ok, err = pcall(gate.selfCall, gate)
    assert.is_false(ok)
    assert.are.equal("the object was reset while the invocation was running", err.message)
    assert.are.equal(start + 100 + 30000, world:now())
    assert.matches("DO:GATE(g)  the object was reset: blockConcurrencyWhile's function ran past 30 s", world:trace(),
      1, true)
  end)

  it("fails the calls that waited for init's function when it raises, each time", function()
    local broken = world.env.BROKEN:getByName("b")
    for _ = 1, 2 do
      local ok, err = pcall(broken.hi, broken)
      assert.is_false(ok)
      assert.matches("^the object was reset: blockConcurrencyWhile's function raised Error: .*no way to start$",
        err.message)
    end
  end)

  it("refuses what is no function", function()
    local ok, err = gate:notAFunction()
    assert.is_false(ok)
    assert.matches("blockConcurrencyWhile expects a function, got number", err, 1, true)
  end)
end)

describe("ctx.blockConcurrencyWhile under check", function()
  it("keeps two increments that wait from losing one, in every order", function()
    local doc, code = C.json(FIX .. "counter.sim.lua" .. C.DETERMINISM .. C.NO_BUDGET)
    assert.are.equal(0, code, doc.message)
    local racy, racy_code = C.json(FIX .. "racy.sim.lua" .. C.NO_BUDGET)
    assert.are.equal(1, racy_code)
    assert.are.equal("no-lost-increment", racy.invariant)
  end)

  it("shows no call an object whose init has not finished, whatever faults strike", function()
    local doc, code = C.json(FIX .. "ready.sim.lua" .. C.DETERMINISM .. C.NO_BUDGET)
    assert.are.equal(0, code, doc.message)
    assert.are.same({ "rpc-fail" }, C.find_point(doc.coverage, "req-1 effect #1 (DO:SOURCE value)").tried)
    assert.are.same({ "reset" }, C.find_point(doc.coverage, "req-1 while DO:GATE(g) sleeps 100ms (sleep #0)").tried)
  end)
end)

describe("ctx.blockConcurrencyWhile under serve", function()
  local h = dofile("spec/fixtures/serve/harness.lua")
  local process = dofile("spec/helpers/process.lua")
  local state
  before_each(function()
    state = h.begin()
    if not state then pending("curl is not installed (the .ci/packages list has it)") end
  end)
  after_each(function() h.finish(state) end)

  it("lets init wait, and loses no increment of two sent at once", function()
    local server = h.start(state, nil, FIX .. "wrangler.jsonc")
    assert.are.same({ 200, '{"value":42}' }, { h.request(server, "GET", "/ready") })
    local curl = "curl -s http://127.0.0.1:" .. server.port .. "/inc"
    local a, b = process.start(curl), process.start(curl)
    local got = { (a()), (b()) }
    table.sort(got)
    assert.are.same({ '{"value":1}', '{"value":2}' }, got)
    assert.are.equal(0, h.stop(server))
  end)
end)
