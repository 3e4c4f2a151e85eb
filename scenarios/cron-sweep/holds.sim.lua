--- A seat is held at the start; its holder confirms it a minute later, the
-- minute the sweeper runs. Every order must keep its seat's hold.
--   eutaxy check scenarios/cron-sweep/holds.sim.lua
local sim = require "eutaxy.check"

local tables = require "schema"
local holds = sim.durableObjectTable("INVENTORY", "inventory", "holds")
local orders = sim.durableObjectTable("INVENTORY", "inventory", "orders")

return sim.defineScenario {
  name = "holds",
  worker = { entry = "./worker.lua", config = "./wrangler.jsonc" },
  setup = { sim.durableObject("INVENTORY", {}, { sql = { inventory = { schema = tables.inventory } } }) },
  drive = sim.http({
    { path = "/holds/a-1", method = "POST" },
    -- at 00:01:00, when the hold expires and the sweeper fires
    { path = "/holds/a-1/confirm", method = "POST", at = 60 * 1000 },
  }, { retries = 0 }),
  invariants = {
    sim.invariant("every-order-keeps-its-hold", function(state)
      local held = {}
      for _, row in ipairs(state:rows(holds)) do held[row.seat] = row end
      for _, order in ipairs(state:rows(orders)) do
        local hold = held[order.seat]
        if not hold or hold.confirmed ~= 1 then
          return false, ("seat %s was ordered, but its hold is gone: it is on sale again"):format(order.seat)
        end
      end
      return true
    end),
    -- the sweeper does its work in some schedule: a hold it takes back
    sim.sometimes("a-hold-is-swept", function(state)
      return #state:rows(holds) == 0 and #state:rows(orders) == 0
    end),
  },
  bounds = { maxFaultsPerRun = 1, cronsPerRun = 2, budgetMs = 10000 },
}
