--- world:faults: a spec arms the checker's faults, so that one story of a
-- schedule (an answer lost, an alarm failed, a reset in the middle of a
-- call) is pinned down as an ordinary test.
local testing = require "eutaxy.testing"

local CONFIG = "spec/fixtures/world-helpers/wrangler.jsonc"

local function here()
  local info = debug.getinfo(2, "Sl")
  return info.short_src .. ":" .. info.currentline
end

local function raised(fn)
  local ok, e = pcall(fn)
  assert.is_false(ok, "it did not raise")
  return e
end

describe("an armed fault", function()
  local world, counter, ledger
  before_each(function()
    world = testing.world { config = CONFIG }
    counter = world.env.COUNTER:getByName("c")
    ledger = world.env.LEDGER:getByName("main")
  end)
  after_each(function() world:close() end)

  it("loses the answer of a call an object makes (ambiguous): the callee's work is kept", function()
    world:faults { { kind = "ambiguous", call = "LEDGER.record" } }
    local e = raised(function() counter:pay(5) end)
    assert.are.equal("Network connection lost.", e.message)
    assert.is_true(e.retryable)
    assert.are.same({ { amount = 5 } }, world:rows(ledger, "SELECT amount FROM entries"))
    assert.is_nil(world:kv(counter).paid)
    assert.matches("fault  ambiguous at call%-1#1 effect #0 %(DO:LEDGER record%) %(armed by the spec%)", world:trace())
  end)

  it("fails a call of the spec's own before it arrives (rpc-fail): nothing ran", function()
    world:faults { { kind = "rpc-fail", call = "COUNTER.hit" } }
    local e = raised(function() counter:hit() end)
    assert.are.equal("Network connection lost.", e.message)
    assert.is_true(e.retryable)
    assert.are.same({}, world:kv(counter))
    assert.are.equal(1, counter:hit())
  end)

  it("refuses a call as an overloaded object does, not to be retried", function()
    world:faults { { kind = "overloaded", object = counter } }
    local e = raised(function() counter:hit() end)
    assert.is_true(e.overloaded)
    assert.is_false(e.retryable)
  end)

  it("crashes the caller right after the answer (caller-crash): the callee's work is kept", function()
    world:faults { { kind = "caller-crash", call = "LEDGER" } }
    local e = raised(function() counter:pay(4) end)
    assert.is_true(e.retryable)
    assert.are.same({ { amount = 4 } }, world:rows(ledger, "SELECT amount FROM entries"))
    assert.is_nil(world:kv(counter).paid)
  end)

  it("fails the object's next alarm (alarm-fail), which is retried on the backoff ladder", function()
    world:faults { { kind = "alarm-fail", object = { "COUNTER", "c" } } }
    counter:arm(100)
    world:advance(100)
    assert.is_nil(world:kv(counter).alarms)
    world:advance(2000)
    assert.are.same({ alarms = 1, lastRetry = 1 }, world:kv(counter))
  end)

  it("fails an alarm runAlarm runs, which says so", function()
    world:faults { { kind = "alarm-fail", call = "COUNTER.alarm" } }
    counter:arm(60000)
    local ran, err = world:runAlarm(counter)
    assert.is_true(ran)
    assert.matches("the alarm failed before it committed %(alarm%-fail%)", err.message)
    assert.is_nil(world:kv(counter).alarms)
  end)

  it("loses an alarm's completion (alarm-lost), so it runs again", function()
    world:faults { { kind = "alarm-lost", object = counter } }
    counter:arm(100)
    assert.is_true(world:runAlarm(counter))
    assert.are.equal(1, world:kv(counter).alarms)
    world:advance(2000)
    assert.are.same({ alarms = 2, lastRetry = 1 }, world:kv(counter))
  end)

  it("resets the object while an invocation waits at a yield point (when = waiting)", function()
    counter:hit()
    world:faults { { kind = "reset", object = counter, when = "waiting" } }
    local e = raised(function() counter:nap(10) end)
    assert.are.equal("the object was reset while the invocation was running", e.message)
    assert.are.same({ count = 1, napping = true }, world:kv(counter))
    assert.are.equal(0, world:runInDurableObject(counter, function(instance) return instance.hits end))
  end)

  it("resets the object between invocations (when = before): the next one finds its memory gone", function()
    counter:hit()
    world:faults { { kind = "reset", call = "COUNTER.nap", when = "before" } }
    counter:hit()
    assert.are.equal(2, world:runInDurableObject(counter, function(instance) return instance.hits end))
    assert.are.equal(0, counter:nap(1))
  end)

  it("resets the worker while its request waits when no object is named: the request gets no answer", function()
    world:faults { { kind = "reset" } }
    local line
    local msg = raised(function() line = here(); world:fetch("/pay") end)
    assert.are.equal(line .. ": the request got no answer: the worker went away while it waited (a reset)", msg)
    assert.matches("fault  reset at req%-1#1 while the worker waits for effect #0 %(DO:COUNTER pay%)", world:trace())
  end)

  it("fails a cron's invocation (cron-fail), which is retried", function()
    world:close()
    world = testing.world { main = "spec/fixtures/world-helpers/worker.lua", crons = { "* * * * *" },
                            bindings = { COUNTER = "Counter", LEDGER = "Ledger" } }
    world:faults { { kind = "cron-fail" } }
    world:advance(60000)
    assert.are.same({}, world:listDurableObjectIds("COUNTER"))
    world:advance(2000)
    assert.are.same({ count = 1 }, world:kv("COUNTER", "cron"))
  end)

  it("strikes once, at the first point that matches, and the faults in the order armed", function()
    world:faults {
      { kind = "rpc-fail", call = "COUNTER.hit" },
      { kind = "overloaded", call = "COUNTER.hit" },
    }
    assert.is_true(raised(function() counter:hit() end).retryable)
    assert.is_true(raised(function() counter:hit() end).overloaded)
    assert.are.equal(1, counter:hit())
  end)

  it("lets the matching points it is told to skip pass first", function()
    world:faults { { kind = "rpc-fail", call = "COUNTER.hit", skip = 2 } }
    assert.are.equal(1, counter:hit())
    assert.are.equal(2, counter:hit())
    raised(function() counter:hit() end)
    assert.are.equal(3, counter:hit())
  end)

  it("leaves other objects, methods and kinds alone", function()
    world:faults { { kind = "rpc-fail", object = world.env.COUNTER:getByName("other") } }
    assert.are.equal(1, counter:hit())
    counter:arm(10)
    world:advance(10)
    assert.are.equal(1, #world:faults())
    raised(function() world.env.COUNTER:getByName("other"):hit() end)
    assert.are.same({}, world:faults())
  end)

  it("reaches an object made with newUniqueId by its id", function()
    local id = world.env.COUNTER:newUniqueId()
    local stub = world.env.COUNTER:get(id)
    world:faults { { kind = "rpc-fail", object = id } }
    assert.are.equal(1, counter:hit())
    raised(function() stub:hit() end)
  end)

  it("is reported until it strikes, and assertFaultsStruck names those that never did", function()
    local faults = { { kind = "alarm-fail", object = counter }, { kind = "rpc-fail", call = "LEDGER.record" } }
    local line = here(); world:faults(faults)
    assert.are.same(faults, world:faults())
    counter:arm(10)
    world:advance(10)
    assert.is_nil(world:kv(counter).alarms)
    assert.are.same({ faults[2] }, world:faults())
    local at
    local msg = raised(function() at = here(); world:assertFaultsStruck() end)
    assert.are.equal(at .. ": 1 armed fault never struck:\n  rpc-fail, call LEDGER.record (armed at " .. line .. ")", msg)
    assert.are.same({ faults[2] }, world:clearFaults())
    world:assertFaultsStruck()
    assert.are.equal(0, counter:pay(0))
  end)

  it("changes nothing of a run while it does not strike", function()
    local function run(arm)
      local w = testing.world { config = CONFIG, seed = 7 }
      if arm then w:faults { { kind = "reset", call = "LEDGER.nosuch" } } end
      local c = w.env.COUNTER:getByName("c")
      c:arm(50)
      w:fetch("/pay")
      c:nap(20)
      w:advance(100)
      w:fetch("/unique")
      local trace = w:trace()
      w:close()
      return trace
    end
    assert.are.equal(run(false), run(true))
  end)
end)

describe("world:faults on a bad fault", function()
  local world
  before_each(function() world = testing.world { config = CONFIG } end)
  after_each(function() world:close() end)

  local function refused(faults)
    local line
    local msg = raised(function() line = here(); world:faults(faults) end)
    assert.are.same({}, world:faults())  -- nothing of a list with a mistake is armed
    assert.are.equal(line .. ": ", msg:sub(1, #line + 2))
    return msg:sub(#line + 3)
  end

  it("names the entry and the field at the spec's line", function()
    assert.matches('^world:faults: faults%[2%]%.kind must be a fault kind %(rpc%-fail, ambiguous, .*%), got "amiguous"$',
      refused { { kind = "reset" }, { kind = "amiguous" } })
    assert.are.equal('world:faults: faults[1] has an unknown field "objet" (fields: kind, call, object, when, skip)',
      refused { { kind = "reset", objet = { "COUNTER", "c" } } })
    assert.are.equal('world:faults: faults[1].call: "POOL.acquire" names no binding (it reads "BINDING.method"; '
      .. "bindings: COUNTER, LEDGER)", refused { { kind = "ambiguous", call = "POOL.acquire" } })
    assert.are.equal("world:faults: faults[1].object: no binding named POOL (bindings: COUNTER, LEDGER)",
      refused { { kind = "ambiguous", object = { "POOL", "pool" } } })
    assert.are.equal('world:faults: faults[1].object must be a stub, an id, or { "BINDING", "name" }',
      refused { { kind = "ambiguous", object = { "COUNTER" } } })
    assert.are.equal("world:faults: faults[1]: call names LEDGER but object is of COUNTER: a fault strikes one object",
      refused { { kind = "ambiguous", object = { "COUNTER", "c" }, call = "LEDGER.record" } })
  end)

  it("refuses what a kind cannot match", function()
    assert.matches('"resend" is a fault of eutaxy check\'s drive', refused { { kind = "resend" } })
    assert.are.equal("world:faults: faults[1]: alarm-fail strikes alarms, so its call can only be COUNTER.alarm, "
      .. "not COUNTER.hit", refused { { kind = "alarm-fail", call = "COUNTER.hit" } })
    assert.are.equal("world:faults: faults[1]: cron-fail strikes the worker's scheduled(): it takes no object or call",
      refused { { kind = "cron-fail", call = "COUNTER" } })
    assert.are.equal("world:faults: faults[1].when applies to reset and hibernate, not ambiguous",
      refused { { kind = "ambiguous", when = "before" } })
    assert.matches('^world:faults: faults%[1%]%.when must be "before" .* got "during"$',
      refused { { kind = "reset", when = "during" } })
    assert.are.equal('world:faults: faults[1]: hibernate strikes an idle object, as an invocation starts: when can '
      .. 'only be "before"', refused { { kind = "hibernate", when = "waiting" } })
    assert.are.equal("world:faults: faults[1].skip must be a whole number of matching points to let pass, got -1",
      refused { { kind = "reset", skip = -1 } })
  end)

  it("wants a list", function()
    assert.are.equal("world:faults expects a list of faults; wrap this one in { }", refused { kind = "reset" })
    assert.are.equal("world:faults expects a list of faults, got \"reset\"", refused("reset"))
    assert.are.equal("world:faults: faults[1] must be a table { kind = ..., ... }, got \"reset\"", refused { "reset" })
  end)
end)

describe("an armed fault on WebSockets", function()
  it("drops a client in place of its next message (ws-drop), and hibernates the object before one (hibernate)", function()
    local world = testing.world { config = "spec/fixtures/websocket/wrangler.jsonc", seed = 1 }
    local ann = world:websocket("http://localhost/?name=ann")
    world:faults {
      { kind = "ws-drop", object = { "ROOM", "lobby" } },
      { kind = "hibernate", object = { "ROOM", "lobby" } },
    }
    ann:send("one")
    assert.are.equal("closed", ann:state())
    local bob = world:websocket("http://localhost/?name=bob")
    bob:send("two")
    local log = {}
    for _, r in ipairs(world:rows("ROOM", "lobby", "SELECT what FROM log ORDER BY seq")) do log[#log + 1] = r.what end
    -- the object saw ann go with 1006, and was built again (init) for bob's message: its sockets stayed open
    assert.are.same({ "init", "close ann 1006  false", "init", "bob text two" }, log)
    assert.are.equal("open", bob:state())
    assert.are.same({}, world:faults())
    world:close()
  end)
end)
