--- bookings.sim.lua over the repaired shop (worker_fixed.lua): the same order,
-- the same faults, and no booking outlives its order.
--   eutaxy check scenarios/undo-reset/bookings.fixed.sim.lua
local sim = require "eutaxy.check"

return sim.variant("bookings.sim.lua", {
  name = "bookings-fixed",
  worker = { entry = "./worker_fixed.lua", config = "./wrangler.jsonc" },
})
