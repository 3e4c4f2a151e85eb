--- Two orders redeem the same single-use coupon; the coupon must be
-- redeemed once. VIOLATED: worker.lua redeems it twice.
--   eutaxy check scenarios/never-reached/redeem.sim.lua
local sim = require "eutaxy.check"

local coupons = require "schema"
local redemptions = sim.durableObjectTable("COUPONS", "spring", "redemptions")

local function redeem(order)
  return { path = "/coupons/redeem", method = "POST", headers = { ["Content-Type"] = "application/json" },
           body = ('{"code": "SPRING-10", "order": "%s"}'):format(order) }
end

return sim.defineScenario {
  name = "redeem",
  worker = { entry = "./worker.lua", config = "./wrangler.jsonc" },
  setup = { sim.durableObject("COUPONS", {}, { sql = { spring = coupons } }) },
  -- Two orders try the same coupon.
  drive = sim.http({ redeem("o-1"), redeem("o-2") }, { retries = 0 }),
  invariants = {
    -- A coupon is redeemed once.
    sim.unique("one-redemption-per-code", redemptions, "code"),
    -- The path this scenario is about: some schedule redeems a coupon at all.
    sim.sometimes("a-coupon-is-redeemed", function(state)
      return #state:rows(redemptions) > 0
    end),
  },
  faults = {},
  bounds = { maxFaultsPerRun = 0, maxConcurrentInvocations = 2, budgetMs = 5000 },
}
