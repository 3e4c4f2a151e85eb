--- scenarios/lease-pool/leases.fixed.sim.lua with its uniqueness also as a
-- sim.always, looked at after every turn that wrote: BOUNDED over the same
-- 12 schedules. What bench/check.sh --always times against leases-fixed.
--   eutaxy check bench/check/lease-always/leases-fixed-always.sim.lua --quiet
local sim = require "eutaxy.check"

local here = debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$") or "."
local project = "../../../scenarios/lease-pool"
local pool = dofile(here .. "/" .. project .. "/schema.lua")
local grants = sim.durableObjectTable("POOL", "pool", "grants")

return sim.defineScenario {
  name = "leases-fixed-always",
  worker = { entry = project .. "/worker_fixed.lua", config = project .. "/wrangler.jsonc" },
  setup = { sim.durableObject("POOL", {}, { sql = { pool = pool }, alarmsPerObject = 6 }) },
  drive = sim.http({
    { path = "/projects/p-1/lease", method = "POST" },
    { path = "/projects/p-2/lease", method = "POST" },
  }, { retries = 0 }),
  invariants = {
    sim.unique("one-runner-per-request", grants, "token"),
    sim.everyRow("every-lease-ends", grants, { { column = "ended_at", op = "notNull" } }),
    sim.always("one-runner-per-request-always", function(state)
      local seen = {}
      for _, row in ipairs(state:rows(grants)) do
        if seen[row.token] then return false, "token " .. row.token .. " is granted twice" end
        seen[row.token] = true
      end
      return true
    end),
  },
  bounds = { maxFaultsPerRun = 1, maxRedeliveries = 2, maxConcurrentInvocations = 1, budgetMs = 2000 },
}
