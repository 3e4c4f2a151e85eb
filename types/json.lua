---@meta eutaxy.json
-- LuaLS annotations for eutaxy.json (also `require "eutaxy.json"`).

--- Deterministic JSON: object keys sorted bytewise, the same value always the same text.
---@class eutaxy.json
---@field null lightuserdata the value that encodes as null (cjson.null); it does not cross between isolates
local json = {}

--- Marks t (a new table when nil) as an array, so that it encodes as [] even when empty.
---@param t? table
---@return table
function json.array(t) end

--- True when t was marked with json.array.
---@param t any
---@return boolean
function json.is_array(t) end

--- Compact JSON with sorted keys. Raises an error naming the path (".items[2]")
--- for functions, userdata, cycles, NaN, mixed or sparse tables.
---@param value any
---@return string
function json.encode(value) end

--- Decodes JSON text: null becomes nil and integral numbers Lua integers.
---@param text string
---@return any
function json.decode(text) end

--- Turns what cjson.decode returned into eutaxy's shape (cjson.null to nil,
--- integral floats to integers), in place.
---@param value any
---@return any
function json.normalize(value) end

return json
