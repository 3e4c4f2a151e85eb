--- The accounts under ordinary tests: the planted worker and the fixed one
-- pass every one of them, because each test sends one request at a time. Two
-- deposits interleaving at the call to the audit log is the checker's to find
-- (scenarios/lost-update/deposits.sim.lua).
local testing = require "eutaxy.testing"
local account = dofile("scenarios/lost-update/schema.lua")

for _, main in ipairs({ "worker.lua", "worker_fixed.lua" }) do
  describe("an account (" .. main .. ")", function()
    local world
    before_each(function()
      world = testing.world {
        config = "scenarios/lost-update/wrangler.jsonc", main = main,
        sql = { ACCOUNT = { ["acct-1"] = account } },
      }
    end)
    after_each(function() world:close() end)

    local function deposit(amount)
      return world:fetch("/accounts/acct-1/deposit", { method = "POST", body = '{"amount": ' .. amount .. "}" })
    end

    it("adds a deposit to the balance and records it", function()
      local response = deposit(50)
      assert.are.equal(200, response.status)
      assert.are.same({ balance = 50 }, response:json())
      assert.are.same({ { amount = 50 } }, world:rows("ACCOUNT", "acct-1", "SELECT amount FROM deposits"))
    end)

    it("adds deposits made one after another", function()
      deposit(50)
      deposit(70)
      assert.are.same({ balance = 120 }, world:fetch("/accounts/acct-1"):json())
      assert.are.same({ { n = 2, sum = 120 } },
        world:rows("ACCOUNT", "acct-1", "SELECT count(*) AS n, sum(amount) AS sum FROM deposits"))
    end)

    it("notes each deposit in the audit log with the balance it was made on", function()
      deposit(50)
      deposit(70)
      assert.are.same({
        { account = "acct-1", amount = 50, balance_before = 0 },
        { account = "acct-1", amount = 70, balance_before = 50 },
      }, world:rows("AUDIT", "audit", "SELECT account, amount, balance_before FROM entries ORDER BY rowid"))
      local noted = world:rows("AUDIT", "audit", "SELECT deposit AS id FROM entries ORDER BY deposit")
      assert.are.same(world:rows("ACCOUNT", "acct-1", "SELECT id FROM deposits ORDER BY id"), noted)
    end)

    it("refuses an amount that is not a positive whole number", function()
      for _, body in ipairs({ '{"amount": 0}', '{"amount": 2.5}', '{"amount": "10"}', "not json" }) do
        local response = world:fetch("/accounts/acct-1/deposit", { method = "POST", body = body })
        assert.are.equal(400, response.status, body)
      end
      assert.are.same({ balance = 0 }, world:fetch("/accounts/acct-1"):json())
    end)

    it("answers 404 for anything but a deposit or a balance", function()
      assert.are.equal(404, world:fetch("/accounts/acct-1/deposit").status)
      assert.are.equal(404, world:fetch("/elsewhere", { method = "POST" }).status)
    end)
  end)
end
