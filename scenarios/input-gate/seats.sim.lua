--- Two customers buy two of the show's three seats at once. No fault is
-- injected: the checker only lets the two sales interleave where each
-- waits for its price.
--   eutaxy check scenarios/input-gate/seats.sim.lua
local sim = require "eutaxy.check"

local sales = sim.durableObjectTable("OFFICE", "gala", "sales")

return sim.defineScenario {
  name = "seats",
  worker = { entry = "./worker.lua", config = "./wrangler.jsonc" },
  drive = sim.http({
    { path = "/shows/gala/buy/2", method = "POST" },
    { path = "/shows/gala/buy/2", method = "POST" },
  }, { retries = 0 }),
  invariants = {
    sim.invariant("no-seat-sold-twice", function(state)
      local sold = 0
      for _, sale in ipairs(state:rows(sales)) do sold = sold + sale.seats end
      return sold <= 3, ("%d seats sold of 3"):format(sold)
    end),
    sim.sometimes("a-sale", function(state) return #state:rows(sales) > 0 end),
  },
  -- The bug needs no fault, only two sales in the office at once.
  faults = {},
  bounds = { maxFaultsPerRun = 0, maxConcurrentInvocations = 2, budgetMs = 2000 },
}
