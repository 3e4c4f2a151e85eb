--- A chat room with the WebSocket Hibernation API, planted with the classic
-- bug: the room keeps its members in memory. After the object hibernates
-- (its isolate closed while the sockets stay open) the list is empty, and
-- a line said then reaches no one (and its speaker has lost their name).
local eutaxy = require "eutaxy"

local Room = eutaxy.DurableObject:extend("Room")

function Room:init()
  self.ctx.storage.sql:exec("CREATE TABLE IF NOT EXISTS lines (seq INTEGER PRIMARY KEY, name TEXT, text TEXT)")
  self.members = {}   -- ws -> name: lost when the object hibernates
end

-- Who is in the room: remembered here, in memory.
function Room:join(ws, name) self.members[ws] = name end
function Room:name_of(ws) return self.members[ws] or "anon" end
function Room:sockets()
  local list = {}
  for ws in pairs(self.members) do list[#list + 1] = ws end
  return list
end
function Room:webSocketClose(ws) self.members[ws] = nil end

-- GET /rooms/<room>?name=<name> with Upgrade: websocket joins the room.
function Room:fetch(request)
  if request.headers:get("upgrade") ~= "websocket" then
    return eutaxy.Response.new("expected Upgrade: websocket", { status = 426 })
  end
  local pair = eutaxy.WebSocketPair.new()
  self.ctx:acceptWebSocket(pair[2])
  self:join(pair[2], request.url:match("[?&]name=([%w_-]+)") or "anon")
  return eutaxy.Response.new(nil, { status = 101, webSocket = pair[1] })
end

-- A line said is kept, then goes to everyone in the room.
function Room:webSocketMessage(ws, message)
  local name = self:name_of(ws)
  self.ctx.storage.sql:exec("INSERT INTO lines (name, text) VALUES (?, ?)", name, message)
  for _, other in ipairs(self:sockets()) do other:send(name .. ": " .. message) end
end

return {
  Room = Room,
  fetch = function(request, env)
    local room = request.url:match("/rooms/([%w_-]+)")
    if not room then return eutaxy.Response.new("not found", { status = 404 }) end
    -- a room that cannot be reached answers 503: the client tries again later
    local ok, response = pcall(function() return env.ROOM:getByName(room):fetch(request) end)
    if not ok then return eutaxy.Response.new("the room is unavailable", { status = 503 }) end
    return response
  end,
}
