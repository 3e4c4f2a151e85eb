--- worker.lua with the sale under the input gate: while a sale waits for
-- its price, no other sale reaches the office, so the seats it counted are
-- still there when it records them. `eutaxy check seats.fixed.sim.lua`
-- reports BOUNDED.
local planted = require "worker"

---@class BoxOffice: eutaxy.DurableObject
local BoxOffice = planted.BoxOffice:extend("BoxOffice")

--- Sells n seats: the sale's id, or nil when too few are left.
---@param n integer
function BoxOffice:sell(n)
  return self.ctx.blockConcurrencyWhile(function()
    return planted.BoxOffice.sell(self, n)
  end)
end

return { Venue = planted.Venue, BoxOffice = BoxOffice, fetch = planted.fetch }
