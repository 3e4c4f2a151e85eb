--- User SQL cannot escape its object: the engines' tables, the host's
-- pragmas, the process's memory and time stay out of its reach (issue 12).
local testing = require "eutaxy.testing"

describe("an object's SQL", function()
  local world, box
  before_each(function()
    world = testing.world { main = "spec/fixtures/sql-sandbox/worker.lua", bindings = { BOX = "Box" } }
    box = world.env.BOX:getByName("b")
    box:schedule()
  end)
  after_each(function() world:close() end)

  local function refused(sql, pattern, ...)
    local how, what = box:try(sql, ...)
    assert.are.equal("refused", how, sql)
    assert.matches(pattern, what, 1, false)
  end

  local function allowed(sql, ...)
    local how, what = box:try(sql, ...)
    assert.are.equal("ok", how, tostring(what))
    return what
  end

  describe("and the engines' tables", function()
    it("cannot put a trigger on an engine table to borrow the engine's rights", function()
      refused([[CREATE TRIGGER steal AFTER INSERT ON eutaxy_agenda
                BEGIN INSERT INTO t(b) SELECT value FROM _eutaxy_kv; END]],
        "table eutaxy_agenda is reserved for eutaxy")
      -- a trigger's body is judged when it runs, whoever fires it
      allowed("CREATE TRIGGER steal AFTER INSERT ON t BEGIN DELETE FROM eutaxy_alarms; END")
      refused("INSERT INTO t VALUES (1, 'x')", "table eutaxy_alarms is reserved for eutaxy")
      assert.are.equal(1, #allowed("SELECT name FROM eutaxy_alarms"))
    end)

    it("cannot drop, recreate, write or index the fanout's and the agenda's tables", function()
      refused("DROP TABLE eutaxy_agenda", "table eutaxy_agenda is reserved for eutaxy")
      refused("DELETE FROM eutaxy_alarms", "table eutaxy_alarms is reserved for eutaxy")
      refused("UPDATE eutaxy_migrations SET version = 0", "table eutaxy_migrations is reserved")
      refused("INSERT INTO eutaxy_durable_ops(id) VALUES ('x')", "table eutaxy_durable_ops is reserved")
      refused("CREATE TABLE eutaxy_fanout_memos(x)", "table eutaxy_fanout_memos is reserved")
      refused("CREATE TEMP TABLE eutaxy_fanout_seq(x)", "table eutaxy_fanout_seq is reserved")
      refused("CREATE INDEX mine ON eutaxy_agenda(due)", "table eutaxy_agenda is reserved")
      refused("CREATE INDEX eutaxy_mine ON t(a)", "the name eutaxy_mine is reserved")
      refused("CREATE VIEW eutaxy_fanout_messages AS SELECT 1", "the name eutaxy_fanout_messages is reserved")
      refused("DROP INDEX eutaxy_agenda_by_due", "reserved for eutaxy")
    end)

    it("can still read the engines' tables, but not the store's own", function()
      assert.are.equal(1, #allowed("SELECT name FROM eutaxy_alarms"))
      refused("SELECT * FROM _eutaxy_kv", "table _eutaxy_kv is reserved for eutaxy")
    end)

    it("cannot rename a table into a reserved name, however it is spelled", function()
      refused("ALTER TABLE t RENAME TO _eutaxy_t", "the name _eutaxy_t is reserved for eutaxy")
      refused('ALTER /* a */ TABLE main."t" -- b\n RENAME TO "eutaxy_agenda2"', "the name eutaxy_agenda2 is reserved")
      refused("ALTER TABLE [t] RENAME TO `EUTAXY_x`", "the name EUTAXY_x is reserved")
      refused("ALTER TABLE t RENAME TO '_eutaxy_kv2'", "the name _eutaxy_kv2 is reserved")
      refused("ALTER TABLE eutaxy_alarms RENAME TO mine", "table eutaxy_alarms is reserved")
    end)

    it("can still rename its own tables and columns", function()
      allowed("ALTER TABLE t RENAME COLUMN b TO eutaxy_b")
      allowed('ALTER TABLE t RENAME TO "t2"')
      allowed("ALTER TABLE t2 RENAME TO t")
      assert.are.same({ { a = 1, eutaxy_b = "x" } }, allowed("INSERT INTO t VALUES (1, 'x') RETURNING *"))
    end)

    it("judges a kept renaming again by its text when the schema changed since it was compiled", function()
      allowed('ALTER TABLE t RENAME TO "t2"')
      allowed("ALTER TABLE t2 RENAME TO t")
      allowed('ALTER TABLE t RENAME TO "t2"')  -- the kept statement, compiled again as it runs
      assert.are.same({}, allowed("SELECT * FROM t2"))
    end)
  end)

  describe("and pragmas", function()
    it("refuses the ones that reach the process, the host's limits or the journal", function()
      refused("PRAGMA hard_heap_limit = 1000000", "PRAGMA hard_heap_limit is not allowed in sql:exec: it is a setting of the whole process")
      refused("PRAGMA soft_heap_limit = 1000000", "PRAGMA soft_heap_limit is not allowed")
      refused("PRAGMA temp_store_directory = '/tmp'", "PRAGMA temp_store_directory is not allowed")
      refused("PRAGMA cache_size = 1000000", "PRAGMA cache_size is not allowed in sql:exec: the host sets the object's memory and storage")
      refused("PRAGMA mmap_size = 1000000", "PRAGMA mmap_size is not allowed")
      refused("PRAGMA max_page_count = 1", "PRAGMA max_page_count is not allowed")
      refused("PRAGMA page_size = 65536", "PRAGMA page_size is not allowed")
      refused("PRAGMA journal_mode = OFF", "the host owns the journal and its syncing")
      refused("PRAGMA synchronous = OFF", "the host owns the journal and its syncing")
      refused("PRAGMA writable_schema = 1", "PRAGMA writable_schema is not allowed in sql:exec; an object may use table_info")
    end)

    it("holds the same list for table-valued pragma functions", function()
      refused("SELECT * FROM pragma_cache_size", "PRAGMA cache_size is not allowed")
      refused("SELECT * FROM pragma_hard_heap_limit", "PRAGMA hard_heap_limit is not allowed")
      assert.are.equal(2, #allowed("SELECT name FROM pragma_table_info('t')"))
    end)

    it("allows the ones that read or set the object's own SQL", function()
      assert.are.equal(2, #allowed("PRAGMA table_info(t)"))
      allowed("PRAGMA index_list(t)")
      allowed("PRAGMA foreign_key_check")
      allowed("PRAGMA defer_foreign_keys = ON")
      allowed("PRAGMA recursive_triggers = ON")
      allowed("PRAGMA user_version = 7")
      assert.are.same({ { ok = "ok" } }, allowed("SELECT quick_check AS ok FROM pragma_quick_check"))
      assert.is_true(allowed("PRAGMA page_size")[1].page_size > 0)
      allowed("PRAGMA page_count")
      allowed("PRAGMA optimize")
    end)
  end)

  describe("and the machine's resources", function()
    it("cannot build a value past 2,000,000 bytes", function()
      refused([[WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n LIMIT 3000)
                SELECT length(group_concat(hex(zeroblob(500)))) FROM n]], "string or blob too big")
      refused("SELECT hex(zeroblob(1000000))", "string or blob too big")
    end)

    it("stops a statement whose work is inside its functions, at the CPU limit", function()
      local how, what, ms = box:timed([[
        WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n LIMIT 20000)
        SELECT count(hex(zeroblob(900000 + 0 * i))) AS c FROM n]])
      assert.are.equal("refused", how)
      assert.matches("the statement ran past the CPU limit %(more than 200,000,000 SQLite steps%), "
        .. "counting a step for each 4 bytes it allocates", what)
      assert.is_true(ms < 10000, ms)
    end)

    it("stops the same statement at the same point every time", function()
      local sql = [[WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n LIMIT 20000)
                    INSERT INTO t(a) SELECT length(hex(zeroblob(900000 + 0 * i))) FROM n]]
      local _, first = box:try(sql)
      local _, again = box:try(sql)
      assert.matches("CPU limit", first)
      assert.are.equal(first, again)
      assert.are.same({ { n = 0 } }, allowed("SELECT count(*) AS n FROM t"))
    end)
  end)
end)

describe("object names", function()
  local world
  before_each(function()
    world = testing.world { main = "spec/fixtures/sql-sandbox/worker.lua", bindings = { BOX = "Box" } }
  end)
  after_each(function() world:close() end)

  it("are bytes: a NUL inside one does not end it", function()
    local ns = world.env.BOX
    local a, b, c = ns:idFromName("a"), ns:idFromName("a\0b"), ns:idFromName("a\0c")
    assert.are_not.equal(tostring(a), tostring(b))
    assert.are_not.equal(tostring(b), tostring(c))
    assert.are.equal(1, ns:getByName("a\0b"):hit())
    assert.are.equal(1, ns:getByName("a\0c"):hit())
    assert.are.equal(1, ns:getByName("a"):hit())
    assert.are.equal(2, ns:getByName("a\0b"):hit())
  end)
end)
