--- The chat room, repaired: who is in the room is the host's to remember.
-- Each socket carries its member's name as its attachment, and a line goes
-- to every socket ctx:getWebSockets() gives, so a room that hibernated and
-- woke up still reaches everyone.
local eutaxy = require "eutaxy"
local worker = require "worker"

local Room = worker.Room

function Room:fetch(request)
  if request.headers:get("upgrade") ~= "websocket" then
    return eutaxy.Response.new("expected Upgrade: websocket", { status = 426 })
  end
  local name = request.url:match("[?&]name=([%w_-]+)") or "anon"
  local pair = eutaxy.WebSocketPair.new()
  self.ctx:acceptWebSocket(pair[2])
  pair[2]:serializeAttachment({ name = name })
  return eutaxy.Response.new(nil, { status = 101, webSocket = pair[1] })
end

function Room:webSocketMessage(ws, message)
  local name = ws:deserializeAttachment().name
  self.ctx.storage.sql:exec("INSERT INTO lines (name, text) VALUES (?, ?)", name, message)
  for _, other in ipairs(self.ctx:getWebSockets()) do other:send(name .. ": " .. message) end
end

function Room:webSocketClose() end

return worker
