--- redeem.sim.lua over the fixed coupons (worker_fixed.lua): the probe is
-- reached, and no schedule redeems the coupon twice. BOUNDED.
--   eutaxy check scenarios/never-reached/redeem.fixed.sim.lua
local sim = require "eutaxy.check"

return sim.variant("redeem.sim.lua", {
  name = "redeem-fixed",
  worker = { entry = "./worker_fixed.lua", config = "./wrangler.jsonc" },
})
