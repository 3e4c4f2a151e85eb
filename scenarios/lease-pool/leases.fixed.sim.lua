--- leases.sim.lua over the fixed pool (worker_fixed.lua): the same requests,
-- faults and invariants, and no schedule within the bounds violates them.
--   eutaxy check scenarios/lease-pool/leases.fixed.sim.lua
local sim = require "eutaxy.check"

return sim.variant("leases.sim.lua", {
  name = "leases-fixed",
  worker = { entry = "./worker_fixed.lua", config = "./wrangler.jsonc" },
})
