--- One order is paid. Every call to the payment provider may be lost before
-- it arrives (rpc-fail), be applied with its answer lost (ambiguous), or be
-- applied and never answered, so the order times out (fetch-timeout); the
-- order retries a failed charge once, and is charged twice.
--   eutaxy check scenarios/outbound-payment/payment.sim.lua
local sim = require "eutaxy.check"

local charges = sim.serviceTable("https://payments.example", "charges")

return sim.defineScenario {
  name = "payment",
  worker = { entry = "./worker.lua", config = "./wrangler.jsonc" },
  services = {
    sim.service("https://payments.example", "./payments.lua", {
      sql = { schema = [[CREATE TABLE charges (id TEXT PRIMARY KEY, order_id TEXT NOT NULL,
                                               amount INTEGER NOT NULL, idempotency_key TEXT)]] },
    }),
  },
  drive = sim.http({
    { path = "/orders/o-1/pay", method = "POST", body = '{"amount": 1500}' },
  }, { retries = 0 }),
  invariants = {
    sim.unique("one-charge-per-order", charges, "order_id"),
  },
  faults = { "rpc-fail", "ambiguous", "fetch-timeout" },
  bounds = { maxFaultsPerRun = 2, maxConcurrentInvocations = 1, budgetMs = 10000 },
}
