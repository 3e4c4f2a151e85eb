--- The hotel shop of worker.lua, repaired: Books remembers every order it
-- was told to cancel, and refuses to book one of them. The cancel may reach
-- Books before the booking it undoes (Orders was reset while it waited, and
-- its call ran on): the booking that arrives late then finds the order
-- cancelled and does nothing.
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
  local sql = self.ctx.storage.sql
  if sql:exec("SELECT 1 FROM cancelled WHERE order_id = ?", order):next() then return end
  sql:exec("INSERT OR IGNORE INTO bookings (order_id, room) VALUES (?, ?)", order, room)
end

---@param order string
function Books:cancel(order)
  local sql = self.ctx.storage.sql
  sql:exec("INSERT OR IGNORE INTO cancelled (order_id) VALUES (?)", order)
  sql:exec("DELETE FROM bookings WHERE order_id = ?", order)
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
