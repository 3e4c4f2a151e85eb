--- Filling objects' databases before anything runs: the `sql` option of
-- testing.world and the setup of a scenario. Works on a world handle from
-- eutaxy.core (w:exec, w:kv_put, w:id_from_name).
local seed = {}

local function sorted_keys(t)
  local keys = {}
  for k in pairs(t) do keys[#keys + 1] = k end
  table.sort(keys, function(a, b) return tostring(a) < tostring(b) end)
  return keys
end
seed.sorted_keys = sorted_keys

local function quote_ident(s)
  return '"' .. tostring(s):gsub('"', '""') .. '"'
end
seed.quote_ident = quote_ident

local function insert_rows(w, binding, hex, name, table_name, rows, where)
  for i, row in ipairs(rows) do
    if type(row) ~= "table" then
      error(string.format("%s.rows.%s[%d] must be a table of columns", where, table_name, i), 0)
    end
    local columns, marks, values = {}, {}, {}
    for _, column in ipairs(sorted_keys(row)) do
      columns[#columns + 1] = quote_ident(column)
      marks[#marks + 1] = "?"
      values[#values + 1] = row[column]
    end
    if #columns == 0 then
      w:exec(binding, hex, name, "INSERT INTO " .. quote_ident(table_name) .. " DEFAULT VALUES")
    else
      w:exec(binding, hex, name, string.format("INSERT INTO %s (%s) VALUES (%s)", quote_ident(table_name),
        table.concat(columns, ", "), table.concat(marks, ", ")), table.unpack(values, 1, #columns))
    end
  end
end

--- Creates one object's schema and rows. where names the option in messages ("sql.POOL.pool").
function seed.sql(w, binding, name, spec, where)
  local hex = w:id_from_name(binding, name)
  if spec.schema then
    local ok, err = pcall(w.exec, w, binding, hex, name, spec.schema)
    if not ok then error(string.format("%s.schema: %s", where, tostring(err)), 0) end
  end
  for _, table_name in ipairs(sorted_keys(spec.rows or {})) do
    local ok, err = pcall(insert_rows, w, binding, hex, name, table_name, spec.rows[table_name], where)
    if not ok then error(string.format("%s.rows.%s: %s", where, table_name, tostring(err)), 0) end
  end
end

--- Stores one object's initial key-value pairs.
function seed.kv(w, binding, name, pairs_, where)
  local hex = w:id_from_name(binding, name)
  for _, key in ipairs(sorted_keys(pairs_)) do
    local ok, err = pcall(w.kv_put, w, binding, hex, name, key, pairs_[key])
    if not ok then error(string.format("%s.%s: %s", where, tostring(key), tostring(err)), 0) end
  end
end

return seed
