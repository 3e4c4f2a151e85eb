--- A shop that records each order, then fans it out to two independent
-- targets: `email` sends the confirmation through the Mailer object and
-- `ledger` books the amount through the Ledger object. Fanout retries a
-- delivery until its target acknowledges it, so a target runs at least
-- once per order, and sometimes more: after a call to the ledger committed
-- but lost its answer, the delivery is retried and Ledger:record books the
-- same order twice. `eutaxy check orders.sim.lua` finds it; worker_fixed.lua
-- makes the ledger idempotent.
local eutaxy = require "eutaxy"

---@class Orders: eutaxy.DurableObject
local Orders = eutaxy.DurableObject:extend("Orders")

-- Orders arriving within a second share one batch per target.
Orders.batchDelayMs = 1000

function Orders:init()
  local env, storage = self.env, self.ctx.storage
  self.fanout = eutaxy.fanout {
    ctx = self.ctx,
    batchDelayMs = self.batchDelayMs,
    targets = {
      email = {
        ackOnReturn = true,
        deliver = function(messages)
          local mailer = env.EMAIL:getByName("mail")
          for _, m in ipairs(messages) do mailer:send(m.body.order) end
        end,
      },
      ledger = {
        deliver = function(messages)
          local books = env.LEDGER:getByName("books")
          for _, m in ipairs(messages) do
            books:record(m.body.order, m.body.amount)
            m:ack()
          end
        end,
      },
    },
    -- A delivery that gives up is kept, so nothing is lost without a trace.
    dlq = function(stored)
      storage.sql:exec("INSERT INTO dead_letters (message_id, target, reason) VALUES (?, ?, ?)",
        stored.messageId, stored.target, stored.failure and stored.failure.reason or "unknown")
    end,
  }
end

--- Records the order and hands it to the fanout, in one turn.
function Orders:place(order, amount)
  self.ctx.storage.sql:exec("INSERT OR IGNORE INTO orders (id, amount) VALUES (?, ?)", order, amount)
  local result = self.fanout:enqueue({ { id = order, body = { order = order, amount = amount } } })
  if not result.success then error("the order could not be queued: " .. tostring(result.error)) end
  return order
end

function Orders:alarm(info)
  return eutaxy.scheduler(self.ctx):alarm(info)
end

---@class Mailer: eutaxy.DurableObject
local Mailer = eutaxy.DurableObject:extend("Mailer")

--- Sends the confirmation at most once per order.
function Mailer:send(order)
  self.ctx.storage.sql:exec("INSERT OR IGNORE INTO sent (order_id) VALUES (?)", order)
end

---@class Ledger: eutaxy.DurableObject
local Ledger = eutaxy.DurableObject:extend("Ledger")

--- Books the order's amount: once per call, which a retried delivery repeats.
function Ledger:record(order, amount)
  self.ctx.storage.sql:exec("INSERT INTO entries (order_id, amount) VALUES (?, ?)", order, amount)
end

local function fetch(request, env)
  local order = eutaxy.url.parse(request.url).pathname:match("^/orders/([%w_-]+)$")
  if request.method ~= "POST" or not order then return eutaxy.Response.new("not found", { status = 404 }) end
  local body = request:json()
  local shop = env.ORDERS:getByName("shop")
  if not pcall(shop.place, shop, order, body.amount) then
    return eutaxy.Response.new("the shop is unavailable", { status = 503 })
  end
  return eutaxy.Response.new(nil, { status = 202 })
end

return { Orders = Orders, Mailer = Mailer, Ledger = Ledger, fetch = fetch }
