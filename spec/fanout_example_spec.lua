--- The fanout example under ordinary tests: both the planted shop and the
-- fixed one pass every one of them. Only a lost answer, which no test here
-- produces, makes the planted ledger book an order twice.
local testing = require "eutaxy.testing"
local schema = dofile("scenarios/fanout/schema.lua")

for _, main in ipairs({ "worker.lua", "worker_fixed.lua" }) do
  describe("the fanout example (" .. main .. ")", function()
    local world
    before_each(function()
      world = testing.world {
        config = "scenarios/fanout/wrangler.jsonc", main = main,
        sql = { ORDERS = { shop = schema.orders }, EMAIL = { mail = schema.mail }, LEDGER = { books = schema.books } },
      }
    end)
    after_each(function() world:close() end)

    local function order(id, amount)
      return world:fetch("/orders/" .. id, { method = "POST", body = ('{"amount": %d}'):format(amount) })
    end

    it("accepts an order and records it at once", function()
      assert.are.equal(202, order("o-1", 30).status)
      assert.are.same({ { id = "o-1", amount = 30 } }, world:rows("ORDERS", "shop", "SELECT id, amount FROM orders"))
    end)

    it("holds deliveries for the batch window, then mails and books every order once", function()
      order("o-1", 30)
      order("o-2", 12)
      assert.are.same({}, world:rows("LEDGER", "books", "SELECT order_id FROM entries"))
      world:advance(1000)
      assert.are.same({ { order_id = "o-1" }, { order_id = "o-2" } },
        world:rows("EMAIL", "mail", "SELECT order_id FROM sent ORDER BY order_id"))
      assert.are.same({ { order_id = "o-1", amount = 30 }, { order_id = "o-2", amount = 12 } },
        world:rows("LEDGER", "books", "SELECT order_id, amount FROM entries ORDER BY order_id"))
    end)

    it("leaves nothing pending once everything is delivered", function()
      order("o-1", 30)
      world:advance(60 * 1000)
      assert.are.same({ { n = 0 } }, world:rows("ORDERS", "shop", "SELECT count(*) AS n FROM eutaxy_fanout_deliveries"))
      assert.are.same({}, world:rows("ORDERS", "shop", "SELECT * FROM dead_letters"))
    end)

    it("answers 404 to anything but POST /orders/:id", function()
      assert.are.equal(404, world:fetch("/orders/o-1").status)
    end)
  end)
end

describe("the fixed fanout example", function()
  it("books an order once even when the ledger is called twice", function()
    local world = testing.world {
      config = "scenarios/fanout/wrangler.jsonc", main = "worker_fixed.lua",
      sql = { LEDGER = { books = schema.books } },
    }
    local books = world.env.LEDGER:getByName("books")
    books:record("o-1", 30)
    books:record("o-1", 30)
    assert.are.same({ { n = 1 } }, world:rows("LEDGER", "books", "SELECT count(*) AS n FROM entries"))
    world:close()
  end)
end)
