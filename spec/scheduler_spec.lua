--- The object's scheduler (eutaxy.scheduler): participants share the one
-- alarm, which follows the earliest of their due times.
local testing = require "eutaxy.testing"

describe("the scheduler", function()
  local world, jobs, t0
  before_each(function()
    world = testing.world {
      main = "spec/fixtures/durability/alarms_scheduler_worker.lua",
      bindings = { JOBS = "Jobs" },
    }
    jobs = world.env.JOBS:getByName("j")
    t0 = world:now()
  end)
  after_each(function() world:close() end)

  local function log()
    return world:rows("JOBS", "j", "SELECT who, at - ? AS t, note FROM log ORDER BY rowid", t0)
  end

  local function who()
    local out = {}
    for i, row in ipairs(log()) do out[i] = row.who end
    return out
  end

  it("is one per object instance", function()
    local same, shared = jobs:identity()
    assert.is_true(same)
    assert.is_true(shared)
  end)

  it("keeps the alarm at the earliest due time of every participant", function()
    jobs:due("first", t0 + 5000)
    assert.are.equal(t0 + 5000, jobs:getAlarm())
    jobs:ping(t0 + 3000)
    assert.are.equal(t0 + 3000, jobs:getAlarm())
    jobs:due("last", t0 + 1000)
    assert.are.equal(t0 + 1000, jobs:getAlarm())
    world:advance(1000)
    assert.are.equal(t0 + 3000, jobs:getAlarm())
    world:advance(2000)
    assert.are.equal(t0 + 5000, jobs:getAlarm())
    world:advance(2000)
    assert.is_nil(jobs:getAlarm())
    assert.are.same({ "last", "alarm:ping", "first" }, who())
  end)

  it("runs the participants' due work in order of registration", function()
    jobs:due("last", t0 + 1000)
    jobs:ping(t0 + 1000)
    jobs:work("op-1")
    jobs:due("first", t0 + 1000)
    world:advance(1000)
    -- the operation was due at once and ran on its own, before the others
    assert.are.same({ "op:op-1", "first", "alarm:ping", "last" }, who())
  end)

  it("gives the alarm's info to each participant", function()
    jobs:due("first", t0 + 1000)
    world:advance(1000)
    assert.are.equal("retry 0", log()[1].note)
  end)

  it("runs the others when one raises, keeps their work, and retries the alarm", function()
    jobs:failNext("first")
    jobs:due("first", t0 + 1000)
    jobs:due("last", t0 + 1000)
    world:advance(1000)
    -- what first wrote before raising is taken back; last's work is kept
    assert.are.same({ { who = "last", t = 1000, note = "retry 0" } }, log())
    assert.matches("alarm retry 1 of 6 in 2s", world:trace(), 1, true)
    assert.matches("first failed", world:trace(), 1, true)
    world:advance(2000)
    assert.are.same({ { who = "last", t = 1000, note = "retry 0" }, { who = "first", t = 3000, note = "retry 1" } },
      log())
    assert.is_nil(jobs:getAlarm())
  end)

  it("refuses to spin on work of a participant nobody registered", function()
    jobs:due("ghost", t0 + 1000)
    world:advance(10 * 60 * 1000)
    local trace = world:trace()
    assert.matches("the ghost participant has work due but is not registered", trace, 1, true)
    assert.matches("alarm dropped after 6 retries", trace, 1, true)
  end)

  it("says what is wrong with a bad participant", function()
    local ok, err = jobs:tryRegister("duplicate")
    assert.is_false(ok)
    assert.matches("the first participant is already registered", err, 1, true)
    ok, err = jobs:tryRegister("nameless")
    assert.is_false(ok)
    assert.matches("expects { name = string, run_due = function(now, info) }", err, 1, true)
    ok, err = jobs:tryRegister("no-run")
    assert.is_false(ok)
    ok, err = jobs:tryForCtx()
    assert.is_false(ok)
    assert.matches("expects the object's ctx", err, 1, true)
  end)

  it("rolls the scheduling back with the turn that did it", function()
    jobs:due("first", t0 + 5000)
    assert.is_false((pcall(jobs.dueThenFail, jobs, "last", t0 + 1000)))
    assert.are.equal(t0 + 5000, jobs:getAlarm())
    assert.are.same({ { participant = "first", due = t0 + 5000 } },
      world:rows("JOBS", "j", "SELECT participant, due FROM eutaxy_agenda"))
  end)
end)
