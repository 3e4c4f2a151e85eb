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

local testing = {}

local pack, unpack = table.pack, table.unpack


local sorted_keys = seed.sorted_keys

local function answer(r, level)
  if r[1] then return unpack(r, 2, r.n) end
  local e = r[2]
  if type(e) == "table" then e = errors.from_wire(e) end
  error(e, level + 1)
end

---@class eutaxy.World
---@field env table stubs callable from the spec: world.env.POOL:getByName("pool"):acquire(...)
local World = {}
World.__index = World

local function host_stub(world, binding, hex, name)
  local stub = { name = name }
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
  local world = setmetatable({ _w = w }, World)
  world.env = host_env(world, cfg.bindings, vars)
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
-- the error it raised if it did.
---@return boolean ran, any err
function World:runAlarm(binding, name)
  local r = pack(self._w:run_alarm(binding, self._w:id_from_name(binding, name), name))
  if not r[1] then return false end
  if r[2] then return true end
  return true, errors.from_wire(r[3])
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
function World:rows(binding, name, sql, ...)
  local result = self._w:exec(binding, self._w:id_from_name(binding, name), name, sql, ...)
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
function World:reset(binding, name)
  self._w:reset(binding, self._w:id_from_name(binding, name), name)
end

--- Hibernates the object, as the platform does with an idle one: its
-- isolate goes (in-memory state lost), its storage and WebSockets stay, and
-- the next event wakes it. Returns false when an invocation is in flight.
---@return boolean
function World:hibernate(binding, name)
  return self._w:hibernate(binding, self._w:id_from_name(binding, name), name)
end

--- Whether the object's isolate is alive (constructed and not reset since).
function World:isLive(binding, name)
  return self._w:has_isolate(binding, self._w:id_from_name(binding, name), name)
end

--- Everything the world did, one line per event, with virtual times.
function World:trace() return self._w:trace() end

function World:close() self._w:close() end

testing.World = World
return testing
