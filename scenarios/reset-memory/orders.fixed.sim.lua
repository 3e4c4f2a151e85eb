--- orders.sim.lua over the fixed shop (worker_fixed.lua): the same two
-- requests and resets, and every schedule places one order.
--   eutaxy check scenarios/reset-memory/orders.fixed.sim.lua
local sim = require "eutaxy.check"

return sim.variant("orders.sim.lua", {
  name = "orders-fixed",
  worker = { entry = "./worker_fixed.lua", config = "./wrangler.jsonc" },
})
