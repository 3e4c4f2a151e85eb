--- A hotel shop. An order is written by the Orders object, which then books
-- its room at the Books object. When the call to place an order fails, the
-- worker undoes it: it asks Orders to cancel, which deletes the order and
-- cancels its booking, if any was made.
--
-- That undo looks complete, and every test passes. But an object can be reset
-- while it waits for a call (a deploy, an exceeded limit, a machine lost):
-- Orders' place ends with a retryable error while its call to Books has not
-- arrived yet, and that call runs on. The worker's undo can then reach Books
-- before the booking does: the cancel finds nothing to cancel, and the booking
-- lands afterwards, for an order that no longer exists.
-- `eutaxy check bookings.sim.lua` finds it; worker_fixed.lua is the repair.
local eutaxy = require "eutaxy"

---@class Orders: eutaxy.DurableObject
local Orders = eutaxy.DurableObject:extend("Orders")

--- Writes the order, then books its room.
---@param id string
---@param room string
function Orders:place(id, room)
  self.ctx.storage.sql:exec("INSERT OR IGNORE INTO orders (id, room) VALUES (?, ?)", id, room)
  local books = self.env.BOOKS:getByName("books")
  books:book(id, room)  -- the insert commits here, before the call leaves
  return id
end

--- Deletes the order and cancels its booking.
---@param id string
function Orders:cancel(id)
  self.ctx.storage.sql:exec("DELETE FROM orders WHERE id = ?", id)
  self.env.BOOKS:getByName("books"):cancel(id)
end

---@class Books: eutaxy.DurableObject
local Books = eutaxy.DurableObject:extend("Books")

---@param order string
---@param room string
function Books:book(order, room)
  self.ctx.storage.sql:exec("INSERT OR IGNORE INTO bookings (order_id, room) VALUES (?, ?)", order, room)
end

---@param order string
function Books:cancel(order)
  self.ctx.storage.sql:exec("DELETE FROM bookings WHERE order_id = ?", order)
end

local function fetch(request, env)
  local id = eutaxy.url.parse(request.url).pathname:match("^/orders/([%w%-]+)$")
  if request.method ~= "POST" or not id then return eutaxy.Response.new("not found", { status = 404 }) end
  local orders = env.ORDERS:getByName("shop")
  local ok = pcall(orders.place, orders, id, "room-12")
  if ok then return eutaxy.Response.new("booked", { status = 201 }) end
  -- The order may be half made: undo it, and tell the client to try again.
  pcall(orders.cancel, orders, id)
  return eutaxy.Response.new("try again", { status = 503 })
end

return { Orders = Orders, Books = Books, fetch = fetch }
