--- The wide benchmark scenario with two requests: 1,290 schedules with
-- --no-reduction, few enough for callgrind's instruction counts
-- (bench/README.md). BOUNDED.
--   valgrind --tool=callgrind eutaxy check bench/check/wide/wide-two.sim.lua --no-reduction --budget-ms 100000000
return require "wide_scenario" ("wide-two", 2)
