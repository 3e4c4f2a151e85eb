--- The wide check benchmark: four projects lease a runner from the fixed pool,
-- two at a time, with up to two faults per run (rpc-fail, ambiguous,
-- alarm-fail). BOUNDED, over 303,274 schedules.
--   eutaxy check bench/check/wide/wide.sim.lua --quiet
return require "wide_scenario" ("wide", 4)
