--- The fixed fanout shop of scenarios/fanout (worker_outbox.lua) with
-- batchDelayMs = 0: two orders, every fault kind of orders.sim.lua, and both
-- orders' deliveries interleaving at every call. Without partial-order
-- reduction its search does not end in reasonable time; bench/check.sh --por
-- times it with and without.
--   eutaxy check bench/check/outbox/outbox.sim.lua
local here = debug.getinfo(1, "S").source:match("^@(.*)/") or "."
local shop = here .. "/../../../scenarios/fanout"
package.path = shop .. "/?.lua;" .. package.path  -- orders.sim.lua requires its schema
local scenario = dofile(shop .. "/orders.sim.lua")
scenario.name = "fanout-outbox"
scenario.worker = { entry = "../../../scenarios/fanout/worker_outbox.lua", config = "../../../scenarios/fanout/wrangler.jsonc" }
return scenario
