--- A shop's orders in one Durable Object. A client sends an Idempotency-Key
-- with each order, so that a request sent twice (a double click, a retry
-- after a timeout) places one order and gets the same answer both times.
--
-- The object remembers the keys it has seen in a table in memory, which
-- lives as long as the instance does. An object can be reset between two
-- calls (an eviction, a deploy, a crash of its machine): the instance is
-- built again, the table is empty, and the second request places a second
-- order. Tests never reset the object between the two requests.
-- `eutaxy check orders.sim.lua` does; worker_fixed.lua is the repair.
local eutaxy = require "eutaxy"

---@class Orders: eutaxy.DurableObject
local Orders = eutaxy.DurableObject:extend("Orders")

function Orders:init()
  -- the order placed for each idempotency key, so a repeat gets the same answer
  self.placed = {}
end

--- Places an order once per key and returns it: { id =, item =, quantity = }.
---@param key string the client's Idempotency-Key
---@param item string
---@param quantity integer
function Orders:place(key, item, quantity)
  local known = self.placed[key]
  if known then return known end
  local order = { id = eutaxy.uuid(), item = item, quantity = quantity }
  self.ctx.storage.sql:exec(
    "INSERT INTO orders (id, idem_key, item, quantity, placed_at) VALUES (?, ?, ?, ?, ?)",
    order.id, key, item, quantity, eutaxy.now())
  self.placed[key] = order
  return order
end

local function fetch(request, env)
  if request.method ~= "POST" or eutaxy.url.parse(request.url).pathname ~= "/orders" then
    return eutaxy.Response.new("not found", { status = 404 })
  end
  local key = request.headers:get("Idempotency-Key")
  if not key or key == "" then
    return eutaxy.Response.new("an Idempotency-Key header is required", { status = 400 })
  end
  local ok, body = pcall(request.json, request)
  if not ok or type(body) ~= "table" or type(body.item) ~= "string"
    or math.type(body.quantity) ~= "integer" or body.quantity <= 0 then
    return eutaxy.Response.new("an order is { item = string, quantity = positive whole number }", { status = 400 })
  end
  local order = env.ORDERS:getByName("shop"):place(key, body.item, body.quantity)
  return eutaxy.Response.json(order)
end

return { Orders = Orders, fetch = fetch }
