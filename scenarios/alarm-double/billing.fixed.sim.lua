--- billing.sim.lua over the fixed billing (worker_fixed.lua): the same usage
-- and the same second run of the alarm, and the hour is billed once.
--   eutaxy check scenarios/alarm-double/billing.fixed.sim.lua
local sim = require "eutaxy.check"

local customer = require "schema"
local usage = sim.durableObjectTable("BILLING", "c-1", "usage")
local invoice = sim.durableObjectTable("BILLING", "c-1", "invoice")

return sim.defineScenario {
  name = "billing-fixed",
  worker = { entry = "./worker_fixed.lua", config = "./wrangler.jsonc" },
  setup = { sim.durableObject("BILLING", {}, { sql = { ["c-1"] = customer } }) },
  drive = sim.http({
    { path = "/customers/c-1/usage", method = "POST", body = '{"amount": 30}' },
    { path = "/customers/c-1/usage", method = "POST", body = '{"amount": 12}' },
  }, { retries = 0 }),
  invariants = {
    -- Once every hour has ended and been billed, the invoice is the usage, no more and no less.
    sim.invariant("invoice-is-the-usage", function(state)
      local used = state:rows(usage)
      local invoices = state:rows(invoice)
      local sum = 0
      for _, row in ipairs(used) do sum = sum + row.amount end
      local total = invoices[1].total
      return total == sum, ("the invoice total is %d but the usage adds up to %d"):format(total, sum)
    end),
  },
  -- Only the at-least-once alarm is in question here.
  faults = { "alarm-lost" },
  bounds = { maxFaultsPerRun = 1, maxConcurrentInvocations = 1, budgetMs = 2000 },
}
