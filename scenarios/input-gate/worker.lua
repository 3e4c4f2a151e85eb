--- A box office, one Durable Object per show, and the venue that says how
-- many seats a show has. The office asks the venue in init, under
-- ctx.blockConcurrencyWhile, so no sale runs before it knows. A sale counts
-- the seats left, asks the venue for the price, and then records the seats.
--
-- The call for the price is a yield point: a second sale can run while the
-- first waits, count the same seats left, and both sell them. Tests that
-- send one request at a time never see it. `eutaxy check seats.sim.lua`
-- finds it; worker_fixed.lua is the repair.
local eutaxy = require "eutaxy"

---@class Venue: eutaxy.DurableObject
local Venue = eutaxy.DurableObject:extend("Venue")

function Venue:seats() return 3 end

function Venue:price(n) return 25 * n end

---@class BoxOffice: eutaxy.DurableObject
local BoxOffice = eutaxy.DurableObject:extend("BoxOffice")

function BoxOffice:init()
  self.ctx.storage.sql:exec("CREATE TABLE IF NOT EXISTS sales (id TEXT PRIMARY KEY, seats INTEGER NOT NULL, paid INTEGER NOT NULL)")
  -- init cannot wait by itself: the venue's answer comes under the input
  -- gate, before any sale is delivered.
  self.ctx.blockConcurrencyWhile(function()
    self.capacity = self.env.VENUE:getByName("venue"):seats()
  end)
end

function BoxOffice:left()
  return self.capacity - self.ctx.storage.sql:exec("SELECT coalesce(sum(seats), 0) AS n FROM sales"):one().n
end

--- Sells n seats: the sale's id, or nil when too few are left.
---@param n integer
function BoxOffice:sell(n)
  if self:left() < n then return nil end
  local paid = self.env.VENUE:getByName("venue"):price(n)
  local id = eutaxy.uuid()
  self.ctx.storage.sql:exec("INSERT INTO sales (id, seats, paid) VALUES (?, ?, ?)", id, n, paid)
  return id
end

local function fetch(request, env)
  local show, n = eutaxy.url.parse(request.url).pathname:match("^/shows/([%w_-]+)/buy/(%d+)$")
  if not show or request.method ~= "POST" then return eutaxy.Response.new("not found", { status = 404 }) end
  local office = env.OFFICE:getByName(show)
  local ok, sale = pcall(office.sell, office, tonumber(n))
  if not ok then return eutaxy.Response.new("try again", { status = 503 }) end
  if not sale then return eutaxy.Response.new("sold out", { status = 409 }) end
  return eutaxy.Response.json({ sale = sale })
end

return { Venue = Venue, BoxOffice = BoxOffice, fetch = fetch }
