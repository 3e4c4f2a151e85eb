--- billing.sim.lua over the fixed billing (worker_fixed.lua): the same usage
-- and the same second run of the alarm, and the hour is billed once.
--   eutaxy check scenarios/alarm-double/billing.fixed.sim.lua
local sim = require "eutaxy.check"

return sim.variant("billing.sim.lua", {
  name = "billing-fixed",
  worker = { entry = "./worker_fixed.lua", config = "./wrangler.jsonc" },
})
