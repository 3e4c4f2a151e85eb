--- eutaxy.check: the scenario DSL of `eutaxy check`, and the evaluation of
-- a scenario's invariants at the end of every run (and of its always and
-- sometimes properties after every turn that wrote, too).
--
--   local sim = require "eutaxy.check"
--   local grants = sim.durableObjectTable("POOL", "pool", "grants")
--   return sim.defineScenario {
--     name = "leases",
--     worker = { entry = "./worker.lua", config = "./wrangler.jsonc" },
--     drive = sim.http({ { path = "/projects/p-1/lease", method = "POST" } }),
--     invariants = { sim.unique("one-runner-per-request", grants, "token") },
--   }
--
-- Everything a scenario says is checked here, when the scenario file runs,
-- not thousands of schedules into the exploration: a typo in a bound or an
-- operator would otherwise surface as a wrong verdict rather than an error.
-- Every error starts with the file and line of the DSL call that caused it,
-- so the CLI can print it as it is and exit 2.
--
-- The values this module returns are plain tables the CLI (C) reads; their
-- shape is a contract with it. Every entry carries the `file` and `line` of
-- the call that made it, for errors here and for reports there.
--
-- This module is pure Lua: it runs in the checker's own state, never inside
-- an isolate, and needs nothing from eutaxy.core.

local type, ipairs, next, tostring, tonumber = type, ipairs, next, tostring, tonumber
local math_type, math_tointeger, math_huge = math.type, math.tointeger, math.huge
local string_format, string_byte = string.format, string.byte
local table_concat, table_sort = table.concat, table.sort

local config = require "eutaxy.config"
---@class eutaxy.check
local limits = require "eutaxy.limits"
local http = require "eutaxy.http"

local sim = {}

-- Fault kinds -------------------------------------------------------------

local FAULTS = {
  { "rpc-fail", "an RPC call fails before it arrives (nothing ran)" },
  { "ambiguous", "an RPC call ran and committed, but its answer is lost" },
  { "caller-crash", "the caller crashes right after an RPC call answers" },
  { "alarm-fail", "an alarm throws before it commits (and is retried on the backoff ladder)" },
  { "alarm-lost", "an alarm ran and committed, but its completion was lost (so it runs again)" },
  { "reset", "an object is reset between invocations or while one of them waits at a yield point: "
      .. "invocations in flight end, in-memory state lost, storage kept (a worker's request ends: its client went away)" },
  { "resend", "the client resends a drive request (up to the drive's retries)" },
  { "delivery-fail", "a fanout target's callback fails (the delivery is retried on its policy)" },
  { "delivery-timeout", "a fanout target's callback times out (its claim expires and it is retried)" },
  { "cron-fail", "a cron's invocation fails before its scheduled() runs (and is retried on the backoff ladder)" },
  { "cron-lost", "a cron's invocation ran, but its outcome was lost (so it runs again)" },
  { "overloaded", "an object too busy refuses an RPC call (nothing ran): the caller gets an error with "
      .. "overloaded = true and retryable = false" },
  { "fetch-timeout", "a service outside receives and applies an eutaxy.fetch, but its answer never comes: "
      .. "after 30 s the caller gets a TimeoutError (retryable)" },
  { "hibernate", "an idle object with WebSockets hibernates before its next event: in-memory state lost, "
      .. "its sockets (tags, attachments) kept" },
  { "ws-drop", "a WebSocket client goes without a close frame instead of sending its next message "
      .. "(the object sees webSocketClose with 1006)" },
  { "ws-close", "a WebSocket client closes (1001, going away) instead of sending its next message" },
}

--- Every fault kind `check` can inject, in a fixed order.
---@type string[]
sim.FAULT_KINDS = {}
local fault_description = {}
for i, f in ipairs(FAULTS) do
  sim.FAULT_KINDS[i] = f[1]
  fault_description[f[1]] = f[2]
end

--- The bounds a scenario gets for the ones it leaves out.
---@type eutaxy.check.Bounds
sim.DEFAULT_BOUNDS = {
  maxFaultsPerRun = 1,
  maxRedeliveries = 2,
  maxConcurrentInvocations = 1,
  budgetMs = 10000,
  maxEventsPerRun = 100000,
}

-- The order bounds are listed in, the least value each accepts, and the
-- most where there is one. cronsPerRun has no default: left out, each cron
-- fires once.
local BOUNDS = {
  { "maxFaultsPerRun", 0 },
  { "maxRedeliveries", 0 },
  { "maxConcurrentInvocations", 1 },
  { "budgetMs", 1 },
  { "maxEventsPerRun", 1 },
  { "cronsPerRun", 1, 100000 },
}

local OPS = { "notNull", "isNull", "eq", "ne", "lt", "le", "gt", "ge" }
local UNARY = { notNull = true, isNull = true }
local OP_SET = {}
for _, op in ipairs(OPS) do OP_SET[op] = true end

-- The host never routes these to a method over RPC (see runtime.lua).
local NOT_RPC = { init = true, extend = true, is_class = true, alarm = true, fetch = true, new = true }

-- Rendering ---------------------------------------------------------------

local string_escapes = { ['"'] = '\\"', ["\\"] = "\\\\", ["\n"] = "\\n", ["\r"] = "\\r", ["\t"] = "\\t" }

local function render_string(s)
  return '"' .. s:gsub('[%c"\\]', function(c)
    return string_escapes[c] or string_format("\\%03d", string_byte(c))
  end) .. '"'
end

local function render_number(n)
  if math_type(n) == "integer" then return tostring(n) end
  if n ~= n then return "0/0" end
  if n == math_huge then return "1/0" end
  if n == -math_huge then return "-1/0" end
  -- the shortest text that reads back to the same float, and looks like one
  local s
  for digits = 14, 17 do
    s = string_format("%." .. digits .. "g", n)
    if tonumber(s) == n then break end
  end
  if not s:find("[%.eEn]") then s = s .. ".0" end
  return s
end

local function sorted_keys(t)
  local keys = {}
  for k in next, t do keys[#keys + 1] = k end
  table_sort(keys, function(a, b)
    local ta, tb = type(a), type(b)
    if ta ~= tb then return ta < tb end
    if ta == "number" or ta == "string" then return a < b end
    return tostring(a) < tostring(b)
  end)
  return keys
end

local function is_identifier(s)
  return type(s) == "string" and s:find("^[%a_][%w_]*$") ~= nil
end

local render

local function render_table(t, seen)
  if seen[t] then return "{...}" end
  seen[t] = true
  local parts, n = {}, #t
  for i = 1, n do parts[#parts + 1] = render(t[i], seen) end
  for _, k in ipairs(sorted_keys(t)) do
    if not (math_type(k) == "integer" and k >= 1 and k <= n) then
      local key = is_identifier(k) and k or "[" .. render(k, seen) .. "]"
      parts[#parts + 1] = key .. " = " .. render(t[k], seen)
    end
  end
  seen[t] = nil
  if #parts == 0 then return "{}" end
  return "{ " .. table_concat(parts, ", ") .. " }"
end

function render(v, seen)
  local tv = type(v)
  if tv == "string" then return render_string(v) end
  if tv == "number" then return render_number(v) end
  if tv == "table" then return render_table(v, seen) end
  if tv == "nil" or tv == "boolean" then return tostring(v) end
  return "<" .. tv .. ">"
end

--- A value as it would be written in Lua: strings quoted and escaped,
--- numbers plain (floats keep a point), nil as nil, tables as constructors
--- with their keys in a fixed order.
---@param v any
---@return string
function sim.format_value(v)
  return render(v, {})
end

-- What a wrong value was, for "got ..." in messages.
local function got(v)
  local tv = type(v)
  if tv == "table" or tv == "function" or tv == "userdata" or tv == "thread" then return "a " .. tv end
  return render(v, {})
end

local function plural(n, one, many)
  return n == 1 and one or many
end

-- Where the user's call is ------------------------------------------------

---@class eutaxy.check.Site
---@field file string
---@field line integer

local function site_of(info)
  if info == nil or info.what == "C" or (info.currentline or -1) <= 0 then return nil end
  local source = info.source
  local first = source:sub(1, 1)
  local file = (first == "@" or first == "=") and source:sub(2) or info.short_src
  return { file = file, line = info.currentline }
end

-- The call site of the public function that called this one. A function
-- called as `return f(...)` has lost its caller's frame to the tail call;
-- the nearest frame that is left (the line that called the caller) is the
-- best place to point at.
local function call_site()
  return site_of(debug.getinfo(3, "Sl"))
end

-- Whether the public function that called this one was tail-called.
local function was_tail_called()
  return debug.getinfo(2, "t").istailcall
end

local function prefix(site)
  if site == nil then return "" end
  return site.file .. ":" .. site.line .. ": "
end

local function raise(site, fmt, ...)
  error(prefix(site) .. string_format(fmt, ...), 0)
end

-- Names close to a misspelt one ---------------------------------------------

local function distance(a, b)
  local la, lb = #a, #b
  local prev, cur = {}, {}
  for j = 0, lb do prev[j] = j end
  for i = 1, la do
    cur[0] = i
    local ca = string_byte(a, i)
    for j = 1, lb do
      local cost = ca == string_byte(b, j) and 0 or 1
      local d = prev[j - 1] + cost
      if prev[j] + 1 < d then d = prev[j] + 1 end
      if cur[j - 1] + 1 < d then d = cur[j - 1] + 1 end
      cur[j] = d
    end
    prev, cur = cur, prev
  end
  return prev[lb]
end

-- The known name a mistyped one most likely meant, or nil.
local function suggest(word, known)
  if type(word) ~= "string" then return nil end
  local lw = word:lower()
  local best, best_d
  for _, k in ipairs(known) do
    local lk = k:lower()
    local d = distance(lw, lk)
    local limit = #lw >= 5 and 2 or 1
    -- a name cut short, run on or with another ending ("maxFaults", "retry")
    -- is a near miss too
    local shorter = math.min(#lw, #lk)
    local common = 0
    while common < shorter and string_byte(lw, common + 1) == string_byte(lk, common + 1) do common = common + 1 end
    local near = d <= limit or (common == shorter and shorter >= 3)
      or (common >= 4 and common * 3 >= shorter * 2)
    if near and (best_d == nil or d < best_d) then best, best_d = k, d end
  end
  return best
end

local function unknown_name(word, known, list_label)
  local near = suggest(word, known)
  local shown = type(word) == "string" and render_string(word) or "[" .. got(word) .. "]"
  if near then return string_format("%s (did you mean %s?)", shown, render_string(near)) end
  return string_format("%s (%s: %s)", shown, list_label, table_concat(known, ", "))
end

-- Checks -------------------------------------------------------------------

local function is_array(t)
  local n = #t
  for k in next, t do
    if math_type(k) ~= "integer" or k < 1 or k > n then return false end
  end
  return true
end

-- The keys of t that are not in `known`, sorted (pairs order is not fixed).
local function unknown_keys(t, known)
  local set = {}
  for _, k in ipairs(known) do set[k] = true end
  local extra = {}
  for _, k in ipairs(sorted_keys(t)) do
    if not set[k] then extra[#extra + 1] = k end
  end
  return extra
end

local function check_fields(site, t, known, fmt, list_label)
  local extra = unknown_keys(t, known)
  if #extra > 0 then raise(site, fmt, unknown_name(extra[1], known, list_label)) end
end

local function check_string(site, v, what)
  if type(v) ~= "string" or v == "" then raise(site, "%s must be a non-empty string, got %s", what, got(v)) end
  return v
end

local function check_integer(site, v, least, what)
  local n = type(v) == "number" and math_tointeger(v) or nil
  if n == nil or n < least then
    raise(site, "%s must be a %s integer, got %s", what, least == 0 and "non-negative" or "positive", got(v))
  end
  return n
end

local function check_table(site, v, what)
  if type(v) ~= "table" then raise(site, "%s must be a table, got %s", what, got(v)) end
  return v
end

local function check_array(site, v, what, of)
  if type(v) ~= "table" or not is_array(v) then
    raise(site, "%s must be an array (a list of %s), got %s", what, of, got(v))
  end
  return v
end

-- A copy of a value that can cross into an isolate, or an error naming
-- the part that cannot.
local function clone_value(site, v, what, seen)
  local tv = type(v)
  if tv == "string" or tv == "number" or tv == "boolean" or tv == "nil" then return v end
  if tv ~= "table" then raise(site, "%s cannot be cloned into an object: it is %s", what, got(v)) end
  if seen[v] then raise(site, "%s cannot be cloned into an object: it contains itself", what) end
  seen[v] = true
  local copy = {}
  for _, k in ipairs(sorted_keys(v)) do
    local tk = type(k)
    if tk ~= "string" and tk ~= "number" then
      raise(site, "%s has a key that cannot be cloned (%s)", what, got(k))
    end
    local path = is_identifier(k) and what .. "." .. k or what .. "[" .. render(k, {}) .. "]"
    copy[k] = clone_value(site, v[k], path, seen)
  end
  seen[v] = nil
  return copy
end

local function path_of(base, key)
  if is_identifier(key) then return base .. "." .. key end
  return base .. "[" .. got(key) .. "]"
end

-- Handles --------------------------------------------------------------------

---@class eutaxy.check.Table
---@field kind "eutaxy.table"
---@field binding string the Durable Object binding (env.POOL)
---@field name string|nil the object's name (getByName); nil for an object named by an id only
---@field hex string|nil the object's id, when the handle was made with one
---@field table string the SQL table read at the end of each run
---@field file string
---@field line integer

local function is_handle(v)
  return type(v) == "table" and v.kind == "eutaxy.table"
end

-- An id as eutaxy.Id has it (state:listDurableObjectIds gives them): a
-- binding, 64 hex digits, a name if it was made from one.
local function is_id(v)
  return type(v) == "table" and type(v.binding) == "string" and type(v.hex) == "string" and #v.hex == 64
    and not v.hex:find("[^0-9a-f]") and (v.name == nil or type(v.name) == "string")
end

-- The object a handle names: its name, or the start of its id.
local function object_label(handle)
  return handle.name or handle.hex:sub(1, 12)
end

local function describe_table(handle)
  if handle.service then return string_format("%s in the service %s", handle.table, handle.binding) end
  return string_format("%s/%s in DO:%s", object_label(handle), handle.table, handle.binding)
end

-- The object of binding that v, the second argument of fn, names: a name,
-- or an id of that binding. Returns its name (nil for an id made by
-- newUniqueId) and its hex (nil for a name).
local function check_object(site, binding, v, fn)
  if is_id(v) then
    if v.binding ~= binding then
      raise(site, "%s: the object (second argument) is an id of %s, not of %s", fn, v.binding, binding)
    end
    return v.name, v.hex
  end
  if type(v) ~= "string" or v == "" then
    raise(site, "%s: the object name (second argument) must be a non-empty string or an id, got %s", fn, got(v))
  end
  return v, nil
end

--- A SQL table of an object, read at the end of every run for the
--- invariants that name it. The object: its name, or its id (as
--- state:listDurableObjectIds gives, for an object made with newUniqueId).
---@param binding string the binding in wrangler.jsonc, e.g. "POOL"
---@param object string|eutaxy.Id the object's name, as getByName takes it, or its id
---@param table string the table's name
---@return eutaxy.check.Table
function sim.durableObjectTable(binding, object, table)
  local site = call_site()
  check_string(site, binding, "durableObjectTable: the binding (first argument)")
  local name, hex = check_object(site, binding, object, "durableObjectTable")
  check_string(site, table, "durableObjectTable: the table name (third argument)")
  return { kind = "eutaxy.table", binding = binding, name = name, hex = hex, table = table,
           file = site and site.file, line = site and site.line }
end

---@class eutaxy.check.Kv
---@field kind "eutaxy.kv"
---@field binding string
---@field name string|nil
---@field hex string|nil
---@field file string
---@field line integer

--- An object's key-value storage (what storage:put wrote), for state:kv.
---@param binding string the binding in wrangler.jsonc, e.g. "POOL"
---@param object string|eutaxy.Id the object's name or its id
---@return eutaxy.check.Kv
function sim.durableObjectKv(binding, object)
  local site = call_site()
  check_string(site, binding, "durableObjectKv: the binding (first argument)")
  local name, hex = check_object(site, binding, object, "durableObjectKv")
  return { kind = "eutaxy.kv", binding = binding, name = name, hex = hex,
           file = site and site.file, line = site and site.line }
end

-- An origin as url.parse spells it: scheme and host, lowercased, no default port.
local function check_origin(site, origin, what)
  check_string(site, origin, what)
  local parsed = origin:find("^https?://") and require("eutaxy.url").parse(origin)
  if not parsed or parsed.origin ~= origin:lower() or origin:find("[/?#]", #parsed.protocol + 3) then
    raise(site, "%s must be an origin such as \"https://payments.example\" (a scheme, a host, no path), got %s",
      what, got(origin))
  end
  return parsed.origin
end

--- A SQL table of a service the scenario declares (sim.service), read at
--- the end of every run for the invariants that name it.
---@param origin string the service's origin, as sim.service names it
---@param table string the table's name
---@return eutaxy.check.Table
function sim.serviceTable(origin, table)
  local site = call_site()
  origin = check_origin(site, origin, "serviceTable: the origin (first argument)")
  check_string(site, table, "serviceTable: the table name (second argument)")
  return { kind = "eutaxy.table", binding = origin, name = origin, table = table, service = true,
           file = site and site.file, line = site and site.line }
end

-- Setup ----------------------------------------------------------------------

---@class eutaxy.check.SqlSeed
---@field schema string SQL run first, as a migration would
---@field rows table<string, table[]> rows per table, each keyed by column

---@class eutaxy.check.Setup
---@field kind "eutaxy.setup"
---@field binding string
---@field kv table<string, table<string, any>> initial key-value storage per object name
---@field sql table<string, eutaxy.check.SqlSeed> tables and rows per object name
---@field alarmsPerObject integer how many times an object's alarm may fire in one run
---@field file string
---@field line integer

local SETUP_OPTIONS = { "sql", "alarmsPerObject" }
local SQL_FIELDS = { "schema", "rows" }

local function check_rows(site, rows, what)
  check_array(site, rows, what, "rows")
  local copy = {}
  for i, row in ipairs(rows) do
    local at = what .. "[" .. i .. "]"
    check_table(site, row, at)
    local r = {}
    for _, column in ipairs(sorted_keys(row)) do
      if type(column) ~= "string" then raise(site, "%s has a column that is not a string (%s)", at, got(column)) end
      local v, tv = row[column], type(row[column])
      if tv ~= "string" and tv ~= "number" and tv ~= "boolean" then
        raise(site, "%s must be a string, number or boolean, got %s", path_of(at, column), got(v))
      end
      r[column] = v
    end
    copy[i] = r
  end
  return copy
end

-- One object's seed: { schema = "...", rows = { table = { row, ... } } }.
local function check_sql_one(site, seed, at)
  check_table(site, seed, at)
  check_fields(site, seed, SQL_FIELDS, at:gsub("%%", "%%%%") .. " has an unknown field %s", "fields")
  check_string(site, seed.schema, at .. ".schema")
  local rows = {}
  if seed.rows ~= nil then
    check_table(site, seed.rows, at .. ".rows")
    for _, name in ipairs(sorted_keys(seed.rows)) do
      if type(name) ~= "string" or name == "" then
        raise(site, "%s.rows must be keyed by table name, got a key %s", at, got(name))
      end
      rows[name] = check_rows(site, seed.rows[name], path_of(at .. ".rows", name))
    end
  end
  return { schema = seed.schema, rows = rows }
end

local function check_sql(site, sql)
  local what = "durableObject: opts.sql"
  check_table(site, sql, what)
  local out = {}
  for _, object in ipairs(sorted_keys(sql)) do
    if type(object) ~= "string" or object == "" then
      raise(site, "%s must be keyed by object name, got a key %s", what, got(object))
    end
    out[object] = check_sql_one(site, sql[object], path_of(what, object))
  end
  return out
end

--- The initial state of a Durable Object namespace: every object it names
--- starts with this key-value storage and these SQL tables, and nothing else.
---@param binding string the binding in wrangler.jsonc, e.g. "POOL"
---@param kv? table<string, table<string, any>> key-value storage per object name ({} for none)
---@param opts? { sql?: table<string, eutaxy.check.SqlSeed>, alarmsPerObject?: integer }
---@return eutaxy.check.Setup
function sim.durableObject(binding, kv, opts)
  local site = call_site()
  check_string(site, binding, "durableObject: the binding (first argument)")
  local storage = {}
  if kv ~= nil then
    check_table(site, kv, "durableObject: the key-value storage (second argument)")
    for _, object in ipairs(sorted_keys(kv)) do
      if type(object) ~= "string" or object == "" then
        raise(site, "durableObject: the key-value storage must be keyed by object name, got a key %s", got(object))
      end
      local what = "durableObject: kv" .. (is_identifier(object) and "." .. object or "[" .. got(object) .. "]")
      local pairs_of = check_table(site, kv[object], what)
      local copy = {}
      for _, key in ipairs(sorted_keys(pairs_of)) do
        if type(key) ~= "string" then raise(site, "%s must be keyed by strings, got a key %s", what, got(key)) end
        copy[key] = clone_value(site, pairs_of[key], path_of(what, key), {})
      end
      storage[object] = copy
    end
  end
  opts = opts == nil and {} or check_table(site, opts, "durableObject: opts (third argument)")
  check_fields(site, opts, SETUP_OPTIONS, "durableObject: unknown option %s", "options")
  local alarms = 10
  if opts.alarmsPerObject ~= nil then
    alarms = check_integer(site, opts.alarmsPerObject, 0, "durableObject: opts.alarmsPerObject")
  end
  return {
    kind = "eutaxy.setup", binding = binding, kv = storage,
    sql = opts.sql ~= nil and check_sql(site, opts.sql) or {},
    alarmsPerObject = alarms, file = site and site.file, line = site and site.line,
  }
end

---@class eutaxy.check.Service
---@field kind "eutaxy.service"
---@field origin string
---@field entry string its module, relative to the scenario's folder
---@field sql eutaxy.check.SqlSeed|nil its tables and rows at the start of every run
---@field file string
---@field line integer

--- A service outside the worker that eutaxy.fetch reaches by its origin:
--- a module like a worker's, whose fetch(request, env, ctx) answers, with
--- ctx.storage for its state (invariants read it with sim.serviceTable).
--- Every call to it is a fault point as an RPC is: lost before it arrives
--- (rpc-fail), applied with its answer lost (ambiguous), the caller gone
--- (caller-crash).
---@param origin string "https://payments.example"
---@param entry string the module, relative to the scenario's folder
---@param opts? { sql?: eutaxy.check.SqlSeed }
---@return eutaxy.check.Service
function sim.service(origin, entry, opts)
  local site = call_site()
  origin = check_origin(site, origin, "service: the origin (first argument)")
  check_string(site, entry, "service: the module (second argument)")
  opts = opts == nil and {} or check_table(site, opts, "service: opts (third argument)")
  check_fields(site, opts, { "sql" }, "service: unknown option %s", "options")
  local sql = opts.sql ~= nil and check_sql_one(site, opts.sql, "service: opts.sql") or nil
  return { kind = "eutaxy.service", origin = origin, entry = entry, sql = sql,
           file = site and site.file, line = site and site.line }
end

-- Drives ---------------------------------------------------------------------

---@class eutaxy.check.Request
---@field path string starts with "/"
---@field method string uppercase, GET by default
---@field headers table<string, string>|nil
---@field body string|nil
---@field at integer|nil virtual ms after the run's start at which it arrives (0 by default)

---@class eutaxy.check.HttpDrive
---@field kind "http"
---@field requests eutaxy.check.Request[] sent to the worker's fetch, as events req-1, req-2, ...
---@field retries integer how many times the client may resend a request (the "resend" fault)
---@field file string
---@field line integer

---@class eutaxy.check.Call
---@field binding string
---@field name string
---@field method string
---@field args any[]
---@field at integer|nil virtual ms after the run's start at which it arrives (0 by default)

---@class eutaxy.check.RpcDrive
---@field kind "rpc"
---@field calls eutaxy.check.Call[]
---@field retries integer
---@field file string
---@field line integer

local REQUEST_FIELDS = { "path", "method", "headers", "body", "at", "websocket" }
local WEBSOCKET_FIELDS = { "path", "headers", "at", "messages", "close" }
local MESSAGE_FIELDS = { "data", "binary", "at" }
local CALL_FIELDS = { "binding", "name", "method", "args", "at" }
local DRIVE_OPTIONS = { "retries" }

local function drive_retries(site, fn, opts)
  if opts == nil then return 0 end
  check_table(site, opts, fn .. ": opts (second argument)")
  check_fields(site, opts, DRIVE_OPTIONS, fn .. ": unknown option %s", "options")
  if opts.retries == nil then return 0 end
  return check_integer(site, opts.retries, 0, fn .. ": opts.retries")
end

-- When a drive event arrives: ms of virtual time after the run's start.
local function check_at(site, v, at)
  if v == nil then return nil end
  local n = type(v) == "number" and math_tointeger(v) or nil
  if n == nil or n < 0 then raise(site, "%s.at must be a non-negative integer (ms), got %s", at, got(v)) end
  return n
end

local function check_request(site, r, i)
  local at = "http: requests[" .. i .. "]"
  check_table(site, r, at)
  check_fields(site, r, REQUEST_FIELDS, at .. " has an unknown field %s", "fields")
  if r.path == nil then raise(site, "%s.path is missing", at) end
  if type(r.path) ~= "string" or r.path:sub(1, 1) ~= "/" then
    raise(site, '%s.path must be a string starting with "/", got %s', at, got(r.path))
  end
  local method = "GET"
  if r.method ~= nil then
    if type(r.method) ~= "string" or not r.method:find("^[%a%-]+$") then
      raise(site, "%s.method must be an HTTP method such as \"POST\", got %s", at, got(r.method))
    end
    method = r.method:upper()
  end
  local headers
  if r.headers ~= nil then
    check_table(site, r.headers, at .. ".headers")
    headers = {}
    for _, name in ipairs(sorted_keys(r.headers)) do
      if type(name) ~= "string" or name == "" then
        raise(site, "%s.headers must be keyed by header name, got a key %s", at, got(name))
      end
      local value = r.headers[name]
      if type(value) ~= "string" then
        raise(site, "%s.headers[%s] must be a string, got %s", at, render_string(name), got(value))
      end
      headers[name] = value
    end
  end
  if r.body ~= nil then
    if type(r.body) ~= "string" then raise(site, "%s.body must be a string, got %s", at, got(r.body)) end
    if method == "GET" or method == "HEAD" then
      raise(site, "%s has a body, which a %s request cannot have", at, method)
    end
  end
  -- The checker makes the request with http.Request.new before the first
  -- run; what that refuses (a header name that is not a token, a line break
  -- in a value) is refused here, where the site is known.
  local ok, err = pcall(http.Request.new, r.path, { method = method, headers = headers, body = r.body })
  if not ok then raise(site, "%s: %s", at, tostring(err)) end
  local ws = r.websocket
  if ws ~= nil then
    -- sim.websocket's: the client's messages, already checked, and how it ends
    if type(ws) ~= "table" or type(ws.messages) ~= "table" then
      raise(site, "%s.websocket must come from sim.websocket, got %s", at, got(ws))
    end
    if method ~= "GET" then raise(site, "%s: a WebSocket upgrade is a GET request, got %s", at, method) end
  end
  return { path = r.path, method = method, headers = headers, body = r.body, at = check_at(site, r.at, at),
           websocket = ws }
end

--- A WebSocket client, for sim.http's list: an upgrade request to path
--- (at `at`, as a request's), then, once the answer is 101, its messages in
--- order, each a string (text) or { data, binary = true, at = ms } (sent
--- no earlier than `at` ms after the start), then a close frame with code
--- `close` (true for 1000) if it is given. What the client received is in
--- state.responses[i].websocket for invariants.
---@param t { path: string, headers?: table<string, string>, at?: integer, messages?: (string|{ data: string, binary?: boolean, at?: integer })[], close?: boolean|integer }
function sim.websocket(t)
  local site = call_site()
  local at = "websocket"
  check_table(site, t, at)
  check_fields(site, t, WEBSOCKET_FIELDS, at .. " has an unknown field %s", "fields")
  local messages = {}
  if t.messages ~= nil then
    check_array(site, t.messages, at .. ".messages", "messages")
    for i, m in ipairs(t.messages) do
      local where = at .. ".messages[" .. i .. "]"
      if type(m) == "string" then m = { data = m } end
      check_table(site, m, where)
      check_fields(site, m, MESSAGE_FIELDS, where .. " has an unknown field %s", "fields")
      if type(m.data) ~= "string" then raise(site, "%s.data must be a string, got %s", where, got(m.data)) end
      if m.binary ~= nil and type(m.binary) ~= "boolean" then
        raise(site, "%s.binary must be true or false, got %s", where, got(m.binary))
      end
      if not m.binary and not utf8.len(m.data) then
        raise(site, "%s is not valid UTF-8: send it with binary = true", where)
      end
      messages[i] = { data = m.data, binary = m.binary or nil, at = check_at(site, m.at, where) }
    end
  end
  local close = t.close
  if close == true then close = 1000 end
  if close ~= nil and close ~= false then
    local n = type(close) == "number" and math_tointeger(close) or nil
    if not n or not (n == 1000 or (n >= 3000 and n <= 4999)) then
      raise(site, "%s.close must be true or a close code (1000, or 3000-4999), got %s", at, got(t.close))
    end
    close = n
  else
    close = nil
  end
  local headers = { upgrade = "websocket", connection = "Upgrade", ["sec-websocket-version"] = "13",
                    ["sec-websocket-key"] = "dGhlIHNhbXBsZSBub25jZQ==" }
  if t.headers ~= nil then
    check_table(site, t.headers, at .. ".headers")
    for k, v in pairs(t.headers) do headers[k] = v end
  end
  return { path = t.path, headers = headers, at = t.at, websocket = { messages = messages, close = close } }
end

--- Drives the worker with HTTP requests, sent at the start of the run or
--- `at` ms of virtual time after it: the i-th is event req-i.
---@param requests { path: string, method?: string, headers?: table<string, string>, body?: string, at?: integer }[]
---@param opts? { retries?: integer }
---@return eutaxy.check.HttpDrive
function sim.http(requests, opts)
  local site = call_site()
  check_array(site, requests, "http: the requests (first argument)", "requests")
  if #requests == 0 then raise(site, "http: the requests (first argument) must list at least one request") end
  local out = {}
  for i, r in ipairs(requests) do out[i] = check_request(site, r, i) end
  return { kind = "http", requests = out, retries = drive_retries(site, "http", opts),
           file = site and site.file, line = site and site.line }
end

local function check_call(site, c, i)
  local at = "rpc: calls[" .. i .. "]"
  check_table(site, c, at)
  check_fields(site, c, CALL_FIELDS, at .. " has an unknown field %s", "fields")
  check_string(site, c.binding, at .. ".binding")
  check_string(site, c.name, at .. ".name")
  check_string(site, c.method, at .. ".method")
  if c.method:sub(1, 1) == "_" or NOT_RPC[c.method] then
    raise(site, "%s.method %s cannot be called over RPC", at, render_string(c.method))
  end
  local args = {}
  if c.args ~= nil then
    check_array(site, c.args, at .. ".args", "arguments")
    args = clone_value(site, c.args, at .. ".args", {})
  end
  return { binding = c.binding, name = c.name, method = c.method, args = args, at = check_at(site, c.at, at) }
end

--- Drives objects directly with RPC calls, made at the start of the run or
--- `at` ms of virtual time after it: the i-th is event call-i.
---@param calls { binding: string, name: string, method: string, args?: any[], at?: integer }[]
---@param opts? { retries?: integer }
---@return eutaxy.check.RpcDrive
function sim.rpc(calls, opts)
  local site = call_site()
  check_array(site, calls, "rpc: the calls (first argument)", "calls")
  if #calls == 0 then raise(site, "rpc: the calls (first argument) must list at least one call") end
  local out = {}
  for i, c in ipairs(calls) do out[i] = check_call(site, c, i) end
  return { kind = "rpc", calls = out, retries = drive_retries(site, "rpc", opts),
           file = site and site.file, line = site and site.line }
end

-- Invariants -----------------------------------------------------------------

---@class eutaxy.check.Condition
---@field column string
---@field op "notNull"|"isNull"|"eq"|"ne"|"lt"|"le"|"gt"|"ge"
---@field value string|number|nil required for eq, ne, lt, le, gt, ge

---@class eutaxy.check.Invariant
---@field kind "unique"|"everyRow"|"custom"
---@field name string
---@field table eutaxy.check.Table|nil unique and everyRow
---@field column string|nil unique
---@field conditions eutaxy.check.Condition[]|nil everyRow
---@field fn (fun(state: eutaxy.check.State): boolean?, string?)|nil custom
---@field file string
---@field line integer

local CONDITION_FIELDS = { "column", "op", "value" }

local function check_handle(site, fn, handle)
  if not is_handle(handle) then
    raise(site, "%s: the second argument must be a table handle from durableObjectTable, got %s", fn, got(handle))
  end
  return handle
end

--- Holds when no two rows of the table have the same value in `column`
--- (NULLs aside, as in a SQL UNIQUE constraint).
---@param name string
---@param handle eutaxy.check.Table
---@param column string
---@return eutaxy.check.Invariant
function sim.unique(name, handle, column)
  local site = call_site()
  check_string(site, name, "unique: the name (first argument)")
  check_handle(site, "unique", handle)
  check_string(site, column, "unique: the column (third argument)")
  return { kind = "unique", name = name, table = handle, column = column,
           file = site and site.file, line = site and site.line }
end

--- Holds when every row of the table meets every condition.
---@param name string
---@param handle eutaxy.check.Table
---@param conditions eutaxy.check.Condition[]
---@return eutaxy.check.Invariant
function sim.everyRow(name, handle, conditions)
  local site = call_site()
  check_string(site, name, "everyRow: the name (first argument)")
  check_handle(site, "everyRow", handle)
  check_array(site, conditions, "everyRow: the conditions (third argument)", "conditions")
  if #conditions == 0 then raise(site, "everyRow: the conditions (third argument) must list at least one condition") end
  local out = {}
  for i, c in ipairs(conditions) do
    local at = "everyRow: conditions[" .. i .. "]"
    check_table(site, c, at)
    check_fields(site, c, CONDITION_FIELDS, at .. " has an unknown field %s", "fields")
    check_string(site, c.column, at .. ".column")
    if not OP_SET[c.op] then
      raise(site, "%s.op must be one of %s, got %s", at, table_concat(OPS, ", "), got(c.op))
    end
    if UNARY[c.op] then
      if c.value ~= nil then raise(site, "%s.value is not used with %s; leave it out", at, c.op) end
    elseif type(c.value) ~= "string" and type(c.value) ~= "number" then
      raise(site, "%s.value must be a string or a number to compare with (%s), got %s", at, c.op, got(c.value))
    elseif c.value ~= c.value then
      raise(site, "%s.value must be a number that compares, got 0/0", at)
    end
    out[i] = { column = c.column, op = c.op, value = c.value }
  end
  return { kind = "everyRow", name = name, table = handle, conditions = out,
           file = site and site.file, line = site and site.line }
end

--- Holds when fn(state) returns true. Returning false or nil, with an
--- optional message, reports a violation.
---@param name string
---@param fn fun(state: eutaxy.check.State): boolean?, string?
---@return eutaxy.check.Invariant
function sim.invariant(name, fn)
  local site = call_site()
  check_string(site, name, "invariant: the name (first argument)")
  if type(fn) ~= "function" then
    raise(site, "invariant: the second argument must be a function(state), got %s", got(fn))
  end
  return { kind = "custom", name = name, fn = fn, file = site and site.file, line = site and site.line }
end

local function property(kind, name, fn)
  local site = call_site()
  check_string(site, name, kind .. ": the name (first argument)")
  if type(fn) ~= "function" then
    raise(site, "%s: the second argument must be a function(state), got %s", kind, got(fn))
  end
  return { kind = kind, name = name, fn = fn, file = site and site.file, line = site and site.line }
end

--- Holds when fn(state) returns true on the committed state after every
--- turn that wrote something, and at the end of the run: the contract of
--- sim.invariant, looked at all along. A violation stops the run at the
--- turn after which it first fails.
---@param name string
---@param fn fun(state: eutaxy.check.State): boolean?, string?
---@return eutaxy.check.Invariant
function sim.always(name, fn)
  return property("always", name, fn)
end

--- A reachability probe: fn(state) must return true at some point (after a
--- turn that wrote, or at the end of a run) of at least one explored
--- schedule. One never reached makes a search that found no violation
--- INCONCLUSIVE: the path the scenario meant to test never ran.
---@param name string
---@param fn fun(state: eutaxy.check.State): boolean?
---@return eutaxy.check.Invariant
function sim.sometimes(name, fn)
  return property("sometimes", name, fn)
end

-- The scenario ---------------------------------------------------------------

---@class eutaxy.check.Bounds
---@field maxFaultsPerRun integer faults injected in one run at most
---@field maxRedeliveries integer times one event may be delivered again
---@field maxConcurrentInvocations integer invocations one object may have in flight at once
---@field budgetMs integer wall-clock time the exploration may take
---@field maxEventsPerRun integer events one run may take before it counts as runaway
---@field cronsPerRun integer|nil cron firings one run has, the first in time order, all crons together; nil: each cron once

---@class eutaxy.check.Scenario
---@field kind "eutaxy.scenario"
---@field name string
---@field seed string|integer
---@field worker { entry: string, config: string }
---@field setup eutaxy.check.Setup[]
---@field services eutaxy.check.Service[]
---@field drive eutaxy.check.HttpDrive|eutaxy.check.RpcDrive
---@field invariants eutaxy.check.Invariant[]
---@field bounds eutaxy.check.Bounds
---@field faults string[]|nil the fault kinds to inject; nil for all of them
---@field vars table<string, any>|nil env's vars over the config's and .dev.vars'
---@field regressions eutaxy.check.Regression[] schedules replayed before every exploration
---@field file string
---@field line integer

---@class eutaxy.check.Regression
---@field schedule string a replay string, as VIOLATED reports it: "1:1:0002"
---@field invariant string|nil the invariant it violated when it was saved
---@field line integer|nil the line of the scenario file that holds it

local SCENARIO_FIELDS = { "name", "seed", "worker", "vars", "setup", "services", "drive", "invariants", "bounds", "faults",
                          "regressions" }
local WORKER_FIELDS = { "entry", "config" }
local BOUND_NAMES = {}
for i, b in ipairs(BOUNDS) do BOUND_NAMES[i] = b[1] end

local function entry_site(entry)
  if type(entry) == "table" and type(entry.file) == "string" and math_type(entry.line) == "integer" then
    return { file = entry.file, line = entry.line }
  end
  return nil
end

-- The line of the defineScenario call when `return sim.defineScenario {...}`
-- (a tail call) has taken the scenario file's frame off the stack. The DSL
-- calls inside the table name the file; the call is the last mention of
-- defineScenario in it up to the last of them.
local function scenario_site(t)
  local file, last
  local function note(entry)
    local s = entry_site(entry)
    if s then
      file = file or s.file
      if s.file == file and (last == nil or s.line > last) then last = s.line end
    end
  end
  if type(t) == "table" then
    if type(t.setup) == "table" then for _, e in ipairs(t.setup) do note(e) end end
    if type(t.services) == "table" then for _, e in ipairs(t.services) do note(e) end end
    note(t.drive)
    if type(t.invariants) == "table" then for _, e in ipairs(t.invariants) do note(e) end end
  end
  if file == nil then return nil end
  local f = io.open(file, "r")
  if f == nil then return { file = file, line = last } end
  local n, before, any = 0, nil, nil
  for text in f:lines() do
    n = n + 1
    local code = text:gsub("%-%-.*$", "")
    if code:find("defineScenario", 1, true) then
      any = n
      if n <= last then before = n end
    end
  end
  f:close()
  return { file = file, line = before or any or last }
end

local function check_worker(site, w)
  if w == nil then raise(site, 'defineScenario: field "worker" is missing') end
  check_table(site, w, "defineScenario: worker")
  check_fields(site, w, WORKER_FIELDS, "defineScenario: worker has an unknown field %s", "fields")
  for _, field in ipairs(WORKER_FIELDS) do
    if w[field] == nil then raise(site, "defineScenario: worker.%s is missing", field) end
    check_string(site, w[field], "defineScenario: worker." .. field)
  end
  return { entry = w.entry, config = w.config }
end

local function check_services(site, services)
  if services == nil then return {} end
  if type(services) == "table" and services.kind == "eutaxy.service" then
    raise(site, "defineScenario: services must be a list of sim.service(...) entries; wrap this one in { }")
  end
  check_array(site, services, "defineScenario: services", "sim.service(...) entries")
  local out, seen = {}, {}
  for i, entry in ipairs(services) do
    if type(entry) ~= "table" or entry.kind ~= "eutaxy.service" then
      raise(site, "defineScenario: services[%d] must come from sim.service, got %s", i, got(entry))
    end
    if seen[entry.origin] then
      raise(entry_site(entry) or site, "defineScenario: services lists %s twice (first at %s)",
        entry.origin, seen[entry.origin])
    end
    local s = entry_site(entry)
    seen[entry.origin] = s and (s.file .. ":" .. s.line) or ("services[" .. i .. "]")
    out[i] = entry
  end
  return out
end

local function check_vars(site, vars, what)
  if vars == nil then return nil end
  local ok, copy = pcall(config.check_vars, what, vars)
  if not ok then raise(site, "%s", copy) end
  return copy
end

local function check_setup(site, setup)
  if setup == nil then return {} end
  if type(setup) == "table" and setup.kind == "eutaxy.setup" then
    raise(site, "defineScenario: setup must be a list of sim.durableObject(...) entries; wrap this one in { }")
  end
  check_array(site, setup, "defineScenario: setup", "sim.durableObject(...) entries")
  local out, seen = {}, {}
  for i, entry in ipairs(setup) do
    if type(entry) ~= "table" or entry.kind ~= "eutaxy.setup" then
      raise(site, "defineScenario: setup[%d] must come from sim.durableObject, got %s", i, got(entry))
    end
    local first = seen[entry.binding]
    if first then
      raise(entry_site(entry) or site, "defineScenario: setup lists DO:%s twice (first at %s)",
        entry.binding, first)
    end
    local s = entry_site(entry)
    seen[entry.binding] = s and (s.file .. ":" .. s.line) or ("setup[" .. i .. "]")
    out[i] = entry
  end
  return out
end

local function check_drive(site, drive)
  if drive == nil then raise(site, 'defineScenario: field "drive" is missing') end
  if type(drive) ~= "table" or (drive.kind ~= "http" and drive.kind ~= "rpc") then
    raise(site, "defineScenario: drive must come from sim.http or sim.rpc, got %s", got(drive))
  end
  return drive
end

local INVARIANT_KINDS = { unique = true, everyRow = true, custom = true, always = true, sometimes = true }

local function check_invariants(site, invariants)
  if invariants == nil then raise(site, 'defineScenario: field "invariants" is missing') end
  if type(invariants) == "table" and INVARIANT_KINDS[invariants.kind] then
    raise(site, "defineScenario: invariants must be a list of invariants; wrap this one in { }")
  end
  check_array(site, invariants, "defineScenario: invariants", "invariants")
  if #invariants == 0 then raise(site, "defineScenario: invariants must list at least one invariant") end
  local out, seen = {}, {}
  for i, inv in ipairs(invariants) do
    if type(inv) ~= "table" or not INVARIANT_KINDS[inv.kind] then
      raise(site, "defineScenario: invariants[%d] must come from sim.unique, sim.everyRow, sim.invariant, "
        .. "sim.always or sim.sometimes, got %s",
        i, got(inv))
    end
    local first = seen[inv.name]
    if first then
      raise(entry_site(inv) or site, "defineScenario: two invariants are named %s (the first is at %s)",
        render_string(inv.name), first)
    end
    local s = entry_site(inv)
    seen[inv.name] = s and (s.file .. ":" .. s.line) or ("invariants[" .. i .. "]")
    out[i] = inv
  end
  return out
end

local function check_bounds(site, bounds)
  local out = {}
  for _, b in ipairs(BOUNDS) do out[b[1]] = sim.DEFAULT_BOUNDS[b[1]] end
  if bounds == nil then return out end
  check_table(site, bounds, "defineScenario: bounds")
  check_fields(site, bounds, BOUND_NAMES, "defineScenario: unknown bound %s", "bounds")
  for _, b in ipairs(BOUNDS) do
    local name, least, most = b[1], b[2], b[3]
    if bounds[name] ~= nil then out[name] = check_integer(site, bounds[name], least, "defineScenario: bounds." .. name) end
    if most and out[name] and out[name] > most then
      raise(site, "defineScenario: bounds.%s must be at most %d, got %d", name, most, out[name])
    end
  end
  return out
end

local function check_faults(site, faults, drive)
  if faults == nil then return nil end
  check_array(site, faults, "defineScenario: faults", "fault kinds")
  local out, seen = {}, {}
  for i, kind in ipairs(faults) do
    if fault_description[kind] == nil then
      if type(kind) == "string" then
        raise(site, "defineScenario: faults[%d] is not a fault kind: %s", i, unknown_name(kind, sim.FAULT_KINDS, "kinds"))
      end
      raise(site, "defineScenario: faults[%d] must be a fault kind name, got %s", i, got(kind))
    end
    if seen[kind] then raise(site, "defineScenario: faults lists %s twice", render_string(kind)) end
    seen[kind] = true
    out[i] = kind
  end
  if seen.resend and drive.retries == 0 then
    raise(site, 'defineScenario: faults lists "resend" but the drive has retries = 0, so the client never resends')
  end
  return out
end

-- Whether s reads as a schedule: the fault count, the drive events kept ("-"
-- for none, else numbers joined by dots), the decisions (0-9, a-z, A-Z).
local function is_schedule(s)
  if type(s) ~= "string" then return false end
  local cap, events, decisions = s:match("^(%d+):([^:]*):(.*)$")
  if not cap or decisions:find("[^%w]") then return false end
  if events == "-" then return true end
  return events:find("^%d+$") ~= nil or (events:find("^%d+[%d.]*%d$") ~= nil and not events:find("%.%."))
end

-- The line of the scenario file that holds text, for an entry that has no
-- DSL call of its own to say where it is.
local function line_of(site, text)
  if site == nil then return nil end
  local f = io.open(site.file, "r")
  if f == nil then return site end
  local n, found = 0, nil
  for line in f:lines() do
    n = n + 1
    if line:find(text, 1, true) then found = n break end
  end
  f:close()
  return found and { file = site.file, line = found } or site
end

local REGRESSION_FIELDS = { "schedule", "invariant" }
-- Violations the checker reports without an invariant of the scenario's.
local BUILT_IN = { "no-uncaught-errors", "run-settles" }

-- regressions = { { schedule = "1:1:0002", invariant = "one-runner" }, "0:1:01", ... }:
-- schedules `eutaxy check --save-regression` wrote, replayed before every
-- exploration. A string is a schedule alone.
local function check_regressions(site, regressions, invariants, fn)
  if regressions == nil then return {} end
  check_array(site, regressions, fn .. ": regressions", '{ schedule = "...", invariant = "..." } entries')
  local names, known = {}, {}
  for _, inv in ipairs(invariants) do
    if inv.kind ~= "sometimes" then
      names[#names + 1] = inv.name
      known[inv.name] = true
    end
  end
  for _, name in ipairs(BUILT_IN) do
    names[#names + 1] = name
    known[name] = true
  end
  local out, seen = {}, {}
  for i, entry in ipairs(regressions) do
    local what = string_format("%s: regressions[%d]", fn, i)
    local schedule, invariant
    if type(entry) == "string" then
      schedule = entry
    elseif type(entry) == "table" then
      check_fields(site, entry, REGRESSION_FIELDS, what .. " has an unknown field %s", "fields")
      schedule, invariant = entry.schedule, entry.invariant
      if schedule == nil then raise(site, '%s has no schedule (it reads { schedule = "1:1:0002", invariant = ... })', what) end
    else
      raise(site, '%s must be { schedule = "1:1:0002", invariant = "..." } or a schedule string, got %s', what, got(entry))
    end
    local at = type(schedule) == "string" and line_of(site, schedule) or site
    if not is_schedule(schedule) then
      raise(at, '%s.schedule must be a replay string such as "1:1:0002" (faults:events:decisions), got %s', what,
        got(schedule))
    end
    if invariant ~= nil then
      if type(invariant) ~= "string" then raise(at, "%s.invariant must be a string, got %s", what, got(invariant)) end
      if not known[invariant] then
        raise(at, "%s.invariant: the scenario has no invariant %s", what, unknown_name(invariant, names, "invariants"))
      end
    end
    if seen[schedule] then raise(at, "%s: the schedule %s is listed twice", what, render_string(schedule)) end
    seen[schedule] = true
    out[i] = { schedule = schedule, invariant = invariant, line = at and at.line }
  end
  return out
end

--- Checks a scenario and returns it normalized: defaults filled in, every
--- part validated. Raises an error naming the file, line and field of the
--- first thing wrong.
---@param t { name: string, seed?: string|integer, worker: { entry: string, config: string }, vars?: table<string, any>, setup?: eutaxy.check.Setup[], services?: eutaxy.check.Service[], drive: eutaxy.check.HttpDrive|eutaxy.check.RpcDrive, invariants: eutaxy.check.Invariant[], bounds?: table<string, integer>, faults?: string[] }
---@return eutaxy.check.Scenario
function sim.defineScenario(t)
  local site
  if was_tail_called() then site = scenario_site(t) else site = call_site() end
  if type(t) ~= "table" then raise(site, "defineScenario: expects a table { name = ..., ... }, got %s", got(t)) end
  check_fields(site, t, SCENARIO_FIELDS, "defineScenario: unknown field %s", "fields")
  if t.name == nil then raise(site, 'defineScenario: field "name" is missing') end
  check_string(site, t.name, "defineScenario: name")
  local seed = t.name
  if t.seed ~= nil then
    seed = type(t.seed) == "number" and math_tointeger(t.seed) or t.seed
    if type(seed) ~= "string" and math_type(seed) ~= "integer" then
      raise(site, "defineScenario: seed must be a string or an integer, got %s", got(t.seed))
    end
  end
  local worker = check_worker(site, t.worker)
  local vars = check_vars(site, t.vars, "defineScenario")
  local setup = check_setup(site, t.setup)
  local services = check_services(site, t.services)
  local drive = check_drive(site, t.drive)
  local invariants = check_invariants(site, t.invariants)
  local bounds = check_bounds(site, t.bounds)
  local faults = check_faults(site, t.faults, drive)
  local regressions = check_regressions(site, t.regressions, invariants, "defineScenario")
  return {
    kind = "eutaxy.scenario", name = t.name, seed = seed, worker = worker, vars = vars, setup = setup,
    services = services, drive = drive, invariants = invariants, bounds = bounds, faults = faults,
    regressions = regressions, file = site and site.file, line = site and site.line,
  }
end

--- The scenario file being loaded, set by the checker while it loads one.
---@type string|nil
sim.loading = nil

local VARIANT_FIELDS = { "name", "seed", "worker", "vars", "bounds", "faults", "regressions" }

--- The scenario that another file of the same folder defines, with some of
-- its fields replaced: a fixed twin is the planted scenario over another
-- worker, and says so in one line.
--   return sim.variant("leases.sim.lua", { name = "leases-fixed",
--                                          worker = { entry = "./worker_fixed.lua", config = "./wrangler.jsonc" } })
---@param file string the other scenario, relative to this file's folder
---@param overrides table name, seed, worker, vars, bounds or faults
---@return table
function sim.variant(file, overrides)
  local tail = was_tail_called()
  local site = not tail and call_site() or nil
  local info = not tail and debug.getinfo(2, "S") or nil
  -- `return sim.variant(...)` leaves no frame of the scenario file behind:
  -- then the file being loaded (sim.loading) says where it is.
  local here = info and info.source:sub(1, 1) == "@" and info.source:sub(2) or sim.loading
  if not site and here then
    local line = 1
    local f = io.open(here, "r")
    if f then
      local n = 0
      for text in f:lines() do
        n = n + 1
        if text:find("variant%s*%(") then line = n break end
      end
      f:close()
    end
    site = { file = here, line = line }
  end
  if type(file) ~= "string" then raise(site, "variant: the first argument must be a scenario file, got %s", got(file)) end
  if type(overrides) ~= "table" then raise(site, "variant: the second argument must be a table of fields, got %s", got(overrides)) end
  check_fields(site, overrides, VARIANT_FIELDS, "variant: field %s cannot be replaced", "fields")
  local dir = here and here:match("^(.*)/[^/]*$") or "."
  local path = file:sub(1, 1) == "/" and file or dir .. "/" .. file:gsub("^%./", "")
  local chunk, err = loadfile(path, "t")
  if not chunk then raise(site, "variant: %s", err) end
  local ok, base = pcall(chunk)
  if not ok then error(base, 0) end
  if type(base) ~= "table" or base.kind ~= "eutaxy.scenario" then
    raise(site, "variant: %s does not return a scenario", path)
  end
  local site_here = site
  local name = overrides.name or base.name
  check_string(site_here, name, "variant: name")
  local seed = overrides.seed or (base.seed == base.name and name or base.seed)
  local worker = overrides.worker ~= nil and check_worker(site_here, overrides.worker) or base.worker
  local bounds = overrides.bounds ~= nil and check_bounds(site_here, overrides.bounds) or base.bounds
  local faults = base.faults
  if overrides.faults ~= nil then faults = check_faults(site_here, overrides.faults, base.drive) end
  local vars = base.vars
  if overrides.vars ~= nil then vars = check_vars(site_here, overrides.vars, "variant") end
  -- a variant's schedules are its own: the base's were found in another tree
  local regressions = check_regressions(site_here, overrides.regressions, base.invariants, "variant")
  return {
    kind = "eutaxy.scenario", name = name, seed = seed, worker = worker, vars = vars, setup = base.setup,
    services = base.services, drive = base.drive, invariants = base.invariants, bounds = bounds, faults = faults,
    regressions = regressions, file = site_here and site_here.file or base.file,
    line = site_here and site_here.line or base.line,
  }
end

--- One line saying what a fault kind does.
---@param kind string one of sim.FAULT_KINDS
---@return string
function sim.describe_fault(kind)
  local d = fault_description[kind]
  if d == nil then
    if type(kind) ~= "string" then error("describe_fault: expects a fault kind name, got " .. got(kind), 2) end
    error("describe_fault: unknown fault kind " .. unknown_name(kind, sim.FAULT_KINDS, "kinds"), 2)
  end
  return d
end

-- Evaluation -----------------------------------------------------------------

---@class eutaxy.check.Response
---@field event string "req-1", ...
---@field status integer|nil nil when the answer was lost
---@field body string|nil

---@class eutaxy.check.State
---@field responses eutaxy.check.Response[] the drive's answers
---@field rows fun(self: eutaxy.check.State, handle: eutaxy.check.Table): table[] the table's rows where the property looks: at the end of the run, or just after a turn
---@field columns fun(self: eutaxy.check.State, handle: eutaxy.check.Table): string[] its columns, in table order

---@class eutaxy.check.Violation
---@field invariant string its name
---@field message string
---@field columns string[]|nil the table's columns, in table order
---@field rows table[]|nil the offending rows

local function where(inv)
  local s = entry_site(inv)
  return s and (s.file .. ":" .. s.line) or "?"
end

local function table_rows(inv, state)
  local columns, rows = state:columns(inv.table), state:rows(inv.table)
  if type(columns) ~= "table" or type(rows) ~= "table" then
    error(string_format("invariant %s (%s): no rows for %s", render_string(inv.name), where(inv),
      describe_table(inv.table)), 0)
  end
  return columns, rows
end

local function require_column(inv, columns, column)
  for _, c in ipairs(columns) do
    if c == column then return end
  end
  error(string_format("invariant %s (%s): %s has no column %s (columns: %s)", render_string(inv.name), where(inv),
    describe_table(inv.table), render_string(column), table_concat(columns, ", ")), 0)
end

-- Bytewise, as SQLite's BINARY collation; Lua's < follows the C locale.
local function compare_strings(a, b)
  local n = math.min(#a, #b)
  for i = 1, n do
    local x, y = string_byte(a, i), string_byte(b, i)
    if x ~= y then return x < y and -1 or 1 end
  end
  if #a == #b then return 0 end
  return #a < #b and -1 or 1
end

-- SQLite's order across types: numbers before text.
local function compare(a, b)
  if type(a) == "boolean" then a = a and 1 or 0 end
  local ta, tb = type(a), type(b)
  if ta == "number" and tb == "number" then
    if a == b then return 0 end
    return a < b and -1 or 1
  end
  if ta == "string" and tb == "string" then return compare_strings(a, b) end
  return ta == "number" and -1 or 1
end

local TESTS = {
  eq = function(c) return c == 0 end, ne = function(c) return c ~= 0 end,
  lt = function(c) return c < 0 end, le = function(c) return c <= 0 end,
  gt = function(c) return c > 0 end, ge = function(c) return c >= 0 end,
}

-- A condition on a NULL fails unless it asks for NULL, as in SQL.
local function holds(value, cond)
  if cond.op == "notNull" then return value ~= nil end
  if cond.op == "isNull" then return value == nil end
  if value == nil or value ~= value then return false end
  return TESTS[cond.op](compare(value, cond.value))
end

local function describe_condition(cond)
  if UNARY[cond.op] then return cond.column .. " " .. cond.op end
  return cond.column .. " " .. cond.op .. " " .. render(cond.value, {})
end

local function evaluate_unique(inv, state)
  local columns, rows = table_rows(inv, state)
  require_column(inv, columns, inv.column)
  local count, order = {}, {}
  for _, row in ipairs(rows) do
    local v = row[inv.column]
    if v ~= nil and v == v then
      if count[v] == nil then order[#order + 1] = v end
      count[v] = (count[v] or 0) + 1
    end
  end
  local dup = {}
  local first
  for _, v in ipairs(order) do
    if count[v] > 1 then
      dup[v] = true
      first = first == nil and v or first
    end
  end
  if first == nil then return nil end
  local groups = 0
  for _ in next, dup do groups = groups + 1 end
  local offending = {}
  for _, row in ipairs(rows) do
    local v = row[inv.column]
    if v ~= nil and dup[v] then offending[#offending + 1] = row end
  end
  local message = string_format("%d rows of %s share %s = %s", count[first], describe_table(inv.table),
    inv.column, render(first, {}))
  if groups > 1 then
    message = message .. string_format(" (and %d more duplicated %s)", groups - 1, plural(groups - 1, "value", "values"))
  end
  return { invariant = inv.name, message = message, columns = columns, rows = offending }
end

local function evaluate_every_row(inv, state)
  local columns, rows = table_rows(inv, state)
  for _, cond in ipairs(inv.conditions) do require_column(inv, columns, cond.column) end
  local failed_by = {}
  local offending = {}
  for _, row in ipairs(rows) do
    local bad = false
    for i, cond in ipairs(inv.conditions) do
      if not holds(row[cond.column], cond) then
        failed_by[i] = (failed_by[i] or 0) + 1
        bad = true
      end
    end
    if bad then offending[#offending + 1] = row end
  end
  local n = #offending
  if n == 0 then return nil end
  local parts = {}
  for i, cond in ipairs(inv.conditions) do
    if failed_by[i] then parts[#parts + 1] = { describe_condition(cond), failed_by[i] } end
  end
  local head = string_format("%d %s of %s", n, plural(n, "row", "rows"), describe_table(inv.table))
  local message
  if #parts == 1 then
    message = string_format("%s %s %s", head, plural(n, "fails", "fail"), parts[1][1])
  else
    local list = {}
    for i, p in ipairs(parts) do
      list[i] = string_format("%s (%d %s)", p[1], p[2], plural(p[2], "row", "rows"))
    end
    message = string_format("%s %s: %s", head, plural(n, "fails its conditions", "fail their conditions"),
      table_concat(list, ", "))
  end
  return { invariant = inv.name, message = message, columns = columns, rows = offending }
end

-- What the error messages call an entry of each kind.
local NOUNS = { custom = "invariant", always = "always", sometimes = "sometimes" }

local function call_property(inv, state)
  local r = table.pack(limits.pcall(inv.fn, state))  -- it runs in the checker's state, not an isolate
  if not r[1] then
    local e = r[2]
    -- error values that are tables (eutaxy errors, the CLI's own) carry a message
    if type(e) == "table" and type(e.message) == "string" then e = e.message end
    error(string_format("%s %s (%s) raised: %s", NOUNS[inv.kind], render_string(inv.name), where(inv), tostring(e)), 0)
  end
  return r[2], r[3]
end

local function evaluate_custom(inv, state)
  local verdict, message = call_property(inv, state)
  if verdict == true then return nil end
  if verdict ~= false and verdict ~= nil then
    error(string_format("%s %s (%s) must return true, or false and a message; it returned %s",
      NOUNS[inv.kind], render_string(inv.name), where(inv), got(verdict)), 0)
  end
  if message == nil then
    message = verdict == false and "the " .. NOUNS[inv.kind] .. " returned false"
      or "the " .. NOUNS[inv.kind] .. " returned nil (no verdict)"
  elseif type(message) ~= "string" then
    message = render(message, {})
  end
  return { invariant = inv.name, message = message }
end

local EVALUATORS = { unique = evaluate_unique, everyRow = evaluate_every_row, custom = evaluate_custom,
                     always = evaluate_custom }

--- Checks one invariant against the state at the end of a run: nil when it
--- holds, else the violation. Raises when the invariant itself is broken (a
--- custom function that raised, a column the table does not have).
---@param invariant eutaxy.check.Invariant
---@param state eutaxy.check.State
---@return eutaxy.check.Violation|nil
function sim.evaluate(invariant, state)
  local evaluator = type(invariant) == "table" and EVALUATORS[invariant.kind]
  if not evaluator then
    error("evaluate: expects an invariant from sim.unique, sim.everyRow, sim.invariant or sim.always, got "
      .. got(invariant), 2)
  end
  return evaluator(invariant, state)
end

--- Whether a sometimes probe holds on the state: true when fn returned
--- true, false when it returned false or nil. Raises when the probe raised
--- or returned anything else.
---@param probe eutaxy.check.Invariant
---@param state eutaxy.check.State
---@return boolean
function sim.reached(probe, state)
  if type(probe) ~= "table" or probe.kind ~= "sometimes" then
    error("reached: expects a probe from sim.sometimes, got " .. got(probe), 2)
  end
  local verdict = call_property(probe, state)
  if verdict == true then return true end
  if verdict == false or verdict == nil then return false end
  error(string_format("sometimes %s (%s) must return true or false; it returned %s", render_string(probe.name),
    where(probe), got(verdict)), 0)
end

return sim
