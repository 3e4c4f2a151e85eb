--- eutaxy.Id, an object's id, and what makes one.
--
-- An id crosses an RPC as an id: passed to a method or returned from one,
-- it arrives as an Id of the receiving isolate, so env.NS:get(id) works
-- there. The host carries its binding, hex and name and nothing else, and
-- checks that the binding is one of the world's and that the name gives the
-- hex; a table with the same fields and no Id class stays a plain table.
-- Inside an isolate eutaxy.core is the third argument of this chunk, and
-- user code cannot require it; in a host Lua state require finds it.
local core = select(3, ...) or require "eutaxy.core"

---@class eutaxy.Id
---@field name string|nil the name it was made from, if any
local Id = {}
Id.__index = Id
Id.__name = "eutaxy.Id"

--- The id as 64 hex digits.
---@return string
function Id:toString() return self.hex end

--- Whether other is the same object's id.
---@param other any
---@return boolean
function Id:equals(other)
  return getmetatable(other) == Id and other.hex == self.hex and other.binding == self.binding
end

Id.__tostring = Id.toString
Id.__eq = Id.equals

core.id_class(Id)

local ids = { Id = Id }

--- An id of binding: hex its 64 hex digits, name the name it was made from (or nil).
---@return eutaxy.Id
function ids.new(binding, hex, name)
  return setmetatable({ binding = binding, hex = hex, name = name }, Id)
end

return ids
