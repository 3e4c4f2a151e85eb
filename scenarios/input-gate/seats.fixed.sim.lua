--- seats.sim.lua over the fixed box office (worker_fixed.lua): the same two
-- sales, and no interleaving or fault within the bounds sells a seat twice.
--   eutaxy check scenarios/input-gate/seats.fixed.sim.lua
local sim = require "eutaxy.check"

return sim.variant("seats.sim.lua", {
  name = "seats-fixed",
  worker = { entry = "./worker_fixed.lua", config = "./wrangler.jsonc" },
})
