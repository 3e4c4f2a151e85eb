-- The eutaxy side of bench/serve/ws.sh; bench/serve/workerd/ws_worker.js is
-- the same worker in JavaScript, and both must stay message for message the
-- same work.
--   GET /room/<name>, Upgrade: websocket   joins room <name>: the room object
--                                          accepts the socket (Hibernation API)
-- A message is broadcast to every socket of its room, the sender's included,
-- except "hibernated?", which the room answers to its sender alone:
-- "hibernated" if the object was rebuilt since it accepted a socket (its
-- memory lost, so it had hibernated), "awake" if not.
local eutaxy = require "eutaxy"

local Room = eutaxy.DurableObject:extend("Room")

function Room:fetch()
  local pair = eutaxy.WebSocketPair.new()
  self.ctx:acceptWebSocket(pair[2])
  self.accepted = true
  return eutaxy.Response.new(nil, { status = 101, webSocket = pair[1] })
end

function Room:webSocketMessage(ws, message)
  if message == "hibernated?" then
    ws:send(self.accepted and "awake" or "hibernated")
    return
  end
  for _, other in ipairs(self.ctx:getWebSockets()) do other:send(message) end
end

return {
  Room = Room,
  fetch = function(request, env)
    local name = eutaxy.url.parse(request.url).pathname:match("^/room/([^/]+)$")
    if not name then return eutaxy.Response.new("not found\n", { status = 404 }) end
    if request.headers:get("Upgrade") ~= "websocket" then
      return eutaxy.Response.new("expected a WebSocket upgrade\n", { status = 426 })
    end
    return env.ROOM:getByName(name):fetch(request)
  end,
}
