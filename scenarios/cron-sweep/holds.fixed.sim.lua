--- holds.sim.lua over the repaired sweeper (worker_fixed.lua): the same
-- requests and the same faults, and every order keeps its hold.
--   eutaxy check scenarios/cron-sweep/holds.fixed.sim.lua
local sim = require "eutaxy.check"

return sim.variant("holds.sim.lua", {
  name = "holds-fixed",
  worker = { entry = "./worker_fixed.lua", config = "./wrangler.jsonc" },
})
