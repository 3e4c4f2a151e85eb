--- 32 requests in a row, one fault per run (depth_scenario.lua).
--   eutaxy check bench/check/depth/depth-32.sim.lua --quiet
return require "depth_scenario" ("depth-32", 32)
