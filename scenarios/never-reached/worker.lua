--- Single-use coupons. POST /coupons/redeem with { code =, order = }
-- redeems a coupon for an order; a coupon may be redeemed once.
--
-- Coupons:redeem writes the redemption without looking whether the code
-- was redeemed already: a second order with the same code gets the
-- discount too. redeem.sim.lua finds it. redeem.unreached.sim.lua asks for
-- /coupon/redeem, a path the worker does not serve: every request is a 404,
-- no coupon is ever redeemed, and the invariant holds in every schedule.
-- Its sim.sometimes probe says so (INCONCLUSIVE, "never reached").
-- worker_fixed.lua is the repair of the worker.
local eutaxy = require "eutaxy"

---@class Coupons: eutaxy.DurableObject
local Coupons = eutaxy.DurableObject:extend("Coupons")

--- Redeems code for order; returns whether the discount applies.
---@param code string
---@param order string
---@return boolean
function Coupons:redeem(code, order)
  self.ctx.storage.sql:exec("INSERT INTO redemptions (order_id, code, redeemed_at) VALUES (?, ?, ?)",
    order, code, eutaxy.now())
  return true
end

local function fetch(request, env)
  if request.method ~= "POST" or eutaxy.url.parse(request.url).pathname ~= "/coupons/redeem" then
    return eutaxy.Response.new("not found", { status = 404 })
  end
  local ok, body = pcall(request.json, request)
  if not ok or type(body) ~= "table" or type(body.code) ~= "string" or type(body.order) ~= "string" then
    return eutaxy.Response.new("a redemption is { code = string, order = string }", { status = 400 })
  end
  if not env.COUPONS:getByName("spring"):redeem(body.code, body.order) then
    return eutaxy.Response.new("this coupon was redeemed already", { status = 409 })
  end
  return eutaxy.Response.new("redeemed")
end

return { Coupons = Coupons, fetch = fetch }
