-- A cursor's rows as objects: the host's row_object and row_objects
-- against storage.lua's as_object, which stays the definition.
local storage = require "eutaxy.storage"
local core = require "eutaxy.core"

local Cursor, as_object = storage.Cursor, storage._as_object

local rng = 7
local function random(n)
  rng = (rng * 1103515245 + 12345) % 2147483648
  return (rng >> 16) % n + 1
end

local NAMES = { "id", "token", "a", "A", "", "a b", "é", "x" }
local VALUES = { 0, 1, -1, 2 ^ 53, 1.5, -0.0, math.huge, "", "r-1", "\0", "é", true, false }

-- Column names, some repeated (SELECT a, a), and rows with holes for NULLs.
local function result()
  local names, rows = {}, {}
  for i = 1, random(6) - 1 do names[i] = NAMES[random(#NAMES)] end
  for r = 1, random(5) - 1 do
    local row = {}
    for i = 1, #names do
      if random(3) > 1 then row[i] = VALUES[random(#VALUES)] end
    end
    rows[r] = row
  end
  return names, rows
end

local function cursor(names, rows, pos)
  return setmetatable({ columnNames = names, _rows = rows, _pos = pos or 0, rowsRead = #rows, rowsWritten = 0 },
    Cursor)
end

describe("a cursor's rows as objects", function()
  it("are made by the host here", function()
    assert.is_function(core.row_object)
    assert.is_function(core.row_objects)
  end)

  it("are as_object's on random results: duplicate names, NULLs, every kind of value", function()
    local rows_seen, dup_seen, null_seen = 0, 0, 0
    for _ = 1, 3000 do
      local names, rows = result()
      local from = random(#rows + 2) - 1
      local want = {}
      for i = from, #rows do
        if i >= 1 then want[#want + 1] = as_object(names, rows[i]) end
      end
      if from >= 1 then
        assert.are.same(want, core.row_objects(names, rows, from))
        assert.are.same(want, cursor(names, rows, from - 1):toArray())
      end
      for i, row in ipairs(rows) do
        local c = cursor(names, rows, i - 1)
        assert.are.same(as_object(names, row), core.row_object(names, row))
        assert.are.same(as_object(names, row), c:next())
        assert.are.equal(i, c._pos)
        rows_seen = rows_seen + 1
        for k = 1, #names do
          if row[k] == nil then null_seen = null_seen + 1 end
          for j = k + 1, #names do
            if names[j] == names[k] then dup_seen = dup_seen + 1 end
          end
        end
      end
    end
    assert.is_true(rows_seen > 3000 and dup_seen > 1000 and null_seen > 1000,
      rows_seen .. " rows, " .. dup_seen .. " repeated names, " .. null_seen .. " NULLs")
  end)

  it("give a later column of a name over an earlier one, NULL included", function()
    assert.are.same({ a = 2 }, core.row_object({ "a", "a" }, { 1, 2 }))
    assert.are.same({}, core.row_object({ "a", "a" }, { 1 }))
    assert.are.same({ a = 1 }, core.row_object({ "a", "a" }, { [1] = nil, [2] = 1 }))
  end)

  it("leave what is not a result to as_object, which says what is wrong", function()
    assert.is_nil(core.row_object({ "a", 1 }, { 1, 2 }))
    assert.is_nil(core.row_object({ "a", 0 / 0 }, { 1, 2 }))
    assert.is_nil(core.row_object({ "a" }, "row"))
    assert.is_nil(core.row_objects({ "a" }, { { 1 }, 5 }, 1))
    assert.is_nil(core.row_objects({ "a" }, { { 1 } }, 1.5))
    assert.has_error(function() cursor({ "a" }, { 5 }):toArray() end)
    assert.has_error(function() cursor({ "a", 0 / 0 }, { { 1, 2 } }):next() end)
    assert.are.same({}, cursor({ "a" }, { { 1 } }, 1):toArray())
  end)
end)
