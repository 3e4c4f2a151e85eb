--- ctx.abort(reason): the object is reset, as on Cloudflare, and every
-- caller of an invocation in flight gets reason as its error; the aborting
-- invocation ends there, whatever catches it, its turn's writes undone.
-- Fixtures: spec/fixtures/abort/.
local testing = require "eutaxy.testing"
local C = dofile("spec/helpers/check.lua")

local FIX = "spec/fixtures/abort/"

describe("ctx.abort", function()
  local world, door
  before_each(function()
    world = testing.world { config = FIX .. "wrangler.jsonc", seed = 1 }
    door = world.env.DOOR:getByName("d")
  end)
  after_each(function() world:close() end)

  it("ends the call with the reason and resets the object, its turn's writes undone", function()
    assert.are.equal(1, door:open())
    local ok, err = pcall(door.shutDown, door, "maintenance")
    assert.is_false(ok)
    assert.are.same({ "maintenance", true, false }, { err.message, err.remote, err.retryable })
    assert.is_false(world:isLive("DOOR", "d"))
    assert.are.equal(0, door:visits())
    assert.are.equal(1, door:open())  -- in-memory state went with the reset
    assert.matches("DO:DOOR(d)  aborted: maintenance", world:trace(), 1, true)
  end)

  it("cannot be caught", function()
    local ok, err = pcall(door.catchIt, door)
    assert.is_false(ok)
    assert.are.equal("no catching this", err.message)
  end)

  it("gives its reason to the caller of every invocation in flight", function()
    local body = world:fetch("http://localhost/both"):json()
    assert.are.same({ ok = false, message = "closing time", remote = true }, body.slow)
    assert.are.same({ ok = false, message = "closing time", remote = true }, body.shut)
  end)

  it("is refused outside an invocation", function()
    assert.matches("abort can only be called while one of the object's invocations runs",
      world.env.EARLY:getByName("e"):why(), 1, true)
  end)
end)

describe("ctx.abort under check", function()
  it("is the same in every run of a schedule", function()
    local doc, code = C.json(FIX .. "both.sim.lua" .. C.DETERMINISM .. C.NO_BUDGET)
    assert.are.equal(0, code, doc.message)
  end)
end)
