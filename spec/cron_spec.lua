--- Cron triggers: wrangler.jsonc's triggers.crons, checked with the field
-- and the reason; when an expression is next due; and the worker's
-- scheduled(controller, env, ctx) firing in a world on the virtual clock.
local testing = require "eutaxy.testing"
local config = require "eutaxy.config"
local core = require "eutaxy.core"

local CONFIG = "spec/fixtures/cron/wrangler.jsonc"
local START = 1767225600000  -- 2026-01-01T00:00:00Z, a Thursday
local MINUTE, HOUR = 60 * 1000, 60 * 60 * 1000

local function tempfile(text)
  local path = os.tmpname()
  local f = assert(io.open(path, "w"))
  f:write(text)
  f:close()
  return path
end

local function load_error(crons)
  local path = tempfile('{ "main": "worker.lua", "triggers": { "crons": ' .. crons .. " } }")
  local ok, err = pcall(config.load, path)
  os.remove(path)
  assert.is_false(ok)
  return tostring(err), path
end

describe("triggers.crons in wrangler.jsonc", function()
  it("lists the expressions in file order, exactly as written", function()
    assert.are.same({ "* * * * *", "0 * * * *", "30 * * * *" }, config.load(CONFIG).crons)
    assert.are.same({}, config.load("scenarios/lease-pool/wrangler.jsonc").crons)
  end)

  it("takes lists, ranges, steps and names, as Cloudflare does", function()
    local path = tempfile([[{ "main": "w.lua", "triggers": { "crons": [
      "*/5 * * * *", "1-10/2 3,4 * * *", "10 7 * * mon-FRI", "0 0 1 JAN,jul *", "59 23 LW * *", "0 18 * * 6L",
      "0 10 * * MON#2", "0 9 15W * *", "0 22-2 * * FRI-MON"] } }]])
    local cfg = config.load(path)
    os.remove(path)
    assert.are.equal(9, #cfg.crons)
  end)

  it("refuses a bad expression naming the file, the entry, the expression and the field", function()
    local err, path = load_error('["* * * * *", "*/61 * * * *"]')
    assert.are.equal(path .. ': triggers.crons[2] "*/61 * * * *": minute field "*/61": a step must be from 1 to 59', err)
    assert.matches('triggers.crons%[1%] "%* %* %* %* 0": day%-of%-week field "0": 0 is out of range: it takes 1%-7 %(1 is Sunday%)',
      (load_error('["* * * * 0"]')))
    assert.matches('hour field "24"', (load_error('["0 24 * * *"]')))
    assert.matches('expected 5 fields', (load_error('["0 0 * * * *"]')))
    assert.matches('never due', (load_error('["0 0 31 2 *"]')))
    assert.matches('triggers.crons%[1%] must be a cron expression', (load_error("[5]")))
    assert.matches("triggers.crons must be an array", (load_error('"* * * * *"')))
    assert.matches('triggers.crons%[2%] "%* %* %* %* %*" is listed already, as triggers.crons%[1%]',
      (load_error('["* * * * *", "* * * * *"]')))
  end)

  it("is taken inline as crons or triggers.crons", function()
    assert.are.same({ "*/5 * * * *" }, config.inline({ main = "w.lua", bindings = {}, crons = { "*/5 * * * *" } }).crons)
    assert.are.same({ "0 3 * * *" }, config.inline({ main = "w.lua", triggers = { crons = { "0 3 * * *" } } }).crons)
    assert.has_error(function() config.inline({ main = "w.lua", crons = { "61 * * * *" } }) end,
      'inline config: triggers.crons[1] "61 * * * *": minute field "61": 61 is out of range: it takes 0-59')
  end)
end)

describe("when a cron is next due", function()
  -- ms since 1970 of a UTC time, counted day by day from 2026
  local function utc(y, mo, d, h, mi)
    local days, mdays = 0, { 31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31 }
    local function leap(year) return year % 4 == 0 and (year % 100 ~= 0 or year % 400 == 0) end
    for year = 2026, y - 1 do days = days + (leap(year) and 366 or 365) end
    for m = 1, mo - 1 do days = days + mdays[m] + ((m == 2 and leap(y)) and 1 or 0) end
    return START + (((days + d - 1) * 24 + h) * 60 + mi) * MINUTE
  end

  it("is the next whole minute the expression takes, strictly after the time given", function()
    assert.are.equal(START + MINUTE, core.cron_next("* * * * *", START))
    assert.are.equal(START + 5 * MINUTE, core.cron_next("*/5 * * * *", START + 3 * MINUTE + 10500))
    assert.are.equal(START + 24 * HOUR, core.cron_next("0 0 * * *", START))
  end)

  it("crosses the ends of months, years and leap years", function()
    assert.are.equal(utc(2026, 5, 31, 12, 0), core.cron_next("0 12 31 * *", utc(2026, 4, 1, 0, 0)))
    assert.are.equal(utc(2027, 1, 1, 0, 0), core.cron_next("0 0 1 1 *", utc(2026, 6, 1, 0, 0)))
    assert.are.equal(utc(2028, 2, 29, 0, 0), core.cron_next("0 0 29 2 *", START))
    assert.are.equal(utc(2026, 1, 30, 23, 59), core.cron_next("59 23 LW * *", START))
  end)

  it("counts days of the week from Sunday as 1, and matches either day field when both are set", function()
    assert.are.equal(utc(2026, 1, 4, 17, 0), core.cron_next("0 17 * * 1", START))
    assert.are.equal(utc(2026, 1, 5, 7, 10), core.cron_next("10 7 * * MON-FRI", utc(2026, 1, 2, 8, 0)))
    assert.are.equal(utc(2027, 1, 5, 9, 0), core.cron_next("0 9 * * TUE", utc(2026, 12, 30, 10, 0)))
    assert.are.equal(utc(2026, 1, 2, 0, 0), core.cron_next("0 0 13 * FRI", START))
    assert.are.equal(utc(2026, 1, 12, 10, 0), core.cron_next("0 10 * * MON#2", START))
  end)
end)

describe("a world with crons", function()
  local world
  before_each(function() world = testing.world { config = CONFIG } end)
  after_each(function() world:close() end)

  it("fires a one-minute cron 60 times in a virtual hour, as the worker's scheduled()", function()
    world:advance(HOUR - 1)
    assert.are.same({ { n = 59 } }, world:rows("TICKS", "ticks", "SELECT count(*) AS n FROM ticks WHERE cron = '* * * * *'"))
    world:advance(1)
    assert.are.same({ { n = 60 } }, world:rows("TICKS", "ticks", "SELECT count(*) AS n FROM ticks WHERE cron = '* * * * *'"))
    local first = world:rows("TICKS", "ticks", "SELECT due, at FROM ticks ORDER BY n LIMIT 1")[1]
    assert.are.same({ due = START + MINUTE, at = START + MINUTE }, first)
    assert.matches("60%.000s  cron%-1#1  fires: %* %* %* %* %*, due 2026%-01%-01T00:01:00Z", world:trace())
  end)

  it("retries a failed firing after 2, 4, 8 ... s, with the time it was due", function()
    world:advance(HOUR + 2000 + 4000)
    local rows = world:rows("TICKS", "ticks", "SELECT due, at FROM ticks WHERE cron = '0 * * * *' ORDER BY n")
    assert.are.same({ { due = START + HOUR, at = START + HOUR }, { due = START + HOUR, at = START + HOUR + 2000 },
                      { due = START + HOUR, at = START + HOUR + 6000 } }, rows)
    assert.matches("cron%-2#1  raised Error: [^\n]*the hourly job fails", world:trace())
    assert.matches("cron%-2#1  retry 1 of 6 in 2s", world:trace())
  end)

  it("does not retry a firing whose handler called controller:noRetry()", function()
    world:advance(31 * MINUTE)
    assert.are.same({ { n = 1 } }, world:rows("TICKS", "ticks", "SELECT count(*) AS n FROM ticks WHERE cron = '30 * * * *'"))
    assert.matches("cron%-3#1  not retried: its handler called controller:noRetry%(%)", world:trace())
  end)

  it("runs a cron now with runCron, returning what scheduled() returned", function()
    world:advance(1000)
    local r = world:runCron("* * * * *")
    assert.are.same({ cron = "* * * * *", scheduledTime = START + 1000, type = "scheduled", n = 1 }, r)
  end)

  it("raises the handler's error out of runCron, and does not retry it", function()
    local ok, err = pcall(world.runCron, world, "0 * * * *")
    assert.is_false(ok)
    assert.matches("the hourly job fails", tostring(err))
    world:advance(30 * 1000)
    assert.are.same({ { n = 1 } }, world:rows("TICKS", "ticks", "SELECT count(*) AS n FROM ticks WHERE cron = '0 * * * *'"))
  end)

  it("refuses runCron of an expression the config does not list", function()
    assert.has_error(function() world:runCron("*/5 * * * *") end,
      'no cron "*/5 * * * *" in triggers.crons (it lists "* * * * *", "0 * * * *", "30 * * * *")')
  end)

  it("starts the virtual clock where it is asked, and fires the next time after it", function()
    local w = testing.world { config = CONFIG, start = START + 30 * 1000 }
    w:advance(30 * 1000)
    assert.are.same({ { due = START + MINUTE } }, w:rows("TICKS", "ticks", "SELECT due FROM ticks"))
    w:close()
  end)
end)

describe("a worker with crons but no scheduled handler", function()
  it("is refused when the world is built, naming the config", function()
    local ok, err = pcall(testing.world, { main = "spec/fixtures/objects/worker.lua", bindings = { COUNTER = "Counter" },
                                           crons = { "*/5 * * * *" } })
    assert.is_false(ok)
    assert.matches('triggers.crons lists "%*/5 %* %* %* %*", but [^\n]*worker%.lua exports no scheduled%(controller, env, ctx%) handler',
      tostring(err))
  end)
end)
