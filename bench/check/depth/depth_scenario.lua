--- The depth benchmarks: N requests to one object, one at a time, each
-- three turns with sleeps between them (./worker.lua), with
-- one rpc-fail fault per run. A run is about 4N steps deep, and there is
-- about one schedule per fault point: what a restored search keeps grows
-- with the depth of its runs, which is what these measure (peak RSS).
local sim = require "eutaxy.check"

return function(name, n)
  local events = {}
  for i = 1, n do events[i] = { path = "/work/a", method = "POST" } end
  return sim.defineScenario {
    name = name,
    worker = { entry = "./worker.lua", config = "./wrangler.jsonc" },
    drive = sim.http(events),
    invariants = {
      sim.invariant("no-client-error", function(state)
        for _, r in ipairs(state.responses) do
          if r.status >= 400 and r.status < 500 then return false, r.event .. " got " .. r.status end
        end
        return true
      end),
    },
    faults = { "rpc-fail" },
    bounds = { maxFaultsPerRun = 1, maxConcurrentInvocations = 1, budgetMs = 1800000 },
  }
end
