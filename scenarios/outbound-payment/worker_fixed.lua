--- worker.lua with the repair: every charge request of an order carries the
-- same Idempotency-Key, so the provider answers a retry with the charge it
-- already made instead of making another. `eutaxy check
-- payment.fixed.sim.lua` reports BOUNDED.
local planted = require "worker"

local Order = planted.Order:extend("Order")

function Order:_charge_headers()
  return { ["content-type"] = "application/json", ["idempotency-key"] = "order-" .. self.ctx.id.name }
end

return { Order = Order, fetch = planted.fetch }
