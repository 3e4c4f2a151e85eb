-- The Lua half of fuzz_jsonc.c: reads a fuzz input as wrangler.jsonc.
--
-- An error is fine when it is one of jsonc's or config's own: a string that
-- names the file (FILE:LINE:COL: or FILE: for jsonc, "inline config:" or the
-- path for config). Anything else (a runtime error inside the modules, an
-- error value that is not a string) is a bug, and so is a disagreement
-- with cjson: text cjson reads as it is (no comments, no trailing commas)
-- must decode to the same value.

local cjson = require "cjson"
local json = require "eutaxy.json"
local jsonc = require "eutaxy.jsonc"
local config = require "eutaxy.config"

local function same(a, b, depth)
  if a ~= a and b ~= b then return true end  -- NaN
  if type(a) ~= "table" or type(b) ~= "table" then
    return a == b and math.type(a) == math.type(b)
  end
  if depth > 2000 then return false end
  for k, v in next, a do
    if not same(v, b[k], depth + 1) then return false end
  end
  for k in next, b do
    if a[k] == nil then return false end
  end
  return true
end

local function clean(err, ...)
  if type(err) ~= "string" then return false end
  for _, prefix in ipairs({ ... }) do
    if err:sub(1, #prefix) == prefix then return true end
  end
  return false
end

local function check_config(cfg)
  assert(type(cfg.main) == "string" and cfg.main ~= "", "config without main")
  for i, b in ipairs(cfg.bindings) do
    assert(b.name:find("^[%a_][%w_]*$") and b.class_name:find("^[%a_][%w_]*$"),
      "binding " .. i .. " is not a pair of identifiers")
  end
end

return function(text, path)
  local ok, value = pcall(jsonc.decode, text, "f.jsonc")
  if not ok then
    if not (clean(value, "f.jsonc: ") or (type(value) == "string" and value:find("^f%.jsonc:%d+:%d+: "))) then
      error("jsonc.decode raised something other than its own error: " .. tostring(value), 0)
    end
  end
  -- Where jsonc is rightly stricter than cjson: a NUL byte (cjson stops
  -- there) and a raw line break inside a string (JSON has none).
  local plain_ok, plain = pcall(cjson.decode, text)
  if plain_ok and not text:find("\0", 1, true) then
    if not ok and not value:find(": unterminated string$") then
      error("cjson reads the text, jsonc.decode refuses it: " .. tostring(value), 0)
    end
    if ok and not same(json.normalize(plain), value, 0) then
      error("jsonc.decode and cjson give different values", 0)
    end
  end
  if not ok then return end

  local cok, cfg = pcall(config.inline, value, "/project")
  if cok then check_config(cfg)
  elseif not clean(cfg, "inline config: ") then
    error("config.inline raised something other than its own error: " .. tostring(cfg), 0)
  end

  -- config.load reads the same text from a file: the wrangler.jsonc path
  local f = assert(io.open(path, "wb"))
  f:write(text)
  f:close()
  local lok, loaded = pcall(config.load, path)
  if lok then check_config(loaded)
  elseif not clean(loaded, path .. ":") then
    error("config.load raised something other than its own error: " .. tostring(loaded), 0)
  end
end
