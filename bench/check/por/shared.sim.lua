--- The requests of disjoint.sim.lua, all three to one object: their turns
-- interleave in one isolate.
--   eutaxy check bench/check/por/shared.sim.lua --quiet
local sim = require "eutaxy.check"

return sim.defineScenario {
  name = "por-shared",
  worker = { entry = "./worker.lua", config = "./wrangler.jsonc" },
  drive = sim.http({ { path = "/work/a", method = "POST" }, { path = "/work/a", method = "POST" },
                     { path = "/work/a", method = "POST" } }),
  invariants = {
    sim.invariant("every-request-answered", function(state)
      for _, r in ipairs(state.responses) do
        if r.status ~= 200 then return false, r.event .. " got " .. tostring(r.status) end
      end
      return true
    end),
  },
  faults = {},
  bounds = { maxFaultsPerRun = 0, maxConcurrentInvocations = 3, budgetMs = 1800000 },
}
