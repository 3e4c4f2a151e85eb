-- storage:deleteAll(), storage:sync() and storage.sql.databaseSize as
-- Cloudflare's SQLite-backed objects have them, in a world, under check
-- (whose rewound runs must not keep what a deleteAll dropped) and under
-- serve.
local testing = require "eutaxy.testing"
local process = dofile("spec/helpers/process.lua")

local FIXTURE = "spec/fixtures/storage-calls"
local CONFIG = FIXTURE .. "/wrangler.jsonc"

-- What fill leaves, besides the engines' tables (eutaxy_*), which the
-- named alarms made.
local FILLED = { "child", "items", "items_by_body", "items_count", "long_items", "notes", "parent", "scratch",
                 "search", "search_config", "search_content", "search_data", "search_docsize", "search_idx",
                 "sqlite_sequence" }

local function user_names(schema)
  local out = {}
  for _, name in ipairs(schema) do
    if not name:find("eutaxy_", 1, true) then out[#out + 1] = name end
  end
  return out
end

describe("storage:deleteAll()", function()
  local world, box
  before_each(function()
    world = testing.world { config = CONFIG }
    box = world.env.BOX:getByName("box")
  end)
  after_each(function() world:close() end)

  it("drops every table, view, virtual table and temp table, the pairs and the alarm", function()
    local filled = box:fill()
    assert.are.same(FILLED, user_names(filled.schema))
    assert.is_true(#filled.schema > #FILLED, "the named alarms made their tables")
    assert.are.equal(2, filled.pairs)
    assert.is_number(filled.alarm)
    local wiped = box:wipe()
    -- SQLite's own sqlite_sequence stays, emptied with the tables it counted
    assert.are.same({ schema = { "sqlite_sequence" }, pairs = 0, size = wiped.size }, wiped)
    assert.are.same({}, world:rows("BOX", "box", "SELECT * FROM sqlite_sequence"))
  end)

  it("deletes the alarm, so nothing fires", function()
    box:fill()
    box:wipe()
    world:advance(60000)
    assert.is_nil(box:describe().rang)
    assert.matches("alarm deleted", world:trace(), 1, true)
  end)

  it("leaves an object that builds its tables and alarms again", function()
    box:fill()
    box:wipe()
    assert.are.same(FILLED, user_names(box:fill().schema))
    world:advance(60000)
    assert.are.equal(1, box:describe().rang)
  end)

  it("is undone with the turn that raises after it", function()
    local before = box:fill()
    local ok, err = pcall(box.wipeThenFail, box)
    assert.is_false(ok)
    assert.matches("changed my mind", err.message)
    assert.are.same(before, box:describe())
  end)

  it("is undone with the transactionSync that raises after it", function()
    local before = box:fill()
    local ok, after = box:wipeInTransaction()
    assert.is_false(ok)
    assert.are.same(before, after)
  end)

  it("settles a deferred reference its turn broke before it, so the turn commits", function()
    box:fill()
    assert.are.same({ "sqlite_sequence" }, box:breakThenWipe().schema)
    assert.are.same({ "sqlite_sequence" }, box:describe().schema)
  end)

  it("drops tables that restrict each other both ways", function()
    box:fill()
    assert.are.same({ { n = 1 } }, world:rows("BOX", "box", "SELECT count(*) AS n FROM child WHERE parent_id = 1"))
    box:wipe()
    assert.are.same({}, world:rows("BOX", "box",
      "SELECT name FROM sqlite_schema WHERE name IN ('parent', 'child')"))
  end)
end)

describe("sql:exec's errors", function()
  it("name the line that called sql:exec", function()
    local world = testing.world { config = CONFIG }
    local lines = {}
    local n = 0
    for line in io.lines(FIXTURE .. "/worker.lua") do
      n = n + 1
      if line:find("-- at: ", 1, true) then lines[#lines + 1] = n end
    end
    local errors = world.env.BOX:getByName("box"):badQueries()
    world:close()
    assert.are.equal(6, #lines)
    assert.are.equal(#lines, #errors)
    local expected = {
      "sql:exec: the query must be a string, got number",
      "sql:exec: cannot bind a table (parameter 1)",
      "sql:exec: the statement takes 1 binding, got 0",
      "sql:exec: the query holds no SQL statement",
      "near \"SELEKT\": syntax error",
      "integer overflow",
    }
    for i, err in ipairs(errors) do
      local at = "worker.lua:" .. lines[i] .. ": "
      assert.is_truthy(err:find(at, 1, true), ("error %d, %q, does not name line %d"):format(i, err, lines[i]))
      assert.is_truthy(err:find(expected[i], 1, true), ("error %d, %q, is not %q"):format(i, err, expected[i]))
    end
  end)
end)

describe("storage.sql.databaseSize", function()
  local world
  before_each(function() world = testing.world { config = CONFIG } end)
  after_each(function() world:close() end)

  it("is page_count * page_size, read afresh, the turn's writes included", function()
    local before, after, pages = world.env.BOX:getByName("box"):grow(200000)
    assert.are.equal("integer", math.type(before))
    assert.are.equal(pages, after)
    assert.is_true(after - before > 150000, before .. " then " .. after)  -- free pages are reused
  end)

  it("is the same in every world built the same way", function()
    local sizes = {}
    for i = 1, 2 do
      local w = testing.world { config = CONFIG, seed = i }
      sizes[i] = w.env.BOX:getByName("box"):fill().size
      w:close()
    end
    assert.are.equal(sizes[1], sizes[2])
  end)
end)

describe("storage:sync()", function()
  it("returns nothing at once, without yielding, even inside transactionSync", function()
    local world = testing.world { config = CONFIG }
    local n, before = world.env.BOX:getByName("box"):syncs()
    assert.are.same({ 0, 1 }, { n, before })
    assert.is_nil(world:trace():find("sleeps", 1, true))
    world:close()
  end)
end)

describe("deleteAll under eutaxy check", function()
  -- a budget no run reaches, valgrind's included: the verdict is BOUNDED or a failure
  local scenario = FIXTURE .. "/wipe.sim.lua --budget-ms 600000"

  it("explores the wipe in every order, each rewound run the same as one built afresh", function()
    local restored = process.start_check(scenario .. " --check-determinism --end-states --quiet")
    local built = process.start_check(scenario .. " --no-restore --end-states --quiet")
    local r, b = restored(), built()
    assert.are.equal(0, r.code, r.out .. r.err)
    assert.are.equal("BOUNDED", r.doc.verdict)
    assert.is_true(r.doc.counts.runsRewound > 0, "no run was rewound")
    assert.are.equal(0, b.code, b.out .. b.err)
    assert.are.equal(r.doc.counts.schedules, b.doc.counts.schedules)
    assert.are.same(r.doc.endStates, b.doc.endStates)
    assert.is_true(r.doc.endStateCount > 2, "too few end states to tell the orders apart")
  end)
end)

describe("deleteAll, sync and databaseSize under eutaxy serve", function()
  local h = dofile("spec/fixtures/serve/harness.lua")
  local json = require "eutaxy.json"
  local state

  before_each(function()
    state = h.begin()
    if not state then pending("curl is not installed (the .ci/packages list has it)") end
  end)

  after_each(function() h.finish(state) end)

  local function call(server, method, path)
    local status, body = h.request(server, method, path)
    assert.are.equal(200, status, body)
    return json.decode(body).result
  end

  it("keeps what deleteAll dropped dropped across a restart, with no alarm left", function()
    local server = h.start(state, nil, CONFIG)
    local filled = call(server, "POST", "/fill")
    assert.are.same(FILLED, user_names(filled.schema))
    assert.is_true(filled.size > 0)
    assert.are.equal(0, call(server, "POST", "/syncs"))
    local wiped = call(server, "POST", "/wipe")
    assert.are.same({ "sqlite_sequence" }, wiped.schema)
    assert.are.equal(0, h.stop(server))
    server = h.start(state, nil, CONFIG)
    -- the object's init makes the named alarms' tables again, but nothing is in them
    local after = call(server, "GET", "/describe")
    assert.are.same({ "sqlite_sequence" }, user_names(after.schema))
    assert.are.same({ pairs = 0, alarm = nil }, { pairs = after.pairs, alarm = after.alarm })
    assert.are.equal(0, h.stop(server))
  end)
end)
