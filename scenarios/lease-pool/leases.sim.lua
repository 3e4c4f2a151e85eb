--- Two projects lease a runner while every call to the pool may fail before
-- it arrives, fail after it committed with the answer lost, or crash the
-- caller after it; the alarm fires in virtual time.
--   eutaxy check scenarios/lease-pool/leases.sim.lua
local sim = require "eutaxy.check"

-- The pool's tables, as a deployment would create them in a migration, with three free runners.
local pool = require "schema"
local grants = sim.durableObjectTable("POOL", "pool", "grants")

return sim.defineScenario {
  name = "leases",
  worker = { entry = "./worker.lua", config = "./wrangler.jsonc" },
  -- The alarm wakes once per expiry; three requests at most (two, and a retry) need three wake-ups,
  -- and the cap leaves room for more (a capped alarm would leave a grant open by the bound, not a bug).
  setup = { sim.durableObject("POOL", {}, { sql = { pool = pool }, alarmsPerObject = 6 }) },
  -- Two projects ask for a runner; the caller does not resend (the worker retries the pool itself).
  drive = sim.http({
    { path = "/projects/p-1/lease", method = "POST" },
    { path = "/projects/p-2/lease", method = "POST" },
  }, { retries = 0 }),
  invariants = {
    -- One request, one runner: no token is granted twice.
    sim.unique("one-runner-per-request", grants, "token"),
    -- The alarm takes every lease back once it expires, so every grant is closed by the end.
    sim.everyRow("every-lease-ends", grants, { { column = "ended_at", op = "notNull" } }),
  },
  bounds = { maxFaultsPerRun = 1, maxRedeliveries = 2, maxConcurrentInvocations = 1, budgetMs = 2000 },
}
