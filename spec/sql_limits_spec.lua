--- A SQL statement that never ends. The isolate's CPU limit counts Lua
-- instructions and cannot see inside SQLite, so the store stops a statement
-- itself once it has run 200,000,000 SQLite steps (host/store.c).
local testing = require "eutaxy.testing"

describe("a SQL statement", function()
  -- Under valgrind (EUTAXY_VALGRIND, see CMakeLists.txt) SQLite's steps run
  -- some thirty times slower: the runaway would take minutes.
  if os.getenv("EUTAXY_VALGRIND") then
    pending("that never ends is stopped (too slow under valgrind)")
    return
  end

  local world
  before_each(function()
    world = testing.world { main = "spec/fixtures/runaway-sql/worker.lua", bindings = { COUNTER = "Counter" } }
  end)
  after_each(function() world:close() end)

  it("that never ends fails at the line of its sql:exec, and the object goes on", function()
    local c = world.env.COUNTER:getByName("c")
    assert.are.equal(1, c:hit())
    local ok, err = pcall(function() return c:forever() end)
    assert.is_false(ok)
    assert.matches("worker%.lua:12: the statement ran past the CPU limit %(more than 200,000,000 SQLite steps%)",
      err.message)
    assert.are.equal(2, c:hit())
  end)

  it("that is long but ends is not stopped", function()
    assert.are.equal(1000000, world.env.COUNTER:getByName("c"):count(1000000))
  end)
end)
