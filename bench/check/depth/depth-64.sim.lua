--- 64 requests in a row, one fault per run (depth_scenario.lua).
--   eutaxy check bench/check/depth/depth-64.sim.lua --quiet
return require "depth_scenario" ("depth-64", 64)
