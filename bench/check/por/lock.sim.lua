--- Two requests through a check-then-act lock (the worker reads the holder,
-- then takes the lock in another call, then releases it), no faults: every
-- turn is the lock's or a request's own, and only the lock's orders matter.
--   eutaxy check bench/check/por/lock.sim.lua --quiet
local sim = require "eutaxy.check"

return sim.defineScenario {
  name = "por-lock",
  worker = { entry = "./worker.lua", config = "./wrangler.jsonc" },
  drive = sim.http({ { path = "/lock/a", method = "POST" }, { path = "/lock/b", method = "POST" } }),
  invariants = {
    sim.invariant("no-error", function(state)
      for _, r in ipairs(state.responses) do
        if r.status ~= 200 and r.status ~= 409 then return false, r.event .. " got " .. tostring(r.status) end
      end
      return true
    end),
  },
  faults = {},
  bounds = { maxConcurrentInvocations = 2, maxFaultsPerRun = 0, budgetMs = 1800000 },
}
