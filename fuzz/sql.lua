-- The Lua half of fuzz_sql.c: a fuzz input as a sequence of storage calls
-- on one object's store (host/lstore.c through lua/eutaxy/storage.lua),
-- with turn ends between them as the world makes them.
--
-- Every call's outcome is checked. An error must be the storage API's own,
-- a string; never a runtime error in storage.lua or the driver. A cursor
-- must agree with itself (rowsRead is the rows it returned plus
-- rowsWritten; every row has its columns). A value put must come back
-- equal from get and list; list keeps key order, ranges and limits; an
-- alarm set reads back; transactionSync's writes vanish with its error.

local storage = require "eutaxy.storage"

local FRAGMENTS = {
  "CREATE TABLE t(a, b)",
  "CREATE TABLE IF NOT EXISTS t(a INTEGER PRIMARY KEY, b TEXT NOT NULL DEFAULT '')",
  "CREATE TABLE u(x UNIQUE, y REFERENCES t(a) ON DELETE CASCADE)",
  "CREATE TABLE s(k TEXT PRIMARY KEY, v BLOB) WITHOUT ROWID",
  "CREATE TABLE c(a INTEGER, b REAL, c TEXT, d BLOB, e ANY) STRICT",
  "CREATE INDEX IF NOT EXISTS ti ON t(b)",
  "CREATE TRIGGER IF NOT EXISTS tt AFTER INSERT ON t BEGIN INSERT INTO u(x) VALUES (new.a); END",
  "CREATE VIEW IF NOT EXISTS v AS SELECT * FROM t",
  "ALTER TABLE t ADD COLUMN c",
  "ALTER TABLE t RENAME TO t2",
  "ALTER TABLE t2 RENAME TO t",
  "DROP TABLE t", "DROP TABLE IF EXISTS u", "DROP VIEW IF EXISTS v",
  "INSERT INTO t VALUES (?, ?)", "INSERT INTO t(a) VALUES (?)", "INSERT INTO t VALUES (?1, ?1)",
  "INSERT OR REPLACE INTO s VALUES (?, ?)", "INSERT INTO c VALUES (?, ?, ?, ?, ?)",
  "INSERT INTO t SELECT * FROM t", "INSERT INTO t VALUES (?, ?) RETURNING *",
  "UPDATE t SET b = ? WHERE a = ?", "UPDATE t SET a = a + 1 RETURNING a, b",
  "DELETE FROM t WHERE a < ?", "DELETE FROM t", "DELETE FROM u RETURNING *",
  "SELECT * FROM t", "SELECT * FROM t ORDER BY a", "SELECT a, b, a AS a FROM t",
  "SELECT * FROM v", "SELECT count(*) AS n FROM t", "SELECT * FROM c",
  "SELECT ?", "SELECT ?, ?, ?", "SELECT ?2", "SELECT ?99", "SELECT :name, @other, $third",
  "SELECT ? AS x, typeof(?) AS t", "SELECT NULL, 1, 1.5, 'x', x'00ff'",
  "SELECT zeroblob(?)", "SELECT randomblob(?)", "SELECT length(?)", "SELECT hex(?)",
  "SELECT 1/0, -9223372036854775808, 9223372036854775807 + 1, 1e308 * 10",
  "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n LIMIT ?) SELECT i FROM n",
  "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n) SELECT count(*) FROM n",
  "SELECT * FROM _eutaxy_kv", "DELETE FROM _eutaxy_alarm", "UPDATE _eutaxy_kv SET value = x'06'",
  "SELECT * FROM sqlite_master", "SELECT * FROM pragma_table_info('t')",
  "BEGIN", "COMMIT", "ROLLBACK", "SAVEPOINT x", "RELEASE x", "ROLLBACK TO eu_turn", "RELEASE eu_turn",
  "ATTACH ':memory:' AS m", "DETACH m", "VACUUM", "ANALYZE", "REINDEX",
  "PRAGMA foreign_keys = OFF", "PRAGMA writable_schema = 1", "PRAGMA user_version = ?",
  "SELECT load_extension('x')", "", " ", "-- only a comment", "/* unterminated", "SELECT",
  "SELECT 'unterminated", "SELECT * FROM nowhere", "CREATE TABLE", "SELECT 1; SELECT 2",
}

-- Equal as a clone must keep them: types, integer or float, float bits.
local function same(a, b, depth)
  if type(a) ~= type(b) then return false end
  if type(a) == "number" then
    if math.type(a) ~= math.type(b) then return false end
    return string.pack("<n", a) == string.pack("<n", b) or (math.type(a) == "integer" and a == b)
  end
  if type(a) ~= "table" then return a == b end
  if depth > 200 then return false end
  for k, v in next, a do
    if not same(v, b[k], depth + 1) then return false end
  end
  for k in next, b do
    if a[k] == nil then return false end
  end
  return true
end

local function bytes_less(a, b)
  local n = math.min(#a, #b)
  for i = 1, n do
    local x, y = a:byte(i), b:byte(i)
    if x ~= y then return x < y end
  end
  return #a < #b
end

local function check(cond, fmt, ...)
  if not cond then error("fuzz_sql: " .. string.format(fmt, ...), 0) end
end

-- An error of the storage API: a string, not a runtime error.
local function api_error(what, err)
  check(type(err) == "string", "%s raised a %s", what, type(err))
  if err:find("not enough memory") then return end
  -- the message proper follows the first "FILE:LINE: "; SQL quoted in it may say anything
  local rest = err:match("^[^:]*:%d+: (.*)$") or err
  check(not rest:find("^attempt to ") and not rest:find("^bad argument") and not err:find("^[^:]*storage%.lua:%d+:"),
    "%s raised a runtime error: %s", what, err)
end

return function(input, fns, end_turn)
  local st = storage.new(fns)
  local pos = 1
  local function u8()
    local b = input:byte(pos) or 0
    pos = pos + 1
    return b
  end
  local function bytes(n)
    local s = input:sub(pos, pos + n - 1)
    pos = pos + n
    return s
  end
  local function number()
    local k = u8() % 6
    if k == 0 then return u8() - 128 end
    if k == 1 then return (string.unpack("<i8", bytes(8) .. ("\0"):rep(8))) end
    if k == 2 then return (string.unpack("<d", bytes(8) .. ("\0"):rep(8))) end
    if k == 3 then return ({ math.huge, -math.huge, 0 / 0, -0.0, 2 ^ 63, -2 ^ 63, 0.5 })[u8() % 7 + 1] end
    if k == 4 then return math.maxinteger - u8() % 2 end
    return (u8() - 128) * 1000.0
  end
  local function string_value()
    local k = u8() % 4
    if k == 0 then return bytes(u8() % 40) end  -- any bytes: often not UTF-8
    if k == 1 then return ("k" .. u8()) end
    if k == 2 then return ("\xff"):rep(u8() % 3) .. bytes(u8() % 4) end
    return ""
  end
  local value
  local function table_value(depth)
    local t, n = {}, u8() % 5
    for _ = 1, n do
      local key = u8() % 2 == 0 and string_value() or number()
      if key == key then t[key] = value(depth + 1) end
    end
    return t
  end
  value = function(depth)
    local k = u8() % 8
    if k == 0 then return nil end
    if k == 1 then return u8() % 2 == 1 end
    if k == 2 or k == 3 then return number() end
    if k == 4 or k == 5 then return string_value() end
    if k == 6 and depth < 8 then return table_value(depth) end
    if k == 7 and u8() == 0 then return print end  -- cannot be bound or cloned
    return "v"
  end
  local function sql_text()
    if u8() % 5 == 0 then return bytes(u8()) end
    local parts = {}
    for i = 1, 1 + u8() % 3 do parts[i] = FRAGMENTS[u8() % #FRAGMENTS + 1] end
    return table.concat(parts, ";")
  end

  local function exec()
    local sql = sql_text()
    local args, n = {}, u8() % 6
    for i = 1, n do args[i] = value(6) end
    local ok, cursor = pcall(st.sql.exec, st.sql, sql, table.unpack(args, 1, n))
    if not ok then return api_error("sql:exec", cursor) end
    local names = cursor.columnNames
    check(type(names) == "table", "a cursor without columnNames")
    check(math.type(cursor.rowsWritten) == "integer" and cursor.rowsWritten >= 0, "rowsWritten")
    local returned = cursor.rowsRead - cursor.rowsWritten
    check(returned >= 0, "rowsRead %d below rowsWritten %d", cursor.rowsRead, cursor.rowsWritten)
    local mode, seen = u8() % 5, 0
    if mode == 0 then
      seen = #cursor:toArray()
    elseif mode == 1 then
      for _, row in ipairs(cursor:raw()) do
        check(row.n == #names, "a raw row of %d columns for %d names", row.n, #names)
        seen = seen + 1
      end
    elseif mode == 2 then
      for row in cursor:rows() do
        check(type(row) == "table", "a row that is not a table")
        seen = seen + 1
      end
    elseif mode == 3 then
      local one_ok, row = pcall(cursor.one, cursor)
      check(one_ok == (returned == 1), "one() on %d rows: %s", returned, tostring(row))
      seen = returned
    else
      while cursor:next() do seen = seen + 1 end
      check(cursor:next() == nil and #cursor:toArray() == 0, "a cursor read twice")
    end
    check(seen == returned, "the cursor gave %d rows, rowsRead says %d", seen, returned)
  end

  local function put()
    local key, v = string_value(), value(0)
    local ok, err = pcall(st.put, st, key, v)
    if not ok then return api_error("storage:put", err) end
    local gok, back = pcall(st.get, st, key)
    check(gok, "get after put: %s", tostring(back))
    check(same(v, back, 0), "put then get of key %q changed the value", key)
  end

  local function put_many()
    local t = table_value(0)
    local ok, err = pcall(st.put, st, t)
    if not ok then return api_error("storage:put", err) end
    for k, v in next, t do
      if type(k) == "string" then
        check(same(v, st:get(k), 0), "put of a table then get of %q changed the value", k)
      end
    end
  end

  local function get()
    local keys = {}
    for i = 1, u8() % 4 do keys[i] = string_value() end
    local ok, v = pcall(st.get, st, u8() % 2 == 0 and keys or keys[1])
    if not ok then api_error("storage:get", v) end
  end

  local function delete()
    local key = string_value()
    local ok, err = pcall(st.delete, st, u8() % 2 == 0 and { key } or key)
    if not ok then return api_error("storage:delete", err) end
    check(st:get(key) == nil, "a deleted key %q is still there", key)
  end

  local function list()
    local opts = {}
    if u8() % 2 == 0 then opts.prefix = string_value() end
    if u8() % 3 == 0 then opts.start = string_value() end
    if u8() % 3 == 0 then opts.startAfter = string_value() end
    if u8() % 3 == 0 then opts["end"] = string_value() end
    if u8() % 2 == 0 then opts.limit = number() end
    if u8() % 2 == 0 then opts.reverse = u8() % 2 == 0 end
    if u8() == 0 then opts.limit = "ten" end
    local ok, pairs_ = pcall(st.list, st, opts)
    if not ok then return api_error("storage:list", pairs_) end
    if math.type(opts.limit) == "integer" or math.type(opts.limit) == "float" then
      check(#pairs_ <= opts.limit, "list gave %d pairs for a limit of %s", #pairs_, tostring(opts.limit))
    end
    for i, p in ipairs(pairs_) do
      local k = p.key
      if opts.prefix then check(k:sub(1, #opts.prefix) == opts.prefix, "a key without the prefix") end
      if opts.start then check(not bytes_less(k, opts.start), "a key before start") end
      if opts.startAfter then check(bytes_less(opts.startAfter, k), "a key not after startAfter") end
      if opts["end"] then check(bytes_less(k, opts["end"]), "a key not before end") end
      if i > 1 then
        local a, b = pairs_[i - 1].key, k
        if opts.reverse then a, b = b, a end
        check(bytes_less(a, b), "list out of key order")
      end
      check(same(p.value, st:get(k), 0), "list and get disagree on %q", k)
    end
  end

  local function alarm()
    local k = u8() % 3
    if k == 0 then
      local at = number()
      local ok, err = pcall(st.setAlarm, st, at)
      if not ok then return api_error("storage:setAlarm", err) end
      check(st:getAlarm() == math.floor(at), "setAlarm(%s) reads back as %s", tostring(at), tostring(st:getAlarm()))
    elseif k == 1 then
      st:deleteAlarm()
      check(st:getAlarm() == nil, "an alarm deleted is still set")
    else
      local ok, err = pcall(st.setAlarm, st, string_value())
      check(not ok, "setAlarm took a string")
      api_error("storage:setAlarm", err)
    end
  end

  local function transaction()
    local key, before = "tx" .. u8() % 4, nil
    local gok, got = pcall(st.get, st, key)
    if gok then before = got end
    local raise = u8() % 2 == 0
    local ok, err = pcall(st.transactionSync, st, function()
      st:put(key, "inside")
      if u8() % 2 == 0 then pcall(exec) end
      if raise then error({ marker = true }) end
      return 1
    end)
    if raise then
      check(not ok and type(err) == "table" and err.marker, "transactionSync lost its function's error")
      if gok then check(same(st:get(key), before, 0), "a failed transactionSync kept its write") end
    elseif not ok then
      api_error("storage:transactionSync", err)
    end
  end

  -- Garbage whose finalizers call storage, so they may run while rows are read.
  local function finalizers()
    for _ = 1, u8() % 8 do
      setmetatable({}, { __gc = function()
        pcall(st.sql.exec, st.sql, "SELECT 1")
        pcall(st.put, st, "gc", 1)
        pcall(st.list, st)
      end })
    end
    if u8() % 2 == 0 then collectgarbage() end
  end

  local OPS = { exec, exec, exec, put, put_many, get, delete, list, alarm, transaction, finalizers }
  for _ = 1, 48 do
    if pos > #input then break end
    local op = u8()
    budget()
    if op >= 240 then
      end_turn(op % 2 == 0)
    elseif op == 239 then
      local ok, err = pcall(st.deleteAll, st)
      if ok then
        budget()
        local counted, left = pcall(function()
          return #st:list() + (st:getAlarm() and 1 or 0) + st.sql:exec("SELECT count(*) AS n FROM sqlite_schema"
            .. " WHERE name NOT LIKE 'sqlite\\_%' ESCAPE '\\' AND name NOT LIKE '\\_eutaxy\\_%' ESCAPE '\\'"):one().n
        end)
        if counted then check(left == 0, "deleteAll left %d pairs, alarms or tables", left)
        else api_error("storage:list after deleteAll", left) end
      else
        api_error("storage:deleteAll", err)
      end
    elseif op == 238 then
      local ok, size = pcall(function()
        st:sync()
        return st.sql.databaseSize
      end)
      if ok then check(math.type(size) == "integer" and size > 0, "databaseSize is %s", tostring(size))
      else api_error("storage.sql.databaseSize", size) end
    else
      OPS[op % #OPS + 1]()
    end
  end
  end_turn(true)
end
