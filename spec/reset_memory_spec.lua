--- The shop under ordinary tests: the planted worker and the fixed one pass
-- every one of them, because no test resets the object between two requests
-- with the same key. That is the checker's to find
-- (scenarios/reset-memory/orders.sim.lua).
local testing = require "eutaxy.testing"
local shop = dofile("scenarios/reset-memory/schema.lua")

local function new_world(main)
  return testing.world {
    config = "scenarios/reset-memory/wrangler.jsonc", main = main,
    sql = { ORDERS = { shop = shop } },
  }
end

local function order(world, key, body)
  return world:fetch("/orders", {
    method = "POST", headers = { ["Idempotency-Key"] = key },
    body = body or '{"item": "espresso beans", "quantity": 2}',
  })
end

for _, main in ipairs({ "worker.lua", "worker_fixed.lua" }) do
  describe("the shop (" .. main .. ")", function()
    local world
    before_each(function() world = new_world(main) end)
    after_each(function() world:close() end)

    it("places an order and stores it under its key", function()
      local response = order(world, "k-1")
      assert.are.equal(200, response.status)
      local placed = response:json()
      assert.are.same({ item = "espresso beans", quantity = 2 }, { item = placed.item, quantity = placed.quantity })
      assert.are.same({ { id = placed.id, idem_key = "k-1", item = "espresso beans", quantity = 2 } },
        world:rows("ORDERS", "shop", "SELECT id, idem_key, item, quantity FROM orders"))
    end)

    it("answers a repeated key with the first order and places no other", function()
      local first = order(world, "k-1"):text()
      assert.are.equal(first, order(world, "k-1"):text())
      assert.are.same({ { n = 1 } }, world:rows("ORDERS", "shop", "SELECT count(*) AS n FROM orders"))
    end)

    it("places another order for another key", function()
      local a = order(world, "k-1"):json()
      local b = order(world, "k-2", '{"item": "filters", "quantity": 1}'):json()
      assert.are_not.equal(a.id, b.id)
      assert.are.same({ { n = 2 } }, world:rows("ORDERS", "shop", "SELECT count(*) AS n FROM orders"))
    end)

    it("refuses an order without a key or with a malformed body", function()
      local response = world:fetch("/orders", { method = "POST", body = '{"item": "filters", "quantity": 1}' })
      assert.are.equal(400, response.status)
      for _, body in ipairs({ "not json", '{"item": "filters"}', '{"item": "filters", "quantity": 0}' }) do
        assert.are.equal(400, order(world, "k-1", body).status, body)
      end
      assert.are.same({ { n = 0 } }, world:rows("ORDERS", "shop", "SELECT count(*) AS n FROM orders"))
    end)

    it("answers 404 for anything but POST /orders", function()
      assert.are.equal(404, world:fetch("/orders").status)
      assert.are.equal(404, world:fetch("/elsewhere", { method = "POST" }).status)
    end)
  end)
end

describe("the fixed shop", function()
  it("answers a repeated key with the first order after a reset", function()
    local world = new_world("worker_fixed.lua")
    local first = order(world, "k-1"):json()
    world:reset("ORDERS", "shop")
    assert.are.same(first, order(world, "k-1"):json())
    assert.are.same({ { n = 1 } }, world:rows("ORDERS", "shop", "SELECT count(*) AS n FROM orders"))
    world:close()
  end)
end)
