--- deposits.sim.lua over the fixed account (worker_fixed.lua): the same two
-- deposits, and no interleaving within the bounds loses one.
--   eutaxy check scenarios/lost-update/deposits.fixed.sim.lua
local sim = require "eutaxy.check"

local account = require "schema"
local balance = sim.durableObjectTable("ACCOUNT", "acct-1", "account")
local deposits = sim.durableObjectTable("ACCOUNT", "acct-1", "deposits")

return sim.defineScenario {
  name = "deposits-fixed",
  worker = { entry = "./worker_fixed.lua", config = "./wrangler.jsonc" },
  setup = {
    sim.durableObject("ACCOUNT", {}, { sql = { ["acct-1"] = account } }),
    sim.durableObject("AUDIT", {}),
  },
  drive = sim.http({
    { path = "/accounts/acct-1/deposit", method = "POST", body = '{"amount": 50}' },
    { path = "/accounts/acct-1/deposit", method = "POST", body = '{"amount": 70}' },
  }, { retries = 0 }),
  invariants = {
    -- Every deposit recorded is in the balance, once.
    sim.invariant("balance-is-the-sum-of-deposits", function(state)
      local accounts = state:rows(balance)
      local made = state:rows(deposits)
      local sum = 0
      for _, deposit in ipairs(made) do sum = sum + deposit.amount end
      local total = accounts[1].balance
      return total == sum, ("the balance is %d but the deposits add up to %d"):format(total, sum)
    end),
  },
  -- The bug needs no fault, only two deposits in the account at once.
  faults = {},
  bounds = { maxFaultsPerRun = 0, maxConcurrentInvocations = 2, budgetMs = 2000 },
}
