--- Billing under ordinary tests: the planted worker and the fixed one pass
-- every one of them, because every alarm here runs once. An alarm that runs
-- again after it committed is the checker's to find
-- (scenarios/alarm-double/billing.sim.lua).
local testing = require "eutaxy.testing"
local customer = dofile("scenarios/alarm-double/schema.lua")

local HOUR_MS = 60 * 60 * 1000

for _, main in ipairs({ "worker.lua", "worker_fixed.lua" }) do
  describe("billing (" .. main .. ")", function()
    local world
    before_each(function()
      world = testing.world {
        config = "scenarios/alarm-double/wrangler.jsonc", main = main,
        sql = { BILLING = { ["c-1"] = customer } },
      }
    end)
    after_each(function() world:close() end)

    local function record(amount)
      return world:fetch("/customers/c-1/usage", { method = "POST", body = '{"amount": ' .. amount .. "}" })
    end

    local function invoice()
      return world:fetch("/customers/c-1/invoice"):json().total
    end

    -- ms from now to the end of the current hour
    local function to_hour_end()
      return (world:now() // HOUR_MS + 1) * HOUR_MS - world:now()
    end

    it("records usage and bills nothing before the hour ends", function()
      assert.are.equal(204, record(30).status)
      assert.are.same({ { amount = 30 } }, world:rows("BILLING", "c-1", "SELECT amount FROM usage"))
      world:advance(to_hour_end() - 1)
      assert.are.equal(0, invoice())
    end)

    it("bills the hour's usage when the hour ends", function()
      record(30)
      record(12)
      world:advance(to_hour_end())
      assert.are.equal(42, invoice())
    end)

    it("bills each hour once, hour after hour", function()
      record(30)
      world:advance(to_hour_end())
      record(5)
      world:advance(HOUR_MS // 2)
      record(7)
      assert.are.equal(30, invoice())
      world:advance(to_hour_end())
      assert.are.equal(42, invoice())
      world:advance(5 * HOUR_MS)
      assert.are.equal(42, invoice())
    end)

    it("refuses an amount that is not a positive whole number", function()
      for _, body in ipairs({ '{"amount": -3}', '{"amount": 1.5}', "{}", "not json" }) do
        local response = world:fetch("/customers/c-1/usage", { method = "POST", body = body })
        assert.are.equal(400, response.status, body)
      end
      assert.are.same({}, world:rows("BILLING", "c-1", "SELECT amount FROM usage"))
    end)

    it("answers 404 for anything but usage and the invoice", function()
      assert.are.equal(404, world:fetch("/customers/c-1/usage").status)
      assert.are.equal(404, world:fetch("/customers/c-1/invoice", { method = "POST" }).status)
      assert.are.equal(404, world:fetch("/elsewhere").status)
    end)
  end)
end

describe("the fixed billing", function()
  it("bills an hour once when its alarm runs again", function()
    local world = testing.world {
      config = "scenarios/alarm-double/wrangler.jsonc", main = "worker_fixed.lua",
      sql = { BILLING = { ["c-1"] = customer } },
    }
    local function record(amount)
      world:fetch("/customers/c-1/usage", { method = "POST", body = '{"amount": ' .. amount .. "}" })
    end
    record(30)
    world:advance((world:now() // HOUR_MS + 1) * HOUR_MS - world:now())
    record(5)
    -- early, in the next hour: the hour that ended is already billed
    assert.is_true((world:runAlarm("BILLING", "c-1")))
    assert.are.same({ { total = 30 } }, world:rows("BILLING", "c-1", "SELECT total FROM invoice"))
    world:advance(HOUR_MS)
    assert.are.same({ { total = 35 } }, world:rows("BILLING", "c-1", "SELECT total FROM invoice"))
    assert.are.same({ { n = 2 } }, world:rows("BILLING", "c-1", "SELECT count(*) AS n FROM billed"))
    world:close()
  end)
end)
