--- The same shop, with the key looked up where it survives a reset: in the
-- orders table, written in the same turn as the order. The instance's memory
-- is only ever a cache of what storage says.
-- `eutaxy check orders.fixed.sim.lua` reports BOUNDED.
local planted = require "worker"

local Orders = planted.Orders:extend("Orders")

function Orders:place(key, item, quantity)
  local known = self.ctx.storage.sql:exec(
    "SELECT id, item, quantity FROM orders WHERE idem_key = ?", key):toArray()[1]
  if known then return known end
  return planted.Orders.place(self, key, item, quantity)
end

return { Orders = Orders, fetch = planted.fetch }
