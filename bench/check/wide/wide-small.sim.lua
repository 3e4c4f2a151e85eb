--- wide.sim.lua with three projects instead of four: the same pool, faults and
-- bounds, BOUNDED over 20,944 schedules, for a benchmark that finishes quickly.
--   eutaxy check bench/check/wide/wide-small.sim.lua --quiet
return require "wide_scenario" ("wide-small", 3)
