--- A client sends the same order twice with one Idempotency-Key, and the
-- shop's object may be reset between any two of its invocations.
--   eutaxy check scenarios/reset-memory/orders.sim.lua
local sim = require "eutaxy.check"

local shop = require "schema"
local orders = sim.durableObjectTable("ORDERS", "shop", "orders")

local order = {
  path = "/orders", method = "POST",
  headers = { ["Idempotency-Key"] = "order-7f3a", ["Content-Type"] = "application/json" },
  body = '{"item": "espresso beans", "quantity": 2}',
}

return sim.defineScenario {
  name = "orders",
  worker = { entry = "./worker.lua", config = "./wrangler.jsonc" },
  setup = { sim.durableObject("ORDERS", {}, { sql = { shop = shop } }) },
  -- The client clicked twice: two requests with the same key, one after the other.
  drive = sim.http({ order, order }, { retries = 0 }),
  invariants = {
    -- One key, one order.
    sim.unique("one-order-per-key", orders, "idem_key"),
    -- Both requests are told about the same order.
    sim.invariant("same-key-same-answer", function(state)
      local first
      for _, response in ipairs(state.responses) do
        if response.status == 200 then
          first = first or response.body
          if response.body ~= first then
            return false, ("%s answered %s, another request with the same key %s"):format(
              response.event, response.body, first)
          end
        end
      end
      return true
    end),
  },
  faults = { "reset" },
  bounds = { maxFaultsPerRun = 1, maxConcurrentInvocations = 1, budgetMs = 2000 },
}
