--- Metered billing, one Durable Object per customer. record adds usage to
-- the current hour and sets the alarm for the hour's end; the alarm adds the
-- hour that just ended to the invoice.
--
-- Alarms are at-least-once: one that ran and committed can still run again
-- when its completion is lost. This alarm does not record which hour it
-- billed, so the second run bills the hour again. Tests run each alarm once.
-- `eutaxy check billing.sim.lua` runs it twice; worker_fixed.lua is the repair.
local eutaxy = require "eutaxy"

local HOUR_MS = 60 * 60 * 1000

---@class Billing: eutaxy.DurableObject
local Billing = eutaxy.DurableObject:extend("Billing")

--- Records usage in the current hour, billed when the hour ends.
---@param amount integer
function Billing:record(amount)
  local storage = self.ctx.storage
  local now = eutaxy.now()
  local period = now // HOUR_MS
  storage.sql:exec("INSERT INTO usage (period, amount, recorded_at) VALUES (?, ?, ?)", period, amount, now)
  local ends = (period + 1) * HOUR_MS
  local alarm = storage:getAlarm()
  if alarm == nil or ends < alarm then storage:setAlarm(ends) end
end

function Billing:getInvoice()
  return self.ctx.storage.sql:exec("SELECT total FROM invoice"):one().total
end

--- Adds the usage of the hour that just ended to the invoice, and wakes at
--- the end of the next hour that has usage.
function Billing:alarm()
  local storage = self.ctx.storage
  local ended = eutaxy.now() // HOUR_MS - 1
  local sum = storage.sql:exec("SELECT coalesce(sum(amount), 0) AS sum FROM usage WHERE period = ?", ended):one().sum
  storage.sql:exec("UPDATE invoice SET total = total + ?", sum)
  self:_wakeForNext()
end

-- Names starting with _ are not callable over RPC.
function Billing:_wakeForNext()
  local storage = self.ctx.storage
  local next_period = storage.sql:exec("SELECT min(period) AS p FROM usage WHERE period >= ?",
    eutaxy.now() // HOUR_MS):one().p
  if next_period ~= nil then storage:setAlarm((next_period + 1) * HOUR_MS) end
end

local function fetch(request, env)
  local customer, action = eutaxy.url.parse(request.url).pathname:match("^/customers/([%w_-]+)/(%a+)$")
  if not customer then return eutaxy.Response.new("not found", { status = 404 }) end
  local billing = env.BILLING:getByName(customer)
  if request.method == "GET" and action == "invoice" then
    return eutaxy.Response.json({ total = billing:getInvoice() })
  end
  if request.method ~= "POST" or action ~= "usage" then
    return eutaxy.Response.new("not found", { status = 404 })
  end
  local ok, body = pcall(request.json, request)
  local amount = ok and type(body) == "table" and body.amount
  if math.type(amount) ~= "integer" or amount <= 0 then
    return eutaxy.Response.new("amount must be a positive whole number", { status = 400 })
  end
  billing:record(amount)
  return eutaxy.Response.new(nil, { status = 204 })
end

return { Billing = Billing, fetch = fetch, HOUR_MS = HOUR_MS }
