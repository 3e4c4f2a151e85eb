--- Three requests, each to its own object, each yielding twice there; no
-- faults. Their turns touch nothing in common: every order of them is one
-- behaviour.
--   eutaxy check bench/check/por/disjoint.sim.lua --quiet
local sim = require "eutaxy.check"

return sim.defineScenario {
  name = "por-disjoint",
  worker = { entry = "./worker.lua", config = "./wrangler.jsonc" },
  drive = sim.http({ { path = "/work/a", method = "POST" }, { path = "/work/b", method = "POST" },
                     { path = "/work/c", method = "POST" } }),
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
