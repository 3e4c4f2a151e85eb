--- The same billing, with an alarm that is safe to run again: it bills every
-- ended hour not billed yet and records each one it bills in the same turn,
-- so a second run finds nothing left to bill.
-- `eutaxy check billing.fixed.sim.lua` reports BOUNDED.
local eutaxy = require "eutaxy"
local planted = require "worker"

local HOUR_MS = planted.HOUR_MS

local Billing = planted.Billing:extend("Billing")

function Billing:init()
  self.ctx.storage.sql:exec("CREATE TABLE IF NOT EXISTS billed (period INTEGER PRIMARY KEY, amount INTEGER NOT NULL)")
end

function Billing:alarm()
  local sql = self.ctx.storage.sql
  local hours = sql:exec([[
    SELECT period, sum(amount) AS amount FROM usage
    WHERE period < ? AND period NOT IN (SELECT period FROM billed)
    GROUP BY period ORDER BY period]], eutaxy.now() // HOUR_MS):toArray()
  for _, hour in ipairs(hours) do
    sql:exec("UPDATE invoice SET total = total + ?", hour.amount)
    sql:exec("INSERT INTO billed (period, amount) VALUES (?, ?)", hour.period, hour.amount)
  end
  self:_wakeForNext()
end

return { Billing = Billing, fetch = planted.fetch, HOUR_MS = HOUR_MS }
