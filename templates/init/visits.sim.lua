--- Two visits, under every fault eutaxy check injects: a call that never
-- arrives, one whose answer is lost after it committed, a reset counter, a
-- crashed caller. Whatever happens, no request is counted twice.
--   eutaxy check visits.sim.lua
local sim = require "eutaxy.check"

local visits = sim.durableObjectTable("COUNTER", "global", "visits")

return sim.defineScenario {
  name = "visits",
  worker = { entry = "./worker.lua", config = "./wrangler.jsonc" },
  setup = {
    sim.durableObject("COUNTER", {}, { sql = { global = { schema = [[
      CREATE TABLE visits (n INTEGER PRIMARY KEY, request TEXT NOT NULL, at INTEGER NOT NULL)
    ]], rows = {} } } }),
  },
  drive = sim.http({
    { path = "/", method = "POST" },
    { path = "/", method = "POST" },
  }, { retries = 0 }),
  invariants = {
    sim.unique("each-request-counted-once", visits, "request"),
    sim.invariant("never-more-visits-than-requests", function(state)
      local n = #state:rows(visits)
      return n <= 2, ("%d visits counted for 2 requests"):format(n)
    end),
  },
  bounds = { maxFaultsPerRun = 1, maxConcurrentInvocations = 1, budgetMs = 10000 },
}
