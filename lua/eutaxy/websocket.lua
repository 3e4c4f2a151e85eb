--- eutaxy.websocket: WebSocketPair and the WebSocket ends of the
-- Hibernation API, inside an object's isolate.
--
-- A pair is two ends: pair[1] the client's, which the object answers the
-- upgrade with (Response.new(nil, { status = 101, webSocket = pair[1] })),
-- and pair[2] the server's, which it accepts (self.ctx:acceptWebSocket).
-- The socket itself is the host's (host/world.h): an end holds its id, so
-- the socket outlives the isolate (hibernation), and after a wake-up
-- ctx:getWebSockets() gives new ends for the same sockets.
local core = select(3, ...) or require "eutaxy.core"

local type, setmetatable, getmetatable, tostring = type, setmetatable, getmetatable, tostring
local math_type = math.type

local websocket = {}

---@class eutaxy.WebSocket
---@field readyState integer 0 connecting, 1 open, 2 closing, 3 closed
local methods = {}
local mt = {
  __name = "WebSocket",
  __index = function(self, k)
    if k == "readyState" then
      local id = rawget(self, "_id")
      if not id then return 0 end
      if rawget(self, "_client") then return 1 end
      return core.ws_state(id)
    end
    return methods[k]
  end,
  __newindex = function(_, k) error("a WebSocket has no field " .. tostring(k) .. " to set", 2) end,
  __metatable = false,
}

local function is_websocket(v)
  return type(v) == "table" and getmetatable(v) == false and rawget(v, "_ws") == true
end
websocket.is_websocket = is_websocket

local function server_id(ws, what)
  if not is_websocket(ws) then error(what .. " expects a WebSocket, got " .. type(ws), 3) end
  if rawget(ws, "_client") then
    error(what .. ": this is the client end of the pair (pair[1]): answer the upgrade with it, "
      .. "and use the server end (pair[2])", 3)
  end
  local id = rawget(ws, "_id")
  if not id then error(what .. ": the WebSocket was not accepted: call self.ctx:acceptWebSocket(pair[2]) first", 3) end
  return id
end

--- Sends a message: text (valid UTF-8), or binary with { binary = true }.
---@param message string
---@param opts? { binary?: boolean }
function methods:send(message, opts)
  local id = server_id(self, "send")
  if type(message) ~= "string" then error("send expects a string, got " .. type(message), 2) end
  local binary = type(opts) == "table" and opts.binary == true
  if not binary and not utf8.len(message) then
    error("send: a text message must be valid UTF-8 (send it with { binary = true })", 2)
  end
  core.ws_send(id, message, binary)
end

--- Starts the close handshake: code 1000 by default, or 3000-4999; reason at most 123 bytes.
---@param code? integer
---@param reason? string
function methods:close(code, reason)
  local id = server_id(self, "close")
  code = code == nil and 1000 or code
  if math_type(code) ~= "integer" or not (code == 1000 or (code >= 3000 and code <= 4999)) then
    error("close: the code must be 1000 or within 3000-4999, got " .. tostring(code), 2)
  end
  reason = reason or ""
  if type(reason) ~= "string" or #reason > 123 or not utf8.len(reason) then
    error("close: the reason must be UTF-8 text of at most 123 bytes", 2)
  end
  core.ws_send(id, nil, nil, code, reason)
end

--- Keeps a copy of value with the socket, through hibernation (2,048 bytes serialized at most).
function methods:serializeAttachment(value)
  core.ws_attach(server_id(self, "serializeAttachment"), value)
end

--- A copy of what serializeAttachment kept, or nil.
function methods:deserializeAttachment()
  return core.ws_attachment(server_id(self, "deserializeAttachment"))
end

local function new_end(id, client)
  return setmetatable({ _ws = true, _id = id, _client = client or nil }, mt)
end

-- This isolate's end for each socket, so that one socket is one end.
local ends = {}

--- The server end of socket id, made once per isolate.
function websocket.server_end(id)
  local ws = ends[id]
  if not ws then
    ws = new_end(id, false)
    ends[id] = ws
  end
  return ws
end

--- A client end that crossed from another isolate (a 101 response's webSocket).
function websocket.client_end(id) return new_end(id, true) end

--- The socket id of a client end, for a 101 response, or nil and why.
function websocket.client_id(ws)
  if not is_websocket(ws) then return nil, "webSocket must be a WebSocket, got " .. type(ws) end
  if not rawget(ws, "_client") then return nil, "webSocket must be the client end of the pair (pair[1])" end
  local id = rawget(ws, "_id")
  if not id then return nil, "the pair's server end (pair[2]) was not accepted: call self.ctx:acceptWebSocket(pair[2]) first" end
  return id
end

--- ctx:acceptWebSocket(ws, tags): the socket is the host's from now on.
function websocket.accept(ws, tags)
  if not is_websocket(ws) or rawget(ws, "_client") then
    error("acceptWebSocket expects the server end of a WebSocketPair (pair[2])", 3)
  end
  if rawget(ws, "_id") then error("acceptWebSocket: this WebSocket was accepted already", 3) end
  if tags ~= nil and type(tags) ~= "table" then error("acceptWebSocket: tags must be a list of strings", 3) end
  local id = core.ws_accept(tags)
  rawset(ws, "_id", id)
  rawset(rawget(ws, "_pair"), "_id", id)
  rawset(ws, "_pair", nil)
  ends[id] = ws
end

--- ctx:getWebSockets(tag): the server ends of the object's sockets not closed.
function websocket.list(tag)
  if tag ~= nil and type(tag) ~= "string" then error("getWebSockets: the tag must be a string", 3) end
  local ids, out = core.ws_list(tag), {}
  for i, id in ipairs(ids) do out[i] = websocket.server_end(id) end
  return out
end

function websocket.tags(ws) return core.ws_tags(server_id(ws, "getTags")) end

function websocket.auto_response_at(ws)
  return core.ws_auto_at(server_id(ws, "getWebSocketAutoResponseTimestamp"))
end

function websocket.set_auto_response(request, response)
  if request == nil then
    core.ws_auto()
    return
  end
  if type(request) ~= "string" or type(response) ~= "string" then
    error("setWebSocketAutoResponse expects a request string and a response string (or nothing, to clear it)", 3)
  end
  core.ws_auto(request, response)
end

---@class eutaxy.WebSocketPair
local Pair = {}

--- A new pair: pair[1] the client end, pair[2] the server end.
function Pair.new()
  local client, server = new_end(nil, true), new_end(nil, false)
  rawset(server, "_pair", client)
  return { client, server }
end
websocket.WebSocketPair = Pair

return websocket
