--- eutaxy: the API that workers and objects use.
--
--   local eutaxy = require "eutaxy"
--   local Counter = eutaxy.DurableObject:extend("Counter")
--
-- Inside an isolate, now/sleep/uuid are the world's virtual clock and
-- seeded randomness. In a host Lua state (a spec) they are not available:
-- the spec drives time through its world.
-- Inside an isolate eutaxy.core is the third argument of this chunk, and
-- user code cannot require it; in a host Lua state require finds it.
local core = select(3, ...) or require "eutaxy.core"
local errors = require "eutaxy.errors"

-- Request, Response, Headers, json and url load on first use: an isolate
-- builds in a fraction of the time when it does not need them.
local lazy = {
  Request = function() return require("eutaxy.http").Request end,
  Response = function() return require("eutaxy.http").Response end,
  Headers = function() return require("eutaxy.http").Headers end,
  json = function() return require "eutaxy.json" end,
  url = function() return require "eutaxy.url" end,
  scheduler = function() return require("eutaxy.scheduler").for_ctx end,
  alarms = function() return require("eutaxy.scheduler").alarms end,
  durable = function() return require("eutaxy.scheduler").durable end,
  fanout = function() return require("eutaxy.fanout").new end,
  WebSocketPair = function() return require("eutaxy.websocket").WebSocketPair end,
}
local eutaxy = setmetatable({}, {
  __index = function(t, k)
    local load = lazy[k]
    if not load then return nil end
    local v = load()
    rawset(t, k, v)
    return v
  end,
})

---@class eutaxy.DurableObjectState
---@field id eutaxy.Id
---@field storage eutaxy.Storage

---@class eutaxy.DurableObject
---@field ctx eutaxy.DurableObjectState set before init runs
---@field env table the bindings (env.POOL, ...)
local DurableObject = { __name = "DurableObject" }
DurableObject.__index = DurableObject

local classes = setmetatable({}, { __mode = "k" })

--- Makes a subclass. Methods defined on it are callable over RPC.
---@param name string the class name, as wrangler.jsonc's class_name gives it
---@return table
function DurableObject:extend(name)
  if type(name) ~= "string" or name == "" then
    error("DurableObject:extend expects the class name, a string", 2)
  end
  local cls = setmetatable({}, { __index = self })
  cls.__index = cls
  cls.__name = name
  cls.super = self
  classes[cls] = true
  return cls
end

--- True for a class made with DurableObject:extend.
function DurableObject.is_class(v)
  return classes[v] == true
end

eutaxy.DurableObject = DurableObject
eutaxy.Error = errors.new
eutaxy.isError = errors.is_error

local function in_isolate(what)
  if not core.isolate then
    error(what .. " runs inside an isolate (a worker or object); a spec moves time with world:advance", 3)
  end
end

--- Virtual time in ms since 1970.
---@return integer
function eutaxy.now()
  in_isolate("eutaxy.now()")
  return core.now()
end

--- Waits ms of virtual time: a yield point, where other invocations may run.
---@param ms integer
function eutaxy.sleep(ms)
  in_isolate("eutaxy.sleep()")
  if math.type(ms) ~= "integer" then
    if type(ms) == "number" and ms == math.floor(ms) then ms = math.tointeger(ms)
    else error("eutaxy.sleep expects whole milliseconds, got " .. tostring(ms), 2) end
  end
  core.sleep(ms)
end

--- Runs the functions side by side, as Promise.all does: each is a task of
--- its own in this isolate, so their calls, fetches and sleeps are in flight
--- at once, and `eutaxy check` explores every order of their turns. Returns
--- the first value each returned, in order, once all have returned; raises
--- the first error one raises, as soon as it does (the others run on, their
--- results dropped). A yield point, as an RPC call is.
---@param fns (fun(): any)[]
---@return any ...
function eutaxy.all(fns)
  in_isolate("eutaxy.all()")
  if type(fns) ~= "table" then error("eutaxy.all expects a list of functions, got " .. type(fns), 2) end
  local n = #fns
  if n == 0 then return end
  local results, failed = {}, nil
  local branches = {}
  for i = 1, n do
    local f = fns[i]
    if type(f) ~= "function" then
      error(string.format("eutaxy.all expects a list of functions, got %s at [%d]", type(f), i), 2)
    end
    branches[i] = function()
      local ok, v = pcall(f)
      if ok then
        results[i] = v
      elseif failed == nil then
        failed = { v }
        core.all_failed()
      end
    end
  end
  local ok, err = core.all(branches)
  if ok == false then
    if type(err) == "table" then err = errors.from_wire(err) end
    error(err, 2)
  end
  if failed then error(failed[1], 0) end
  return table.unpack(results, 1, n)
end

--- A random (version 4) UUID from the run's seed.
---@return string
function eutaxy.uuid()
  in_isolate("eutaxy.uuid()")
  return core.uuid()
end

--- Calls a service outside: input is an absolute http: or https: URL or a
--- Request, init as for Request.new; returns its Response, or raises as a
--- failed RPC does. A yield point, as an RPC is. In eutaxy check and in
--- specs only the services a scenario declares (sim.service) or a world is
--- given answer, and every call is a fault point (lost on the way, applied
--- with its answer lost); under eutaxy serve it goes out to the network.
---@param input string|eutaxy.Request
---@param init? eutaxy.RequestInit
---@return eutaxy.Response
function eutaxy.fetch(input, init)
  in_isolate("eutaxy.fetch()")
  local http = require "eutaxy.http"
  local url = require "eutaxy.url"
  if type(input) == "string" then
    if not input:find("^%a[%w+.-]*://") then
      error("eutaxy.fetch needs an absolute URL (https://host/path), got " .. string.format("%q", input), 2)
    end
    local _, err = url.parse(input)
    if err then error("eutaxy.fetch: " .. err, 2) end
  end
  local request = input
  if not http.is_request(request) or init ~= nil then request = http.Request.new(input, init) end
  local parsed = url.parse(request.url)
  if parsed.protocol ~= "http:" and parsed.protocol ~= "https:" then
    error("eutaxy.fetch: unsupported scheme " .. parsed.protocol .. " in " .. string.format("%q", request.url)
      .. ": only http: and https: URLs are fetched", 2)
  end
  local origin = parsed.origin
  local ok, answer = core.fetch(origin, http.to_wire(request))
  if ok == nil then error(answer, 2) end
  if not ok then
    if type(answer) == "table" then answer = errors.from_wire(answer) end
    error(answer, 2)
  end
  return http.from_wire(answer)
end

return eutaxy
