--- Seat holds for a ticket shop. POST /holds/SEAT holds a seat for a
-- minute; POST /holds/SEAT/confirm turns the hold into an order, for as
-- long as the hold is there; GET /holds/SEAT says whether it is. Every
-- minute a cron trigger sweeps the holds that expired unconfirmed, so the
-- seats go back on sale.
--
-- The sweeper (scheduled) asks the inventory which holds expired, then
-- releases them: two calls, and an await between them. A confirmation
-- that comes in between confirms a hold the sweeper already chose, and
-- the release takes it anyway: the order has lost its seat. Nothing goes
-- wrong when either runs alone, so no fault is needed, only the cron and
-- a request at the same minute. worker_fixed.lua is the repair.
local eutaxy = require "eutaxy"

---@class Inventory: eutaxy.DurableObject
local Inventory = eutaxy.DurableObject:extend("Inventory")

function Inventory:init()
  self.ctx.storage.sql:exec(require("schema").inventory)
end

--- Holds seat until ms from now.
---@param seat string
---@param ms integer
function Inventory:hold(seat, ms)
  self.ctx.storage.sql:exec("INSERT OR REPLACE INTO holds (seat, expires_at) VALUES (?, ?)", seat, eutaxy.now() + ms)
end

--- Turns seat's hold into an order: false when there is no hold to confirm.
---@param seat string
---@return boolean
function Inventory:confirm(seat)
  local sql = self.ctx.storage.sql
  if not sql:exec("SELECT seat FROM holds WHERE seat = ?", seat):toArray()[1] then return false end
  sql:exec("UPDATE holds SET confirmed = 1 WHERE seat = ?", seat)
  sql:exec("INSERT OR IGNORE INTO orders (seat, ordered_at) VALUES (?, ?)", seat, eutaxy.now())
  return true
end

--- The seats whose holds expired by now and were not confirmed.
---@param now integer
---@return string[]
function Inventory:expired(now)
  local seats = {}
  for row in self.ctx.storage.sql:exec("SELECT seat FROM holds WHERE expires_at <= ? AND confirmed = 0 ORDER BY seat", now):rows() do
    seats[#seats + 1] = row.seat
  end
  return seats
end

--- Puts the seats back on sale.
---@param seats string[]
function Inventory:release(seats)
  for _, seat in ipairs(seats) do
    self.ctx.storage.sql:exec("DELETE FROM holds WHERE seat = ?", seat)
  end
end

---@param seat string
---@return boolean
function Inventory:held(seat)
  return self.ctx.storage.sql:exec("SELECT seat FROM holds WHERE seat = ?", seat):toArray()[1] ~= nil
end

local function route(request, env)
  local path = eutaxy.url.parse(request.url).pathname
  local inventory = env.INVENTORY:getByName("inventory")
  local seat = path:match("^/holds/([%w-]+)$")
  if seat and request.method == "GET" then
    if inventory:held(seat) then return eutaxy.Response.new("held") end
    return eutaxy.Response.new("not held", { status = 404 })
  elseif seat and request.method == "POST" then
    inventory:hold(seat, 60 * 1000)
    return eutaxy.Response.new("held for a minute", { status = 201 })
  end
  seat = path:match("^/holds/([%w-]+)/confirm$")
  if seat and request.method == "POST" then
    if not inventory:confirm(seat) then return eutaxy.Response.new("the hold is gone", { status = 409 }) end
    return eutaxy.Response.new("ordered")
  end
  return eutaxy.Response.new("not found", { status = 404 })
end

local function fetch(request, env)
  local ok, response = pcall(route, request, env)
  if ok then return response end
  return eutaxy.Response.new("the inventory is unavailable: try again", { status = 503 })
end

--- The sweeper: every minute, the holds that expired unconfirmed go back
-- on sale. A sweep cut short (a call lost on the way) is left to the next
-- one, a minute later.
---@param controller eutaxy.ScheduledController
local function scheduled(controller, env)
  local inventory = env.INVENTORY:getByName("inventory")
  local ok, seats = pcall(inventory.expired, inventory, controller.scheduledTime)
  if ok and #seats > 0 then pcall(inventory.release, inventory, seats) end
end

return { Inventory = Inventory, fetch = fetch, scheduled = scheduled }
