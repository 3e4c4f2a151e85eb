--- chat.sim.lua over the repaired room (worker_fixed.lua): members are the
-- sockets the host keeps, so no hibernation, drop or reset within the
-- bounds leaves a connected member without a line.
--   eutaxy check scenarios/chat-room/chat.fixed.sim.lua
local sim = require "eutaxy.check"

return sim.variant("chat.sim.lua", {
  name = "chat-fixed",
  worker = { entry = "./worker_fixed.lua", config = "./wrangler.jsonc" },
})
