--- Two requests start the nightly job at the same time; the lock must have
-- one holder at most at every moment, not only at the end.
--   eutaxy check scenarios/lock-check/locks.sim.lua
local sim = require "eutaxy.check"

local tables = require "schema"
local holders = sim.durableObjectTable("LOCKS", "nightly", "holders")

return sim.defineScenario {
  name = "locks",
  worker = { entry = "./worker.lua", config = "./wrangler.jsonc" },
  setup = {
    sim.durableObject("LOCKS", {}, { sql = { nightly = { schema = tables.lock } } }),
    sim.durableObject("AUDIT", {}, { sql = { log = { schema = tables.audit } } }),
  },
  -- Two clients (a cron and a person at a console) start the job at once.
  drive = sim.http({
    { path = "/jobs/nightly", method = "POST" },
    { path = "/jobs/nightly", method = "POST" },
  }, { retries = 0 }),
  invariants = {
    -- Whoever took the lock let it go: true at the end of every run, bug or not.
    sim.invariant("lock-free-at-end", function(state)
      local rows = state:rows(holders)
      return #rows == 0, ("%d holders left at the end"):format(#rows)
    end),
    -- The point of a lock: never two holders at once.
    sim.always("one-holder", function(state)
      local rows = state:rows(holders)
      if #rows <= 1 then return true end
      local tokens = {}
      for i, row in ipairs(rows) do tokens[i] = row.token end
      return false, ("%d requests hold the lock at once (%s)"):format(#rows, table.concat(tokens, ", "))
    end),
  },
  faults = {},
  bounds = { maxFaultsPerRun = 0, maxConcurrentInvocations = 2, budgetMs = 5000 },
}
