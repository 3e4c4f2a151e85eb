--- The wide benchmark scenario, shared by wide.sim.lua and wide-small.sim.lua:
-- the fixed lease pool (scenarios/lease-pool/worker_fixed.lua, three free
-- runners) under N projects leasing a runner at once, two invocations in
-- flight, and up to two faults per run. Its verdict is BOUNDED; what it is for
-- is the number of schedules, so `eutaxy check` has a space wide enough to
-- measure schedules per second on.
local sim = require "eutaxy.check"

-- This file's folder, as the checker loaded it (relative to the working directory).
local here = debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$") or "."
local project = "../../../scenarios/lease-pool"

-- The pool's tables and its three free runners, as the lease-pool scenarios use them.
local pool = dofile(here .. "/" .. project .. "/schema.lua")
local grants = sim.durableObjectTable("POOL", "pool", "grants")

-- The first invariant again as a sim.always, for what looking after every
-- turn that wrote costs (bench/check.sh --always).
local function always_unique()
  return sim.always("one-runner-per-request-always", function(state)
    local seen = {}
    for _, row in ipairs(state:rows(grants)) do
      if seen[row.token] then return false, "token " .. row.token .. " is granted twice" end
      seen[row.token] = true
    end
    return true
  end)
end

---@param name string
---@param requests integer how many projects ask for a runner
---@param opts? { always?: boolean, faults?: string[] } also the always; fault kinds besides the three below
return function(name, requests, opts)
  opts = opts or {}
  local drive = {}
  for i = 1, requests do drive[i] = { path = "/projects/p-" .. i .. "/lease", method = "POST" } end
  local faults = { "rpc-fail", "ambiguous", "alarm-fail" }
  for _, k in ipairs(opts.faults or {}) do faults[#faults + 1] = k end
  local invariants = {
    sim.unique("one-runner-per-request", grants, "token"),
    sim.everyRow("every-lease-ends", grants, { { column = "ended_at", op = "notNull" } }),
  }
  if opts.always then invariants[#invariants + 1] = always_unique() end
  return sim.defineScenario {
    name = name,
    worker = { entry = project .. "/worker_fixed.lua", config = project .. "/wrangler.jsonc" },
    -- Every grant expires at the same virtual time, so one alarm closes them all; the cap leaves
    -- room for alarm failures and their retries.
    setup = { sim.durableObject("POOL", {}, { sql = { pool = pool }, alarmsPerObject = 8 }) },
    drive = sim.http(drive, { retries = 0 }),
    invariants = invariants,
    -- The budget is generous: the full wide space took 400 s at ~760 schedules per second.
    -- What a network and a flaky alarm do: a call that never arrives, a call that committed
    -- and lost its answer, an alarm that throws before it commits.
    faults = faults,
    bounds = { maxFaultsPerRun = 2, maxRedeliveries = 2, maxConcurrentInvocations = 2, budgetMs = 1800000 },
  }
end
