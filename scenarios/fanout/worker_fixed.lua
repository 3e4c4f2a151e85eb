--- The same shop with an idempotent ledger: an order is booked once, however
-- often its delivery runs. `eutaxy check orders.fixed.sim.lua` reports BOUNDED.
local planted = require "worker"

local Ledger = planted.Ledger:extend("Ledger")

function Ledger:record(order, amount)
  local storage = self.ctx.storage
  if storage.sql:exec("SELECT 1 FROM entries WHERE order_id = ?", order):next() then return end
  storage.sql:exec("INSERT INTO entries (order_id, amount) VALUES (?, ?)", order, amount)
end

return { Orders = planted.Orders, Mailer = planted.Mailer, Ledger = Ledger, fetch = planted.fetch }
