--- eutaxy.storage: an object's storage as user code sees it (ctx.storage).
--
-- The work is done in C (host/lstore.c), which hands over a table of plain
-- functions bound to the object's database; this module wraps them in the
-- Durable Objects shapes: `storage.sql:exec(...)` returns a Cursor, and the
-- key-value and alarm methods are called with `:`.
--
-- The C functions raise bare messages. They are raised again here one level
-- up, so the message points at the line of user code that made the call.
-- transactionSync is the exception: the error of its function passes
-- through untouched, as the function raised it.

local setmetatable, type, pcall, error = setmetatable, type, pcall, error

-- Inside an isolate eutaxy.core is the third argument of this chunk; a host
-- state requires it, and without it the rows become objects in Lua alone.
local core = select(3, ...)
if not core then
  local ok, m = pcall(require, "eutaxy.core")
  core = ok and m or nil
end
local row_object, row_objects = core and core.row_object, core and core.row_objects

local storage = {}

--- Rows of one `sql:exec`, read eagerly; the methods consume them in order.
---@class eutaxy.Cursor
---@field columnNames string[] the result's column names, in order
---@field rowsRead integer rows the statement returned plus rows it wrote
---@field rowsWritten integer rows inserted, updated or deleted, triggers' included
---@field private _rows table[] each row an array of column values, nil for NULL
---@field private _pos integer rows consumed so far
local Cursor = {}
Cursor.__index = Cursor
Cursor.__name = "eutaxy.Cursor"

-- An object keyed by column name; a NULL column is absent. The host's
-- row_object and row_objects make the same, faster; they give nothing for
-- what this says is wrong.
local function as_object(names, row)
  local object = {}
  for i = 1, #names do object[names[i]] = row[i] end
  return object
end

--- The next row as an object keyed by column name, or nil after the last.
---@return table|nil
function Cursor:next()
  local pos = self._pos + 1
  local row = self._rows[pos]
  if row == nil then return nil end
  self._pos = pos
  return row_object and row_object(self.columnNames, row) or as_object(self.columnNames, row)
end

--- The remaining rows as objects.
---@return table[]
function Cursor:toArray()
  local rows, names = self._rows, self.columnNames
  local out = row_objects and row_objects(names, rows, self._pos + 1)
  if not out then
    out = {}
    for i = self._pos + 1, #rows do out[#out + 1] = as_object(names, rows[i]) end
  end
  self._pos = #rows
  return out
end

--- The one remaining row as an object; an error unless exactly one remains.
---@return table
function Cursor:one()
  local left = #self._rows - self._pos
  if left ~= 1 then
    error("cursor:one(): expected exactly one row, got " .. (left == 0 and "0" or "more than one"), 2)
  end
  return self:next()
end

--- The remaining rows as arrays of column values. NULL leaves a hole, so
--- each array carries n, the number of columns.
---@return table[]
function Cursor:raw()
  local rows, ncol, out = self._rows, #self.columnNames, {}
  for i = self._pos + 1, #rows do
    local row = rows[i]
    row.n = ncol
    out[#out + 1] = row
  end
  self._pos = #rows
  return out
end

--- An iterator over the remaining rows as objects: `for row in cursor:rows() do`.
---@return fun(): table|nil
function Cursor:rows()
  return function() return self:next() end
end

storage.Cursor = Cursor
storage._as_object = as_object

-- Calls a C function and, when it raises a message, raises it again so that
-- it points at the caller of the method that called invoke.
local function invoke(fn, ...)
  local ok, result = pcall(fn, ...)
  if ok then return result end
  if type(result) == "string" then error(result, 3) end
  error(result, 0)
end

---@class eutaxy.SqlStorage
---@field databaseSize integer the database's size in bytes, read afresh at every access
---@field private _query function the host's: makes the Cursor itself, and raises at exec's caller
local SqlStorage = {}
SqlStorage.__name = "eutaxy.SqlStorage"

--- Runs query; with several statements, bindings and the cursor belong to
--- the last. Bindings: nil, booleans (1/0), integers, floats, strings
--- (TEXT when valid UTF-8, else BLOB).
---@param query string
---@param ... nil|boolean|number|string
---@return eutaxy.Cursor
function SqlStorage:exec(query, ...)
  -- The host's query raises at exec's caller itself, two levels up from it.
  local cursor = self._query(Cursor, query, ...)
  return cursor
end

---@class eutaxy.ListOptions
---@field prefix string|nil only keys that begin with it
---@field start string|nil first key, inclusive
---@field startAfter string|nil first key, exclusive
---@field end string|nil last key, exclusive
---@field limit integer|nil at most this many pairs
---@field reverse boolean|nil descending key order

---@class eutaxy.Storage
---@field sql eutaxy.SqlStorage
---@field private _fns table
local Storage = {}
Storage.__index = Storage
Storage.__name = "eutaxy.Storage"

--- The value stored at key (nil if none), or for an array of keys a table
--- of the keys found and their values.
---@param key string|string[]
---@return any
function Storage:get(key)
  local value = invoke(self._fns.get, key)
  return value
end

--- Stores value at key, or every pair of a { [key] = value } table at once.
---@param key string|table<string, any>
---@param value any
function Storage:put(key, value)
  invoke(self._fns.put, key, value)
end

--- Removes key (true if it was there), or an array of keys (how many were).
---@param key string|string[]
---@return boolean|integer
function Storage:delete(key)
  local result = invoke(self._fns.delete, key)
  return result
end

--- Pairs in key order, as an array of { key =, value = }.
---@param options eutaxy.ListOptions|nil
---@return { key: string, value: any }[]
function Storage:list(options)
  local result = invoke(self._fns.list, options)
  return result
end

--- Deletes everything the object stored, as one unit: drops every table,
--- view and virtual table (the fanout's and the scheduler's too), removes
--- every key-value pair and deletes the alarm.
function Storage:deleteAll()
  invoke(self._fns.deleteAll)
end

--- Returns at once: the turn's writes commit when it yields or returns,
--- and nothing it sends leaves before they are durable. Not a yield point.
function Storage:sync()
  invoke(self._fns.sync)
end

--- The alarm's time in ms since the epoch, or nil.
---@return integer|nil
function Storage:getAlarm()
  local at = invoke(self._fns.getAlarm)
  return at
end

--- Sets the object's one alarm to a time in ms since the epoch.
---@param at number
function Storage:setAlarm(at)
  invoke(self._fns.setAlarm, at)
end

function Storage:deleteAlarm()
  invoke(self._fns.deleteAlarm)
end

--- Runs fn(...) as one unit: its writes commit together or, if it raises,
--- not at all, and its error is raised again unchanged. fn may not yield.
---@param fn function
---@return any ...
function Storage:transactionSync(fn, ...)
  if type(fn) ~= "function" then
    error("storage:transactionSync: expected a function, got " .. type(fn), 2)
  end
  return self._fns.transactionSync(fn, ...)
end

--- Wraps the functions eu_lstore_push gives.
---@param fns table
---@return eutaxy.Storage
function storage.new(fns)
  -- databaseSize is a property, as on Cloudflare: the instance's own class
  -- has the methods, and asks the store for the size whenever it is read.
  local size = fns.databaseSize
  local class = setmetatable({ exec = SqlStorage.exec }, {
    __index = function(_, k)
      if k == "databaseSize" then return invoke(size) end
    end,
  })
  return setmetatable({
    sql = setmetatable({ _query = fns.query }, { __index = class, __name = SqlStorage.__name }),
    _fns = fns,
  }, Storage)
end

return storage
