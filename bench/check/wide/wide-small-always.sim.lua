--- wide-small.sim.lua with its uniqueness also as a sim.always, looked at
-- after every turn that wrote: BOUNDED over the same 20,944 schedules.
--   eutaxy check bench/check/wide/wide-small-always.sim.lua --quiet
return require "wide_scenario" ("wide-small-always", 3, { always = true })
