--- The runtime inside every isolate: loads the worker module, builds the
-- object instance, its env and ctx, and runs each invocation the host
-- starts, through one function, dispatch(kind, ...).
--
-- The host (host/world.c) calls boot once per isolate and dispatch once per
-- invocation, each in a coroutine of its own; it never reaches into user
-- code any other way.
-- Inside an isolate eutaxy.core is the third argument of this chunk, and
-- user code cannot require it; in a host Lua state require finds it.
local core = select(3, ...) or require "eutaxy.core"
local errors = require "eutaxy.errors"
local eutaxy = require "eutaxy"

-- Loaded when first needed: an object that never answers fetch never loads
-- HTTP, and the worker never loads storage.
local function lazy(name)
  return setmetatable({}, { __index = function(t, k)
    local m = require(name)
    setmetatable(t, { __index = m })
    return m[k]
  end })
end
local http = lazy "eutaxy.http"
local storage = lazy "eutaxy.storage"
local websocket = lazy "eutaxy.websocket"

local runtime = {}

local pack, unpack = table.pack, table.unpack

-- Names that RPC never reaches: lifecycle hooks and the class machinery.
local not_rpc = { init = true, extend = true, is_class = true, alarm = true, fetch = true, new = true,
                  webSocketMessage = true, webSocketClose = true, webSocketError = true }

local ids = require "eutaxy.id"
local Id, new_id = ids.Id, ids.new

local function raise_answer(r, level)
  local e = r[2]
  if type(e) == "table" then e = errors.from_wire(e) end
  error(e, level + 1)
end

local function make_stub(binding, id)
  local stub = { id = id, name = id.name }
  function stub.fetch(_, input, init)
    local request = input
    if not http.is_request(request) or init ~= nil then request = http.Request.new(input, init) end
    local r = pack(core.call(binding, id.hex, id.name, "fetch", http.to_wire(request)))
    if not r[1] then raise_answer(r, 2) end
    return http.from_wire(r[2])
  end
  return setmetatable(stub, {
    __name = "eutaxy.Stub",
    __index = function(t, method)
      if type(method) ~= "string" then return nil end
      local function call(_, ...)
        local r = pack(core.call(binding, id.hex, id.name, method, ...))
        if not r[1] then raise_answer(r, 2) end
        return unpack(r, 2, r.n)
      end
      rawset(t, method, call)
      return call
    end,
  })
end

---@class eutaxy.Namespace
local Namespace = {}
Namespace.__index = Namespace
Namespace.__name = "eutaxy.Namespace"

local function check_string(v, what, level)
  if type(v) ~= "string" then
    error(string.format("%s expects a string, got %s", what, type(v)), level + 1)
  end
end

---@param name string
---@return eutaxy.Id
function Namespace:idFromName(name)
  check_string(name, "idFromName", 2)
  return new_id(self.binding, core.id_from_name(self.binding, name), name)
end

---@return eutaxy.Id
function Namespace:newUniqueId()
  return new_id(self.binding, core.new_unique_id(self.binding), nil)
end

---@param hex string
---@return eutaxy.Id
function Namespace:idFromString(hex)
  check_string(hex, "idFromString", 2)
  if #hex ~= 64 or hex:find("[^0-9a-f]") then
    error("idFromString: invalid id \"" .. hex .. "\": 64 lowercase hex digits expected", 2)
  end
  return new_id(self.binding, hex, nil)
end

---@param id eutaxy.Id
function Namespace:get(id)
  if getmetatable(id) ~= Id then error("get expects an id from idFromName, newUniqueId or idFromString", 2) end
  if id.binding ~= self.binding then
    error("get: the id belongs to " .. id.binding .. ", not to " .. self.binding, 2)
  end
  return make_stub(self.binding, id)
end

---@param name string
function Namespace:getByName(name)
  check_string(name, "getByName", 2)
  return self:get(self:idFromName(name))
end

local function sorted_names(t)
  local names = {}
  for k in pairs(t) do names[#names + 1] = tostring(k) end
  table.sort(names)
  return names
end

-- vars: the vars and secrets (config.env), this isolate's own copy.
local function make_env(bindings, vars)
  local env, names = {}, {}
  for _, b in ipairs(bindings) do
    env[b.name] = setmetatable({ binding = b.name }, Namespace)
    names[#names + 1] = b.name
  end
  local var_names = vars and sorted_names(vars) or {}
  for _, k in ipairs(var_names) do env[k] = vars[k] end
  local list = (#names > 0 and table.concat(names, ", ") or "none") .. "; vars: "
    .. (#var_names > 0 and table.concat(var_names, ", ") or "none")
  return setmetatable(env, {
    __index = function(_, k)
      error(string.format("env.%s: no binding or var named %s in wrangler.jsonc or .dev.vars (bindings: %s)",
        tostring(k), tostring(k), list), 2)
    end,
  })
end

-- core.loadfile is the host's: an isolate has no loadfile of its own.
local loadfile = core.loadfile or loadfile

local function load_module(entry)
  local chunk, err = loadfile(entry)
  if not chunk then error(err, 0) end
  local modname = entry:match("([^/\\]+)%.lua$") or entry
  local ok, mod = xpcall(chunk, debug.traceback, modname, entry)
  if not ok then error(mod, 0) end
  if type(mod) ~= "table" then
    error(entry .. " must return a table of its exports (fetch and its classes), got " .. type(mod), 0)
  end
  package.loaded[modname] = mod
  return mod
end

local function check_classes(mod, entry, bindings)
  for _, b in ipairs(bindings) do
    local cls = mod[b.class_name]
    if not eutaxy.DurableObject.is_class(cls) then
      local exports = sorted_names(mod)
      error(string.format(
        "binding %s: class %s is not exported by %s%s (it exports: %s)", b.name, b.class_name, entry,
        cls == nil and "" or " as a DurableObject class",
        #exports > 0 and table.concat(exports, ", ") or "nothing"), 0)
    end
  end
end

--- ctx.waitUntil(fn): fn runs once the invocation has answered, as an
-- invocation of its own (its own turns, its own errors), in this isolate.
local function wait_until(fn)
  if type(fn) ~= "function" then
    error("waitUntil expects a function to run after the answer, got " .. type(fn), 2)
  end
  core.wait_until(fn)
end

local worker_ctx = {
  waitUntil = wait_until,
  passThroughOnException = function() end,
}

---@class eutaxy.ScheduledController
---@field cron string the cron expression that fired, as triggers.crons writes it
---@field scheduledTime integer when the firing was due, ms since 1970 (UTC)
---@field type "scheduled"
local Controller = {}
Controller.__index = Controller
Controller.__name = "eutaxy.ScheduledController"

--- The platform does not retry this invocation if it fails.
function Controller:noRetry()
  core.no_retry()
end

-- A cron's firing: the worker's scheduled(controller, env, ctx), whose
-- results go back to whoever asked for the run (world:runCron).
local function run_scheduled(mod, entry, env, cron, scheduled_time)
  if type(mod.scheduled) ~= "function" then
    error(errors.new("TypeError", entry .. " exports no scheduled(controller, env, ctx) handler"), 0)
  end
  local controller = setmetatable({ cron = cron, scheduledTime = scheduled_time, type = "scheduled" }, Controller)
  return mod.scheduled(controller, env, worker_ctx)
end

--- Builds the isolate's program and returns its dispatch function.
---@param role "worker"|"object"|"service"
-- The worker module, loaded before any object was (runtime.preload).
local preloaded = {}

--- Loads the worker module ahead of the object it is for: a host that
--- builds many objects' isolates from one image (host/world.c's berths)
--- puts it in the image when loading it did nothing an object could tell.
function runtime.preload(entry)
  preloaded[entry] = load_module(entry)
end

function runtime.boot(role, entry, bindings, binding, hex, name, vars)
  local mod = preloaded[entry] or load_module(entry)
  if role ~= "service" then check_classes(mod, entry, bindings) end
  local env = make_env(bindings, vars)

  if role == "worker" then
    -- Every request shares the worker's isolate: the lib modules a request
    -- would load on first use are loaded now, so that no request leaves the
    -- isolate changed for the next by loading one (the checker's reduction
    -- looks for what a worker turn changes: host/heapprint.h).
    local _ = http.from_wire, eutaxy.Request, eutaxy.Response, eutaxy.Headers, eutaxy.json, eutaxy.url
    return function(kind, wire, ...)
      if kind == "run" then
        wire()
        return
      end
      if kind == "scheduled" then return run_scheduled(mod, entry, env, wire, ...) end
      if kind == "exports" then return type(mod[wire]) == "function" end
      if kind ~= "fetch" then error("the worker only answers fetch and scheduled", 0) end
      if type(mod.fetch) ~= "function" then
        error(errors.new("TypeError", entry .. " exports no fetch(request, env, ctx) handler"), 0)
      end
      local response = mod.fetch(http.from_wire(wire), env, worker_ctx)
      if not http.is_response(response) then
        error(errors.new("TypeError", "fetch must return a Response, got " .. type(response)), 0)
      end
      return http.to_wire(response)
    end
  end

  if role == "service" then
    -- A service outside (sim.service): a module like a worker's, whose
    -- fetch(request, env, ctx) answers eutaxy.fetch to its origin. It keeps
    -- its state in ctx.storage, which invariants read and a rewind restores;
    -- it has no bindings of its own.
    if type(mod.fetch) ~= "function" then
      error("the service " .. tostring(name) .. ": " .. entry .. " exports no fetch(request, env, ctx) handler", 0)
    end
    local _ = http.from_wire, eutaxy.Request, eutaxy.Response
    local ctx = { storage = storage.new(core.storage()), waitUntil = worker_ctx.waitUntil }
    local service_env = make_env({})
    return function(kind, wire)
      if kind == "run" then
        wire()
        return
      end
      if kind ~= "fetch" then error("a service only answers fetch", 0) end
      local response = mod.fetch(http.from_wire(wire), service_env, ctx)
      if not http.is_response(response) then
        error(errors.new("TypeError", "the service " .. tostring(name) .. ": fetch must return a Response, got "
          .. type(response)), 0)
      end
      return http.to_wire(response)
    end
  end

  local class_name
  for _, b in ipairs(bindings) do
    if b.name == binding then class_name = b.class_name end
  end
  local cls = mod[class_name]
  local id = new_id(binding, hex, name)
  local store = storage.new(core.storage())
  local instance = setmetatable({}, cls)
  local set_alarm = store.setAlarm
  -- Like Cloudflare, an object without an alarm handler cannot set an alarm.
  store.setAlarm = function(self, at)
    if type(instance.alarm) ~= "function" then
      error(class_name .. " has no alarm(info) method, so it cannot set an alarm", 2)
    end
    return set_alarm(self, at)
  end
  -- ctx.blockConcurrencyWhile(fn): no other event reaches the object while
  -- fn runs, waits included; if fn raises, the object is reset. In init,
  -- the functions are kept and run first, before anything is delivered.
  local constructing, init_blocks = true, {}
  local function fail_gate(e)
    local w = errors.to_wire(e)
    core.gate("fail", w.name .. ": " .. w.message)
    error(e, 0)
  end
  local function block_concurrency_while(fn)
    if type(fn) ~= "function" then
      error("blockConcurrencyWhile expects a function, got " .. type(fn), 2)
    end
    if constructing then
      if #init_blocks == 0 then core.gate("init") end
      init_blocks[#init_blocks + 1] = fn
      return
    end
    core.gate("shut")
    local r = pack(pcall(fn))
    if not r[1] then fail_gate(r[2]) end
    core.gate("open")
    return unpack(r, 2, r.n)
  end
  -- ctx.abort(reason): the object is reset, and every caller of an
  -- invocation in flight (this one's included) gets reason as its error.
  local function abort(reason)
    if reason ~= nil then reason = tostring(reason) end
    core.abort(reason)
  end
  instance.ctx = { id = id, storage = store, waitUntil = wait_until, blockConcurrencyWhile = block_concurrency_while,
                   abort = abort,
                   -- the Hibernation API's, called with a colon as storage's are
                   acceptWebSocket = function(_, ws, tags) websocket.accept(ws, tags) end,
                   getWebSockets = function(_, tag) return websocket.list(tag) end,
                   getTags = function(_, ws) return websocket.tags(ws) end,
                   setWebSocketAutoResponse = function(_, request, response)
                     websocket.set_auto_response(request, response)
                   end,
                   getWebSocketAutoResponseTimestamp = function(_, ws) return websocket.auto_response_at(ws) end }
  instance.env = env
  if instance.init then instance:init() end
  constructing = false

  -- runInDurableObject (eutaxy.testing): the requests of a spec's function,
  -- each carried out here, on the instance itself, as a turn of one
  -- invocation. The function stays in the spec's Lua state: only the
  -- requests' values and the replies cross, cloned.
  local storage_requests = { get = true, put = true, delete = true, list = true, deleteAll = true, getAlarm = true,
                             setAlarm = true, deleteAlarm = true, exec = true, databaseSize = true, sync = true }
  local function visit_request(op, key, ...)
    if op == "get" then
      local v = instance[key]
      if type(v) == "function" then return "function" end
      return "value", v
    elseif op == "set" then
      instance[key] = (...)
      return
    elseif op == "call" then
      local f = instance[key]
      if type(f) ~= "function" then
        error(errors.new("TypeError", string.format("%s has no method %q", class_name, tostring(key))), 0)
      end
      return f(instance, ...)
    elseif op == "fetch" then
      if type(instance.fetch) ~= "function" then
        error(errors.new("TypeError", class_name .. " has no fetch(request) method"), 0)
      end
      local response = instance:fetch(http.from_wire(key))
      if not http.is_response(response) then
        error(errors.new("TypeError", class_name .. ":fetch must return a Response, got " .. type(response)), 0)
      end
      return http.to_wire(response)
    elseif op == "storage" and storage_requests[key] then
      if key == "setAlarm" then return store:setAlarm((...)) end
      return store._fns[key](...)
    end
    error("runInDurableObject: no request " .. tostring(op) .. " " .. tostring(key), 0)
  end

  local function visit()
    local reply = pack(true, class_name)
    while true do
      local request = pack(core.visit_reply(unpack(reply, 1, reply.n)))
      if request[1] == nil then
        reply = pack(false, errors.to_wire(errors.new("DataCloneError",
          "the result cannot come out of the object: " .. tostring(request[2]), { remote = false })))
      elseif request[1] == "end" then
        return
      elseif request[1] == false then
        reply = pack(false, errors.to_wire(errors.new("Error", tostring(request[2]), { remote = false })))
      else
        reply = pack(pcall(visit_request, unpack(request, 1, request.n)))
        if not reply[1] then reply = pack(false, errors.to_wire(reply[2])) end
      end
    end
  end

  return function(kind, ...)
    if kind == "visit" then
      return visit()
    elseif kind == "call" then
      local method = ...
      local f = type(method) == "string" and not not_rpc[method] and method:sub(1, 1) ~= "_"
        and instance[method]
      if type(f) ~= "function" then
        error(errors.new("TypeError", string.format(
          "%s has no method %q that can be called over RPC", class_name, tostring(method))), 0)
      end
      return f(instance, select(2, ...))
    elseif kind == "fetch" then
      if type(instance.fetch) ~= "function" then
        error(errors.new("TypeError", class_name .. " has no fetch(request) method"), 0)
      end
      local response = instance:fetch(http.from_wire((...)))
      if not http.is_response(response) then
        error(errors.new("TypeError", class_name .. ":fetch must return a Response, got " .. type(response)), 0)
      end
      return http.to_wire(response)
    elseif kind == "ws" then
      -- a client's message (id, "message", message, isBinary), close
      -- (id, "close", code, reason, wasClean) or error (id, "error", message)
      local id, what = ...
      local sock = websocket.server_end(id)
      if what == "message" then
        if type(instance.webSocketMessage) ~= "function" then
          error(errors.new("TypeError", class_name .. " accepted a WebSocket but has no webSocketMessage(ws, message) method"), 0)
        end
        instance:webSocketMessage(sock, select(3, ...))
      elseif what == "error" then
        if type(instance.webSocketError) == "function" then
          instance:webSocketError(sock, errors.new("Error", (select(3, ...))))
        end
      elseif type(instance.webSocketClose) == "function" then
        instance:webSocketClose(sock, select(3, ...))
      end
      return
    elseif kind == "run" then
      (...)()
      return
    elseif kind == "block" then
      local fns = init_blocks
      init_blocks = {}
      for _, fn in ipairs(fns) do
        local ok, e = pcall(fn)
        if not ok then fail_gate(e) end
      end
      return
    elseif kind == "alarm" then
      if type(instance.alarm) ~= "function" then
        error(errors.new("TypeError", class_name .. " has no alarm(info) method"), 0)
      end
      instance:alarm(...)
      return
    end
    error("unknown invocation kind " .. tostring(kind), 0)
  end
end

--- The plain error table the host clones back to the caller.
function runtime.wire_error(e, traceback)
  return errors.to_wire(e, traceback)
end

return runtime
