--- Ann joins the lobby, then Bob, and each says a line. Every line the room
-- took must reach every member still connected. The checker may hibernate
-- the room between two events, drop a client, or reset the room.
--   eutaxy check scenarios/chat-room/chat.sim.lua
local sim = require "eutaxy.check"

local lines = sim.durableObjectTable("ROOM", "lobby", "lines")

return sim.defineScenario {
  name = "chat",
  worker = { entry = "./worker.lua", config = "./wrangler.jsonc" },
  drive = sim.http({
    sim.websocket { path = "/rooms/lobby?name=ann", messages = { { data = "hi", at = 20 } } },
    sim.websocket { path = "/rooms/lobby?name=bob", at = 10, messages = { "yo" } },
  }),
  invariants = {
    sim.invariant("every-member-hears-every-line", function(state)
      for _, r in ipairs(state.responses) do
        local ws = r.websocket
        if ws and ws.state == "open" then
          local heard = {}
          for _, m in ipairs(ws.received) do
            if m.data then heard[m.data] = true end
          end
          for _, line in ipairs(state:rows(lines)) do
            local said = line.name .. ": " .. line.text
            if not heard[said] then
              return false, ("%s never heard %q"):format(r.event, said)
            end
          end
        end
      end
      return true
    end),
    sim.sometimes("a-line-said", function(state) return #state:rows(lines) > 0 end),
  },
  bounds = { maxFaultsPerRun = 1, budgetMs = 5000 },
}
