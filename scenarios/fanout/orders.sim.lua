--- Two orders fan out to the mailer and the ledger while any call may fail,
-- lose its answer or crash its caller, and any alarm may fail or run again.
--   eutaxy check scenarios/fanout/orders.sim.lua
local sim = require "eutaxy.check"
local schema = require "schema"

local orders = sim.durableObjectTable("ORDERS", "shop", "orders")
local dead = sim.durableObjectTable("ORDERS", "shop", "dead_letters")
local sent = sim.durableObjectTable("EMAIL", "mail", "sent")
local entries = sim.durableObjectTable("LEDGER", "books", "entries")

local function has(rows, column, value, target)
  for _, row in ipairs(rows) do
    if row[column] == value and (target == nil or row.target == target) then return true end
  end
  return false
end

return sim.defineScenario {
  name = "orders-fanout",
  worker = { entry = "./worker.lua", config = "./wrangler.jsonc" },
  setup = {
    sim.durableObject("ORDERS", {}, { sql = { shop = schema.orders }, alarmsPerObject = 12 }),
    sim.durableObject("EMAIL", {}, { sql = { mail = schema.mail } }),
    sim.durableObject("LEDGER", {}, { sql = { books = schema.books } }),
  },
  drive = sim.http({
    { path = "/orders/o-1", method = "POST", body = '{"amount": 30}' },
    { path = "/orders/o-2", method = "POST", body = '{"amount": 12}' },
  }, { retries = 0 }),
  invariants = {
    -- Nothing lost: every order reaches both targets, or their dead letters.
    sim.invariant("nothing-lost", function(state)
      local mailed, booked, letters = state:rows(sent), state:rows(entries), state:rows(dead)
      for _, order in ipairs(state:rows(orders)) do
        if not (has(mailed, "order_id", order.id) or has(letters, "message_id", order.id, "email")) then
          return false, ("order %s reached neither the mailer nor its dead letters"):format(order.id)
        end
        if not (has(booked, "order_id", order.id) or has(letters, "message_id", order.id, "ledger")) then
          return false, ("order %s reached neither the ledger nor its dead letters"):format(order.id)
        end
      end
      return true
    end),
    -- No double effect: the ledger books an order once.
    sim.unique("booked-once", entries, "order_id"),
  },
  bounds = { maxFaultsPerRun = 1, maxRedeliveries = 2, maxConcurrentInvocations = 1, budgetMs = 60000 },
}
