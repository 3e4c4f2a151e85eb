--- The seat holds of worker.lua, repaired: the inventory releases only
-- holds that are still unconfirmed, checking in the same turn as it
-- deletes, so a confirmation that comes between the sweeper's two calls
-- keeps its seat. (Inventory:sweep(now), one call that finds and releases
-- in one turn, would do as well.)
local planted = require "worker"

---@class Inventory: eutaxy.DurableObject
local Inventory = planted.Inventory:extend("Inventory")

--- Puts the seats back on sale, those still unconfirmed: a hold confirmed
-- since the sweeper asked stays.
---@param seats string[]
function Inventory:release(seats)
  for _, seat in ipairs(seats) do
    self.ctx.storage.sql:exec("DELETE FROM holds WHERE seat = ? AND confirmed = 0", seat)
  end
end

return { Inventory = Inventory, fetch = planted.fetch, scheduled = planted.scheduled }
