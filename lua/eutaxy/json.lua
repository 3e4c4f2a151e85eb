-- eutaxy.json: deterministic JSON.
--
-- Encoding is ours rather than cjson's because traces, responses and specs
-- compare bytes: the same value must give the same text in every process,
-- and Lua 5.4 randomises `pairs` order per process. So object keys are
-- sorted bytewise, numbers print the shortest text that reads back to the
-- same value, and anything JSON cannot say (functions, cycles, sparse or
-- mixed tables) is an error naming where it sits instead of a guess.
--
-- Decoding is cjson's (fast and strict), followed by one walk that turns
-- cjson.null into nil and integral floats into integers.

local cjson = require "cjson"
-- Inside an isolate eutaxy.core is the third argument of this chunk; a host
-- Lua state requires it, and plain Lua may not have it.
local core = select(3, ...)
if not core then
  local ok, m = pcall(require, "eutaxy.core")
  core = ok and m or nil
end

local type, next, pairs, ipairs, tostring, tonumber = type, next, pairs, ipairs, tostring, tonumber
local getmetatable, setmetatable = getmetatable, setmetatable
local math_type, string_format, string_byte = math.type, string.format, string.byte
local table_concat, table_sort = table.concat, table.sort

---@class eutaxy.json
local json = {}

--- The value that encodes as `null`. It is cjson.null (a light userdata), so
--- values that came from cjson elsewhere encode the same way. Like any
--- userdata it does not cross between isolates: send nil or a flag instead.
json.null = cjson.null

-- Marks a table as a JSON array so that an empty one encodes as [] not {}.
local array_mt = { __name = "json.array" }

--- Marks `t` (a new table when nil) as an array, so that it encodes as []
--- even when empty. Replaces any metatable `t` had.
---@param t? table
---@return table
function json.array(t)
  t = t or {}
  if type(t) ~= "table" then
    error("json.array: expected a table, got " .. type(t), 2)
  end
  return setmetatable(t, array_mt)
end

--- True when `t` was marked with json.array.
---@param t any
---@return boolean
function json.is_array(t)
  return type(t) == "table" and getmetatable(t) == array_mt
end

-- Encoding ---------------------------------------------------------------

local escapes = {
  ['"'] = '\\"', ["\\"] = "\\\\",
  ["\b"] = "\\b", ["\f"] = "\\f", ["\n"] = "\\n", ["\r"] = "\\r", ["\t"] = "\\t",
}
for byte = 0, 31 do
  local c = string.char(byte)
  escapes[c] = escapes[c] or string_format("\\u%04x", byte)
end
escapes["\127"] = "\\u007f"

-- Bytes >= 0x80 pass through untouched: UTF-8 stays readable and nothing
-- is lost for strings that are not valid UTF-8.
local function encode_string(s)
  return '"' .. s:gsub('[%c"\\]', escapes) .. '"'
end

local function is_identifier(s)
  return s:find("^[%a_][%w_]*$") ~= nil
end

-- Paths read like Lua indexing: .items[2].name, or ["a key"] when needed.
local function child_path(path, key)
  if type(key) == "string" then
    if is_identifier(key) then return path .. "." .. key end
    return path .. "[" .. string_format("%q", key) .. "]"
  end
  return path .. "[" .. tostring(key) .. "]"
end

-- The path of the value being encoded is kept as a stack of keys, and only
-- spelled out when an error needs it: encoding allocates no path strings.
local function path_of(st)
  local path = ""
  for i = 1, st.depth do path = child_path(path, st.keys[i]) end
  if path == "" then return "the top level" end
  return path
end

-- msg has one %s where the path goes, so it can sit mid-sentence.
local function fail(msg, st)
  error("json.encode: " .. msg:format(path_of(st)), 0)
end

-- %.17g always round-trips a double, but often prints noise (0.1 becomes
-- 0.10000000000000001); the first shorter precision that reads back equal
-- is the one JavaScript would print too.
local function encode_float(v, st)
  if v ~= v then fail("cannot encode NaN at %s", st) end
  if v == math.huge or v == -math.huge then fail("cannot encode infinity at %s", st) end
  for precision = 14, 17 do
    local s = string_format("%." .. precision .. "g", v)
    if precision == 17 or tonumber(s) == v then return s end
  end
end

-- Lua's string `<` uses strcoll, which follows the locale; key order must
-- not, so compare bytes when the collation is not plain C.
local function bytewise_less(a, b)
  local n = #a < #b and #a or #b
  for i = 1, n do
    local x, y = string_byte(a, i), string_byte(b, i)
    if x ~= y then return x < y end
  end
  return #a < #b
end

-- Inside an isolate os.setlocale only answers what the locale is (no
-- isolate may change the process's); where it raises, bytewise is always
-- right. It is asked each time rather than remembered, so an encode changes
-- nothing the worker's requests share (host/heapprint.h).
local setlocale = os and os.setlocale

local function key_order()
  if not setlocale then return bytewise_less end
  local ok, collate = pcall(setlocale, nil, "collate")
  if not ok then return bytewise_less end
  if collate == "C" or collate == "POSIX" then return nil end
  return bytewise_less
end

local encode_value

local function encode_table(t, st)
  local out, seen = st.out, st.seen
  if seen[t] then fail("cannot encode a cycle at %s (a table that contains itself)", st) end
  seen[t] = true

  local count, max_index, string_keys = 0, 0, nil
  for k in next, t do
    local kt = math_type(k) or type(k)
    if kt == "integer" and k >= 1 then
      count = count + 1
      if k > max_index then max_index = k end
    elseif kt == "string" then
      string_keys = string_keys or {}
      string_keys[#string_keys + 1] = k
    else
      local shown = type(k) == "string" and k or tostring(k)
      fail("table at %s has a key that is neither a string nor a positive integer ("
        .. shown:gsub("%%", "%%%%") .. ", " .. kt .. ")", st)
    end
  end

  local marked = getmetatable(t) == array_mt
  if count > 0 and string_keys then
    fail("table at %s has both array and object keys", st)
  end
  if marked and string_keys then
    fail("table at %s is marked with json.array but has object keys", st)
  end

  local depth = st.depth + 1
  local keys = st.keys
  if count > 0 or marked then
    if max_index ~= count then
      fail("table at %s is a sparse array (" .. count .. " items but the largest index is "
        .. max_index .. ")", st)
    end
    out[#out + 1] = "["
    for i = 1, count do
      if i > 1 then out[#out + 1] = "," end
      st.depth, keys[depth] = depth, i
      encode_value(t[i], st)
    end
    out[#out + 1] = "]"
  elseif string_keys then
    table_sort(string_keys, st.less)
    out[#out + 1] = "{"
    for i, k in ipairs(string_keys) do
      if i > 1 then out[#out + 1] = "," end
      out[#out + 1] = encode_string(k)
      out[#out + 1] = ":"
      st.depth, keys[depth] = depth, k
      encode_value(t[k], st)
    end
    out[#out + 1] = "}"
  else
    out[#out + 1] = "{}"
  end
  st.depth = depth - 1

  -- Only the current path counts as a cycle; shared subtables are fine.
  seen[t] = nil
end

encode_value = function(v, st)
  local out = st.out
  local vt = type(v)
  if vt == "string" then
    out[#out + 1] = encode_string(v)
  elseif vt == "number" then
    if math_type(v) == "integer" then
      out[#out + 1] = string_format("%d", v)
    else
      out[#out + 1] = encode_float(v, st)
    end
  elseif vt == "boolean" then
    out[#out + 1] = v and "true" or "false"
  elseif vt == "nil" or v == json.null then
    out[#out + 1] = "null"
  elseif vt == "table" then
    encode_table(v, st)
  else
    fail("cannot encode a " .. vt .. " at %s", st)
  end
end

local function encode_in_lua(value)
  local st = { out = {}, seen = {}, keys = {}, depth = 0, less = key_order() }
  encode_value(value, st)
  return table_concat(st.out)
end

--- Encodes `value` as compact JSON with object keys sorted bytewise, so
--- equal values always give equal text. Raises an error naming the path
--- (e.g. ".items[2]") for functions, userdata, cycles, NaN/infinity,
--- tables mixing array and object keys, sparse arrays and keys that are
--- neither strings nor positive integers. nil and json.null encode as null;
--- an empty table as {} unless marked with json.array.
---@param value any
---@return string
json.encode = encode_in_lua
-- The host's encoder (host/ljson.c), where eutaxy.core is loaded: the same
-- text, and json.lua's encoder called for what it leaves to it.
if core and core.json_encoder then json.encode = core.json_encoder(array_mt, json.null, encode_in_lua) end

-- The encoder in Lua alone, for the spec that compares the two.
json._encode_in_lua = encode_in_lua

-- Decoding ---------------------------------------------------------------

local MAX_SAFE = 2 ^ 53

-- cjson 2.1 reads every number as a float; JSON has one number type and
-- integral values are nearly always meant as integers (ids, counts,
-- timestamps), which SQLite and string.format("%d") treat differently.
local function normalize(v)
  if v == cjson.null then return nil end
  local vt = type(v)
  if vt == "number" then
    if math_type(v) == "float" and v == math.floor(v) and v >= -MAX_SAFE and v <= MAX_SAFE then
      return math.tointeger(v)
    end
    return v
  end
  if vt == "table" then
    for k, item in pairs(v) do
      v[k] = normalize(item)
    end
  end
  return v
end

--- Turns what cjson.decode returned into eutaxy's shape: cjson.null
--- becomes nil and integral floats within 2^53 become integers.
--- Modifies tables in place and returns the result.
---@param value any
---@return any
function json.normalize(value)
  return normalize(value)
end

--- Decodes JSON text. null becomes nil (so an array with nulls has holes)
--- and integral numbers become Lua integers. Raises
--- "json.decode: <cjson's message>" on malformed text.
---@param text string
---@return any
function json.decode(text)
  if type(text) ~= "string" then
    error("json.decode: expected a string, got " .. type(text), 0)
  end
  local ok, result = pcall(cjson.decode, text)
  if not ok then
    error("json.decode: " .. tostring(result), 0)
  end
  return normalize(result)
end

return json
