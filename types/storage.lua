---@meta
-- LuaLS annotations for an object's storage: self.ctx.storage.

--- An object's storage: SQL, key-value pairs and the alarm, in one database.
--- Calls never yield; an invocation's writes between two yield points are
--- one transaction.
---@class eutaxy.Storage
---@field sql eutaxy.SqlStorage
local Storage = {}

--- The value stored at key (nil if none), or for an array of keys a table
--- of the keys found and their values.
---@param key string
---@return any
---@overload fun(self: eutaxy.Storage, keys: string[]): table<string, any>
function Storage:get(key) end

--- Stores value at key, or every pair of a { [key] = value } table at once.
---@param key string
---@param value any
---@overload fun(self: eutaxy.Storage, entries: table<string, any>)
function Storage:put(key, value) end

--- Removes key (true if it was there), or an array of keys (how many were).
---@param key string
---@return boolean
---@overload fun(self: eutaxy.Storage, keys: string[]): integer
function Storage:delete(key) end

--- Pairs in key order.
---@param options? eutaxy.ListOptions
---@return { key: string, value: any }[]
function Storage:list(options) end

--- Deletes everything the object stored, as one unit, as Cloudflare's
--- SQLite-backed objects do (compatibility date 2026-02-24 on): drops every
--- table, view and virtual table (the fanout's and the scheduler's too),
--- removes every key-value pair and deletes the alarm.
function Storage:deleteAll() end

--- Returns at once: the writes of the turn commit when it yields or returns,
--- and nothing it sends (an answer, a call) leaves before they are durable.
--- Not a yield point.
function Storage:sync() end

--- The alarm's time in ms since 1970, or nil. Nil while the alarm handler
--- runs, unless it set a new one.
---@return integer|nil
function Storage:getAlarm() end

--- Sets the object's one alarm (the class needs an alarm method).
---@param at integer ms since 1970
function Storage:setAlarm(at) end

--- Removes the alarm.
function Storage:deleteAlarm() end

--- Runs fn(...) as one unit: its writes commit together or, if it raises,
--- not at all; its error is raised again unchanged. fn may not yield.
---@generic R
---@param fn fun(...: any): R
---@param ... any
---@return R
function Storage:transactionSync(fn, ...) end

---@class eutaxy.ListOptions
---@field prefix? string only keys that begin with it
---@field start? string first key, inclusive
---@field startAfter? string first key, exclusive
---@field end? string last key, exclusive
---@field limit? integer at most this many pairs
---@field reverse? boolean descending key order

--- self.ctx.storage.sql
---@class eutaxy.SqlStorage
---@field databaseSize integer the database's size in bytes (page_count * page_size), read afresh each time
local SqlStorage = {}

--- Runs query; with several statements, bindings and the cursor belong to
--- the last. BEGIN, COMMIT, SAVEPOINT and ATTACH are refused, and so are
--- the host's own tables (_eutaxy_*). SQL errors carry SQLite's message.
---@param query string
---@param ... nil|boolean|integer|number|string bindings for ?, in order (booleans as 1/0)
---@return eutaxy.Cursor
function SqlStorage:exec(query, ...) end

--- The rows of one sql:exec, read eagerly; the methods consume them in order.
---@class eutaxy.Cursor
---@field columnNames string[] the result's column names, in order
---@field rowsRead integer rows the statement returned plus rows it wrote
---@field rowsWritten integer rows inserted, updated or deleted, triggers' included
local Cursor = {}

--- The next row as a table keyed by column name (a NULL column is absent), or nil after the last.
---@return table<string, any>|nil
function Cursor:next() end

--- The remaining rows as tables keyed by column name.
---@return table<string, any>[]
function Cursor:toArray() end

--- The one remaining row; an error unless exactly one remains.
---@return table<string, any>
function Cursor:one() end

--- The remaining rows as arrays of column values; each carries n, the number of columns.
---@return any[][]
function Cursor:raw() end

--- An iterator over the remaining rows: `for row in cursor:rows() do`.
---@return fun(): table<string, any>|nil
function Cursor:rows() end
