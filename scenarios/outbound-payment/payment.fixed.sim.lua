--- payment.sim.lua over the fixed order (worker_fixed.lua): a retried charge
-- carries the first one's idempotency key, and no schedule within the bounds
-- charges the order twice.
--   eutaxy check scenarios/outbound-payment/payment.fixed.sim.lua
local sim = require "eutaxy.check"

return sim.variant("payment.sim.lua", {
  name = "payment-fixed",
  worker = { entry = "./worker_fixed.lua", config = "./wrangler.jsonc" },
})
