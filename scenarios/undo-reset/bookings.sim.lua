--- One order, placed through the worker; any object may be reset while it
-- waits for a call. At the end, every booking must belong to an order that
-- still exists, and every order must have its booking.
--   eutaxy check scenarios/undo-reset/bookings.sim.lua
local sim = require "eutaxy.check"

local schema = require "schema"
local orders = sim.durableObjectTable("ORDERS", "shop", "orders")
local bookings = sim.durableObjectTable("BOOKS", "books", "bookings")

return sim.defineScenario {
  name = "bookings",
  worker = { entry = "./worker.lua", config = "./wrangler.jsonc" },
  setup = {
    sim.durableObject("ORDERS", {}, { sql = { shop = { schema = schema.orders } } }),
    sim.durableObject("BOOKS", {}, { sql = { books = { schema = schema.books } } }),
  },
  drive = sim.http({ { path = "/orders/o-1", method = "POST" } }),
  invariants = {
    sim.invariant("bookings-match-orders", function(state)
      local placed, booked = {}, {}
      for _, o in ipairs(state:rows(orders)) do placed[o.id] = true end
      for _, b in ipairs(state:rows(bookings)) do
        booked[b.order_id] = true
        if not placed[b.order_id] then
          return false, ("room %s is booked for order %s, which does not exist"):format(b.room, b.order_id)
        end
      end
      for id in pairs(placed) do
        if not booked[id] then return false, ("order %s has no booking"):format(id) end
      end
      return true
    end),
  },
  bounds = { maxFaultsPerRun = 1, maxConcurrentInvocations = 1, budgetMs = 20000 },
}
