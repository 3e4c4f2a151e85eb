--- deposits.sim.lua over the fixed account (worker_fixed.lua): the same two
-- deposits, and no interleaving within the bounds loses one.
--   eutaxy check scenarios/lost-update/deposits.fixed.sim.lua
local sim = require "eutaxy.check"

return sim.variant("deposits.sim.lua", {
  name = "deposits-fixed",
  worker = { entry = "./worker_fixed.lua", config = "./wrangler.jsonc" },
})
