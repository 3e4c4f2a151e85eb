--- Named alarms (eutaxy.alarms): many named wake-ups on the object's one
-- alarm, on the virtual clock.
local testing = require "eutaxy.testing"

local function new_world(seed)
  return testing.world {
    main = "spec/fixtures/durability/alarms_worker.lua",
    bindings = { REMINDERS = "Reminders" },
    seed = seed,
  }
end

describe("named alarms", function()
  local world, r, t0
  before_each(function()
    world = new_world()
    r = world.env.REMINDERS:getByName("r")
    t0 = world:now()
  end)
  after_each(function() world:close() end)

  local function runs(name)
    if name then
      return world:rows("REMINDERS", "r", "SELECT * FROM runs WHERE name = ? ORDER BY rowid", name)
    end
    return world:rows("REMINDERS", "r", "SELECT * FROM runs ORDER BY rowid")
  end

  it("runs a named alarm at its time with its name, payload, scheduled time and attempt", function()
    assert.are.equal(t0 + 5000, r:schedule("remind", t0 + 5000, { text = "call mum" }))
    world:advance(4999)
    assert.are.same({}, runs())
    world:advance(1)
    assert.are.same({ { name = "remind", payload = "call mum", scheduled_at = t0 + 5000, attempt = 1, at = t0 + 5000 } },
      runs())
    assert.are.same({}, r:pending())
    assert.is_nil(r:getAlarm())
  end)

  it("takes a time relative to now with inMs", function()
    world:advance(1000)
    assert.are.equal(t0 + 3000, r:schedule("remind", { inMs = 2000 }, "x"))
    world:advance(2000)
    assert.are.equal(t0 + 3000, runs()[1].at)
  end)

  it("replaces the pending occurrence when a name is scheduled again", function()
    r:schedule("remind", t0 + 5000, "first")
    r:schedule("remind", t0 + 8000, "second")
    local pending = r:pending()
    assert.are.equal(1, #pending)
    assert.are.equal("second", pending[1].payload)
    assert.are.equal(t0 + 8000, r:getAlarm())
    world:advance(10000)
    assert.are.same({ { name = "remind", payload = "second", scheduled_at = t0 + 8000, attempt = 1, at = t0 + 8000 } },
      runs())
  end)

  it("moves the alarm earlier when a name is scheduled again sooner", function()
    r:schedule("remind", t0 + 8000, "later")
    r:schedule("remind", t0 + 2000, "sooner")
    assert.are.equal(t0 + 2000, r:getAlarm())
    world:advance(10000)
    assert.are.equal(1, #runs())
    assert.are.equal(t0 + 2000, runs()[1].at)
  end)

  it("cancels a pending alarm", function()
    r:schedule("remind", t0 + 5000)
    assert.is_true(r:cancel("remind"))
    assert.is_false(r:cancel("remind"))
    assert.is_nil(r:getAlarm())
    world:advance(10000)
    assert.are.same({}, runs())
  end)

  it("keeps several names on the one alarm, set to the earliest", function()
    r:schedule("digest", t0 + 9000, "d")
    r:schedule("remind", t0 + 3000, "r")
    assert.are.equal(t0 + 3000, r:getAlarm())
    local pending = r:pending()
    assert.are.same({ "remind", "digest" }, { pending[1].name, pending[2].name })
    world:advance(3000)
    assert.are.equal(t0 + 9000, r:getAlarm())
    world:advance(6000)
    assert.are.same({ { "remind", t0 + 3000 }, { "digest", t0 + 9000 } },
      { { runs()[1].name, runs()[1].at }, { runs()[2].name, runs()[2].at } })
    assert.is_nil(r:getAlarm())
  end)

  it("runs every name due at one firing, in order of due time", function()
    r:schedule("digest", t0 + 2000)
    r:schedule("remind", t0 + 1000)
    world:advance(5000)
    local got = runs()
    assert.are.same({ "remind", "digest" }, { got[1].name, got[2].name })
  end)

  it("retries a handler that throws with exponential backoff, then drops it", function()
    r:schedule("always", t0 + 1000)
    world:advance(60 * 1000)
    local got = runs("always")
    assert.are.equal(5, #got)
    assert.are.equal(t0 + 1000, got[1].at)
    -- after attempt n fails it waits 1 s * 2^(n-1), less up to a fifth of that (jitter)
    for n = 1, 4 do
      local base = 1000 * 2 ^ (n - 1)
      local waited = got[n + 1].at - got[n].at
      assert.are.equal(n + 1, got[n + 1].attempt)
      assert.is_true(waited <= base and waited >= base * 0.8, "attempt " .. n + 1 .. " waited " .. waited)
      assert.are.equal(t0 + 1000, got[n + 1].scheduled_at)
    end
    assert.are.same({}, r:pending())
    assert.is_nil(r:getAlarm())
    world:advance(10 * 60 * 1000)
    assert.are.equal(5, #runs("always"))
  end)

  it("shows a failing alarm's attempts and last error while it waits", function()
    r:schedule("always", t0 + 1000)
    world:advance(1000)
    local p = r:pending()[1]
    assert.are.equal(1, p.attempt)
    assert.matches("ReminderError: always fails", p.lastError)
    assert.is_true(p.due > t0 + 1000 and p.due <= t0 + 2000)
    assert.are.equal(p.due, r:getAlarm())
  end)

  it("follows a handler's own retry policy", function()
    r:schedule("twice", t0 + 1000)
    world:advance(60 * 1000)
    local got = runs("twice")
    assert.are.same({ t0 + 1000, t0 + 11000 }, { got[1].at, got[2].at })
    assert.are.same({}, r:pending())
  end)

  it("runs a failed alarm again until it succeeds, then forgets it", function()
    r:schedule("flaky", t0 + 1000, { failures = 2 })
    world:advance(60 * 1000)
    local got = runs("flaky")
    assert.are.same({ 1, 2, 3 }, { got[1].attempt, got[2].attempt, got[3].attempt })
    assert.are.equal(3, #got)
    assert.are.same({}, r:pending())
  end)

  it("draws the jitter from the run's seed: the same seed gives the same times", function()
    local function times(seed)
      local w = new_world(seed)
      local s = w:now()
      w.env.REMINDERS:getByName("r"):schedule("always", s + 1000)
      w:advance(60 * 1000)
      local out = {}
      for i, row in ipairs(w:rows("REMINDERS", "r", "SELECT at FROM runs ORDER BY rowid")) do out[i] = row.at - s end
      w:close()
      return out
    end
    assert.are.same(times(7), times(7))
    assert.are_not.same(times(7), times(8))
  end)

  it("takes back what a failing handler wrote and keeps what a succeeding one wrote", function()
    r:schedule("writes", t0 + 1000)
    world:advance(60 * 1000)
    assert.are.same({ { name = "writes", attempt = 2 } },
      world:rows("REMINDERS", "r", "SELECT name, attempt FROM effects"))
  end)

  it("keeps the occurrence a handler schedules for its own name", function()
    r:schedule("periodic", t0 + 1000, { every = 1000, times = 3 })
    world:advance(10 * 1000)
    local got = runs("periodic")
    assert.are.same({ t0 + 1000, t0 + 2000, t0 + 3000 }, { got[1].at, got[2].at, got[3].at })
    assert.are.equal(3, #got)
    assert.is_nil(r:getAlarm())
  end)

  it("lets a handler call another object", function()
    r:schedule("relay", t0 + 1000, { to = "other", text = "hello" })
    world:advance(2000)
    assert.are.same({ { name = "hello" } }, world:rows("REMINDERS", "other", "SELECT name FROM effects"))
    assert.are.same({}, r:pending())
  end)

  it("rolls the scheduling back with a turn that fails", function()
    r:schedule("digest", t0 + 9000)
    local ok = pcall(r.scheduleThenFail, r, "remind", t0 + 1000)
    assert.is_false(ok)
    assert.are.equal(1, #r:pending())
    assert.are.equal(t0 + 9000, r:getAlarm())
    world:advance(5000)
    assert.are.same({}, runs())
  end)

  it("survives a reset between scheduling and firing", function()
    r:schedule("remind", t0 + 5000, "kept")
    world:reset("REMINDERS", "r")
    world:advance(5000)
    assert.are.equal("kept", runs()[1].payload)
  end)

  it("runs again an attempt a reset interrupted, counting it", function()
    r:schedule("slow", t0 + 1000)
    world:advance(1000 + 5000)  -- the handler sleeps until t0 + 11000
    world:reset("REMINDERS", "r")
    world:advance(60 * 1000)
    local got = runs("slow")
    assert.are.equal(2, #got)
    assert.are.same({ 1, 2 }, { got[1].attempt, got[2].attempt })
    assert.are.same({ { name = "slow", attempt = 2 } },
      world:rows("REMINDERS", "r", "SELECT name, attempt FROM effects"))
    assert.are.same({}, r:pending())
  end)

  it("says what is wrong with a bad call", function()
    local ok, err = r:tryBadSchedule("handler")
    assert.is_false(ok)
    assert.matches("no handler named nobody", err)
    ok, err = r:tryBadSchedule("time")
    assert.is_false(ok)
    assert.matches("ms since the epoch or { inMs = ms }", err, 1, true)
    ok, err = r:tryBadSchedule("payload")
    assert.is_false(ok)
    assert.matches("cannot clone a function", err)
    ok, err = r:tryBadSchedule("twice")
    assert.is_false(ok)
    assert.matches("the alarms participant is already registered", err)
  end)

  it("keeps its rows where invariants can read them", function()
    r:schedule("remind", t0 + 5000, "x")
    local rows = world:rows("REMINDERS", "r", "SELECT name, due, attempt FROM eutaxy_alarms")
    assert.are.same({ { name = "remind", due = t0 + 5000, attempt = 0 } }, rows)
    assert.are.same({ { participant = "alarms", due = t0 + 5000 } },
      world:rows("REMINDERS", "r", "SELECT participant, due FROM eutaxy_agenda"))
  end)
end)
