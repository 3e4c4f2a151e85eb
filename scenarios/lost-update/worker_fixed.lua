--- The same accounts, with deposit's read, add and write in one turn, before
-- the call to the audit log: no other invocation can run inside a turn, so
-- concurrent deposits each add to the balance the other left.
-- `eutaxy check deposits.fixed.sim.lua` reports BOUNDED.
local eutaxy = require "eutaxy"
local planted = require "worker"

local Account = planted.Account:extend("Account")

function Account:deposit(amount)
  local sql = self.ctx.storage.sql
  local balance = sql:exec("SELECT balance FROM account"):one().balance
  local id = eutaxy.uuid()
  sql:exec("INSERT INTO deposits (id, amount, made_at) VALUES (?, ?, ?)", id, amount, eutaxy.now())
  sql:exec("UPDATE account SET balance = balance + ?", amount)
  self.env.AUDIT:getByName("audit"):note(self.ctx.id.name, id, amount, balance)
  return balance + amount
end

return { Account = Account, AuditLog = planted.AuditLog, fetch = planted.fetch }
