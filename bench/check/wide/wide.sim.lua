--- The wide check benchmark: four projects lease a runner from the fixed pool,
-- two at a time, with up to two faults per run (rpc-fail, ambiguous,
-- alarm-fail). BOUNDED, over 5,356 schedules (303,274 with --no-reduction,
-- every order of the turns that commute).
--   eutaxy check bench/check/wide/wide.sim.lua --quiet
return require "wide_scenario" ("wide", 4)
