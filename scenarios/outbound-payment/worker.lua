--- A shop's orders. Paying an order charges it at the payment provider
-- (https://payments.example, outside the worker) and records the charge.
-- The charge is retried once when the call fails.
--
-- The retry is right for a call that never reached the provider and wrong
-- for one that the provider applied before its answer was lost: the order
-- is then charged twice. `eutaxy check payment.sim.lua` finds it;
-- worker_fixed.lua is the repair.
local eutaxy = require "eutaxy"

---@class Order: eutaxy.DurableObject
local Order = eutaxy.DurableObject:extend("Order")

function Order:init()
  self.ctx.storage.sql:exec("CREATE TABLE IF NOT EXISTS paid (charge TEXT NOT NULL, amount INTEGER NOT NULL)")
end

-- The headers of a charge request; worker_fixed.lua adds an idempotency key.
function Order:_charge_headers()
  return { ["content-type"] = "application/json" }
end

--- Charges the order once, and returns the charge's id.
---@param amount integer cents
function Order:pay(amount)
  local sql = self.ctx.storage.sql
  local done = sql:exec("SELECT charge FROM paid"):toArray()[1]
  if done then return done.charge end
  local body = eutaxy.json.encode({ order = self.ctx.id.name, amount = amount })
  for attempt = 1, 2 do
    local ok, response = pcall(eutaxy.fetch, "https://payments.example/charges",
      { method = "POST", headers = self:_charge_headers(), body = body })
    if ok and response.status == 200 then
      local charge = eutaxy.json.decode(response.body).id
      sql:exec("INSERT INTO paid (charge, amount) VALUES (?, ?)", charge, amount)
      return charge
    end
    if attempt == 2 then error(ok and "the provider said " .. response.status or response, 0) end
  end
end

local function fetch(request, env)
  local order = eutaxy.url.parse(request.url).pathname:match("^/orders/([%w_-]+)/pay$")
  if request.method ~= "POST" or not order then
    return eutaxy.Response.new("not found", { status = 404 })
  end
  local ok, charge = pcall(function()
    return env.ORDERS:getByName(order):pay(eutaxy.json.decode(request.body).amount)
  end)
  if not ok then return eutaxy.Response.new("payment failed", { status = 502 }) end
  return eutaxy.Response.json({ charge = charge })
end

return { Order = Order, fetch = fetch }
