--- locks.sim.lua over the fixed job (worker_fixed.lua): the same two
-- requests, and no schedule has two holders at any moment.
--   eutaxy check scenarios/lock-check/locks.fixed.sim.lua
local sim = require "eutaxy.check"

return sim.variant("locks.sim.lua", {
  name = "locks-fixed",
  worker = { entry = "./worker_fixed.lua", config = "./wrangler.jsonc" },
})
