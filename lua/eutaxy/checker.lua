--- `eutaxy check`: loads a scenario, hands it to the C explorer
-- (core.explore), and reports VIOLATED, BOUNDED or INCONCLUSIVE.
--
-- The exploration itself (choosers, faults, schedules, shrinking) is C;
-- this module owns what a user reads: arguments, the scenario's errors,
-- the invariants' evaluation, and the report, as text or JSON.
local core = require "eutaxy.core"
local config = require "eutaxy.config"
local fingerprint = require "eutaxy.fingerprint"
local http = require "eutaxy.http"
local ids = require "eutaxy.id"
local json = require "eutaxy.json"
local limits = require "eutaxy.limits"
local seed = require "eutaxy.seed"
local sim = require "eutaxy.check"

local checker = {}

-- The usage printed on a mistake and for --help: lua/eutaxy/help.lua holds
-- every command's text, flags included, and is loaded only then.
local function usage()
  return (require("eutaxy.help").text("check"):gsub("\n$", ""))
end


local EXIT = { BOUNDED = 0, VIOLATED = 1, NONDETERMINISTIC = 1, INCONCLUSIVE = 3 }

-- A usage or scenario error: reported with exit 2.
local Bad = {}
local function bad(fmt, ...)
  error(setmetatable({ message = string.format(fmt, ...) }, Bad), 0)
end

-- The options that shape an exploration, which --merge (reading reports) refuses.
local EXPLORING = { "--replay", "--random", "--seed", "--shard", "-j", "--check-determinism", "--budget-ms",
                    "--no-reduction", "--no-restore", "--by-fault-count", "--end-states", "--save-regression", "--coverage",
                    "--coverage-out" }

local function parse_args(argv)
  local o = { jobs = 1, files = {}, given = {} }
  local i = 1
  local function value(flag)
    i = i + 1
    if argv[i] == nil then bad("%s needs a value", flag) end
    return argv[i]
  end
  local function count(flag)
    local v = value(flag)
    local n = math.tointeger(tonumber(v))
    if not n or n < 1 then bad("%s expects a positive whole number, got %q", flag, v) end
    return n
  end
  while i <= #argv do
    local a = argv[i]
    o.given[a:match("^%-j%d+$") and "-j" or a == "--jobs" and "-j" or a] = true
    if a == "--replay" then o.replay = value(a)
    elseif a == "--json" then o.json = true
    elseif a == "--html" then o.html = value(a)
    elseif a == "--random" then o.random = count(a)
    elseif a == "--seed" then o.seed = math.tointeger(tonumber(value(a))) or bad("--seed expects an integer")
    elseif a == "--shard" then
      local v = value(a)
      local k, n = v:match("^(%d+)/(%d+)$")
      k, n = tonumber(k), tonumber(n)
      if not k or n < 1 or k < 1 or k > n then bad("--shard expects K/N with 1 <= K <= N, got %q", v) end
      o.shard_k, o.shard_n = k - 1, n
    elseif a == "-j" or a == "--jobs" then o.jobs = count(a)
    elseif a:match("^%-j%d+$") then
      o.jobs = math.tointeger(tonumber(a:sub(3)))
      if not o.jobs or o.jobs < 1 then bad("-j expects a positive whole number, got %q", a:sub(3)) end
    elseif a == "--check-determinism" then o.determinism = true
    elseif a == "--no-reduction" then o.no_reduction = true
    elseif a == "--no-restore" then o.no_restore = true
    elseif a == "--by-fault-count" then o.by_fault_count = true
    elseif a == "--budget-ms" then o.budget = count(a)
    elseif a == "--quiet" then o.quiet = true
    elseif a == "--end-states" then o.end_states = true
    elseif a == "--save-regression" then o.save_regression = true
    elseif a == "--merge" then o.merge = true
    elseif a == "--coverage" then o.coverage = o.coverage or "lcov.info"
    elseif a == "--coverage-out" then o.coverage = value(a)
    elseif a == "-h" or a == "--help" then o.help = true
    elseif a:sub(1, 1) == "-" then bad("unknown option %s", a)
    else o.files[#o.files + 1] = a end
    i = i + 1
  end
  if o.merge then
    for _, flag in ipairs(EXPLORING) do
      if o.given[flag] then bad("--merge adds up shards' reports: it explores nothing, so it takes no %s", flag) end
    end
    if #o.files == 0 and not o.help then
      bad("--merge needs the shards' reports: %s", "eutaxy check --merge 1.json 2.json ...")
    end
    return o
  end
  if #o.files > 1 then bad("one scenario at a time (got %s and %s)", o.files[1], o.files[2]) end
  o.file = o.files[1]
  if not o.file and not o.help then bad("which scenario? %s", "eutaxy check SCENARIO.lua") end
  if o.replay and (o.random or o.shard_n) then bad("--replay runs one schedule: it cannot be combined with --random or --shard") end
  -- The end states are gathered in this process, over a whole search: -j's
  -- workers would keep theirs, and --random or --replay see no whole search.
  if o.end_states then
    if o.jobs > 1 then bad("--end-states gathers the end states in one process: it cannot be combined with -j %d", o.jobs) end
    if o.random then bad("--end-states lists the end states of a whole search: it cannot be combined with --random") end
    if o.replay then bad("--end-states lists the end states of a whole search: it cannot be combined with --replay") end
  end
  return o
end

local function dirname(path)
  return path:match("^(.*)/[^/]*$") or "."
end

local function join(dir, path)
  if path:sub(1, 1) == "/" then return path end
  return dir .. "/" .. path:gsub("^%./", "")
end

-- A stable 53-bit integer from the scenario's seed (a name or a number).
local function seed_number(s)
  if math.type(s) == "integer" then return s end
  local h = 0
  for i = 1, #tostring(s) do h = (h * 31 + tostring(s):byte(i)) % 9007199254740881 end
  return h
end

local function load_scenario(file)
  local dir = dirname(file)
  package.path = dir .. "/?.lua;" .. dir .. "/?/init.lua;" .. package.path
  local chunk, err = loadfile(file, "t")
  if not chunk then bad("%s", err) end
  sim.loading = file
  local ok, scenario = limits.pcall(chunk)
  sim.loading = nil
  if not ok then
    if type(scenario) == "table" then scenario = tostring(scenario.message or scenario) end
    bad("%s", tostring(scenario))
  end
  if type(scenario) ~= "table" or scenario.kind ~= "eutaxy.scenario" then
    bad("%s must return sim.defineScenario{ ... }, got %s", file, type(scenario))
  end
  return scenario, dir
end

local function where(file, thing)
  return string.format("%s:%s", file, thing.line or "?")
end

-- Everything core.explore needs, checked against the project's config.
local function prepare(scenario, file, dir)
  local cfg_path = join(dir, scenario.worker.config)
  local ok, cfg = pcall(config.load, cfg_path)
  if not ok then bad("%s: worker.config: %s", where(file, scenario), tostring(cfg)) end
  local entry = join(dir, scenario.worker.entry)
  local known, origins = {}, {}
  for _, b in ipairs(cfg.bindings) do known[b.name] = b end
  for _, sv in ipairs(scenario.services) do origins[sv.origin] = sv end
  local function check_binding(binding, what, thing)
    if not known[binding] then
      local names = {}
      for _, b in ipairs(cfg.bindings) do names[#names + 1] = b.name end
      bad("%s: %s: no binding named %s in %s (bindings: %s)", where(file, thing), what, binding, cfg_path,
        #names > 0 and table.concat(names, ", ") or "none")
    end
  end
  local function check_service(origin, what, thing)
    if not origins[origin] then
      local names = {}
      for _, sv in ipairs(scenario.services) do names[#names + 1] = sv.origin end
      bad("%s: %s: no service %s in the scenario (services: %s)", where(file, thing), what, origin,
        #names > 0 and table.concat(names, ", ") or "none")
    end
  end
  local bindings = {}
  for _, b in ipairs(cfg.bindings) do bindings[#bindings + 1] = { name = b.name, class_name = b.class_name } end
  for _, sv in ipairs(scenario.services) do
    local module = join(dir, sv.entry)
    local f = io.open(module, "r")
    if not f then bad("%s: service %s: no module %s", where(file, sv), sv.origin, module) end
    f:close()
    bindings[#bindings + 1] = { name = sv.origin, class_name = sv.origin, entry = module }
  end
  local got_vars, vars = pcall(config.env, cfg, scenario.vars, where(file, scenario))
  if not got_vars then bad("%s", vars) end
  for _, s in ipairs(scenario.setup) do
    check_binding(s.binding, "durableObject", s)
    for _, b in ipairs(bindings) do
      if b.name == s.binding then b.alarms = s.alarmsPerObject end
    end
  end
  for _, inv in ipairs(scenario.invariants) do
    if inv.table and inv.table.service then check_service(inv.table.binding, "invariant " .. inv.name, inv)
    elseif inv.table then check_binding(inv.table.binding, "invariant " .. inv.name, inv) end
  end
  local events = {}
  if scenario.drive.kind == "http" then
    for i, r in ipairs(scenario.drive.requests) do
      local request = http.Request.new(r.path, { method = r.method, headers = r.headers, body = r.body })
      events[i] = { kind = "fetch", label = "req-" .. i, request = http.to_wire(request), at = r.at }
      if r.websocket then
        local script = {}
        for k, m in ipairs(r.websocket.messages) do
          script[k] = { op = m.binary and "binary" or "text", data = m.data, at = m.at }
        end
        if r.websocket.close then script[#script + 1] = { op = "close", code = r.websocket.close } end
        events[i].script = script
      end
    end
  else
    for i, c in ipairs(scenario.drive.calls) do
      check_binding(c.binding, "rpc", scenario.drive)
      events[i] = { kind = "rpc", label = "call-" .. i, binding = c.binding, name = c.name, method = c.method,
                    args = c.args, at = c.at }
    end
  end
  return {
    entry = entry, projectdir = dirname(entry), bindings = bindings, vars = vars, secrets = cfg.secrets,
    events = events, seed = seed_number(scenario.seed), crons = cfg.crons, config = cfg_path,
  }
end

local function setup_fn(scenario)
  return function(world)
    for _, s in ipairs(scenario.setup) do
      for _, name in ipairs(seed.sorted_keys(s.sql or {})) do
        seed.sql(world, s.binding, name, s.sql[name], "durableObject(" .. s.binding .. ").sql." .. name)
      end
      for _, name in ipairs(seed.sorted_keys(s.kv or {})) do
        seed.kv(world, s.binding, name, s.kv[name], "durableObject(" .. s.binding .. ").kv." .. name)
      end
    end
    for _, sv in ipairs(scenario.services) do
      if sv.sql then seed.sql(world, sv.origin, sv.origin, sv.sql, "service(" .. sv.origin .. ").sql") end
    end
  end
end

-- Lua's string < follows the locale's collation: canonical order compares bytes.
local function bytewise_less(a, b)
  if a == b then return false end
  local n = math.min(#a, #b)
  for i = 1, n do
    local x, y = a:byte(i), b:byte(i)
    if x ~= y then return x < y end
  end
  return #a < #b
end

-- What an invariant sees of a run: a State is made for one look at the
-- committed state (the end of a run, or just after a turn), so what it
-- caches never outlives the turn it was read after.
local State = {}

local function responses(answers, kind)
  local list = {}
  for i, a in ipairs(answers or {}) do
    local r = { event = a.event, deliveries = a.deliveries, websocket = a.websocket }
    if a.lost then
      r.lost = true
    elseif a.ok and kind == "http" and type(a.value) == "table" then
      r.status, r.body = a.value.status, a.value.body
    elseif a.ok then
      r.value = a.value
    else
      r.error = a.error
      if kind == "http" then r.status, r.body = 500, tostring(a.error and a.error.message) end
    end
    list[i] = r
  end
  return list
end

-- state.responses is made on first use: most looks never need it (nor,
-- at the end of a run, the run's answers it is made from).
function State.__index(self, key)
  if key == "responses" then
    local list = responses(self._run.answers, self._kind)
    rawset(self, "responses", list)
    return list
  end
  return State[key]
end

-- task: the task whose turn was just committed; nil at the end of the run.
-- reads: what reading each handle's table takes, worked out once a check
-- (the object's id and the query: ids are hashes of the binding's class and
-- the name, the same in every world of one check).
local function new_state(run, kind, task, reads)
  return setmetatable({ _world = run.world, _tables = {}, _kv = {}, _run = run, _kind = kind, _task = task,
                        _reads = reads }, State)
end

-- The query that reads a handle's table.
local function table_query(handle) return "SELECT * FROM " .. seed.quote_ident(handle.table) end

-- How to read the handle's table: the object's id and the query.
function State:_how(handle)
  local how = self._reads[handle]
  if not how then
    how = { hex = handle.hex or self._world:id_from_name(handle.binding, handle.name), sql = table_query(handle) }
    self._reads[handle] = how
  end
  return how
end

-- The table's rows and columns, read once per look and handle.
function State:_read(handle)
  local cached = self._tables[handle]
  if cached then return cached end
  local w = self._world
  local how = self:_how(handle)
  local label = handle.name or handle.hex:sub(1, 12)
  local ok, result = pcall(w.exec, w, handle.binding, how.hex, handle.name, how.sql)
  if not ok then
    local msg = tostring(result)
    if msg:find("no such table") then
      bad("%s:%s: table %s/%s does not exist in DO:%s %s (invariant %q reads it)",
        handle.file or "?", handle.line or "?", label, handle.table, handle.binding,
        self._task and "after the turn of " .. self._task or "at the end of the run", self._reader or "?")
    end
    bad("%s:%s: reading %s/%s: %s", handle.file or "?", handle.line or "?", label, handle.table, msg)
  end
  local rows = {}
  for i, raw in ipairs(result.rows) do
    local row = {}
    for c, column in ipairs(result.columnNames) do row[column] = raw[c] end
    rows[i] = row
  end
  cached = { columns = result.columnNames, rows = rows }
  self._tables[handle] = cached
  return cached
end

--- The table's rows where the property looks, as tables keyed by column (NULL absent).
function State:rows(handle) return self:_read(handle).rows end

--- The table's columns, in table order.
function State:columns(handle) return self:_read(handle).columns end

-- Where the property that is looking was written, for its mistakes.
function State:_where()
  local info = debug.getinfo(3, "Sl")
  return info and info.currentline > 0 and (info.short_src .. ":" .. info.currentline) or "?"
end

--- An object's key-value storage where the property looks, as a table by
--- key: state:kv(sim.durableObjectKv("POOL", "pool")), or state:kv("POOL", name or id).
function State:kv(handle, object)
  local at = self:_where()
  if type(handle) == "string" then
    local ok, h = pcall(sim.durableObjectKv, handle, object)
    if not ok then bad("%s: state:kv: %s", at, tostring(h):gsub("^[^:]*:%d+: ", "")) end
    handle = h
  elseif type(handle) ~= "table" or (handle.kind ~= "eutaxy.kv" and handle.kind ~= "eutaxy.table") then
    bad("%s: state:kv expects a handle from sim.durableObjectKv, or a binding and an object, got %s", at,
      type(handle))
  end
  local cached = self._kv[handle]
  if cached then return cached end
  local w = self._world
  local ok, kv = pcall(function()
    return w:kv(handle.binding, handle.hex or w:id_from_name(handle.binding, handle.name), handle.name)
  end)
  if not ok then
    bad("%s: state:kv: reading DO:%s(%s): %s", at, handle.binding, handle.name or handle.hex:sub(1, 12),
      (tostring(kv):gsub("^[^:]*:%d+: ", "")))
  end
  self._kv[handle] = kv
  return kv
end

--- The ids of the objects of a binding that exist where the property looks,
--- named ones by name, then those made with newUniqueId by id: for
--- sim.durableObjectTable and state:kv to read objects without a name.
function State:listDurableObjectIds(binding)
  local ok, list = pcall(self._world.objects, self._world, binding)
  if type(binding) ~= "string" or not ok then
    bad("%s: state:listDurableObjectIds: no Durable Object binding named %s", self:_where(), tostring(binding))
  end
  table.sort(list, function(a, b)
    if (a.name == nil) ~= (b.name == nil) then return a.name ~= nil end
    if a.name then return bytewise_less(a.name, b.name) end
    return a.hex < b.hex
  end)
  local out = {}
  for i, o in ipairs(list) do out[i] = ids.new(o.binding, o.hex, o.name) end
  return out
end

-- The built-in properties over a table the host decides without making
-- Lua rows of it, when they hold (host/holds.h); a table this look has
-- read already is as cheap to look at here.
local DECIDED_IN_C = { unique = true, everyRow = true }

-- Whether the host says the built-in property holds on the state; false
-- when it fails or the host cannot say, and check.lua decides.
function State:_holds(inv)
  local handle = DECIDED_IN_C[inv.kind] and inv.table
  if not handle or self._tables[handle] then return false end
  local w = self._world
  local ok, how = pcall(self._how, self, handle)
  if not ok then return false end
  local done, holds = pcall(w.holds, w, handle.binding, how.hex, handle.name, how.sql, inv)
  return done and holds == true
end

-- When every end-of-run property is one the host decides, the host checks
-- a run's end without calling check_run where they all hold
-- (core.explore's decided): nothing else is looked at there then (no
-- probes, no end states, no answers of an RPC drive). nil otherwise.
local function decided_in_host(scenario)
  if scenario.end_states or #scenario.probes > 0 or scenario.drive.kind == "rpc" then return nil end
  local list = {}
  for _, inv in ipairs(scenario.invariants) do
    if not DECIDED_IN_C[inv.kind] then return nil end
    local handle = inv.table
    list[#list + 1] = { binding = handle.binding, name = handle.name, hex = handle.hex, sql = table_query(handle),
                        property = inv }
  end
  return #list > 0 and list or nil
end

-- The first of the properties to fail on the state, or nil.
local function look(properties, state)
  for _, inv in ipairs(properties) do
    if inv.kind ~= "sometimes" and not state:_holds(inv) then
      state._reader = inv.name
      local ok, v = pcall(sim.evaluate, inv, state)
      if not ok then
        if getmetatable(v) == Bad then error(v, 0) end
        bad("%s", tostring(v))
      end
      if v then return v end
    end
  end
  return nil
end

-- The probes this look reaches, as their indices in scenario.probes (nil
-- for none); reached[i] marks those this process has seen already, which
-- are not called again.
local function probe(scenario, state, reached)
  local hit
  for i, p in ipairs(scenario.probes) do
    if not reached[i] then
      state._reader = p.name
      local ok, v = pcall(sim.reached, p, state)
      if not ok then
        if getmetatable(v) == Bad then error(v, 0) end
        bad("%s", tostring(v))
      end
      if v then
        reached[i] = true
        hit = hit or {}
        hit[#hit + 1] = i
      end
    end
  end
  return hit
end

-- ---- end states (--end-states) ---------------------------------------------
--
-- A testing aid: two searches of one scenario (with and without reduction)
-- must reach the same set of end states. An end state is written as one
-- canonical string, the same bytes exactly when the states are equal: no
-- table iteration order, no addresses, floats printed exactly, and rows in
-- an order of their own (SQL gives them in none), then hashed.

-- One value, tagged by type so 1, 1.0 and "1" differ; a table's keys in the
-- order of their own encodings.
local function canonical(v, out)
  local t = math.type(v) or type(v)
  if t == "nil" then out[#out + 1] = "n"
  elseif t == "boolean" then out[#out + 1] = v and "T" or "F"
  elseif t == "integer" then out[#out + 1] = string.format("i%d;", v)
  elseif t == "float" then
    out[#out + 1] = v ~= v and "fnan;" or string.format("f%.17g;", v)
  elseif t == "string" then out[#out + 1] = "s" .. #v .. ":" .. v
  elseif t == "table" then
    local entries = {}
    for k, x in pairs(v) do
      local ko, xo = {}, {}
      canonical(k, ko)
      canonical(x, xo)
      entries[#entries + 1] = { table.concat(ko), table.concat(xo) }
    end
    table.sort(entries, function(a, b) return bytewise_less(a[1], b[1]) end)
    out[#out + 1] = "{"
    for _, e in ipairs(entries) do out[#out + 1] = e[1] .. "=" .. e[2] end
    out[#out + 1] = "}"
  else
    out[#out + 1] = "?" .. t  -- a function or userdata: its kind only, never its address
  end
end

local function encode(v)
  local out = {}
  canonical(v, out)
  return table.concat(out)
end

-- 64-bit FNV-1a of s, as 16 hex digits: the fingerprint's hash.
local fnv1a64 = fingerprint.hash

local INTERNAL = { "_eutaxy_", "eutaxy_", "sqlite_" }

local function is_internal(name)
  local lower = name:lower()
  for _, prefix in ipairs(INTERNAL) do
    if lower:sub(1, #prefix) == prefix then return true end
  end
  return false
end

-- The objects a scenario names: its setup's (sql and kv), its invariants'
-- tables and its rpc drive's targets, sorted. The world handle cannot list
-- the objects a run made, so one the scenario never names is not seen.
local function named_objects(scenario)
  local seen, list = {}, {}
  local function add(binding, name)
    local key = encode({ binding, name })
    if not seen[key] then
      seen[key] = true
      list[#list + 1] = { binding = binding, name = name, key = key }
    end
  end
  local function add_id(binding, hex)
    local key = encode({ binding, hex = hex })
    if not seen[key] then
      seen[key] = true
      list[#list + 1] = { binding = binding, hex = hex, key = key }
    end
  end
  for _, s in ipairs(scenario.setup) do
    for name in pairs(s.sql or {}) do add(s.binding, name) end
    for name in pairs(s.kv or {}) do add(s.binding, name) end
  end
  for _, sv in ipairs(scenario.services) do add(sv.origin, sv.origin) end
  for _, inv in ipairs(scenario.invariants) do
    if inv.table and inv.table.name then add(inv.table.binding, inv.table.name)
    elseif inv.table then add_id(inv.table.binding, inv.table.hex) end
  end
  if scenario.drive.kind == "rpc" then
    for _, c in ipairs(scenario.drive.calls) do add(c.binding, c.name) end
  end
  table.sort(list, function(a, b) return bytewise_less(a.key, b.key) end)
  return list
end

-- One object's user tables: each with its columns and its rows, the rows
-- sorted by their encodings (every column).
local function object_state(w, object)
  local hex = object.hex or w:id_from_name(object.binding, object.name)
  local names = w:exec(object.binding, hex, object.name,
    "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")
  local tables = {}
  for _, raw in ipairs(names.rows) do
    local name = raw[1]
    if not is_internal(name) then
      local result = w:exec(object.binding, hex, object.name, "SELECT * FROM " .. seed.quote_ident(name))
      local ncols = #result.columnNames
      local rows = {}
      for i, r in ipairs(result.rows) do
        local out = {}
        for c = 1, ncols do canonical(r[c], out) end
        rows[i] = table.concat(out)
      end
      table.sort(rows, bytewise_less)
      tables[#tables + 1] = "t" .. encode(name) .. encode(result.columnNames) .. "[" .. table.concat(rows, ",") .. "]"
    end
  end
  return "o" .. object.key .. table.concat(tables)
end

-- The digest of a run's end state: the named objects' tables, then the
-- drive's answers as state.responses shows them.
local function end_state(scenario, run)
  local parts = {}
  for _, object in ipairs(scenario.end_objects) do
    local ok, text = pcall(object_state, run.world, object)
    if not ok then
      bad("--end-states: reading DO:%s(%s): %s", object.binding, object.name or object.hex:sub(1, 12), tostring(text))
    end
    parts[#parts + 1] = text
  end
  parts[#parts + 1] = "r" .. encode(responses(run.answers, scenario.drive.kind))
  return fnv1a64(table.concat(parts))
end

local function check_run(scenario, run, reached)
  if run.undeclared then bad("%s: %s", scenario.file or "the scenario", run.undeclared) end
  if scenario.end_states and run.settled then scenario.end_states[end_state(scenario, run)] = true end
  if run.uncaught then
    return { invariant = "no-uncaught-errors", message = run.uncaught .. " (uncaught)" }
  end
  -- Nothing catches what a driven call raises: an object's own error there is
  -- as uncaught as one out of fetch (an infrastructure failure is a fault's doing).
  if scenario.drive.kind == "rpc" then
    for _, a in ipairs(run.answers or {}) do
      local e = a.error
      if a.ok == false and type(e) == "table" and e.remote then
        return { invariant = "no-uncaught-errors", message = string.format("%s raised %s: %s (uncaught)",
          a.event, tostring(e.name or "Error"), tostring(e.message)) }
      end
    end
  end
  if not run.settled then
    return { invariant = "run-settles", message = string.format(
      "the run did not settle within %d events (bounds.maxEventsPerRun)", scenario.bounds.maxEventsPerRun) }
  end
  local state = new_state(run, scenario.drive.kind, nil, scenario.reads)
  local v = look(scenario.invariants, state)
  if v then v.capped = run.capped end
  return v, run.probing and probe(scenario, state, reached) or nil
end

-- After a turn that wrote: the always properties, then the probes not yet reached.
local function check_turn(scenario, run, reached)
  local state = new_state(run, scenario.drive.kind, run.task, scenario.reads)
  local v = look(scenario.always, state)
  if v then v.turn = { task = run.task, object = run.object, atMs = run.at } end
  return v, run.probing and probe(scenario, state, reached) or nil
end

-- core.explore (C) reports what check raised by its text: a Bad table
-- would reach the user as "the check raised", so its message goes as a string.
local function protect(fn, scenario, reached)
  return function(run)
    local ok, v, hit = pcall(fn, scenario, run, reached)
    if ok then return v, hit end
    error(getmetatable(v) == Bad and v.message or tostring(v), 0)
  end
end

-- ---- the report -----------------------------------------------------------

local function plural(n, one, many)
  return string.format("%d %s", n, n == 1 and one or (many or one .. "s"))
end

local function by_faults(counted)
  local parts = {}
  for i = 1, #counted do
    if counted[i] > 0 then
      parts[#parts + 1] = string.format("%s: %d", plural(i - 1, "fault"), counted[i])
    end
  end
  -- nothing at all was counted when a budget ran out during the first run
  if #parts == 0 then return "" end
  return " (" .. table.concat(parts, ", ") .. ")"
end

local function total(counted)
  local n = 0
  for _, c in ipairs(counted) do n = n + c end
  return n
end

local function cell(v)
  if v == nil then return "NULL" end
  return tostring(v)
end

local function rows_table(columns, rows)
  if not columns or not rows or #rows == 0 then return {} end
  local width = {}
  for c, name in ipairs(columns) do
    width[c] = #name
    for _, row in ipairs(rows) do width[c] = math.max(width[c], #cell(row[name])) end
  end
  local lines = {}
  local function line(values)
    local parts = {}
    for c, v in ipairs(values) do parts[c] = v .. string.rep(" ", width[c] - #v) end
    lines[#lines + 1] = "  " .. table.concat(parts, "  "):gsub("%s+$", "")
  end
  line(columns)
  for _, row in ipairs(rows) do
    local values = {}
    for c, name in ipairs(columns) do values[c] = cell(row[name]) end
    line(values)
  end
  return lines
end

local function split_lines(s)
  local lines = {}
  for line in (s or ""):gmatch("[^\n]+") do lines[#lines + 1] = line end
  return lines
end

local function event_labels(scenario, indices)
  local prefix = scenario.drive.kind == "http" and "req-" or "call-"
  local labels = {}
  for i, e in ipairs(indices or {}) do labels[i] = prefix .. e end
  return labels
end

local function replay_command(file, schedule)
  return string.format("eutaxy check %s --replay %s", file, schedule)
end

-- cronsPerRun is said only for a worker with crons.
local function bounds_line(scenario, budget_ms, crons)
  local b = scenario.bounds
  local caps = {}
  for _, s in ipairs(scenario.setup) do caps[#caps + 1] = s.binding .. " " .. s.alarmsPerObject end
  local line = string.format("maxFaultsPerRun %d, maxRedeliveries %d, maxConcurrentInvocations %d, alarmsPerObject %s, budgetMs %d",
    b.maxFaultsPerRun, b.maxRedeliveries, b.maxConcurrentInvocations,
    #caps > 0 and table.concat(caps, ", ") or "-", budget_ms)
  if #crons > 0 then line = line .. ", cronsPerRun " .. (b.cronsPerRun or "each cron once") end
  return line
end

-- "req-2" before "req-10": digits compare as numbers, so the order reads
-- naturally and does not depend on how many processes explored.
local function natural_less(a, b)
  local function parts(s)
    local t = {}
    for text, digits in s:gmatch("(%D*)(%d*)") do
      if text ~= "" then t[#t + 1] = text end
      if digits ~= "" then t[#t + 1] = tonumber(digits) end
    end
    return t
  end
  local pa, pb = parts(a), parts(b)
  for i = 1, math.max(#pa, #pb) do
    local x, y = pa[i], pb[i]
    if x == nil then return true end
    if y == nil then return false end
    if type(x) ~= type(y) then return type(x) == "number" end
    if x ~= y then return x < y end
  end
  return false
end

local function set_of(list)
  local t = {}
  for _, k in ipairs(list or {}) do t[k] = true end
  return t
end

-- Why a point's untried kinds were never tried, when that is known: the
-- fault budget of the run (maxFaultsPerRun) only where a run reached the
-- point after spending it. A kind offered only in runs that had no fault to
-- spend (the 0-fault tree) was kept away by where the search stopped. Kinds
-- offered with a fault left and not tried get no reason: the search ended
-- (a violation, the budget, --random) before it tried them.
local function never_why(c, search)
  if #c.untried == 0 or #c.closed < #c.untried then return nil end
  if #c.spent == #c.untried then return "the run's faults were spent: maxFaultsPerRun" end
  if #c.spent == 0 then
    if search.maxFaults == 0 then return "not explored: maxFaultsPerRun is 0" end
    if search.violatedWithoutFault then return "not explored: the violation needed no fault" end
  end
  return "never offered while a fault was left"
end

-- Coverage rows as the reports show them: kinds never tried at a point, and
-- why, where that is known (never_why). search: { maxFaults =, violatedWithoutFault = }.
local function coverage_rows(coverage, search)
  local rows = {}
  for _, c in ipairs(coverage or {}) do
    local tried, open, spent = set_of(c.tried), set_of(c.open), set_of(c.spent)
    local untried, closed, spent_untried = {}, {}, {}
    for _, k in ipairs(c.kinds) do
      if not tried[k] then
        untried[#untried + 1] = k
        if not open[k] then closed[#closed + 1] = k end
        if not open[k] and spent[k] then spent_untried[#spent_untried + 1] = k end
      end
    end
    local row = { point = c.point, reached = c.reached, kinds = c.kinds, tried = c.tried,
                  untried = untried, closed = closed, spent = spent_untried,
                  offered_open = c.open or {}, offered_spent = c.spent or {} }
    row.why = never_why(row, search)
    rows[#rows + 1] = row
  end
  table.sort(rows, function(a, b) return natural_less(a.point, b.point) end)
  return rows
end

local function coverage_text(put, rows)
  if #rows == 0 then
    put("Coverage: no fault point was reached.")
    return
  end
  local width = 0
  for _, c in ipairs(rows) do width = math.max(width, #c.point) end
  put("Coverage (fault point, schedules that reached it, fault kinds tried there):")
  for _, c in ipairs(rows) do
    local line = string.format("  %s%s  %6d  %s", c.point, string.rep(" ", width - #c.point), c.reached,
      #c.tried > 0 and table.concat(c.tried, ", ") or "none")
    if #c.untried > 0 then
      line = line .. "; never " .. table.concat(c.untried, ", ")
      if c.why then line = line .. " (" .. c.why .. ")" end
    end
    put(line)
  end
end

local function seconds(ms)
  return string.format("%d.%03ds", ms // 1000, ms % 1000)
end

-- What a schedule count stands for: with reduction, one order of each set
-- of turns that commute.
local function reduction_line(r)
  if not r.reduction then return "Orders: every order of tied events (--no-reduction)" end
  return string.format("Orders: one of each set of orders that only swap independent turns "
    .. "(%s reversed, %s stopped as covered); --no-reduction explores them all",
    plural(r.races or 0, "race"), plural(r.blocked or 0, "run"))
end

-- "BOUNDED", or "BOUNDED in shard 2/3": a shard's verdict is its part's,
-- and must not read as the scenario's.
local function verdict_words(r)
  if r.shard then return string.format("%s in shard %d/%d", r.verdict, r.shard.k, r.shard.n) end
  return r.verdict
end

-- "9 schedules", "9 schedules of shard 2/3", "23 schedules of the 3 shards"
local function schedules_words(r)
  local words = plural(r.schedules, "schedule")
  if r.shard then return words .. string.format(" of shard %d/%d", r.shard.k, r.shard.n) end
  if r.merged then return words .. string.format(" of the %d shards", r.merged.n) end
  return words
end

-- "in 20 ms", or for a merge the slowest shard's time and the sum.
local function elapsed_words(r)
  if r.merged then
    return string.format("in %d ms (the slowest shard; %d ms in all)", r.elapsedMs, r.elapsedMsSum)
  end
  return string.format("in %d ms", r.elapsedMs)
end

local function short_fingerprint(r)
  return tostring(r.fingerprint):sub(1, 12)
end

-- What a shard report says after its counts.
local function parts_text(put, r)
  if r.shard then
    put(string.format("Shard %d/%d explored only its part of the schedules: merge the --json reports of all %d "
      .. "shards (eutaxy check --merge) for the scenario's verdict.", r.shard.k, r.shard.n, r.shard.n))
  end
end

-- A merge's shards, one line each: what each found, and in which file.
local function merged_text(put, r)
  if not r.merged then return end
  put(string.format("Merged from %d shards:", r.merged.n))
  local rows, width = {}, { 0, 0, 0, 0 }
  for i, s in ipairs(r.merged.shards) do
    rows[i] = { string.format("%d/%d", s.k, r.merged.n), s.verdict,
                s.schedules and plural(s.schedules, "schedule") or "-", s.elapsedMs and string.format("%d ms", s.elapsedMs) or "-", s.file }
    for c = 1, 4 do width[c] = math.max(width[c], #rows[i][c]) end
  end
  for _, row in ipairs(rows) do
    put(string.format("  %" .. width[1] .. "s  %-" .. width[2] .. "s  %" .. width[3] .. "s  %" .. width[4] .. "s  %s",
      table.unpack(row)))
  end
end

-- Where a regression is written: "leases.sim.lua:14", or the file alone.
local function regression_where(r, reg)
  return reg.line and string.format("%s:%d", r.defined.file or r.file, reg.line) or (r.defined.file or r.file)
end

-- "1:1:2 (leases.sim.lua:14, saved for one-runner-per-request)"
local function regression_words(r, reg)
  return string.format("%s (%s%s)", reg.schedule, regression_where(r, reg),
    reg.invariant and ", saved for " .. reg.invariant or "")
end

-- The regressions replayed before the exploration, one line each; true when
-- it put any.
local function regressions_text(put, r)
  if not r.regressions or #r.regressions == 0 or r.regression then return false end
  put(string.format("Regressions replayed first: %d.", #r.regressions))
  for _, reg in ipairs(r.regressions) do
    if reg.outcome == "holds" then
      put(string.format("  %s: holds", regression_words(r, reg)))
    else
      put(string.format("  %s: no longer fits the scenario: %s", regression_words(r, reg), reg.why))
    end
  end
  return true
end

local function report_text(r)
  local out = {}
  local function put(s) out[#out + 1] = s or "" end
  put(string.format("%s  %s  (seed %s)", verdict_words(r), r.scenario, tostring(r.seed)))
  if r.verdict == "VIOLATED" then
    put()
    put(string.format("Invariant %s is violated: %s", r.invariant, r.message))
    if r.regression then
      local reg = r.regression
      put(string.format("  a regression of the scenario violates again: %s%s", regression_words(r, reg),
        reg.invariant and reg.invariant ~= r.invariant and " (another invariant now)" or ""))
    end
    if r.turn then
      put(string.format("  broken after the turn of %s in %s at %s, where the run stopped", r.turn.task, r.turn.object,
        seconds(r.turn.atMs)))
    end
    if r.capped then put("  (this run reached alarmsPerObject: an alarm it needed may not have fired)") end
    local table_lines = rows_table(r.columns, r.rows)
    if #table_lines > 0 then
      put()
      for _, l in ipairs(table_lines) do put(l) end
    end
    put()
    put(string.format("Schedule (run seed %s), events kept: %s", r.schedule, table.concat(r.events, ", ")))
    if #r.faults == 0 then put("  no fault: the events' interleaving alone") end
    for _, f in ipairs(r.faults) do put("  " .. f) end
    put()
    put("Trace:")
    for _, l in ipairs(r.trace) do put("  " .. l) end
    put()
    -- a replay's stdout is the same bytes every time: its wall time goes to stderr
    if r.regression then
      put("Found by replaying it before any exploration.")
      put("Fingerprint: " .. short_fingerprint(r))
    elseif not r.replayed then
      local where = r.shard or r.merged and r.merged.violation
      put(string.format("Found %safter %s%s %s; shrunk in %s.",
        where and string.format("in shard %d/%d ", where.k, where.n) or "",
        r.shard and plural(r.schedules, "schedule") or schedules_words(r), r.byFaults,
        elapsed_words(r), plural(r.shrinkRuns, "run")))
      merged_text(put, r)
      put("Fingerprint: " .. short_fingerprint(r))
      regressions_text(put, r)
    end
    put("Replay: " .. r.replay)
  elseif r.verdict == "BOUNDED" then
    put()
    put(string.format("No invariant is violated in any of the %s within the bounds%s, explored %s.",
      schedules_words(r), r.byFaults, elapsed_words(r)))
    parts_text(put, r)
    put("Bounds: " .. r.bounds)
    put("Faults: " .. r.faultKinds)
    put(reduction_line(r))
    if r.endStates then put(string.format("End states: %d distinct.", #r.endStates)) end
    put("Fingerprint: " .. short_fingerprint(r))
    put()
    if regressions_text(put, r) then put() end
    if r.merged then
      merged_text(put, r)
      put()
    end
    coverage_text(put, r.coverage)
  elseif r.verdict == "INCONCLUSIVE" then
    put()
    put(r.why)
    put(string.format("%s explored%s %s; no violation among them.", schedules_words(r),
      r.byFaults, elapsed_words(r)))
    parts_text(put, r)
    put("Bounds: " .. r.bounds)
    if r.endStates then put(string.format("End states: %d distinct among them.", #r.endStates)) end
    put("Fingerprint: " .. short_fingerprint(r))
    put()
    if regressions_text(put, r) then put() end
    if r.unreachedWhy then
      for _, name in ipairs(r.neverReached) do put(r.unreachedWord .. ": " .. name) end
      put(r.unreachedWhy)
      put()
    end
    if r.merged then
      merged_text(put, r)
      put()
    end
    coverage_text(put, r.coverage)
  elseif r.verdict == "NONDETERMINISTIC" then
    put()
    put(r.message)
    if r.merged then
      put()
      merged_text(put, r)
    end
  end
  return table.concat(out, "\n") .. "\n"
end

local function unreached_why(count)
  return "No explored schedule reached " .. (count == 1 and "this sometimes probe" or "these sometimes probes")
    .. ": the path the scenario means to test never ran (a request to a path the worker does not serve, "
    .. "a fault that never applies, a probe that reads the wrong row), so finding no violation says nothing about it."
end

-- ---- main -------------------------------------------------------------------

-- core.explore raises when the world cannot be built (a worker that does not
-- parse, a class it does not export): the scenario's mistake, so reported
-- without eutaxy's own stack. Called through pcall, luaL_error adds no
-- position of ours to the message either.
local function explore(opts)
  local ok, result, err, kind = pcall(core.explore, opts)
  if ok then return result, err, kind end
  if getmetatable(result) == Bad then error(result, 0) end
  local msg = tostring(result):gsub("\n?stack traceback:.*$", "")
  -- a cron names the config that lists it
  if opts.config and msg:find("^triggers%.crons") then msg = opts.config .. ": " .. msg end
  bad("%s", msg)
end

-- The fingerprint of what this check explores (eutaxy.fingerprint): the
-- files a run can load, and what else shapes the tree. The budget, -j and
-- --check-determinism do not: they change how far or how fast, not what.
local function fingerprint_of(o, scenario, dir, kinds, caps, secrets)
  local b = scenario.bounds
  local faults = {}
  for i, k in ipairs(kinds) do faults[i] = k end
  local options = {
    scenario = o.file:match("[^/]*$"), seed = seed_number(scenario.seed), faults = json.array(faults),
    retries = scenario.drive.retries, maxFaultsPerRun = b.maxFaultsPerRun, maxRedeliveries = b.maxRedeliveries,
    maxConcurrentInvocations = b.maxConcurrentInvocations, maxEventsPerRun = b.maxEventsPerRun,
    cronsPerRun = b.cronsPerRun,
    alarmsPerObject = caps, random = o.random, randomSeed = o.random and (o.seed or 1) or nil,
    reduction = not o.no_reduction,
    -- .dev.vars by its names only: a report must carry nothing made from a secret's value
    secrets = #secrets > 0 and json.array(secrets) or nil,
  }
  local ok, hash, inputs = pcall(fingerprint.compute, {
    scenario = o.file, scenario_dir = dir, project = dirname(scenario.worker.entry), config = scenario.worker.config,
    libdir = config.libdir(), version = core.version, options = options,
  })
  if not ok then bad("%s: fingerprint: %s", o.file, tostring(hash)) end
  return hash, inputs
end

local function run_check(o)
  local scenario, dir = load_scenario(o.file)
  local p = prepare(scenario, o.file, dir)
  local b = scenario.bounds
  -- The properties looked at after turns, in the scenario's order.
  scenario.always, scenario.probes = {}, {}
  for _, inv in ipairs(scenario.invariants) do
    if inv.kind == "always" then scenario.always[#scenario.always + 1] = inv end
    if inv.kind == "sometimes" then scenario.probes[#scenario.probes + 1] = inv end
  end
  local reached = {}
  scenario.reads = {}
  if o.end_states then scenario.end_states, scenario.end_objects = {}, named_objects(scenario) end
  -- A client with no retries never resends, a worker with no crons has no
  -- cron invocation, a scenario with no services has no fetch to time out,
  -- one with no WebSocket client has no socket: resend, cron-fail and
  -- cron-lost, fetch-timeout, hibernate and ws-* are no kinds in play there.
  local kinds, websockets = {}, false
  for _, e in ipairs(p.events) do websockets = websockets or e.script ~= nil end
  for _, k in ipairs(scenario.faults or sim.FAULT_KINDS) do
    if (k ~= "resend" or scenario.drive.retries > 0) and (#p.crons > 0 or not k:find("^cron%-"))
       and (k ~= "fetch-timeout" or #scenario.services > 0)
       and (websockets or (k ~= "hibernate" and not k:find("^ws%-"))) then
      kinds[#kinds + 1] = k
    end
  end
  local opts = {
    entry = p.entry, projectdir = p.projectdir, libdir = config.libdir(), bindings = p.bindings, vars = p.vars,
    seed = p.seed,
    events = p.events, retries = scenario.drive.retries, maxConcurrent = b.maxConcurrentInvocations,
    maxRedeliveries = b.maxRedeliveries, maxFaults = b.maxFaultsPerRun, maxEvents = b.maxEventsPerRun,
    budgetMs = o.budget or b.budgetMs, faults = kinds,
    crons = p.crons, maxCrons = b.cronsPerRun or -1, config = p.config,
    setup = setup_fn(scenario), check = protect(check_run, scenario, reached),
    turn = (#scenario.always > 0 or #scenario.probes > 0) and protect(check_turn, scenario, reached) or nil,
    always = #scenario.always, probes = #scenario.probes, decided = decided_in_host(scenario),
    checkDeterminism = o.determinism, jobs = o.jobs, shardK = o.shard_k, shardN = o.shard_n,
    reduction = not o.no_reduction,
    restore = not o.no_restore,
    byFaultCount = o.by_fault_count,
    progress = not o.quiet,
  }
  local caps = {}
  for _, s in ipairs(scenario.setup) do caps[s.binding] = s.alarmsPerObject end
  local hash, inputs = fingerprint_of(o, scenario, dir, kinds, caps, p.secrets)
  local r = { scenario = scenario.name, seed = scenario.seed, file = o.file, bounds = bounds_line(scenario, opts.budgetMs, p.crons),
              defined = { file = scenario.file, line = scenario.line },
              fingerprint = hash, fingerprintInputs = inputs,
              shard = o.shard_n and { k = o.shard_k + 1, n = o.shard_n, exhausted = false },
              faultKinds = #opts.faults > 0 and table.concat(opts.faults, ", ") or "none",
              faultKindsList = kinds,
              boundsTable = { maxFaultsPerRun = b.maxFaultsPerRun, maxRedeliveries = b.maxRedeliveries,
                              maxConcurrentInvocations = b.maxConcurrentInvocations, budgetMs = opts.budgetMs,
                              maxEventsPerRun = b.maxEventsPerRun, alarmsPerObject = caps, cronsPerRun = b.cronsPerRun } }
  local result, err, kind
  -- The scenario's regressions first, each replayed as --replay does: one
  -- that violates again is the verdict at once; one that no longer fits the
  -- scenario's decisions (other code, other bounds) is said to, never skipped.
  local regressed
  if not o.replay and #scenario.regressions > 0 then
    r.regressions = {}
    for i, reg in ipairs(scenario.regressions) do
      local ropts = {}
      for k, v in pairs(opts) do ropts[k] = v end
      ropts.mode, ropts.replay, ropts.trace, ropts.shrink, ropts.jobs = "replay", reg.schedule, true, false, 1
      ropts.checkDeterminism, ropts.progress, ropts.shardK, ropts.shardN = false, false, nil, nil
      local replayed, rerr = explore(ropts)
      local entry = { index = i, schedule = reg.schedule, invariant = reg.invariant, line = reg.line }
      if not replayed then
        -- the schedule's own errors say "schedule ...": the rest are the scenario's
        if not tostring(rerr):find('^schedule "') then bad("%s", tostring(rerr)) end
        entry.outcome, entry.why = "stale", tostring(rerr)
      elseif replayed.verdict == "VIOLATED" then
        entry.outcome = "violated"
        regressed = { entry = entry, result = replayed }
      else
        entry.outcome = "holds"
      end
      r.regressions[i] = entry
      if regressed then break end
    end
  end
  if regressed then
    result, r.regression = regressed.result, regressed.entry
  elseif o.replay then
    opts.mode, opts.replay, opts.trace = "replay", o.replay, true
    result, err, kind = explore(opts)
  else
    if o.random then opts.mode, opts.runs, opts.randomSeed = "random", o.random, o.seed or 1 end
    opts.shrink = true
    result, err, kind = explore(opts)
    if result and result.verdict == "VIOLATED" then
      local first = result
      opts.mode, opts.replay, opts.trace, opts.shrink, opts.jobs = "replay", first.schedule, true, false, 1
      opts.checkDeterminism, opts.progress = false, false
      result, err, kind = explore(opts)
      if result then
        result.runs, result.counted, result.elapsedMs, result.shrinkRuns =
          first.runs, first.counted, first.elapsedMs, first.shrinkRuns
        result.coverage, result.faultsByKind, result.faultsTried = first.coverage, first.faultsByKind, first.faultsTried
        result.turnChecks = first.turnChecks
        result.reduction, result.blocked, result.races = first.reduction, first.blocked, first.races
        result.sweepRuns, result.splitRuns = first.sweepRuns, first.splitRuns
        result.worldsBuilt, result.runsRewound, result.runsReused = first.worldsBuilt, first.runsRewound, first.runsReused
        result.runsCountedAgain = first.runsCountedAgain
        if result.verdict ~= "VIOLATED" then
          err, kind, result = "the violating schedule " .. first.schedule .. " did not violate again on replay", "nondeterministic", nil
        end
      end
    end
  end
  if not result then
    if kind == "nondeterministic" then
      r.verdict, r.message = "NONDETERMINISTIC", err
      return r
    end
    bad("%s", tostring(err))
  end
  r.verdict = result.verdict
  r.schedules, r.byFaults, r.elapsedMs, r.shrinkRuns = total(result.counted), by_faults(result.counted),
    result.elapsedMs, result.shrinkRuns or 0
  r.runs, r.turnChecks = result.runs, result.turnChecks or 0
  r.reduction, r.blocked, r.races = result.reduction, result.blocked, result.races
  r.sweepRuns, r.splitRuns = result.sweepRuns, result.splitRuns
  r.worldsBuilt, r.runsRewound, r.runsReused = result.worldsBuilt, result.runsRewound, result.runsReused
  r.runsCountedAgain = result.runsCountedAgain
  -- a violation's schedule string starts with the fault cap of the tree it was found in
  r.coverage = coverage_rows(result.coverage, { maxFaults = b.maxFaultsPerRun,
    violatedWithoutFault = result.verdict == "VIOLATED" and (result.schedule or ""):match("^0:") ~= nil })
  r.faultsTried, r.faultsByKind = result.faultsTried or 0, result.faultsByKind or {}
  r.byFaultsList = {}
  for i, n in ipairs(result.counted) do
    if n > 0 then r.byFaultsList[#r.byFaultsList + 1] = { faults = i - 1, schedules = n } end
  end
  r.replayed = o.replay ~= nil
  if o.replay and result.verdict == "BOUNDED" then r.verdict = "HOLDS" end
  if result.schedule then
    r.schedule = result.schedule
    r.events = event_labels(scenario, result.events)
    r.faults = split_lines(result.faultLog)
    r.trace = split_lines(result.trace)
    r.timeline = result.timeline
    r.replay = replay_command(o.file, result.schedule)
  end
  if result.violation then
    local v = result.violation
    r.invariant, r.message, r.columns, r.rows, r.capped = v.invariant, v.message, v.columns, v.rows, v.capped
    r.turn = v.turn
  end
  local bounded = r.verdict == "BOUNDED"
  if r.shard then r.shard.exhausted = bounded end
  if r.verdict == "INCONCLUSIVE" then
    r.why = o.random and string.format("Random exploration of %s found no violation; that proves nothing about the rest.",
      plural(o.random, "schedule")) or string.format("The budget of %d ms ran out before every schedule%s was explored.",
      opts.budgetMs, o.shard_n and " of this shard" or "")
  end
  if scenario.end_states then
    r.endStates = {}
    for digest in pairs(scenario.end_states) do r.endStates[#r.endStates + 1] = digest end
    table.sort(r.endStates, bytewise_less)
  end
  if not o.replay and r.verdict ~= "VIOLATED" and #scenario.probes > 0 then
    local hit = set_of(result.reached)
    r.probes, r.reached, r.neverReached = {}, {}, {}
    for i, p in ipairs(scenario.probes) do
      local list = hit[i] and r.reached or r.neverReached
      list[#list + 1] = p.name
      r.probes[i] = p.name
    end
    if #r.neverReached > 0 then
      r.verdict = "INCONCLUSIVE"
      r.unreachedWord = o.shard_n and "not reached in this shard" or "never reached"
      r.unreachedWhy = unreached_why(#r.neverReached)
      if o.shard_n then
        r.unreachedWhy = r.unreachedWhy .. " A shard cannot see the others: a probe may be reached in another one."
      end
      if bounded then r.why = "Every schedule within the bounds was explored, but a sometimes probe was never reached." end
    end
  end
  return r
end

-- The report of `--merge`: the shards' reports added up (eutaxy.merge),
-- in the shape run_check gives, so it prints as any report does.
local function run_merge(o)
  local ok, m = pcall(require("eutaxy.merge").shards, o.files)
  if not ok then bad("--merge: %s", tostring(m)) end
  local d = m.doc
  local bt = d.bounds or {}
  local budget = 0
  for _, s in ipairs(m.shards) do budget = math.max(budget, s.doc.bounds and s.doc.bounds.budgetMs or 0) end
  local caps = {}
  for _, name in ipairs(seed.sorted_keys(bt.alarmsPerObject or {})) do caps[#caps + 1] = name .. " " .. bt.alarmsPerObject[name] end
  local r = {
    scenario = d.scenario, seed = d.seed, verdict = m.verdict, fingerprint = d.fingerprint,
    fingerprintInputs = d.fingerprintInputs, faultKindsList = d.faultKinds or {},
    boundsTable = { maxFaultsPerRun = bt.maxFaultsPerRun, maxRedeliveries = bt.maxRedeliveries,
                    maxConcurrentInvocations = bt.maxConcurrentInvocations, budgetMs = budget,
                    maxEventsPerRun = bt.maxEventsPerRun, alarmsPerObject = bt.alarmsPerObject,
                    cronsPerRun = bt.cronsPerRun },
    bounds = string.format("maxFaultsPerRun %s, maxRedeliveries %s, maxConcurrentInvocations %s, alarmsPerObject %s, "
      .. "budgetMs %d (the largest shard's)%s", tostring(bt.maxFaultsPerRun), tostring(bt.maxRedeliveries),
      tostring(bt.maxConcurrentInvocations), #caps > 0 and table.concat(caps, ", ") or "-", budget,
      bt.cronsPerRun and (", cronsPerRun " .. bt.cronsPerRun) or ""),
    schedules = total(m.counted), byFaults = by_faults(m.counted), runs = m.runs, turnChecks = m.turnChecks,
    elapsedMs = m.elapsedMax, elapsedMsSum = m.elapsedSum, faultsTried = m.faultsTried, faultsByKind = m.faultsByKind,
    shrinkRuns = m.violation and m.violation.counts.shrinkRuns or 0,
    reduction = m.reduction, blocked = m.blockedRuns, races = m.races, sweepRuns = m.sweepRuns, splitRuns = m.splitRuns,
    merged = { n = m.n, shards = {} },
  }
  if m.endStates then
    r.endStates = m.endStates
    table.sort(r.endStates, bytewise_less)
  end
  r.faultKinds = #r.faultKindsList > 0 and table.concat(r.faultKindsList, ", ") or "none"
  for _, s in ipairs(m.shards) do
    r.merged.shards[#r.merged.shards + 1] = { k = s.k, file = s.file, verdict = s.doc.verdict,
      schedules = s.doc.counts and s.doc.counts.schedules, elapsedMs = s.doc.counts and s.doc.counts.elapsedMs }
  end
  r.byFaultsList = {}
  for i, n in ipairs(m.counted) do
    if n > 0 then r.byFaultsList[#r.byFaultsList + 1] = { faults = i - 1, schedules = n } end
  end
  local v = m.violation
  r.coverage = coverage_rows(m.coverage, { maxFaults = bt.maxFaultsPerRun or 0,
    violatedWithoutFault = v ~= nil and (v.schedule or ""):match("^0:") ~= nil })
  if v then
    -- the violation as its shard reported it: its schedule replays without --shard
    r.merged.violation = { k = m.violation_k, n = m.n }
    r.invariant, r.message, r.columns, r.rows, r.capped, r.turn = v.invariant, v.message, v.columns, v.rows, v.capped, v.turn
    r.schedule, r.events, r.faults, r.trace = v.schedule, v.events or {}, v.faults or {}, v.trace or {}
    r.timeline, r.replay = v.timeline, v.replay
  elseif m.nondeterministic then
    local s = m.nondeterministic
    r.message = string.format("Shard %d/%d (%s): %s", s.k, m.n, s.file, tostring(s.doc.message))
  else
    if m.probes then
      r.probes, r.reached, r.neverReached = m.probes, {}, {}
      for _, name in ipairs(m.probes) do
        local list = m.reached[name] and r.reached or r.neverReached
        list[#list + 1] = name
      end
    end
    if r.verdict == "INCONCLUSIVE" then
      local why = {}
      for _, s in ipairs(m.incomplete) do
        why[#why + 1] = string.format("Shard %d/%d (%s): %s", s.k, m.n, s.file,
          tostring(s.doc.reason or "it did not explore its whole part."))
      end
      if r.neverReached and #r.neverReached > 0 then
        r.unreachedWord, r.unreachedWhy = "never reached", unreached_why(#r.neverReached)
        if #why == 0 then
          why[1] = string.format("Every schedule within the bounds was explored by the %d shards, but a sometimes "
            .. "probe was reached in none of them.", m.n)
        end
      end
      r.why = table.concat(why, "\n")
    end
  end
  return r
end

local function report_replay(r)
  local out = {}
  if r.verdict == "VIOLATED" then return report_text(r) end
  out[#out + 1] = string.format("HOLDS  %s  (seed %s)", r.scenario, tostring(r.seed))
  out[#out + 1] = ""
  out[#out + 1] = string.format("Schedule %s, events: %s: no invariant is violated.", r.schedule, table.concat(r.events, ", "))
  for _, f in ipairs(r.faults) do out[#out + 1] = "  " .. f end
  out[#out + 1] = ""
  out[#out + 1] = "Trace:"
  for _, l in ipairs(r.trace) do out[#out + 1] = "  " .. l end
  return table.concat(out, "\n") .. "\n"
end

local function coverage_json(rows)
  local list = {}
  for i, c in ipairs(rows) do
    list[i] = { point = c.point, reached = c.reached, kinds = json.array(c.kinds), tried = json.array(c.tried),
                untried = json.array(c.untried), whyUntried = c.why,
                open = json.array(c.offered_open), spent = json.array(c.offered_spent) }
  end
  return list
end

local function to_json(r)
  return json.encode({
    verdict = r.verdict, scenario = r.scenario, seed = r.seed, invariant = r.invariant, message = r.message,
    columns = r.columns and json.array(r.columns), rows = r.rows and json.array(r.rows),
    schedule = r.schedule, events = r.events and json.array(r.events),
    faults = r.faults and json.array(r.faults), trace = r.trace and json.array(r.trace),
    replay = r.replay, reason = r.why, turn = r.turn,
    regressions = r.regressions and json.array(r.regressions), regression = r.regression,
    reached = r.reached and json.array(r.reached), neverReached = r.neverReached and json.array(r.neverReached),
    neverReachedReason = r.unreachedWhy,
    counts = r.schedules and { schedules = r.schedules, runs = r.runs, byFaults = json.array(r.byFaultsList),
                               shrinkRuns = r.shrinkRuns, elapsedMs = r.elapsedMs, elapsedMsSum = r.elapsedMsSum,
                               faultsTried = r.faultsTried, faultsByKind = r.faultsByKind, turnChecks = r.turnChecks,
                               reduction = r.reduction, blockedRuns = r.blocked, races = r.races,
                               sweepRuns = r.sweepRuns, splitRuns = r.splitRuns,
                               worldsBuilt = r.worldsBuilt, runsRewound = r.runsRewound,
                               runsReused = r.runsReused, runsCountedAgain = r.runsCountedAgain },
    coverage = r.coverage and json.array(coverage_json(r.coverage)),
    timeline = r.timeline and json.array(r.timeline), capped = r.capped,
    bounds = r.boundsTable, faultKinds = r.faultKindsList and json.array(r.faultKindsList),
    endStates = r.endStates and json.array(r.endStates), endStateCount = r.endStates and #r.endStates,
    probes = r.probes and json.array(r.probes),
    fingerprint = r.fingerprint, fingerprintInputs = r.fingerprintInputs,
    shard = r.shard, merged = r.merged and { n = r.merged.n, shards = json.array(r.merged.shards),
                                              violation = r.merged.violation },
  }) .. "\n"
end

-- --save-regression: the violation's schedule into the scenario file's
-- regressions, said on stderr (stdout is the report's). Returns an exit
-- code when it could not be saved.
local function save_regression(o, r)
  local function say(fmt, ...) io.stderr:write("eutaxy check: ", string.format(fmt, ...), "\n") end
  if r.verdict ~= "VIOLATED" then
    say("--save-regression: nothing to save: the result is %s", r.verdict)
    return nil
  end
  if r.regression then
    say("--save-regression: %s is a regression of the scenario already", regression_words(r, r.regression))
    return nil
  end
  local file = r.defined.file or o.file
  if file ~= o.file then
    say("--save-regression: the scenario is defined in %s, not in %s: add { schedule = \"%s\", invariant = \"%s\" } "
      .. "to its regressions by hand", tostring(file), o.file, r.schedule, r.invariant)
    return 2
  end
  local done, why = require("eutaxy.regression").save(file, r.defined.line,
    { schedule = r.schedule, invariant = r.invariant })
  if not done then
    say("--save-regression: cannot write the schedule into the scenario: %s", why)
    return 2
  end
  if done == "present" then
    say("--save-regression: %s is in %s's regressions already", r.schedule, file)
  else
    say("saved %s (%s) in %s's regressions: every check replays it first", r.schedule, r.invariant, file)
  end
  return nil
end

-- The line --coverage ends with: what the tracefile holds and where it is.
local function coverage_line(c, file)
  return string.format("coverage: %d of %s ran, in %s; written to %s", c.hit, plural(c.lines, "line"),
    plural(c.files, "file"), file)
end

--- Runs `eutaxy check` with argv (the arguments after "check"); returns the exit code.
function checker.main(argv)
  local ok, o = pcall(parse_args, argv)
  if not ok then
    io.stderr:write("eutaxy check: ", getmetatable(o) == Bad and o.message or tostring(o), "\n\n", usage(), "\n")
    return 2
  end
  if o.help then
    io.stdout:write(usage(), "\n")
    return 0
  end
  local r
  -- --coverage counts the lines the isolates run (host/linecov.c), from
  -- before the first world is built to the end of the last exploration.
  if o.coverage then
    local started, why = core.coverage_start { out = o.coverage, libdir = config.libdir() }
    if not started then
      io.stderr:write("eutaxy check: --coverage: ", why, "\n")
      return 2
    end
  end
  -- A scenario's mistake is reported plainly; anything else is eutaxy's and gets a traceback.
  ok, r = xpcall(o.merge and run_merge or run_check, function(e)
    if getmetatable(e) == Bad then return e end
    return debug.traceback(tostring(e), 2)
  end, o)
  if not ok then
    if o.coverage then core.coverage_stop() end
    io.stderr:write("eutaxy check: ", getmetatable(r) == Bad and r.message or tostring(r), "\n")
    return 2
  end
  if o.coverage then
    local c, why = core.coverage_finish()
    if not c then
      io.stderr:write("eutaxy check: --coverage: ", why, "\n")
      return 2
    end
    if not o.quiet then io.stderr:write("eutaxy check: ", coverage_line(c, o.coverage), "\n") end
  end
  if o.html then
    local f, ferr = io.open(o.html, "w")
    if not f then
      io.stderr:write("eutaxy check: --html: ", tostring(ferr), "\n")
      return 2
    end
    f:write(require("eutaxy.report_html").render(r))
    f:close()
  end
  if o.json then
    io.stdout:write(to_json(r))
  elseif o.quiet then
    io.stdout:write(string.format("%s  %s\n", verdict_words(r), r.scenario))
  elseif o.replay then
    io.stdout:write(report_replay(r))
    if r.elapsedMs then io.stderr:write(string.format("eutaxy check: replayed %s in %d ms\n", r.schedule, r.elapsedMs)) end
  else
    io.stdout:write(report_text(r))
  end
  -- a regression that no longer fits is said on stderr too, whatever the output
  for _, reg in ipairs(r.regressions or {}) do
    if reg.outcome == "stale" then
      io.stderr:write(string.format("eutaxy check: regression %s no longer fits the scenario: %s\n",
        regression_words(r, reg), reg.why))
    end
  end
  if o.save_regression then
    local code = save_regression(o, r)
    if code then return code end
  end
  if r.verdict == "HOLDS" then return 0 end
  return EXIT[r.verdict] or 2
end

return checker
