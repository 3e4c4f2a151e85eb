--- sim.unique and sim.everyRow decided by the host (w:holds, host/holds.c)
-- against check.lua's evaluation of the same rows, on random tables of
-- values where Lua's and SQLite's comparisons part: integers and floats of
-- equal value, -0.0, 2^53 + 1, 2^63, infinities, TEXT against BLOB of the
-- same bytes, NULL. The checker takes the host's pass as final and asks
-- check.lua only otherwise, so the two must agree on every case: a pass
-- where check.lua fails would be a violation the checker never reports.
local testing = require "eutaxy.testing"
local sim = require "eutaxy.check"

local FIXTURE = "spec/fixtures/objects/worker.lua"
local BINDINGS = { COUNTER = "Counter", STORE = "Store", ALARMED = "Alarmed", NOALARM = "NoAlarm" }

-- Families of values where the two sides could part, each as SQL literals
-- for what rows hold and as Lua values for what conditions compare with.
-- A table draws from one family (or from all of them) so that values of a
-- family meet often.
local FAMILIES = {
  { stored = { "0", "-0.0", "0.0", "1", "1.0", "1.5", "-1", "-1.5", "2" },
    compared = { 0, -0.0, 1, 1.0, 1.5, -1, -1.5, 2 } },
  { stored = { "9007199254740992", "9007199254740993", "9007199254740992.0", "9007199254740994.0" },
    compared = { 2 ^ 53, math.tointeger(2 ^ 53) + 1, math.tointeger(2 ^ 53), 2 ^ 53 + 2 } },
  { stored = { "9223372036854775807", "-9223372036854775808", "9223372036854775808.0", "-9223372036854775808.0",
               "1e308", "9e999", "-9e999" },
    compared = { math.maxinteger, math.mininteger, 2 ^ 63, -(2 ^ 63), 1e308, math.huge, -math.huge } },
  { stored = { "''", "'a'", "'b'", "'ab'", "'1'", "X'61'", "X''", "X'ff'", "'a' || char(0) || 'b'",
               "CAST('ab' AS BLOB)", "1" },
    compared = { "", "a", "ab", "b", "1", "\xff", "a\0b", 1 } },
}
local ALL = { stored = { "NULL" }, compared = {} }
for _, f in ipairs(FAMILIES) do
  for _, v in ipairs(f.stored) do ALL.stored[#ALL.stored + 1] = v end
  for _, v in ipairs(f.compared) do ALL.compared[#ALL.compared + 1] = v end
  f.stored[#f.stored + 1] = "NULL"
end

local OPS = { "notNull", "isNull", "eq", "ne", "lt", "le", "gt", "ge" }
local COLUMNS = { "a", "b", "c" }

-- What the checker's state reads (lua/eutaxy/checker.lua, State:_read):
-- the table's columns, and each row keyed by column name, NULL absent
-- (as world:rows gives them).
local function lua_state(world)
  return {
    rows = function() return world:rows("STORE", "holds", "SELECT * FROM t") end,
    columns = function() return { "a", "b", "c" } end,
  }
end

describe("w:holds against check.lua", function()
  local world, w, hex
  local handle = sim.durableObjectTable("STORE", "holds", "t")

  setup(function()
    world = testing.world({ main = FIXTURE, bindings = BINDINGS })
    w = world._w
    hex = w:id_from_name("STORE", "holds")
    w:exec("STORE", hex, "holds", "CREATE TABLE t (a, b, c REAL)")
  end)
  teardown(function() world:close() end)

  local rng = 20261204
  local function random(n)
    rng = (rng * 1103515245 + 12345) % 2147483648
    return rng % n + 1
  end

  local function fill(nrows, family)
    local stored = family.stored
    w:exec("STORE", hex, "holds", "DELETE FROM t")
    local shown = {}
    for i = 1, nrows do
      local a, b, c = stored[random(#stored)], stored[random(#stored)], stored[random(#stored)]
      w:exec("STORE", hex, "holds", "INSERT INTO t VALUES (" .. a .. ", " .. b .. ", " .. c .. ")")
      shown[i] = "(" .. a .. ", " .. b .. ", " .. c .. ")"
    end
    return table.concat(shown, " ")
  end

  local function random_property(family)
    if random(3) == 1 then
      local column = random(8) == 1 and "d" or COLUMNS[random(#COLUMNS)]
      return sim.unique("u", handle, column), "unique " .. column
    end
    local conds, shown = {}, {}
    for i = 1, random(3) do
      local op = OPS[random(#OPS)]
      local column = random(12) == 1 and "A" or COLUMNS[random(#COLUMNS)]
      local value = (op ~= "notNull" and op ~= "isNull") and family.compared[random(#family.compared)] or nil
      conds[i] = { column = column, op = op, value = value }
      shown[i] = column .. " " .. op .. " " .. (value == nil and "" or string.format("%q", value))
    end
    return sim.everyRow("e", handle, conds), "everyRow " .. table.concat(shown, ", ")
  end

  it("agrees on every case: the host passes exactly where check.lua finds nothing", function()
    local cases, passed, failed, raised = 0, 0, 0, 0
    local passes = { [true] = 0, [false] = 0 }
    for _ = 1, 1500 do
      local family = random(3) == 1 and ALL or FAMILIES[random(#FAMILIES)]
      local rows = fill(random(4) - 1, family)
      local invs = {}
      for k = 1, 6 do
        local inv, shown = random_property(family)
        local ok, v = pcall(sim.evaluate, inv, lua_state(world))
        local lua_holds = ok and v == nil
        local c_holds = w:holds("STORE", hex, "holds", "SELECT * FROM \"t\"", inv)
        if c_holds ~= lua_holds then
          error(string.format("%s on %s: the host says %s, check.lua %s", shown, rows,
            tostring(c_holds), ok and (v and v.message or "holds") or ("raised " .. tostring(v))))
        end
        invs[k] = inv
        cases = cases + 1
        if not ok then raised = raised + 1 elseif v then failed = failed + 1 else passed = passed + 1 end
      end
      -- the six in one pass over the rows, as the search decides a run's invariants
      local first = random(6)
      local together = w:holds("STORE", hex, "holds", "SELECT * FROM \"t\"", table.unpack(invs, first))
      local expected = true
      for k = first, 6 do
        local ok, v = pcall(sim.evaluate, invs[k], lua_state(world))
        expected = expected and ok and v == nil
      end
      if together ~= expected then
        error(string.format("properties %d to 6 on %s in one pass: the host says %s, check.lua %s", first, rows,
          tostring(together), tostring(expected)))
      end
      passes[together] = passes[together] + 1
    end
    -- every outcome is met often, or the comparison says little
    assert.are.equal(9000, cases)
    assert.is_true(passed > 300, "passed " .. passed)
    assert.is_true(failed > 300, "failed " .. failed)
    assert.is_true(raised > 50, "raised " .. raised)
    assert.is_true(passes[true] > 100 and passes[false] > 100, "passes " .. passes[true] .. "/" .. passes[false])
  end)

  it("says false for a table that is not there, and for a query that writes", function()
    local inv = sim.unique("u", sim.durableObjectTable("STORE", "holds", "missing"), "a")
    assert.is_false(w:holds("STORE", hex, "holds", "SELECT * FROM \"missing\"", inv))
    w:exec("STORE", hex, "holds", "DELETE FROM t")
    assert.is_true(w:holds("STORE", hex, "holds", "SELECT * FROM \"t\"", sim.unique("u", handle, "a")))
    assert.is_false(w:holds("STORE", hex, "holds", "DELETE FROM t RETURNING *", sim.unique("u", handle, "a")))
  end)

  it("leaves a property of another kind to check.lua", function()
    local custom = sim.invariant("i", function() return true end)
    assert.is_false(w:holds("STORE", hex, "holds", "SELECT * FROM \"t\"", custom))
  end)
end)
