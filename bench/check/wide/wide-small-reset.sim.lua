--- wide-small.sim.lua with resets too: between invocations, and while an
-- invocation waits at a yield point (the worker's requests included). What
-- the reset fault costs on the wide benchmark.
--   eutaxy check bench/check/wide/wide-small-reset.sim.lua --quiet
return require "wide_scenario" ("wide-small-reset", 3, { faults = { "reset" } })
