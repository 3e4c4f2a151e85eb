--- The counter in a world of its own, on a virtual clock.
--   eutaxy test              (in the project's folder; from anywhere: eutaxy test PROJECT/spec)
local testing = require "eutaxy.testing"

describe("the counter", function()
  local world

  before_each(function()
    -- relative to this file's folder, wherever the specs run from
    world = testing.world { config = "../wrangler.jsonc", seed = 1 }
  end)

  after_each(function()
    if world then world:close() end
    world = nil
  end)

  it("counts each request", function()
    assert.are.equal(1, world:fetch("/", { method = "POST" }):json().visits)
    assert.are.equal(2, world:fetch("/", { method = "POST" }):json().visits)
  end)

  it("counts a request called twice once", function()
    local counter = world.env.COUNTER:getByName("global")
    assert.are.equal(1, counter:visit("request-1"))
    assert.are.equal(1, counter:visit("request-1"))
    assert.are.equal(2, counter:visit("request-2"))
  end)

  it("keeps the visits when the counter loses its memory", function()
    world:fetch("/", { method = "POST", headers = { ["x-request-id"] = "a" } })
    world:reset("COUNTER", "global")
    assert.are.equal(1, world:fetch("/", { method = "POST", headers = { ["x-request-id"] = "a" } }):json().visits)
  end)
end)
