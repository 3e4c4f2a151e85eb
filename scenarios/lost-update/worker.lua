--- Bank accounts, one Durable Object each, and an audit log that notes every
-- deposit with the balance it was made on. deposit reads the balance,
-- records the deposit, tells the audit log, and then writes the new balance.
--
-- The call to the audit log is a yield point: a second deposit to the same
-- account can run while the first one waits, read the same old balance, and
-- whichever writes last wins; the other deposit is recorded but its money is
-- gone. Tests that send one request at a time never see it.
-- `eutaxy check deposits.sim.lua` finds it; worker_fixed.lua is the repair.
local eutaxy = require "eutaxy"

---@class Account: eutaxy.DurableObject
local Account = eutaxy.DurableObject:extend("Account")

--- Adds amount to the balance and returns the new balance.
---@param amount integer
function Account:deposit(amount)
  local sql = self.ctx.storage.sql
  local balance = sql:exec("SELECT balance FROM account"):one().balance
  local id = eutaxy.uuid()
  sql:exec("INSERT INTO deposits (id, amount, made_at) VALUES (?, ?, ?)", id, amount, eutaxy.now())
  self.env.AUDIT:getByName("audit"):note(self.ctx.id.name, id, amount, balance)
  sql:exec("UPDATE account SET balance = ?", balance + amount)
  return balance + amount
end

function Account:getBalance()
  return self.ctx.storage.sql:exec("SELECT balance FROM account"):one().balance
end

---@class AuditLog: eutaxy.DurableObject
local AuditLog = eutaxy.DurableObject:extend("AuditLog")

function AuditLog:init()
  self.ctx.storage.sql:exec([[
    CREATE TABLE IF NOT EXISTS entries (account TEXT NOT NULL, deposit TEXT NOT NULL,
                                        amount INTEGER NOT NULL, balance_before INTEGER NOT NULL,
                                        noted_at INTEGER NOT NULL)]])
end

--- Notes a deposit and the balance it was made on.
function AuditLog:note(account, deposit, amount, balance_before)
  self.ctx.storage.sql:exec(
    "INSERT INTO entries (account, deposit, amount, balance_before, noted_at) VALUES (?, ?, ?, ?, ?)",
    account, deposit, amount, balance_before, eutaxy.now())
end

local function fetch(request, env)
  local account, action = eutaxy.url.parse(request.url).pathname:match("^/accounts/([%w_-]+)(.*)$")
  if not account then return eutaxy.Response.new("not found", { status = 404 }) end
  local stub = env.ACCOUNT:getByName(account)
  if request.method == "GET" and action == "" then
    return eutaxy.Response.json({ balance = stub:getBalance() })
  end
  if request.method ~= "POST" or action ~= "/deposit" then
    return eutaxy.Response.new("not found", { status = 404 })
  end
  local ok, body = pcall(request.json, request)
  local amount = ok and type(body) == "table" and body.amount
  if math.type(amount) ~= "integer" or amount <= 0 then
    return eutaxy.Response.new("amount must be a positive whole number", { status = 400 })
  end
  return eutaxy.Response.json({ balance = stub:deposit(amount) })
end

return { Account = Account, AuditLog = AuditLog, fetch = fetch }
