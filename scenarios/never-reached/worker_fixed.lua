--- The coupons of worker.lua, repaired: redeem looks for an earlier
-- redemption of the code in the same turn as it writes its own, so a code
-- is redeemed once.
local eutaxy = require "eutaxy"

---@class Coupons: eutaxy.DurableObject
local Coupons = eutaxy.DurableObject:extend("Coupons")

--- Redeems code for order; returns whether the discount applies.
---@param code string
---@param order string
---@return boolean
function Coupons:redeem(code, order)
  local sql = self.ctx.storage.sql
  if sql:exec("SELECT order_id FROM redemptions WHERE code = ?", code):toArray()[1] then return false end
  sql:exec("INSERT INTO redemptions (order_id, code, redeemed_at) VALUES (?, ?, ?)", order, code, eutaxy.now())
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
