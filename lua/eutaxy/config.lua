-- eutaxy.config: the part of wrangler.jsonc eutaxy uses.
--
-- Only "main" and durable_objects.bindings matter here; every other field
-- Wrangler knows is ignored, so a project's real config loads unchanged.
-- What is checked is checked up front, with the file and the field in
-- the message, because a wrong binding otherwise surfaces much later as a
-- nil `env.POOL` deep inside a run.

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

--- Reads a wrangler.jsonc and checks what eutaxy uses. Raises (level 0)
--- "PATH:LINE:COL: ..." for malformed text and "PATH: <field> ..." for a
--- wrong field.
---@param path string
---@return eutaxy.Config
function config.load(path)
  if type(path) ~= "string" then
    error("config.load: expected a path, got " .. type(path), 0)
  end
  local t = jsonc.read(path)
  local dir = dirname(path)
  local main, bindings = check_wrangler(path, t, dir)
  return { path = path, dir = dir, main = main, bindings = bindings }
end

--- Checks a config given as a Lua table, as specs do:
--- `{ main = "worker.lua", bindings = { POOL = "LeasePool" } }` (a map,
--- taken in name order), or `bindings` as an array of
--- `{ name = ..., class_name = ... }`, or a wrangler-shaped
--- `durable_objects = { bindings = ... }`. `main` is relative to base_dir
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
  if t.bindings == nil then
    local main, bindings = check_wrangler(where, t, dir)
    return { path = nil, dir = dir, main = main, bindings = bindings }
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
  return { path = nil, dir = dir, main = main, bindings = bindings }
end

return config
