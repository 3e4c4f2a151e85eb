--- orders.sim.lua over the idempotent ledger (worker_fixed.lua): the same
-- orders and faults, and every order is booked exactly once.
--   eutaxy check scenarios/fanout/orders.fixed.sim.lua
local sim = require "eutaxy.check"

return sim.variant("orders.sim.lua", {
  name = "orders-fanout-fixed",
  worker = { entry = "./worker_fixed.lua", config = "./wrangler.jsonc" },
})
