-- eutaxy.config: the part of wrangler.jsonc eutaxy uses.
--
-- Only "main", durable_objects.bindings, triggers.crons and vars matter
-- here, with the secrets of the .dev.vars file beside the config; every other field
-- Wrangler knows is ignored, so a project's real config loads unchanged.
-- What is checked is checked up front, with the file and the field in
-- the message, because a wrong binding otherwise surfaces much later as a
-- nil `env.POOL` deep inside a run.

local dotenv = require "eutaxy.dotenv"
local jsonc = require "eutaxy.jsonc"

local type, ipairs, next, tostring = type, ipairs, next, tostring
local math_type = math.type

---@class eutaxy.config
local config = {}

--- The folder eutaxy's Lua modules were loaded from (the one holding
-- eutaxy/): isolates load eutaxy from there too. A relative path stays
-- relative: the process's directory is the isolates' too.
---@return string
function config.libdir()
  local source = debug.getinfo(1, "S").source
  return source:match("^@(.*)/eutaxy/config%.lua$") or "."
end

---@class eutaxy.Binding
---@field name string the field of `env` the stub namespace appears as
---@field class_name string the exported class the namespace builds

---@class eutaxy.Config
---@field path string|nil the config file, nil for an inline config
---@field dir string the directory paths are relative to
---@field main string path of the worker's entry module
---@field bindings eutaxy.Binding[] in file order
---@field vars table<string, any> what env carries besides the bindings: the config's vars, .dev.vars' secrets over them
---@field secrets string[] the names .dev.vars sets, sorted (not their values)
---@field crons string[] triggers.crons: cron expressions the worker's scheduled() answers, in file order

local function fail(where, msg)
  error(where .. ": " .. msg, 0)
end

-- Keys exactly 1..n (n may be 0): how a decoded JSON array looks.
local function is_array(t)
  local n = #t
  for k in next, t do
    if math_type(k) ~= "integer" or k < 1 or k > n then return false end
  end
  return true
end

-- An empty JSON [] and {} decode alike, so "object" means no array items.
local function is_object(t)
  return type(t) == "table" and (next(t) == nil or t[1] == nil)
end

local function is_identifier(s)
  return s:find("^[%a_][%w_]*$") ~= nil
end

--- Directory part of `path`: "." when it has none.
---@param path string
---@return string
local function dirname(path)
  local dir = path:match("^(.*)/[^/]*$")
  if dir == nil then return "." end
  if dir == "" then return "/" end
  return dir
end

local function join(dir, path)
  if path:sub(1, 1) == "/" then return path end
  while path:sub(1, 2) == "./" do path = path:sub(3) end
  if dir:sub(-1) == "/" then return dir .. path end
  return dir .. "/" .. path
end

local function check_main(where, main, dir)
  if main == nil then fail(where, 'field "main" is missing') end
  if type(main) ~= "string" then
    fail(where, 'field "main" must be a string, got ' .. type(main))
  end
  if main == "" then fail(where, 'field "main" must not be empty') end
  return join(dir, main)
end

local function check_binding(where, field, entry, bindings, seen)
  if type(entry) ~= "table" or not is_object(entry) then
    fail(where, field .. " must be an object with name and class_name")
  end
  for _, key in ipairs({ "name", "class_name" }) do
    local value = entry[key]
    if value == nil then fail(where, field .. "." .. key .. " is missing") end
    if type(value) ~= "string" then
      fail(where, field .. "." .. key .. " must be a string")
    end
    if not is_identifier(value) then
      fail(where, field .. "." .. key .. ' "' .. value .. '" is not an identifier'
        .. " (letters, digits and _, not starting with a digit)")
    end
  end
  if entry.script_name ~= nil then
    fail(where, field .. ".script_name: bindings to classes of another worker are not"
      .. " supported; export " .. entry.class_name .. " from this worker's main instead")
  end
  if seen[entry.name] then
    fail(where, field .. '.name "' .. entry.name .. '" is already bound by ' .. seen[entry.name])
  end
  seen[entry.name] = field
  bindings[#bindings + 1] = { name = entry.name, class_name = entry.class_name }
end

-- Checks a wrangler-shaped table (main, durable_objects.bindings).
local function check_wrangler(where, t, dir)
  if not is_object(t) then fail(where, "expected an object at the top level") end
  local main = check_main(where, t.main, dir)
  local bindings, seen = {}, {}
  local objects = t.durable_objects
  if objects ~= nil then
    if not is_object(objects) then fail(where, "durable_objects must be an object") end
    local list = objects.bindings
    if list ~= nil then
      if type(list) ~= "table" or not is_array(list) then
        fail(where, "durable_objects.bindings must be an array")
      end
      for i, entry in ipairs(list) do
        check_binding(where, "durable_objects.bindings[" .. i .. "]", entry, bindings, seen)
      end
    end
  end
  return main, bindings
end

-- triggers.crons: each a cron expression Cloudflare takes (eutaxy.core
-- parses it as host/cron.c does), each once.
local function check_crons(where, t)
  local triggers = t.triggers
  if triggers == nil then return {} end
  if not is_object(triggers) then fail(where, "triggers must be an object with crons") end
  local list = triggers.crons
  if list == nil then return {} end
  if type(list) ~= "table" or not is_array(list) then
    fail(where, "triggers.crons must be an array of cron expressions")
  end
  local core = require "eutaxy.core"
  local crons, seen = {}, {}
  for i, expr in ipairs(list) do
    local field = "triggers.crons[" .. i .. "]"
    if type(expr) ~= "string" then
      fail(where, field .. ' must be a cron expression (a string such as "*/5 * * * *"), got ' .. type(expr))
    end
    local ok, why = core.cron_check(expr)
    if not ok then fail(where, field .. " " .. ("%q"):format(expr) .. ": " .. why) end
    if seen[expr] then fail(where, field .. " " .. ("%q"):format(expr) .. " is listed already, as " .. seen[expr]) end
    seen[expr] = field
    crons[i] = expr
  end
  return crons
end

-- Vars and secrets -----------------------------------------------------------

local VAR_DEPTH = 100  -- what an RPC value may nest (host/clone.h)

-- A var holds what JSON holds: a string, a finite number, a boolean, or a
-- table of them under string or integer keys. It is copied into every
-- isolate, so anything with behaviour or identity is refused here, where
-- the message can still name the field.
local function check_var_value(where, path, v, depth, open)
  local t = type(v)
  if t == "string" or t == "boolean" then return end
  if t == "number" then
    if v ~= v or v == math.huge or v == -math.huge then
      fail(where, path .. " is " .. tostring(v) .. ": a var's number must be finite, as in JSON")
    end
    return
  end
  if t ~= "table" then
    fail(where, path .. " is a " .. t .. ": a var is a string, a number, a boolean or a table of them"
      .. " (what JSON holds)")
  end
  if open[v] then fail(where, path .. " contains itself (a cycle)") end
  if depth >= VAR_DEPTH then fail(where, path .. " nests deeper than " .. VAR_DEPTH .. " levels") end
  local mt = getmetatable(v)
  if type(mt) == "table" and rawget(mt, "__call") ~= nil then
    fail(where, path .. " is a callable table: a var is a string, a number, a boolean or a table of them"
      .. " (what JSON holds)")
  end
  open[v] = true
  local keys = {}
  for k in next, v do
    if type(k) ~= "string" and math_type(k) ~= "integer" then
      fail(where, path .. " has a key that is a " .. (math_type(k) or type(k))
        .. ": a var's tables take string or integer keys, as JSON objects and arrays do")
    end
    keys[#keys + 1] = k
  end
  table.sort(keys, function(a, b)
    if type(a) ~= type(b) then return type(a) == "number" end
    return a < b
  end)
  for _, k in ipairs(keys) do
    local sub = type(k) == "string" and k:find("^[%a_][%w_]*$") and (path .. "." .. k)
      or (path .. "[" .. (type(k) == "string" and ("%q"):format(k) or tostring(k)) .. "]")
    check_var_value(where, sub, v[k], depth + 1, open)
  end
  open[v] = nil
end

-- A deep copy of a value check_var_value accepted, without metatables.
local function copy_value(v)
  if type(v) ~= "table" then return v end
  local out = {}
  for k, x in next, v do out[k] = copy_value(x) end
  return out
end

local function var_field(name)
  if name:find("^[%a_][%w_]*$") then return "vars." .. name end
  return "vars[" .. ("%q"):format(name) .. "]"
end

-- The binding that has name, as the config's field names it, or nil.
local function binding_named(bindings, name)
  for i, b in ipairs(bindings) do
    if b.name == name then return b, i end
  end
  return nil
end

-- Checks vars = { NAME = value, ... } and returns a copy. `where` names the
-- file or the call; taken_by(i) says where bindings[i] is declared.
local function check_vars(where, vars, bindings, taken_by)
  if type(vars) ~= "table" or not is_object(vars) then
    fail(where, "vars must be an object of names to values, got " .. (type(vars) == "table" and "an array" or type(vars)))
  end
  local names = {}
  for name in next, vars do
    if type(name) ~= "string" or name == "" then
      fail(where, "vars has a name that is not a non-empty string (" .. tostring(name) .. ")")
    end
    names[#names + 1] = name
  end
  table.sort(names)
  local out = {}
  for _, name in ipairs(names) do
    local field = var_field(name)
    local b, i = binding_named(bindings, name)
    if b then
      fail(where, field .. ": " .. name .. " is the name of a Durable Object binding (" .. taken_by(i)
        .. "); a var or secret cannot have it")
    end
    check_var_value(where, field, vars[name], 0, {})
    out[name] = copy_value(vars[name])
  end
  return out
end

-- The .dev.vars beside the config: its secrets over the config's vars.
local function read_secrets(config_path, dir, vars, bindings)
  local path = join(dir, ".dev.vars")
  local secrets, lines = dotenv.read(path)
  local names = {}
  if secrets == nil then return names end
  for name in next, secrets do names[#names + 1] = name end
  table.sort(names)
  for _, name in ipairs(names) do
    local _, i = binding_named(bindings, name)
    if i then
      error(("%s:%d: %s is the name of a Durable Object binding (%s: durable_objects.bindings[%d]);"
        .. " a var or secret cannot have it"):format(path, lines[name], name, config_path, i), 0)
    end
    vars[name] = secrets[name]
  end
  return names
end

-- The config's own vars field (nil for none).
local function config_vars(where, vars, bindings)
  if vars == nil then return {} end
  return check_vars(where, vars, bindings, function(i) return "durable_objects.bindings[" .. i .. "]" end)
end

--- Checks vars given in Lua, a scenario's or a spec's, before there is a
--- config to check their names against: { NAME = value } with values JSON
--- can hold. Returns a copy; raises "WHERE: vars.NAME ..." on a value a var
--- cannot hold.
---@param where string
---@param vars table<string, any>
---@return table<string, any>
function config.check_vars(where, vars)
  return check_vars(where, vars, {})
end

--- The vars env carries: the config's (vars and secrets) with overrides
--- over them, each checked as a var (a scenario's or a spec's vars).
--- Raises "WHERE: vars.NAME ..." for a value a var cannot hold or a name a
--- binding has.
---@param cfg eutaxy.Config
---@param overrides table<string, any>|nil
---@param where string what the message names: the scenario's file and line, the call
---@return table<string, any>
function config.env(cfg, overrides, where)
  local out = copy_value(cfg.vars or {})
  if overrides == nil then return out end
  local checked = check_vars(where, overrides, cfg.bindings, function(i)
    return (cfg.path or "the config") .. ": durable_objects.bindings[" .. i .. "]"
  end)
  for name, v in next, checked do out[name] = v end
  return out
end

--- Reads a wrangler.jsonc and checks what eutaxy uses, with the secrets of
--- the .dev.vars beside it, if there is one. Raises (level 0)
--- "PATH:LINE:COL: ..." for malformed text, "PATH: <field> ..." for a
--- wrong field and "DIR/.dev.vars:LINE: ..." for a line of .dev.vars.
---@param path string
---@return eutaxy.Config
function config.load(path)
  if type(path) ~= "string" then
    error("config.load: expected a path, got " .. type(path), 0)
  end
  local t = jsonc.read(path)
  local dir = dirname(path)
  local main, bindings = check_wrangler(path, t, dir)
  local vars = config_vars(path, t.vars, bindings)
  local secrets = read_secrets(path, dir, vars, bindings)
  return { path = path, dir = dir, main = main, bindings = bindings, vars = vars, secrets = secrets,
           crons = check_crons(path, t) }
end

--- Checks a config given as a Lua table, as specs do:
--- `{ main = "worker.lua", bindings = { POOL = "LeasePool" } }` (a map,
--- taken in name order), or `bindings` as an array of
--- `{ name = ..., class_name = ... }`, or a wrangler-shaped
--- `durable_objects = { bindings = ... }`; crons as `crons = { ... }` or
--- `triggers = { crons = { ... } }`. `main` is relative to base_dir
--- (default ".").
---@param t table
---@param base_dir? string
---@return eutaxy.Config
function config.inline(t, base_dir)
  local where = "inline config"
  if type(t) ~= "table" then fail(where, "expected a table, got " .. type(t)) end
  if base_dir ~= nil and type(base_dir) ~= "string" then
    fail(where, "base_dir must be a string, got " .. type(base_dir))
  end
  local dir = base_dir or "."
  if t.crons ~= nil and t.triggers ~= nil then fail(where, "give either crons or triggers.crons, not both") end
  local crons = check_crons(where, t.crons ~= nil and { triggers = { crons = t.crons } } or t)
  if t.bindings == nil then
    local main, bindings = check_wrangler(where, t, dir)
    return { path = nil, dir = dir, main = main, bindings = bindings, vars = config_vars(where, t.vars, bindings),
             secrets = {}, crons = crons }
  end
  if t.durable_objects ~= nil then
    fail(where, "give either bindings or durable_objects.bindings, not both")
  end

  local main = check_main(where, t.main, dir)
  local list = t.bindings
  if type(list) ~= "table" then
    fail(where, "bindings must be a table, got " .. type(list))
  end
  local bindings, seen = {}, {}
  if list[1] ~= nil or next(list) == nil then
    if not is_array(list) then fail(where, "bindings mixes array items and names") end
    for i, entry in ipairs(list) do
      check_binding(where, "bindings[" .. i .. "]", entry, bindings, seen)
    end
  else
    local names = {}
    for name in next, list do
      if type(name) ~= "string" then
        fail(where, "bindings has a key that is not a string (" .. tostring(name) .. ")")
      end
      names[#names + 1] = name
    end
    table.sort(names)
    for _, name in ipairs(names) do
      local field = "bindings[" .. ("%q"):format(name) .. "]"
      if not is_identifier(name) then
        fail(where, field .. ": the binding name is not an identifier"
          .. " (letters, digits and _, not starting with a digit)")
      end
      if type(list[name]) ~= "string" then
        fail(where, field .. " must be a class name (a string), got " .. type(list[name]))
      end
      check_binding(where, field, { name = name, class_name = list[name] }, bindings, seen)
    end
  end
  return { path = nil, dir = dir, main = main, bindings = bindings, vars = config_vars(where, t.vars, bindings),
           secrets = {}, crons = crons }
end

return config
