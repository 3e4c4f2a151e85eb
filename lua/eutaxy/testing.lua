--- eutaxy.testing: a worker and its objects in an in-process world with a
-- virtual clock, for busted specs.
--
--   local testing = require "eutaxy.testing"
--   local world = testing.world{ config = "scenarios/lease-pool/wrangler.jsonc",
--                                sql = { POOL = { pool = { schema = "...", rows = { slots = { { id = "r-1" } } } } } } }
--   local lease = world.env.POOL:getByName("pool"):acquire("p-1", "t-1")
--   world:advance(5 * 60 * 1000)   -- runs the alarm
--
-- Calls from a spec are synchronous: the world runs until the answer is in,
-- firing whatever comes due on the way.
local core = require "eutaxy.core"
local config = require "eutaxy.config"
local errors = require "eutaxy.errors"
local http = require "eutaxy.http"
local ids = require "eutaxy.id"
local seed = require "eutaxy.seed"
local normalize = require("eutaxy.fingerprint").normalize
local storage = require "eutaxy.storage"

local testing = {}

local pack, unpack = table.pack, table.unpack


local sorted_keys = seed.sorted_keys

local function answer(r, level)
  if r[1] then return unpack(r, 2, r.n) end
  if r.n == 0 then
    -- a reset struck the worker while the request waited: its client went away
    error("the request got no answer: the worker went away while it waited (a reset)", level + 1)
  end
  local e = r[2]
  if type(e) == "table" then e = errors.from_wire(e) end
  error(e, level + 1)
end

---@class eutaxy.World
---@field env table stubs callable from the spec: world.env.POOL:getByName("pool"):acquire(...)
local World = {}
World.__index = World

local function describe(v)
  if type(v) == "string" then return string.format("%q", v) end
  if type(v) == "table" or type(v) == "function" or type(v) == "userdata" then return "a " .. type(v) end
  return tostring(v)
end

local function binding_list(world, kind)
  local names = {}
  for _, name in ipairs(sorted_keys(world._bindings)) do
    if not kind or world._bindings[name] == kind then names[#names + 1] = name end
  end
  return #names > 0 and table.concat(names, ", ") or "none"
end

-- The object a spec names, as the arguments from i on: a binding and a name,
-- a stub (world.env.NS:getByName(...), :get(id)) or an id. Returns its
-- binding, hex and name and the index of the argument after it; a mistake
-- is raised at the spec's line (level: of the caller of the method).
local function object_of(world, fname, level, ...)
  local a, b = ...
  if type(a) == "string" then
    if world._bindings[a] == nil then
      error(string.format("%s: no binding named %s (bindings: %s)", fname, a, binding_list(world)), level + 1)
    end
    if type(b) ~= "string" then
      error(string.format("%s: after the binding %s comes the object's name, got %s", fname, a, describe(b)), level + 1)
    end
    return a, world._w:id_from_name(a, b), b, 3
  end
  local id = getmetatable(a) == ids.Id and a or type(a) == "table" and getmetatable(rawget(a, "id")) == ids.Id
    and rawget(a, "id") or nil
  if not id then
    error(string.format("%s expects a stub, an id, or a binding and a name, got %s", fname, describe(a)), level + 1)
  end
  if world._bindings[id.binding] == nil then
    error(string.format("%s: the id is of %s, which is no binding of this world (bindings: %s)", fname,
      tostring(id.binding), binding_list(world)), level + 1)
  end
  return id.binding, id.hex, id.name, 2
end

local function host_stub(world, binding, hex, name)
  local stub = { id = ids.new(binding, hex, name), name = name }
  function stub.fetch(_, input, init)
    local request = http.is_request(input) and init == nil and input or http.Request.new(input, init)
    local r = pack(world._w:fetch(http.to_wire(request), binding, hex, name))
    if not r[1] then answer(r, 2) end
    return http.from_wire(r[2])
  end
  return setmetatable(stub, {
    __index = function(t, method)
      if type(method) ~= "string" then return nil end
      local function call(_, ...)
        return answer(pack(world._w:call(binding, hex, name, method, ...)), 2)
      end
      rawset(t, method, call)
      return call
    end,
  })
end

local function host_env(world, bindings, vars)
  local env, names = {}, {}
  for _, b in ipairs(bindings) do
    local binding = b.name
    names[#names + 1] = binding
    world._bindings[binding] = "object"
    env[binding] = {
      getByName = function(_, name)
        if type(name) ~= "string" then error("getByName expects a string", 2) end
        return host_stub(world, binding, world._w:id_from_name(binding, name), name)
      end,
      idFromName = function(_, name)
        if type(name) ~= "string" then error("idFromName expects a string", 2) end
        return ids.new(binding, world._w:id_from_name(binding, name), name)
      end,
      newUniqueId = function(_)
        return ids.new(binding, world._w:new_unique_id(binding), nil)
      end,
      get = function(_, id)
        if getmetatable(id) ~= ids.Id or id.binding ~= binding then error("get expects an id of " .. binding, 2) end
        return host_stub(world, binding, id.hex, id.name)
      end,
    }
    world._namespaces[env[binding]] = binding
  end
  local var_names = sorted_keys(vars)
  for _, name in ipairs(var_names) do env[name] = vars[name] end
  local list = (#names > 0 and table.concat(names, ", ") or "none") .. "; vars: "
    .. (#var_names > 0 and table.concat(var_names, ", ") or "none")
  return setmetatable(env, {
    __index = function(_, k)
      error(string.format("env.%s: no binding or var named %s (bindings: %s)", tostring(k), tostring(k), list), 2)
    end,
  })
end

local function seed_sql(w, sql)
  for _, binding in ipairs(sorted_keys(sql)) do
    local objects = sql[binding]
    if type(objects) ~= "table" then error("sql." .. tostring(binding) .. " must be a table of objects by name", 0) end
    for _, name in ipairs(sorted_keys(objects)) do
      seed.sql(w, binding, name, objects[name], "sql." .. binding .. "." .. name)
    end
  end
end

-- Where a relative path a spec or a script gives testing.world is looked
-- up: first from the folder of the file that calls testing.world, so a spec
-- finds its files wherever busted was started; then from the working
-- directory, where specs written before that rule named them from (and
-- still do: "spec/fixtures/..." from spec/*_spec.lua). The caller is the
-- first Lua function above testing.world (pcall and other C functions
-- skipped); a `return testing.world{...}` leaves no frame of its own, and
-- the function it returns to stands for it.
local function caller_dir()
  for level = 3, math.huge do
    local info = debug.getinfo(level, "S")
    if not info then return nil end
    if info.what ~= "C" then
      local file = info.source:match("^@(.+)$")
      return file and (file:match("^(.*)/[^/]*$") or ".")
    end
  end
end

local function exists(path)
  local f = io.open(path, "r")
  if f then f:close() end
  return f ~= nil
end

-- path, found as said above; an absolute one as it is. Nil and a message
-- naming where it was looked for when it is nowhere; what: "file" or "folder".
local function locate(path, base, what)
  if path:sub(1, 1) == "/" or not base or base == "." then
    if exists(path) then return path end
    return nil, ("no %s %s"):format(what, path)
  end
  local near = normalize(base .. "/" .. path)
  if exists(near) then return near end
  if exists(path) then return path end
  return nil, ("no %s %s (relative to the calling file), nor %s (relative to the working directory)")
    :format(what, near, path)
end

-- services = { ["https://payments.example"] = { module = "payments.lua", sql = { schema = ..., rows = ... } } }:
-- bindings the world is made with, sorted by origin, and their seeds.
local function service_bindings(services, bindings, base)
  local list = {}
  for _, b in ipairs(bindings) do list[#list + 1] = b end
  if services == nil then return list, {} end
  if type(services) ~= "table" then error("testing.world: services must be a table keyed by origin", 0) end
  local seeds = {}
  for _, origin in ipairs(sorted_keys(services)) do
    local what = "testing.world: services[" .. string.format("%q", tostring(origin)) .. "]"
    local parsed = type(origin) == "string" and origin:find("^https?://") and require("eutaxy.url").parse(origin)
    if not parsed or parsed.origin ~= origin:lower() or origin:find("[/?#]", #parsed.protocol + 3) then
      error(what .. ": the key must be an origin such as \"https://payments.example\"", 0)
    end
    local sv = services[origin]
    if type(sv) ~= "table" or type(sv.module) ~= "string" then
      error(what .. " must be { module = \"file.lua\", sql = ... }", 0)
    end
    local module, missing = locate(sv.module, base, "file")
    if not module then error(what .. ".module: " .. missing, 0) end
    list[#list + 1] = { name = parsed.origin, class_name = parsed.origin, entry = module }
    if sv.sql ~= nil then seeds[#seeds + 1] = { origin = parsed.origin, sql = sv.sql, what = what .. ".sql" } end
  end
  return list, seeds
end

--- A new world. A relative path in opts (config, main, dir, a service's
--- module) is relative to the folder of the file that calls testing.world,
--- spec or script, or, when nothing is there, to the working directory.
--- services: the services outside that eutaxy.fetch reaches
--- by origin, each a module whose fetch(request, env, ctx) answers (as
--- sim.service in a scenario), with its tables seeded by sql. vars = {
--- NAME = value } sets env's vars over the config's vars and its .dev.vars.
---@param opts { config: string|nil, main: string|nil, bindings: table|nil, crons: string[]|nil, dir: string|nil, vars: table|nil, sql: table|nil, services: table|nil, seed: integer|nil, start: integer|nil, echo: boolean|nil, memLimit: integer|nil, cpuLimit: integer|nil }
---@return eutaxy.World
function testing.world(opts)
  opts = opts or {}
  local base = caller_dir()
  -- the path in opts[field], found (locate), when it is a string
  local function find(field)
    local path = opts[field]
    if type(path) ~= "string" then return path end
    local found, missing = locate(path, base, field == "dir" and "folder" or "file")
    if not found then error("testing.world: " .. field .. ": " .. missing, 3) end
    return found
  end
  local cfg
  if opts.config then
    cfg = config.load(find("config"))
    -- main may name another entry of the same project (a fixed twin, say)
    if opts.main then
      cfg.main = opts.main:sub(1, 1) == "/" and opts.main or (cfg.dir .. "/" .. opts.main:gsub("^%./", ""))
    end
  else
    local dir = find("dir")
    cfg = config.inline({ main = dir and opts.main or find("main"), bindings = opts.bindings, crons = opts.crons },
                        dir or ".")
    -- modules beside the worker are found, as they are beside a wrangler.jsonc
    cfg.dir = cfg.main:match("^(.*)/[^/]*$") or cfg.dir
  end
  local got_vars, vars = pcall(config.env, cfg, opts.vars, "testing.world")
  if not got_vars then error(vars, 2) end
  local bindings, service_seeds = service_bindings(opts.services, cfg.bindings, base)
  local ok, w = pcall(core.world, {
    entry = cfg.main, projectdir = cfg.dir, libdir = config.libdir(), bindings = bindings, vars = vars,
    crons = cfg.crons, seed = opts.seed or 0, start = opts.start, echo = opts.echo, memLimit = opts.memLimit,
    cpuLimit = opts.cpuLimit,
  })
  if not ok then
    local msg = tostring(w)
    -- a binding or a cron names the config that made it
    if cfg.path and (msg:find("^binding ") or msg:find("^triggers%.crons")) then msg = cfg.path .. ": " .. msg end
    error(msg, 2)
  end
  local world = setmetatable({ _w = w, _bindings = {}, _namespaces = setmetatable({}, { __mode = "k" }), _arms = {} },
    World)
  world.env = host_env(world, cfg.bindings, vars)
  for _, b in ipairs(bindings) do
    if b.entry then world._bindings[b.name] = "service" end
  end
  if opts.sql then seed_sql(w, opts.sql) end
  for _, sv in ipairs(service_seeds) do seed.sql(w, sv.origin, sv.origin, sv.sql, sv.what) end
  return world
end

--- Sends a request to the worker's fetch and returns its Response.
---@return eutaxy.Response
function World:fetch(input, init)
  local request = http.is_request(input) and init == nil and input or http.Request.new(input, init)
  local r = pack(self._w:fetch(http.to_wire(request)))
  if not r[1] then answer(r, 2) end
  return http.from_wire(r[2])
end

---@class eutaxy.WebSocketClient
---@field response eutaxy.Response the 101 answer to the upgrade
local Client = {}
Client.__index = Client
Client.__name = "eutaxy.WebSocketClient"

--- Sends a text message (or binary, with { binary = true }) and runs what it starts.
---@return boolean sent false when the socket is closed
function Client:send(message, opts)
  if type(message) ~= "string" then error("send expects a string, got " .. type(message), 2) end
  return self._w:ws_client(self._sock, type(opts) == "table" and opts.binary and "binary" or "text", message)
end

--- Closes with a close frame (code 1000 by default).
function Client:close(code, reason)
  return self._w:ws_client(self._sock, "close", code or 1000, reason or "")
end

--- Goes without a close frame: the object sees code 1006.
function Client:drop()
  return self._w:ws_client(self._sock, "drop")
end

--- The connection fails as a protocol error would (serve closes it with
-- code, 1002 by default): the object sees webSocketError(ws, error).
function Client:error(message, code)
  return self._w:ws_client(self._sock, "error", code or 1002, message or "protocol error")
end

--- Everything received so far: { type = "text"|"binary", data } and
-- { type = "close"|"drop", code, reason }, each with `at`, virtual ms since the start.
function Client:received()
  return self._w:ws_seen(self._sock).received
end

--- The text and binary messages received so far, as strings.
function Client:messages()
  local out = {}
  for _, m in ipairs(self:received()) do
    if m.type == "text" or m.type == "binary" then out[#out + 1] = m.data end
  end
  return out
end

--- "open", "closing" (the object closed, the client's close went back) or "closed".
function Client:state() return self._w:ws_seen(self._sock).state end

--- How the connection ended, from what the client received: { code, reason } or nil while open.
function Client:closed()
  local got = self:received()
  local last = got[#got]
  if last and (last.type == "close" or last.type == "drop") then return { code = last.code, reason = last.reason } end
  return nil
end

--- Opens a WebSocket to the worker: an upgrade request (GET, with the
-- headers a client sends) to its fetch. Returns a client when the answer is
-- 101 with a webSocket, else nil and the response.
---@return eutaxy.WebSocketClient|nil, eutaxy.Response
function World:websocket(input, init)
  local request = http.is_request(input) and init == nil and input or http.Request.new(input, init)
  local headers = request.headers
  if not headers:has("upgrade") then headers:set("upgrade", "websocket") end
  if not headers:has("connection") then headers:set("connection", "Upgrade") end
  if not headers:has("sec-websocket-version") then headers:set("sec-websocket-version", "13") end
  if not headers:has("sec-websocket-key") then headers:set("sec-websocket-key", "dGhlIHNhbXBsZSBub25jZQ==") end
  local r = pack(self._w:fetch(http.to_wire(request)))
  if not r[1] then answer(r, 2) end
  local wire = r[2]
  local response = http.from_wire(wire)
  if response.status ~= 101 or not wire.webSocket then return nil, response end
  self._clients = (self._clients or 0) + 1
  local label = "ws-" .. self._clients
  self._w:ws_connect(wire.webSocket, label)
  return setmetatable({ _w = self._w, _sock = wire.webSocket, label = label, response = response }, Client), response
end

--- Virtual time, ms since 1970.
function World:now() return self._w:now() end

--- Runs everything due in the next ms of virtual time, alarms included.
function World:advance(ms) return self._w:advance(ms) end

--- Runs the object's alarm now, if one is set. Returns whether one ran, and
-- the error it raised if it did. The object: a stub, an id, or a binding
-- and a name.
---@return boolean ran, any err
function World:runAlarm(...)
  local binding, hex, name = object_of(self, "runAlarm", 2, ...)
  local r = pack(self._w:run_alarm(binding, hex, name))
  if not r[1] then return false end
  if r[2] then return true end
  return true, errors.from_wire(r[3])
end

--- The ids of the objects of a namespace that exist in the world (made by
--- a call, a seed, or a look at their storage), in the order they came to
--- be. ns: world.env.NS, or the binding's name.
---@return eutaxy.Id[]
function World:listDurableObjectIds(ns)
  local binding = type(ns) == "string" and ns or type(ns) == "table" and self._namespaces[ns] or nil
  if binding == nil then
    error("listDurableObjectIds expects a namespace (world.env.NS) or a binding's name, got " .. describe(ns), 2)
  end
  if self._bindings[binding] ~= "object" then
    error(string.format("listDurableObjectIds: %s is no Durable Object binding of this world (bindings: %s)",
      binding, binding_list(self, "object")), 2)
  end
  local list = {}
  for i, o in ipairs(self._w:objects(binding)) do list[i] = ids.new(o.binding, o.hex, o.name) end
  return list
end

--- An object's key-value storage (what storage:put wrote), as a table keyed
--- by key, read between events as an invariant reads it. The object: a
--- stub, an id, or a binding and a name.
---@return table<string, any>
function World:kv(...)
  local binding, hex, name = object_of(self, "kv", 2, ...)
  return self._w:kv(binding, hex, name)
end

--- Runs the worker's scheduled() for a cron of triggers.crons now, as if it
-- fired (controller.scheduledTime is now), and returns what the handler
-- returned, or raises its error. A run asked for is not retried.
---@param expr string the cron expression, as triggers.crons writes it
---@return any ...
function World:runCron(expr)
  if type(expr) ~= "string" then error("runCron expects a cron expression of triggers.crons, got " .. type(expr), 2) end
  local ok, r = pcall(function() return pack(self._w:run_cron(expr)) end)
  if not ok then error(tostring(r), 2) end
  return answer(r, 2)
end

--- Rows of a query on an object's database, as tables keyed by column.
--- The object: a stub, an id, or a binding and a name; then the query and
--- its bindings.
function World:rows(...)
  local binding, hex, name, i = object_of(self, "rows", 2, ...)
  local sql = select(i, ...)
  if type(sql) ~= "string" then error("rows: the query must be a string, got " .. describe(sql), 2) end
  local result = self._w:exec(binding, hex, name, select(i, ...))
  local rows = {}
  for i, raw in ipairs(result.rows) do
    local row = {}
    for c, column in ipairs(result.columnNames) do row[column] = raw[c] end
    rows[i] = row
  end
  return rows
end

--- Rows of a query on a service's database (services in testing.world).
function World:serviceRows(origin, sql, ...)
  return self:rows(origin, origin, sql, ...)
end

--- Resets the object: its in-memory state is lost, its storage kept.
function World:reset(...)
  local binding, hex, name = object_of(self, "reset", 2, ...)
  self._w:reset(binding, hex, name)
end

--- Hibernates the object, as the platform does with an idle one: its
-- isolate goes (in-memory state lost), its storage and WebSockets stay, and
-- the next event wakes it. Returns false when an invocation is in flight.
---@return boolean
function World:hibernate(...)
  local binding, hex, name = object_of(self, "hibernate", 2, ...)
  return self._w:hibernate(binding, hex, name)
end

--- Whether the object's isolate is alive (constructed and not reset since).
function World:isLive(...)
  local binding, hex, name = object_of(self, "isLive", 2, ...)
  return self._w:has_isolate(binding, hex, name)
end

-- runInDurableObject ---------------------------------------------------------
--
-- fn runs here, in the spec's Lua state, where its upvalues and busted's
-- asserts are: a function cannot cross into an isolate (only values are
-- cloned across, and bytecode is no sandbox's to load). What it does to
-- `instance` and `state` goes to one invocation of the object as requests,
-- each run there on the instance itself as a turn (runtime.lua's visit):
--   instance.field          a clone of the field ("ctx" is state, "env" the world's env)
--   instance.field = v      sets it to a clone of v
--   instance:method(...)    calls it on the instance, any method (private
--                           ones, fetch, alarm), and returns clones
--   state.storage           the object's storage: the same API as inside
--   state.id                the object's id

local STORAGE_CALLS = { "get", "put", "delete", "list", "deleteAll", "getAlarm", "setAlarm", "deleteAlarm", "exec",
                        "databaseSize", "sync" }

local function visit_error(e, level)
  if type(e) == "table" then e = errors.from_wire(e) end
  error(e, level + 1)
end

--- Runs fn(instance, state) inside the object as one invocation, as
--- cloudflare:test's runInDurableObject does, and returns what fn returns;
--- an error fn raises is raised again. The object: a stub, an id, or a
--- binding and a name, then fn.
---@return any ...
function World:runInDurableObject(...)
  local binding, hex, name, i = object_of(self, "runInDurableObject", 2, ...)
  local fn = select(i, ...)
  if self._bindings[binding] ~= "object" then
    error("runInDurableObject: " .. binding .. " is a service, not a Durable Object", 2)
  end
  if type(fn) ~= "function" then
    error("runInDurableObject: after the object comes a function(instance, state), got " .. describe(fn), 2)
  end
  local w = self._w
  local started = pack(w:visit(binding, hex, name))
  local task = started[1]
  if not started[2] then visit_error(started[3], 2) end
  local class_name = started[3]
  local tag = string.format("DO:%s(%s)", binding, name or hex:sub(1, 12))
  local live = true

  -- One request: its reply (true and the values, or false and the error),
  -- or nil and why it could not be sent.
  local function send(...)
    if not live then return nil, "runInDurableObject: instance and state belong to its function, which has returned" end
    local reply = pack(w:visit_step(task, ...))
    if reply.n == 0 then
      return nil, "runInDurableObject: the invocation in " .. tag .. " has ended while the function ran (a reset "
        .. "or a limit ended it)"
    end
    if reply[1] == false and type(reply[2]) == "string" then
      -- the request's own two values (what and which) come before the user's
      reply[2] = reply[2]:gsub("%(at %[(%d+)%]", function(n) return "(at [" .. (tonumber(n) - 2) .. "]" end)
    end
    return reply
  end

  -- A request's values, or its error raised `level` above the caller.
  local function request(level, ...)
    local reply, why = send(...)
    if not reply then error(why, level + 1) end
    if not reply[1] then visit_error(reply[2], level + 1) end
    return unpack(reply, 2, reply.n)
  end

  -- storage.lua raises a message again at its caller's line, as inside.
  local fns = {}
  for _, call in ipairs(STORAGE_CALLS) do
    fns[call] = function(...)
      local reply, why = send("storage", call, ...)
      if not reply then error(why, 0) end
      if not reply[1] then
        local e = reply[2]
        error(type(e) == "table" and tostring(e.message) or tostring(e), 0)
      end
      return unpack(reply, 2, reply.n)
    end
  end
  -- sql:exec's cursor, made here of the table the object's exec sends back
  local exec = fns.exec
  fns.query = function(cursor_class, ...)
    local r = exec(...)
    return setmetatable({ columnNames = r.columnNames, rowsRead = r.rowsRead, rowsWritten = r.rowsWritten,
                          _rows = r.rows, _pos = 0 }, cursor_class)
  end
  fns.transactionSync = function()
    error("storage:transactionSync: its function would run in the spec, not in the object; call a method of the "
      .. "object that uses it", 2)
  end
  local state = setmetatable({ id = ids.new(binding, hex, name), storage = storage.new(fns) }, {
    __name = "eutaxy.DurableObjectState",
    __index = function(_, k)
      error(string.format("runInDurableObject: state.%s is not available to a spec's function (state has id and "
        .. "storage; call a method of the object for the rest)", tostring(k)), 2)
    end,
  })

  local instance
  local function fetch(first, input, init)
    if first ~= instance then first, input, init = instance, first, input end
    local request_ = http.is_request(input) and init == nil and input or http.Request.new(input, init)
    return http.from_wire(request(2, "fetch", http.to_wire(request_)))
  end
  instance = setmetatable({}, {
    __name = "eutaxy.Instance",
    __index = function(_, key)
      if key == "ctx" then return state end
      if key == "env" then return self.env end
      if key == "fetch" then return fetch end
      local kind, value = request(2, "get", key)
      if kind ~= "function" then return value end
      return function(first, ...)
        if first == instance then return request(2, "call", key, ...) end
        return request(2, "call", key, first, ...)
      end
    end,
    __newindex = function(_, key, value) request(2, "set", key, value) end,
    __tostring = function() return string.format("%s %s (runInDurableObject)", class_name, tag) end,
  })

  local results = pack(pcall(fn, instance, state))
  live = false
  -- fn may have closed the world, or a reset ended the invocation: then there is nothing to end
  local ended = pack(pcall(w.visit_step, w, task, "end"))
  if not results[1] then error(results[2], 0) end
  if not ended[1] then error(ended[2], 2) end
  if ended.n > 1 and not ended[2] then visit_error(ended[3], 2) end
  return unpack(results, 2, results.n)
end

-- Faults a spec arms --------------------------------------------------------

local checks -- eutaxy.check, for the fault kinds, loaded when first needed

local FAULT_FIELDS = { "kind", "call", "object", "when", "skip" }
-- What each kind strikes, for the call it may name: nil for any method.
local ONLY_METHOD = { ["alarm-fail"] = "alarm", ["alarm-lost"] = "alarm", ["ws-drop"] = "webSocketMessage",
                      ["ws-close"] = "webSocketMessage" }
local WORKER_KINDS = { ["cron-fail"] = true, ["cron-lost"] = true }

-- One entry of world:faults{...}, checked: kind, binding, hex, method, when, skip.
local function parse_fault(world, f, i)
  local what = string.format("world:faults: faults[%d]", i)
  if type(f) ~= "table" then error(what .. " must be a table { kind = ..., ... }, got " .. describe(f), 0) end
  for _, k in ipairs(sorted_keys(f)) do
    local known = false
    for _, name in ipairs(FAULT_FIELDS) do known = known or k == name end
    if not known then
      error(string.format("%s has an unknown field %s (fields: %s)", what, describe(k), table.concat(FAULT_FIELDS, ", ")), 0)
    end
  end
  checks = checks or require "eutaxy.check"
  local kind = f.kind
  local known = false
  for _, k in ipairs(checks.FAULT_KINDS) do known = known or k == kind end
  if not known then
    error(string.format("%s.kind must be a fault kind (%s), got %s", what, table.concat(checks.FAULT_KINDS, ", "),
      describe(kind)), 0)
  end
  if kind == "resend" then
    error(what .. ': "resend" is a fault of eutaxy check\'s drive (its client resends a request); a spec\'s calls '
      .. "have no client to resend them", 0)
  end
  local p = { kind = kind, when = "any", skip = 0 }
  if f.object ~= nil then
    local o = f.object
    if type(o) == "table" and getmetatable(o) == nil and rawget(o, "id") == nil then
      if type(o[1]) ~= "string" or type(o[2]) ~= "string" or o[3] ~= nil then
        error(what .. '.object must be a stub, an id, or { "BINDING", "name" }', 0)
      end
      if world._bindings[o[1]] == nil then
        error(string.format("%s.object: no binding named %s (bindings: %s)", what, o[1], binding_list(world)), 0)
      end
      p.binding, p.hex = o[1], world._w:id_from_name(o[1], o[2])
    else
      local ok, binding, hex = pcall(object_of, world, what .. ".object", 1, o)
      if not ok then error(binding, 0) end
      p.binding, p.hex = binding, hex
    end
  end
  if f.call ~= nil then
    local call = f.call
    if type(call) ~= "string" or call == "" then
      error(what .. '.call must be a string, "BINDING.method" or "BINDING", got ' .. describe(call), 0)
    end
    local binding, method = call, nil
    if world._bindings[call] == nil then binding, method = call:match("^(.*)%.([^.]+)$") end
    if not binding or world._bindings[binding] == nil then
      error(string.format('%s.call: %s names no binding (it reads "BINDING.method"; bindings: %s)', what, describe(call),
        binding_list(world)), 0)
    end
    if p.binding and p.binding ~= binding then
      error(string.format("%s: call names %s but object is of %s: a fault strikes one object", what, binding, p.binding), 0)
    end
    if method and ONLY_METHOD[kind] and method ~= ONLY_METHOD[kind] then
      error(string.format("%s: %s strikes %s, so its call can only be %s.%s, not %s", what, kind,
        ONLY_METHOD[kind] == "alarm" and "alarms" or "messages of WebSocket clients", binding, ONLY_METHOD[kind], call), 0)
    end
    p.binding, p.method = binding, method
  end
  if WORKER_KINDS[kind] and (f.object ~= nil or f.call ~= nil) then
    error(string.format("%s: %s strikes the worker's scheduled(): it takes no object or call", what, kind), 0)
  end
  if f.when ~= nil then
    if kind ~= "reset" and kind ~= "hibernate" then
      error(string.format("%s.when applies to reset and hibernate, not %s", what, kind), 0)
    end
    if f.when ~= "before" and f.when ~= "waiting" then
      error(what .. '.when must be "before" (as an invocation starts) or "waiting" (while one waits at a yield '
        .. "point), got " .. describe(f.when), 0)
    end
    if kind == "hibernate" and f.when == "waiting" then
      error(what .. ': hibernate strikes an idle object, as an invocation starts: when can only be "before"', 0)
    end
    p.when = f.when
  end
  if f.skip ~= nil then
    if math.type(f.skip) ~= "integer" or f.skip < 0 then
      error(what .. ".skip must be a whole number of matching points to let pass, got " .. describe(f.skip), 0)
    end
    p.skip = f.skip
  end
  return p
end

local function fault_text(f, where)
  local parts = { f.kind }
  if f.call ~= nil then parts[#parts + 1] = "call " .. tostring(f.call) end
  if type(f.object) == "table" and getmetatable(f.object) == nil and rawget(f.object, "id") == nil then
    parts[#parts + 1] = string.format("object %s(%s)", tostring(f.object[1]), tostring(f.object[2]))
  elseif f.object ~= nil then
    local id = getmetatable(f.object) == ids.Id and f.object or f.object.id
    parts[#parts + 1] = string.format("object %s(%s)", id.binding, id.name or id.hex:sub(1, 12))
  end
  if f.when ~= nil then parts[#parts + 1] = "when " .. f.when end
  if f.skip ~= nil then parts[#parts + 1] = "skip " .. f.skip end
  return table.concat(parts, ", ") .. " (armed at " .. where .. ")"
end

--- Arms faults of the checker's kinds (sim.FAULT_KINDS): each strikes once,
--- at the first fault point that offers its kind and matches, in the order
--- armed; the world's own choices stay as they were. Each fault:
---   kind    the fault, e.g. "ambiguous", "alarm-fail", "reset"
---   call    "BINDING.method" or "BINDING": the invocation there (a call
---           made, "POOL.alarm", the one a reset strikes before or in)
---   object  the object struck: a stub, an id, or { "BINDING", "name" }
---   when    reset and hibernate: "before" (as an invocation starts) or
---           "waiting" (while one waits at a yield point)
---   skip    matching points to let pass first (0)
--- Without a list, returns the faults armed that have not struck yet.
---@param list? table[]
---@return table[]|nil
function World:faults(list)
  if list == nil then
    local left = {}
    for _, id in ipairs(self._w:armed()) do left[#left + 1] = self._arms[id].fault end
    return left
  end
  if type(list) ~= "table" then error("world:faults expects a list of faults, got " .. describe(list), 2) end
  if list.kind ~= nil then error("world:faults expects a list of faults; wrap this one in { }", 2) end
  local parsed = {}
  for i, f in ipairs(list) do
    local ok, p = pcall(parse_fault, self, f, i)
    if not ok then error(p, 2) end
    parsed[i] = p
  end
  local info = debug.getinfo(2, "Sl")
  local where = info and info.currentline > 0 and (info.short_src .. ":" .. info.currentline) or "?"
  for i, p in ipairs(parsed) do
    local id = self._w:arm_fault(p.kind, p.binding, p.hex, p.method, p.when, p.skip)
    self._arms[id] = { fault = list[i], text = fault_text(list[i], where) }
  end
end

--- Raises an error naming every armed fault that never struck.
function World:assertFaultsStruck()
  local left = self._w:armed()
  if #left == 0 then return end
  local lines = {}
  for i, id in ipairs(left) do lines[i] = "  " .. self._arms[id].text end
  error(string.format("%d armed fault%s never struck:\n%s", #left, #left == 1 and "" or "s",
    table.concat(lines, "\n")), 2)
end

--- Disarms every fault that has not struck, and returns them.
---@return table[]
function World:clearFaults()
  local left = self:faults()
  self._w:disarm()
  return left
end

--- Everything the world did, one line per event, with virtual times.
function World:trace() return self._w:trace() end

function World:close() self._w:close() end

testing.World = World
return testing
