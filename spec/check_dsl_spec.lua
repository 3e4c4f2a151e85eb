--- eutaxy.check: the scenario DSL, its validation errors (each pointing at
-- the line of the DSL call that caused it), the evaluation of invariants
-- against the state at the end of a run, and the example scenarios.
local sim = require "eutaxy.check"

local WORKER = { entry = "./worker.lua", config = "./wrangler.jsonc" }

-- The message of the error fn raises, after checking that it starts with
-- this spec's file and the line fn is written on (fn is a one-line function).
local function raised_here(fn)
  local ok, err = pcall(fn)
  assert.is_false(ok, "no error was raised")
  assert.are.equal("string", type(err))
  local line, rest = err:match("^[^:]*check_dsl_spec%.lua:(%d+): (.*)$")
  assert.is_truthy(line, "no file:line at the start of: " .. err)
  assert.are.equal(debug.getinfo(fn, "S").linedefined, tonumber(line), err)
  return rest
end

local GRANTS_LINE = debug.getinfo(1, "l").currentline + 1
local grants = sim.durableObjectTable("POOL", "pool", "grants")

-- The smallest valid scenario, with fields replaced, or removed with NONE.
local NONE = {}
local function scenario(fields)
  local t = {
    name = "leases", worker = WORKER,
    drive = sim.http({ { path = "/projects/p-1/lease", method = "POST" } }),
    invariants = { sim.unique("one-runner-per-request", grants, "token") },
  }
  for k, v in pairs(fields or {}) do
    if v == NONE then t[k] = nil else t[k] = v end
  end
  return t
end

describe("durableObjectTable", function()
  it("names a table of a named object, and where the handle was made", function()
    assert.are.equal("eutaxy.table", grants.kind)
    assert.are.equal("POOL", grants.binding)
    assert.are.equal("pool", grants.name)
    assert.are.equal("grants", grants.table)
    assert.are.equal(GRANTS_LINE, grants.line)
    assert.matches("check_dsl_spec%.lua$", grants.file)
  end)

  it("refuses a binding, name or table that is not a non-empty string", function()
    assert.are.equal("durableObjectTable: the binding (first argument) must be a non-empty string, got nil",
      raised_here(function() sim.durableObjectTable(nil, "pool", "grants") end))
    assert.are.equal('durableObjectTable: the object name (second argument) must be a non-empty string or an id, got ""',
      raised_here(function() sim.durableObjectTable("POOL", "", "grants") end))
    assert.are.equal("durableObjectTable: the table name (third argument) must be a non-empty string, got a table",
      raised_here(function() sim.durableObjectTable("POOL", "pool", {}) end))
  end)

  it("points at the line that called a helper which tail-called it", function()
    local function table_of(name) return sim.durableObjectTable("POOL", name, "grants") end
    assert.matches("durableObjectTable: the object name", raised_here(function() table_of(42) end))
  end)
end)

describe("durableObject", function()
  it("gives each named object its key-value storage, tables and rows", function()
    local line = debug.getinfo(1, "l").currentline + 1
    local setup = sim.durableObject("POOL", { pool = { limit = 3, owners = { "a", "b" } } }, {
      sql = { pool = { schema = "CREATE TABLE slots (id TEXT)", rows = { slots = { { id = "r-1" }, { id = "r-2" } } } } },
      alarmsPerObject = 6,
    })
    assert.are.equal("eutaxy.setup", setup.kind)
    assert.are.equal("POOL", setup.binding)
    assert.are.same({ pool = { limit = 3, owners = { "a", "b" } } }, setup.kv)
    assert.are.same({ pool = { schema = "CREATE TABLE slots (id TEXT)", rows = { slots = { { id = "r-1" }, { id = "r-2" } } } } },
      setup.sql)
    assert.are.equal(6, setup.alarmsPerObject)
    assert.are.equal(line, setup.line)
  end)

  it("defaults to no storage, no tables and ten alarms per object", function()
    local setup = sim.durableObject("POOL", {})
    assert.are.same({}, setup.kv)
    assert.are.same({}, setup.sql)
    assert.are.equal(10, setup.alarmsPerObject)
    assert.are.same({}, sim.durableObject("POOL").kv)
  end)

  it("gives a seeded table no rows when it lists none", function()
    local setup = sim.durableObject("POOL", {}, { sql = { pool = { schema = "CREATE TABLE t (x)" } } })
    assert.are.same({ pool = { schema = "CREATE TABLE t (x)", rows = {} } }, setup.sql)
  end)

  it("copies what it is given, so later changes to the tables do not leak in", function()
    local rows = { slots = { { id = "r-1" } } }
    local kv = { pool = { n = 1 } }
    local setup = sim.durableObject("POOL", kv, { sql = { pool = { schema = "x", rows = rows } } })
    rows.slots[1].id = "changed"
    kv.pool.n = 2
    assert.are.equal("r-1", setup.sql.pool.rows.slots[1].id)
    assert.are.equal(1, setup.kv.pool.n)
  end)

  it("refuses a binding that is not a non-empty string", function()
    assert.are.equal("durableObject: the binding (first argument) must be a non-empty string, got 1",
      raised_here(function() sim.durableObject(1, {}) end))
  end)

  it("refuses key-value storage not keyed by object name, or values that cannot be cloned", function()
    assert.are.equal('durableObject: the key-value storage (second argument) must be a table, got "pool"',
      raised_here(function() sim.durableObject("POOL", "pool") end))
    assert.are.equal("durableObject: the key-value storage must be keyed by object name, got a key 1",
      raised_here(function() sim.durableObject("POOL", { { a = 1 } }) end))
    assert.are.equal("durableObject: kv.pool must be a table, got 3",
      raised_here(function() sim.durableObject("POOL", { pool = 3 }) end))
    assert.are.equal("durableObject: kv.pool.hook cannot be cloned into an object: it is a function",
      raised_here(function() sim.durableObject("POOL", { pool = { hook = print } }) end))
    local loop = {}
    loop.self = loop
    assert.are.equal("durableObject: kv.pool.loop.self cannot be cloned into an object: it contains itself",
      raised_here(function() sim.durableObject("POOL", { pool = { loop = loop } }) end))
  end)

  it("refuses an unknown option, suggesting the one it is close to", function()
    assert.are.equal('durableObject: unknown option "alarmPerObject" (did you mean "alarmsPerObject"?)',
      raised_here(function() sim.durableObject("POOL", {}, { alarmPerObject = 2 }) end))
    assert.are.equal('durableObject: unknown option "tables" (options: sql, alarmsPerObject)',
      raised_here(function() sim.durableObject("POOL", {}, { tables = {} }) end))
  end)

  it("refuses an alarm cap that is not a non-negative integer", function()
    assert.are.equal("durableObject: opts.alarmsPerObject must be a non-negative integer, got -1",
      raised_here(function() sim.durableObject("POOL", {}, { alarmsPerObject = -1 }) end))
    assert.are.equal("durableObject: opts.alarmsPerObject must be a non-negative integer, got 1.5",
      raised_here(function() sim.durableObject("POOL", {}, { alarmsPerObject = 1.5 }) end))
  end)

  it("refuses SQL seeds without a schema, with unknown fields or with rows that are not rows", function()
    assert.are.equal("durableObject: opts.sql.pool.schema must be a non-empty string, got nil",
      raised_here(function() sim.durableObject("POOL", {}, { sql = { pool = { rows = {} } } }) end))
    assert.are.equal('durableObject: opts.sql.pool has an unknown field "row" (did you mean "rows"?)',
      raised_here(function() sim.durableObject("POOL", {}, { sql = { pool = { schema = "x", row = {} } } }) end))
    assert.are.equal("durableObject: opts.sql.pool.rows.slots must be an array (a list of rows), got a table",
      raised_here(function() sim.durableObject("POOL", {}, { sql = { pool = { schema = "x", rows = { slots = { id = "r-1" } } } } }) end))
    assert.are.equal("durableObject: opts.sql.pool.rows.slots[2].id must be a string, number or boolean, got a table",
      raised_here(function() sim.durableObject("POOL", {}, { sql = { pool = { schema = "x", rows = { slots = { {}, { id = {} } } } } } }) end))
    assert.are.equal('durableObject: opts.sql["my pool"].schema must be a non-empty string, got 5',
      raised_here(function() sim.durableObject("POOL", {}, { sql = { ["my pool"] = { schema = 5 } } }) end))
  end)
end)

describe("http", function()
  it("normalizes requests: GET by default, methods in upper case, no retries", function()
    local line = debug.getinfo(1, "l").currentline + 1
    local drive = sim.http({
      { path = "/a" },
      { path = "/b", method = "post", headers = { ["Content-Type"] = "application/json" }, body = "{}" },
    })
    assert.are.equal("http", drive.kind)
    assert.are.same({
      { path = "/a", method = "GET" },
      { path = "/b", method = "POST", headers = { ["Content-Type"] = "application/json" }, body = "{}" },
    }, drive.requests)
    assert.are.equal(0, drive.retries)
    assert.are.equal(line, drive.line)
  end)

  it("takes the client's retries from the options", function()
    assert.are.equal(2, sim.http({ { path = "/" } }, { retries = 2 }).retries)
  end)

  it("refuses requests that are not an array, or none", function()
    assert.are.equal("http: the requests (first argument) must be an array (a list of requests), got a table",
      raised_here(function() sim.http({ path = "/" }) end))
    assert.are.equal("http: the requests (first argument) must list at least one request",
      raised_here(function() sim.http({}) end))
  end)

  it("insists on a path that starts with a slash", function()
    assert.are.equal("http: requests[1].path is missing",
      raised_here(function() sim.http({ { method = "POST" } }) end))
    assert.are.equal('http: requests[2].path must be a string starting with "/", got "projects"',
      raised_here(function() sim.http({ { path = "/" }, { path = "projects" } }) end))
  end)

  it("refuses unknown fields, bad methods, headers and bodies", function()
    assert.are.equal('http: requests[1] has an unknown field "url" (fields: path, method, headers, body, at, websocket)',
      raised_here(function() sim.http({ { path = "/", url = "http://x/" } }) end))
    assert.are.equal('http: requests[1] has an unknown field "header" (did you mean "headers"?)',
      raised_here(function() sim.http({ { path = "/", header = {} } }) end))
    assert.are.equal('http: requests[1].method must be an HTTP method such as "POST", got "PO ST"',
      raised_here(function() sim.http({ { path = "/", method = "PO ST" } }) end))
    assert.are.equal('http: requests[1].headers["X-Count"] must be a string, got 3',
      raised_here(function() sim.http({ { path = "/", headers = { ["X-Count"] = 3 } } }) end))
    assert.are.equal("http: requests[1].body must be a string, got a table",
      raised_here(function() sim.http({ { path = "/", method = "POST", body = { a = 1 } } }) end))
    assert.are.equal("http: requests[1] has a body, which a GET request cannot have",
      raised_here(function() sim.http({ { path = "/", body = "x" } }) end))
    assert.are.equal('http: requests[1]: Headers:append: invalid header name "bad name"',
      raised_here(function() sim.http({ { path = "/", headers = { ["bad name"] = "v" } } }) end))
    assert.are.equal("http: requests[1]: Headers:append: the value of header x contains a line break or NUL",
      raised_here(function() sim.http({ { path = "/", headers = { x = "a\r\nb: c" } } }) end))
  end)

  it("refuses retries that are not a non-negative integer, and unknown options", function()
    assert.are.equal("http: opts.retries must be a non-negative integer, got -1",
      raised_here(function() sim.http({ { path = "/" } }, { retries = -1 }) end))
    assert.are.equal('http: unknown option "retry" (did you mean "retries"?)',
      raised_here(function() sim.http({ { path = "/" } }, { retry = 1 }) end))
  end)

  it("keeps a request's arrival time, and none when it arrives at the start", function()
    local drive = sim.http({ { path = "/a" }, { path = "/b", at = 250 }, { path = "/c", at = 0 } })
    assert.is_nil(drive.requests[1].at)
    assert.are.equal(250, drive.requests[2].at)
    assert.are.equal(0, drive.requests[3].at)
    assert.are.equal("integer", math.type(drive.requests[2].at))
  end)

  it("refuses an arrival time that is not a non-negative integer of ms", function()
    assert.are.equal('http: requests[2].at must be a non-negative integer (ms), got "5"',
      raised_here(function() sim.http({ { path = "/" }, { path = "/", at = "5" } }) end))
    assert.are.equal("http: requests[1].at must be a non-negative integer (ms), got -1",
      raised_here(function() sim.http({ { path = "/", at = -1 } }) end))
    assert.are.equal("http: requests[1].at must be a non-negative integer (ms), got 1.5",
      raised_here(function() sim.http({ { path = "/", at = 1.5 } }) end))
  end)
end)

describe("rpc", function()
  it("normalizes calls: no arguments by default, no retries", function()
    local drive = sim.rpc({
      { binding = "POOL", name = "pool", method = "acquire", args = { "p-1", "t-1" } },
      { binding = "POOL", name = "pool", method = "size" },
    })
    assert.are.equal("rpc", drive.kind)
    assert.are.same({
      { binding = "POOL", name = "pool", method = "acquire", args = { "p-1", "t-1" } },
      { binding = "POOL", name = "pool", method = "size", args = {} },
    }, drive.calls)
    assert.are.equal(0, drive.retries)
    assert.are.equal(1, sim.rpc({ { binding = "POOL", name = "pool", method = "size" } }, { retries = 1 }).retries)
  end)

  it("refuses calls with missing parts or unknown fields", function()
    assert.are.equal("rpc: calls[1].name must be a non-empty string, got nil",
      raised_here(function() sim.rpc({ { binding = "POOL", method = "size" } }) end))
    assert.are.equal('rpc: calls[1] has an unknown field "arguments" (fields: binding, name, method, args, at)',
      raised_here(function() sim.rpc({ { binding = "POOL", name = "p", method = "m", arguments = {} } }) end))
    assert.are.equal("rpc: the calls (first argument) must list at least one call",
      raised_here(function() sim.rpc({}) end))
  end)

  it("keeps a call's arrival time and refuses one that is not a non-negative integer", function()
    assert.are.equal(40, sim.rpc({ { binding = "POOL", name = "pool", method = "size", at = 40 } }).calls[1].at)
    assert.are.equal("rpc: calls[1].at must be a non-negative integer (ms), got true",
      raised_here(function() sim.rpc({ { binding = "POOL", name = "pool", method = "size", at = true } }) end))
  end)

  it("refuses methods that RPC cannot reach", function()
    assert.are.equal('rpc: calls[1].method "_grant" cannot be called over RPC',
      raised_here(function() sim.rpc({ { binding = "POOL", name = "pool", method = "_grant" } }) end))
    assert.are.equal('rpc: calls[1].method "alarm" cannot be called over RPC',
      raised_here(function() sim.rpc({ { binding = "POOL", name = "pool", method = "alarm" } }) end))
  end)

  it("refuses arguments that are not an array or cannot be cloned", function()
    assert.are.equal("rpc: calls[1].args must be an array (a list of arguments), got a table",
      raised_here(function() sim.rpc({ { binding = "P", name = "p", method = "m", args = { x = 1 } } }) end))
    assert.are.equal("rpc: calls[1].args[2].f cannot be cloned into an object: it is a function",
      raised_here(function() sim.rpc({ { binding = "P", name = "p", method = "m", args = { 1, { f = print } } } }) end))
  end)
end)

describe("unique", function()
  it("names the table and the column that must not repeat", function()
    local line = debug.getinfo(1, "l").currentline + 1
    local inv = sim.unique("one-runner-per-request", grants, "token")
    assert.are.equal("unique", inv.kind)
    assert.are.equal("one-runner-per-request", inv.name)
    assert.are.equal(grants, inv.table)
    assert.are.equal("token", inv.column)
    assert.are.equal(line, inv.line)
  end)

  it("refuses anything but a table handle as its second argument", function()
    assert.are.equal('unique: the second argument must be a table handle from durableObjectTable, got "grants"',
      raised_here(function() sim.unique("u", "grants", "token") end))
  end)

  it("refuses a name or column that is not a non-empty string", function()
    assert.are.equal('unique: the name (first argument) must be a non-empty string, got ""',
      raised_here(function() sim.unique("", grants, "token") end))
    assert.are.equal("unique: the column (third argument) must be a non-empty string, got nil",
      raised_here(function() sim.unique("u", grants) end))
  end)
end)

describe("everyRow", function()
  it("keeps each condition's column, operator and value", function()
    local inv = sim.everyRow("ended-and-paid", grants, {
      { column = "ended_at", op = "notNull" },
      { column = "amount", op = "gt", value = 0 },
    })
    assert.are.equal("everyRow", inv.kind)
    assert.are.same({ { column = "ended_at", op = "notNull" }, { column = "amount", op = "gt", value = 0 } },
      inv.conditions)
    assert.are.equal(grants, inv.table)
  end)

  it("refuses an unknown operator, listing the ones there are", function()
    assert.are.equal('everyRow: conditions[2].op must be one of notNull, isNull, eq, ne, lt, le, gt, ge, got "equals"',
      raised_here(function() sim.everyRow("e", grants, { { column = "a", op = "notNull" }, { column = "b", op = "equals", value = 1 } }) end))
  end)

  it("insists on a value to compare with, and on none for the null tests", function()
    assert.are.equal("everyRow: conditions[1].value must be a string or a number to compare with (gt), got nil",
      raised_here(function() sim.everyRow("e", grants, { { column = "amount", op = "gt" } }) end))
    assert.are.equal("everyRow: conditions[1].value must be a string or a number to compare with (eq), got true",
      raised_here(function() sim.everyRow("e", grants, { { column = "paid", op = "eq", value = true } }) end))
    assert.are.equal("everyRow: conditions[1].value is not used with isNull; leave it out",
      raised_here(function() sim.everyRow("e", grants, { { column = "ended_at", op = "isNull", value = 0 } }) end))
  end)

  it("refuses no conditions, unknown fields and a missing handle", function()
    assert.are.equal("everyRow: the conditions (third argument) must list at least one condition",
      raised_here(function() sim.everyRow("e", grants, {}) end))
    assert.are.equal('everyRow: conditions[1] has an unknown field "operator" (fields: column, op, value)',
      raised_here(function() sim.everyRow("e", grants, { { column = "a", operator = "notNull" } }) end))
    assert.are.equal("everyRow: the second argument must be a table handle from durableObjectTable, got nil",
      raised_here(function() sim.everyRow("e", nil, { { column = "a", op = "notNull" } }) end))
  end)
end)

describe("invariant", function()
  it("keeps the function to call on the state", function()
    local fn = function() return true end
    local inv = sim.invariant("custom", fn)
    assert.are.equal("custom", inv.kind)
    assert.are.equal("custom", inv.name)
    assert.are.equal(fn, inv.fn)
  end)

  it("refuses anything but a function", function()
    assert.are.equal("invariant: the second argument must be a function(state), got a table",
      raised_here(function() sim.invariant("custom", {}) end))
  end)
end)

describe("always and sometimes", function()
  it("keep the function to call on the state, and where they were written", function()
    local fn = function() return true end
    local line = debug.getinfo(1, "l").currentline + 1
    local always, probe = sim.always("one-holder", fn), sim.sometimes("reached", fn)
    assert.are.equal("always", always.kind)
    assert.are.equal("sometimes", probe.kind)
    assert.are.equal("one-holder", always.name)
    assert.are.equal(fn, probe.fn)
    assert.are.equal(line, always.line)
    assert.matches("check_dsl_spec%.lua$", probe.file)
  end)

  it("refuse a name that is not a string and anything but a function", function()
    assert.are.equal("always: the second argument must be a function(state), got a table",
      raised_here(function() sim.always("a", {}) end))
    assert.are.equal("sometimes: the second argument must be a function(state), got nil",
      raised_here(function() sim.sometimes("s") end))
    assert.are.equal("always: the name (first argument) must be a non-empty string, got 3",
      raised_here(function() sim.always(3, function() end) end))
    assert.are.equal("sometimes: the name (first argument) must be a non-empty string, got nil",
      raised_here(function() sim.sometimes(nil, function() end) end))
  end)

  it("go in the invariants list, even alone", function()
    local s = sim.defineScenario(scenario { invariants = { sim.sometimes("reached", function() return true end) } })
    assert.are.equal("sometimes", s.invariants[1].kind)
  end)

  it("share one namespace with the invariants", function()
    local line = debug.getinfo(1, "l").currentline + 2
    local err = select(2, pcall(sim.defineScenario, scenario { invariants = {
      sim.unique("u", grants, "token"), sim.always("u", function() return true end) } }))
    assert.matches(":" .. line .. ': defineScenario: two invariants are named "u"', err)
  end)
end)

describe("defineScenario", function()
  it("returns the scenario with its defaults filled in", function()
    local line = debug.getinfo(1, "l").currentline + 1
    local s = sim.defineScenario(scenario())
    assert.are.equal("eutaxy.scenario", s.kind)
    assert.are.equal("leases", s.name)
    assert.are.equal("leases", s.seed)
    assert.are.same(WORKER, s.worker)
    assert.are.same({}, s.setup)
    assert.are.equal("http", s.drive.kind)
    assert.are.equal(1, #s.invariants)
    assert.are.same({ maxFaultsPerRun = 1, maxRedeliveries = 2, maxConcurrentInvocations = 1, budgetMs = 10000,
                      maxEventsPerRun = 100000 }, s.bounds)
    assert.is_nil(s.faults)
    assert.are.equal(line, s.line)
  end)

  it("keeps the bounds it is given and fills the others", function()
    local s = sim.defineScenario(scenario { bounds = { maxFaultsPerRun = 0, budgetMs = 2000 } })
    assert.are.same({ maxFaultsPerRun = 0, maxRedeliveries = 2, maxConcurrentInvocations = 1, budgetMs = 2000,
                      maxEventsPerRun = 100000 }, s.bounds)
  end)

  it("takes a seed that is a string or an integer", function()
    assert.are.equal(7, sim.defineScenario(scenario { seed = 7 }).seed)
    assert.are.equal("integer", math.type(sim.defineScenario(scenario { seed = 7.0 }).seed))
    assert.are.equal("s-1", sim.defineScenario(scenario { seed = "s-1" }).seed)
    assert.are.equal("defineScenario: seed must be a string or an integer, got 1.5",
      raised_here(function() sim.defineScenario(scenario { seed = 1.5 }) end))
  end)

  it("keeps the setup entries and the fault kinds in order", function()
    local setup = { sim.durableObject("POOL", {}), sim.durableObject("AUDIT", {}) }
    local s = sim.defineScenario(scenario { setup = setup, faults = { "reset", "ambiguous" } })
    assert.are.same(setup, s.setup)
    assert.are.same({ "reset", "ambiguous" }, s.faults)
    assert.are.same({}, sim.defineScenario(scenario { faults = {} }).faults)
  end)

  it("says which required field is missing", function()
    assert.are.equal('defineScenario: field "drive" is missing',
      raised_here(function() sim.defineScenario(scenario { drive = NONE }) end))
    assert.are.equal('defineScenario: field "name" is missing',
      raised_here(function() sim.defineScenario(scenario { name = NONE }) end))
    assert.are.equal('defineScenario: field "worker" is missing',
      raised_here(function() sim.defineScenario(scenario { worker = NONE }) end))
    assert.are.equal('defineScenario: field "invariants" is missing',
      raised_here(function() sim.defineScenario(scenario { invariants = NONE }) end))
    assert.are.equal("defineScenario: worker.config is missing",
      raised_here(function() sim.defineScenario(scenario { worker = { entry = "./worker.lua" } }) end))
  end)

  it("refuses an unknown field, suggesting the one it is close to", function()
    assert.are.equal('defineScenario: unknown field "invariant" (did you mean "invariants"?)',
      raised_here(function() sim.defineScenario(scenario { invariant = {} }) end))
    assert.are.equal('defineScenario: unknown field "Bounds" (did you mean "bounds"?)',
      raised_here(function() sim.defineScenario(scenario { Bounds = {} }) end))
    assert.are.equal('defineScenario: unknown field "timeout" (fields: name, seed, worker, vars, setup, services, drive, invariants, bounds, faults, regressions)',
      raised_here(function() sim.defineScenario(scenario { timeout = 5 }) end))
    assert.are.equal('defineScenario: worker has an unknown field "main" (fields: entry, config)',
      raised_here(function() sim.defineScenario(scenario { worker = { entry = "a", config = "b", main = "c" } }) end))
  end)

  it("refuses an unknown bound, suggesting the one it is close to", function()
    assert.are.equal('defineScenario: unknown bound "maxFaults" (did you mean "maxFaultsPerRun"?)',
      raised_here(function() sim.defineScenario(scenario { bounds = { maxFaults = 1 } }) end))
    assert.are.equal('defineScenario: unknown bound "depth" (bounds: maxFaultsPerRun, maxRedeliveries, maxConcurrentInvocations, budgetMs, maxEventsPerRun, cronsPerRun)',
      raised_here(function() sim.defineScenario(scenario { bounds = { depth = 3 } }) end))
  end)

  it("refuses bounds that are not integers in range", function()
    assert.are.equal('defineScenario: bounds.maxFaultsPerRun must be a non-negative integer, got "one"',
      raised_here(function() sim.defineScenario(scenario { bounds = { maxFaultsPerRun = "one" } }) end))
    assert.are.equal("defineScenario: bounds.maxConcurrentInvocations must be a positive integer, got 0",
      raised_here(function() sim.defineScenario(scenario { bounds = { maxConcurrentInvocations = 0 } }) end))
    assert.are.equal("defineScenario: bounds.budgetMs must be a positive integer, got 0.5",
      raised_here(function() sim.defineScenario(scenario { bounds = { budgetMs = 0.5 } }) end))
    assert.are.equal("defineScenario: bounds must be a table, got 3",
      raised_here(function() sim.defineScenario(scenario { bounds = 3 }) end))
  end)

  it("refuses setup entries that do not come from durableObject", function()
    assert.are.equal("defineScenario: setup[1] must come from sim.durableObject, got a table",
      raised_here(function() sim.defineScenario(scenario { setup = { { binding = "POOL" } } }) end))
    assert.are.equal("defineScenario: setup must be a list of sim.durableObject(...) entries; wrap this one in { }",
      raised_here(function() sim.defineScenario(scenario { setup = sim.durableObject("POOL", {}) }) end))
  end)

  it("points at the second setup of one binding", function()
    local first = sim.durableObject("POOL", {})
    local second_line = debug.getinfo(1, "l").currentline + 1
    local second = sim.durableObject("POOL", {})
    local ok, err = pcall(sim.defineScenario, scenario { setup = { first, second } })
    assert.is_false(ok)
    assert.matches("check_dsl_spec%.lua:" .. second_line .. ": defineScenario: setup lists DO:POOL twice %(first at [^)]*check_dsl_spec%.lua:" .. (second_line - 2) .. "%)$", err)
  end)

  it("refuses a drive that does not come from http or rpc", function()
    assert.are.equal("defineScenario: drive must come from sim.http or sim.rpc, got a table",
      raised_here(function() sim.defineScenario(scenario { drive = { { path = "/" } } }) end))
  end)

  it("refuses invariants that are missing, empty or not made by the DSL", function()
    assert.are.equal("defineScenario: invariants must list at least one invariant",
      raised_here(function() sim.defineScenario(scenario { invariants = {} }) end))
    assert.are.equal("defineScenario: invariants[1] must come from sim.unique, sim.everyRow, sim.invariant, sim.always or sim.sometimes, got a function",
      raised_here(function() sim.defineScenario(scenario { invariants = { function() end } }) end))
    assert.are.equal("defineScenario: invariants must be a list of invariants; wrap this one in { }",
      raised_here(function() sim.defineScenario(scenario { invariants = sim.unique("u", grants, "token") }) end))
  end)

  it("points at the second of two invariants with one name", function()
    local first = sim.unique("once", grants, "token")
    local second = sim.everyRow("once", grants, { { column = "ended_at", op = "notNull" } })
    local ok, err = pcall(sim.defineScenario, scenario { invariants = { first, second } })
    assert.is_false(ok)
    assert.matches('check_dsl_spec%.lua:' .. second.line .. ': defineScenario: two invariants are named "once" %(the first is at [^)]*check_dsl_spec%.lua:' .. first.line .. '%)$', err)
  end)

  it("refuses unknown and repeated fault kinds", function()
    assert.are.equal('defineScenario: faults[2] is not a fault kind: "ambigous" (did you mean "ambiguous"?)',
      raised_here(function() sim.defineScenario(scenario { faults = { "reset", "ambigous" } }) end))
    assert.are.equal('defineScenario: faults[1] is not a fault kind: "timeout" (kinds: rpc-fail, ambiguous, caller-crash, alarm-fail, alarm-lost, reset, resend, delivery-fail, delivery-timeout, cron-fail, cron-lost, overloaded, fetch-timeout, hibernate, ws-drop, ws-close)',
      raised_here(function() sim.defineScenario(scenario { faults = { "timeout" } }) end))
    assert.are.equal('defineScenario: faults lists "reset" twice',
      raised_here(function() sim.defineScenario(scenario { faults = { "reset", "reset" } }) end))
    assert.are.equal("defineScenario: faults must be an array (a list of fault kinds), got \"reset\"",
      raised_here(function() sim.defineScenario(scenario { faults = "reset" }) end))
  end)

  it("refuses resend faults when the client never resends", function()
    assert.are.equal('defineScenario: faults lists "resend" but the drive has retries = 0, so the client never resends',
      raised_here(function() sim.defineScenario(scenario { faults = { "resend" } }) end))
    local s = sim.defineScenario(scenario { faults = { "resend" }, drive = sim.http({ { path = "/" } }, { retries = 1 }) })
    assert.are.same({ "resend" }, s.faults)
  end)

  it("refuses anything but a table", function()
    assert.are.equal('defineScenario: expects a table { name = ..., ... }, got "leases"',
      raised_here(function() sim.defineScenario("leases") end))
  end)

  describe("returned directly from a scenario file (a tail call)", function()
    local DIR = "spec/fixtures/scenarios/"

    it("finds the line of the call in the file", function()
      local s = dofile(DIR .. "tail.sim.lua")
      assert.are.equal("tail", s.name)
      assert.are.equal(6, s.line)
      assert.are.equal(DIR .. "tail.sim.lua", s.file)
    end)

    it("names the file and line of the call in an error", function()
      local ok, err = pcall(dofile, DIR .. "tail_bad.sim.lua")
      assert.is_false(ok)
      assert.are.equal(DIR .. "tail_bad.sim.lua:5: defineScenario: bounds.maxFaultsPerRun must be a non-negative integer, got -1", err)
    end)

    it("still says what is wrong when nothing in it tells where it is", function()
      local ok, err = pcall(dofile, DIR .. "tail_empty.sim.lua")
      assert.is_false(ok)
      assert.are.equal('defineScenario: field "worker" is missing', err)
    end)
  end)
end)

describe("fault kinds", function()
  it("lists every kind in a fixed order", function()
    assert.are.same({ "rpc-fail", "ambiguous", "caller-crash", "alarm-fail", "alarm-lost", "reset", "resend",
      "delivery-fail", "delivery-timeout", "cron-fail", "cron-lost", "overloaded", "fetch-timeout", "hibernate",
      "ws-drop", "ws-close" }, sim.FAULT_KINDS)
  end)

  it("describes each kind in one line", function()
    for _, kind in ipairs(sim.FAULT_KINDS) do
      local d = sim.describe_fault(kind)
      assert.are.equal("string", type(d))
      assert.is_nil(d:find("\n"), kind)
    end
    assert.matches("answer is lost", sim.describe_fault("ambiguous"))
    assert.matches("reset", sim.describe_fault("reset"))
  end)

  it("refuses an unknown kind, suggesting the one it is close to", function()
    assert.has_error(function() sim.describe_fault("alarm-los") end,
      'describe_fault: unknown fault kind "alarm-los" (did you mean "alarm-lost"?)')
  end)
end)

describe("format_value", function()
  it("writes values as Lua would", function()
    assert.are.equal('"abc"', sim.format_value("abc"))
    assert.are.equal('"say \\"hi\\"\\n\\\\"', sim.format_value('say "hi"\n\\'))
    assert.are.equal('"\\000\\027"', sim.format_value("\0\27"))
    assert.are.equal("42", sim.format_value(42))
    assert.are.equal("-3", sim.format_value(-3))
    assert.are.equal("1.5", sim.format_value(1.5))
    assert.are.equal("2.0", sim.format_value(2.0))
    assert.are.equal("0.1", sim.format_value(0.1))
    assert.are.equal("0.30000000000000004", sim.format_value(0.1 + 0.2))
    assert.are.equal("1e+300", sim.format_value(1e300))
    assert.are.equal("1/0", sim.format_value(math.huge))
    assert.are.equal("nil", sim.format_value(nil))
    assert.are.equal("true", sim.format_value(true))
  end)

  it("writes tables as constructors with their keys in order", function()
    assert.are.equal("{}", sim.format_value({}))
    assert.are.equal('{ 1, "two", a = 1, b = { c = true }, ["odd key"] = 2 }',
      sim.format_value({ 1, "two", b = { c = true }, a = 1, ["odd key"] = 2 }))
    local loop = {}
    loop.self = loop
    assert.are.equal("{ self = {...} }", sim.format_value(loop))
  end)
end)

-- A state as the CLI gives one: rows by table name, and the drive's answers.
local function state_of(tables, responses)
  return {
    responses = responses or {},
    rows = function(self, handle) return tables[handle.table].rows end,
    columns = function(self, handle) return tables[handle.table].columns end,
  }
end

local GRANT_COLUMNS = { "token", "project", "slot", "granted_at", "ended_at" }

local function grants_state(rows)
  return state_of { grants = { columns = GRANT_COLUMNS, rows = rows } }
end

describe("evaluate", function()
  describe("unique", function()
    local inv = sim.unique("one-runner-per-request", grants, "token")

    it("holds when no value repeats, NULLs aside", function()
      assert.is_nil(sim.evaluate(inv, grants_state {
        { token = "a", project = "p-1" }, { token = "b", project = "p-2" }, { project = "p-3" }, { project = "p-4" },
      }))
      assert.is_nil(sim.evaluate(inv, grants_state {}))
    end)

    it("reports the rows that share a value", function()
      local rows = {
        { token = "abc", project = "p-1", slot = "r-1" },
        { token = "xyz", project = "p-2", slot = "r-2" },
        { token = "abc", project = "p-1", slot = "r-3" },
      }
      local v = sim.evaluate(inv, grants_state(rows))
      assert.are.same({
        invariant = "one-runner-per-request",
        message = '2 rows of pool/grants in DO:POOL share token = "abc"',
        columns = GRANT_COLUMNS,
        rows = { rows[1], rows[3] },
      }, v)
    end)

    it("names the first repeated value in row order and counts the others", function()
      local rows = {
        { token = "b" }, { token = "a" }, { token = "c" }, { token = "a" }, { token = "b" }, { token = "c" }, { token = "a" },
      }
      local v = sim.evaluate(inv, grants_state(rows))
      assert.are.equal('2 rows of pool/grants in DO:POOL share token = "b" (and 2 more duplicated values)', v.message)
      assert.are.equal(7, #v.rows)
      v = sim.evaluate(inv, grants_state { { token = "a" }, { token = "b" }, { token = "a" }, { token = "b" }, { token = "a" } })
      assert.are.equal('3 rows of pool/grants in DO:POOL share token = "a" (and 1 more duplicated value)', v.message)
    end)

    it("writes numbers plain and treats 1 and 1.0 as one value", function()
      local by_slot = sim.unique("one-grant-per-slot", grants, "granted_at")
      local v = sim.evaluate(by_slot, grants_state { { granted_at = 1 }, { granted_at = 1.0 }, { granted_at = "1" } })
      assert.are.equal("2 rows of pool/grants in DO:POOL share granted_at = 1", v.message)
    end)

    it("raises when the table has no such column", function()
      local typo = sim.unique("typo", grants, "tokn")
      local ok, err = pcall(sim.evaluate, typo, grants_state {})
      assert.is_false(ok)
      assert.matches('^invariant "typo" %([^)]*check_dsl_spec%.lua:' .. typo.line ..
        '%): pool/grants in DO:POOL has no column "tokn" %(columns: token, project, slot, granted_at, ended_at%)$', err)
    end)
  end)

  describe("everyRow", function()
    local ends = sim.everyRow("every-lease-ends", grants, { { column = "ended_at", op = "notNull" } })

    it("holds when every row meets every condition", function()
      assert.is_nil(sim.evaluate(ends, grants_state { { token = "a", ended_at = 5 }, { token = "b", ended_at = 0 } }))
    end)

    it("reports the one row that fails", function()
      local rows = { { token = "a", ended_at = 5 }, { token = "b" } }
      assert.are.same({
        invariant = "every-lease-ends",
        message = "1 row of pool/grants in DO:POOL fails ended_at notNull",
        columns = GRANT_COLUMNS,
        rows = { rows[2] },
      }, sim.evaluate(ends, grants_state(rows)))
    end)

    it("counts the rows that fail a comparison", function()
      local positive = sim.everyRow("positive", grants, { { column = "granted_at", op = "gt", value = 0 } })
      local v = sim.evaluate(positive, grants_state { { granted_at = 0 }, { granted_at = 3 }, { granted_at = -1 }, {} })
      assert.are.equal("3 rows of pool/grants in DO:POOL fail granted_at gt 0", v.message)
      assert.are.same({ { granted_at = 0 }, { granted_at = -1 }, {} }, v.rows)
    end)

    it("compares as SQLite does: NULL fails, numbers come before text, text bytewise", function()
      local function fails(op, value, cell)
        local inv = sim.everyRow("c", grants, { { column = "slot", op = op, value = value } })
        return sim.evaluate(inv, grants_state { { slot = cell } }) ~= nil
      end
      assert.is_false(fails("eq", "r-1", "r-1"))
      assert.is_true(fails("eq", 1, "1"))
      assert.is_false(fails("ne", 1, "1"))
      assert.is_true(fails("ne", "r-1", nil))
      assert.is_false(fails("lt", "b", "a"))
      assert.is_false(fails("lt", "a", 5))
      assert.is_true(fails("gt", "a", 5))
      assert.is_false(fails("le", 2, 2.0))
      assert.is_false(fails("ge", "Z", "a"))
      assert.is_true(fails("lt", "Z", "a"))
      assert.is_false(fails("isNull", nil, nil))
      assert.is_true(fails("isNull", nil, 0))
    end)

    it("writes each failed condition and how many rows fail it", function()
      local inv = sim.everyRow("closed-and-paid", grants, {
        { column = "ended_at", op = "notNull" },
        { column = "slot", op = "ne", value = "r-0" },
      })
      local v = sim.evaluate(inv, grants_state { { slot = "r-0" }, { slot = "r-1" }, { slot = "r-2", ended_at = 1 } })
      assert.are.equal('2 rows of pool/grants in DO:POOL fail their conditions: ended_at notNull (2 rows), slot ne "r-0" (1 row)',
        v.message)
      v = sim.evaluate(inv, grants_state { { slot = "r-0" } })
      assert.are.equal('1 row of pool/grants in DO:POOL fails its conditions: ended_at notNull (1 row), slot ne "r-0" (1 row)',
        v.message)
    end)

    it("raises when the table has no such column", function()
      local typo = sim.everyRow("typo", grants, { { column = "ended", op = "notNull" } })
      local ok, err = pcall(sim.evaluate, typo, grants_state {})
      assert.is_false(ok)
      assert.matches('pool/grants in DO:POOL has no column "ended"', err)
    end)
  end)

  describe("a custom invariant", function()
    it("holds when its function returns true", function()
      assert.is_nil(sim.evaluate(sim.invariant("ok", function() return true end), grants_state {}))
    end)

    it("is violated when its function returns false, with its message", function()
      local inv = sim.invariant("few", function(state)
        local rows = state:rows(grants)
        return #rows <= 1, ("%d grants"):format(#rows)
      end)
      assert.are.same({ invariant = "few", message = "2 grants" }, sim.evaluate(inv, grants_state { {}, {} }))
    end)

    it("says what it returned when it gives no message", function()
      assert.are.equal("the invariant returned false",
        sim.evaluate(sim.invariant("no", function() return false end), grants_state {}).message)
      assert.are.equal("the invariant returned nil (no verdict)",
        sim.evaluate(sim.invariant("none", function() end), grants_state {}).message)
    end)

    it("reads the drive's answers", function()
      local inv = sim.invariant("all-answered", function(state)
        for _, r in ipairs(state.responses) do
          if r.status == nil then return false, r.event .. " lost its answer" end
        end
        return true
      end)
      local answered = state_of({}, { { event = "req-1", status = 200, body = "{}" }, { event = "req-2", status = 409 } })
      assert.is_nil(sim.evaluate(inv, answered))
      local lost = state_of({}, { { event = "req-1", status = 200, body = "{}" }, { event = "req-2" } })
      assert.are.equal("req-2 lost its answer", sim.evaluate(inv, lost).message)
    end)

    it("raises with its name and where it was defined when its function raises", function()
      local inv = sim.invariant("boom", function() error("no grants table") end)
      local ok, err = pcall(sim.evaluate, inv, grants_state {})
      assert.is_false(ok)
      assert.matches('^invariant "boom" %([^)]*check_dsl_spec%.lua:' .. inv.line ..
        '%) raised: [^:]*check_dsl_spec%.lua:%d+: no grants table$', err)
    end)

    it("gives the message of an error table its function raises", function()
      local inv = sim.invariant("table-error", function() error({ name = "Error", message = "no such table: grants" }) end)
      local ok, err = pcall(sim.evaluate, inv, grants_state {})
      assert.is_false(ok)
      assert.matches('^invariant "table%-error" %(.*%) raised: no such table: grants$', err)
    end)

    it("raises when its function returns something else than a verdict", function()
      local inv = sim.invariant("vague", function() return "maybe" end)
      local ok, err = pcall(sim.evaluate, inv, grants_state {})
      assert.is_false(ok)
      assert.matches('^invariant "vague" %(.*%) must return true, or false and a message; it returned "maybe"$', err)
    end)
  end)

  describe("always", function()
    it("holds and fails as a custom invariant does, its errors naming it an always", function()
      local one = sim.always("one-holder", function(state) return #state:rows(grants) <= 1, "two holders" end)
      assert.is_nil(sim.evaluate(one, grants_state { { token = "a" } }))
      assert.are.same({ invariant = "one-holder", message = "two holders" },
        sim.evaluate(one, grants_state { { token = "a" }, { token = "b" } }))
      local ok, err = pcall(sim.evaluate, sim.always("boom", function() error("no table", 0) end), grants_state {})
      assert.is_false(ok)
      assert.matches('^always "boom" %(.*check_dsl_spec%.lua:%d+%) raised: no table$', err)
    end)
  end)

  describe("reached", function()
    it("is true when the probe returns true, false on false or nil", function()
      assert.is_true(sim.reached(sim.sometimes("any", function(state) return #state:rows(grants) > 0 end),
        grants_state { { token = "a" } }))
      assert.is_false(sim.reached(sim.sometimes("none", function() return false end), grants_state {}))
      assert.is_false(sim.reached(sim.sometimes("nil", function() end), grants_state {}))
    end)

    it("raises when the probe raises or returns anything else", function()
      local ok, err = pcall(sim.reached, sim.sometimes("boom", function() error("typo", 0) end), grants_state {})
      assert.is_false(ok)
      assert.matches('^sometimes "boom" %(.*%) raised: typo$', err)
      ok, err = pcall(sim.reached, sim.sometimes("count", function() return 1 end), grants_state {})
      assert.is_false(ok)
      assert.matches('^sometimes "count" %(.*%) must return true or false; it returned 1$', err)
    end)

    it("refuses anything but a probe", function()
      assert.has_error(function() sim.reached(sim.always("a", function() end), grants_state {}) end,
        "reached: expects a probe from sim.sometimes, got a table")
    end)
  end)

  it("refuses anything but an invariant", function()
    assert.has_error(function() sim.evaluate({ kind = "other" }, grants_state {}) end,
      "evaluate: expects an invariant from sim.unique, sim.everyRow, sim.invariant or sim.always, got a table")
  end)
end)

-- The example scenarios, loaded as the CLI loads them: the scenario's folder
-- first on package.path.
local function load_scenario(dir, file)
  local saved = package.path
  package.path = dir .. "/?.lua;" .. package.path
  package.loaded.schema = nil
  sim.loading = dir .. "/" .. file
  local ok, s = pcall(dofile, dir .. "/" .. file)
  sim.loading = nil
  package.path = saved
  package.loaded.schema = nil
  assert(ok, s)
  return s
end

local function line_of(path, text)
  local n = 0
  for line in io.lines(path) do
    n = n + 1
    if line:find(text, 1, true) then return n end
  end
end

local EXAMPLES = {
  { dir = "scenarios/lease-pool", name = "leases", faults = nil },
  { dir = "scenarios/lost-update", name = "deposits", faults = {} },
  { dir = "scenarios/reset-memory", name = "orders", faults = { "reset" } },
  { dir = "scenarios/alarm-double", name = "billing", faults = { "alarm-lost" } },
}

describe("the example scenarios", function()
  for _, ex in ipairs(EXAMPLES) do
    it("load for " .. ex.dir .. ", the fixed one the same over worker_fixed.lua", function()
      local planted = load_scenario(ex.dir, ex.name .. ".sim.lua")
      local fixed = load_scenario(ex.dir, ex.name .. ".fixed.sim.lua")
      assert.are.equal(ex.name, planted.name)
      assert.are.equal(ex.name .. "-fixed", fixed.name)
      assert.are.same({ entry = "./worker.lua", config = "./wrangler.jsonc" }, planted.worker)
      assert.are.same({ entry = "./worker_fixed.lua", config = "./wrangler.jsonc" }, fixed.worker)
      assert.are.same(ex.faults, planted.faults)
      for _, s in ipairs({ planted, fixed }) do
        local path = ex.dir .. "/" .. (s == planted and ex.name .. ".sim.lua" or ex.name .. ".fixed.sim.lua")
        assert.are.equal(line_of(path, s == planted and "sim.defineScenario" or "sim.variant"), s.line)
        assert.is_truthy(io.open(ex.dir .. "/" .. s.worker.entry:sub(3))):close()
        assert.is_truthy(io.open(ex.dir .. "/" .. s.worker.config:sub(3))):close()
      end
      assert.are.same(planted.bounds, fixed.bounds)
      assert.are.same(planted.faults, fixed.faults)
      assert.are.same(planted.drive, (function()
        local d = {}
        for k, v in pairs(fixed.drive) do d[k] = v end
        d.file, d.line = planted.drive.file, planted.drive.line
        return d
      end)())
      local names = function(s)
        local out = {}
        for i, inv in ipairs(s.invariants) do out[i] = inv.kind .. ":" .. inv.name end
        return out
      end
      assert.are.same(names(planted), names(fixed))
    end)
  end

  it("port the lease pool's reference scenario", function()
    local s = load_scenario("scenarios/lease-pool", "leases.sim.lua")
    local pool = dofile("scenarios/lease-pool/schema.lua")
    assert.are.equal("leases", s.seed)
    assert.are.equal(1, #s.setup)
    assert.are.equal("POOL", s.setup[1].binding)
    assert.are.same({}, s.setup[1].kv)
    assert.are.same({ pool = pool }, s.setup[1].sql)
    assert.are.equal(6, s.setup[1].alarmsPerObject)
    assert.are.same({ { path = "/projects/p-1/lease", method = "POST" }, { path = "/projects/p-2/lease", method = "POST" } },
      s.drive.requests)
    assert.are.equal(0, s.drive.retries)
    assert.are.equal("unique", s.invariants[1].kind)
    assert.are.equal("one-runner-per-request", s.invariants[1].name)
    assert.are.equal("token", s.invariants[1].column)
    assert.are.same({ kind = "eutaxy.table", binding = "POOL", name = "pool", table = "grants" },
      { kind = s.invariants[1].table.kind, binding = s.invariants[1].table.binding,
        name = s.invariants[1].table.name, table = s.invariants[1].table.table })
    assert.are.equal("everyRow", s.invariants[2].kind)
    assert.are.equal("every-lease-ends", s.invariants[2].name)
    assert.are.same({ { column = "ended_at", op = "notNull" } }, s.invariants[2].conditions)
    assert.are.same({ maxFaultsPerRun = 1, maxRedeliveries = 2, maxConcurrentInvocations = 1, budgetMs = 2000,
                      maxEventsPerRun = 100000 }, s.bounds)
  end)

  it("check the deposits against the balance", function()
    local inv = load_scenario("scenarios/lost-update", "deposits.sim.lua").invariants[1]
    local function state(balance)
      return state_of {
        account = { columns = { "id", "balance" }, rows = { { id = 1, balance = balance } } },
        deposits = { columns = { "id", "amount", "made_at" }, rows = { { id = "d-1", amount = 50 }, { id = "d-2", amount = 70 } } },
      }
    end
    assert.is_nil(sim.evaluate(inv, state(120)))
    assert.are.equal("the balance is 70 but the deposits add up to 120", sim.evaluate(inv, state(70)).message)
  end)

  it("check that one key gets one answer", function()
    local invs = load_scenario("scenarios/reset-memory", "orders.sim.lua").invariants
    local answer = state_of({}, {
      { event = "req-1", status = 200, body = '{"id":"o-1"}' }, { event = "req-2", status = 200, body = '{"id":"o-1"}' },
    })
    assert.is_nil(sim.evaluate(invs[2], answer))
    local twice = state_of({}, {
      { event = "req-1", status = 200, body = '{"id":"o-1"}' }, { event = "req-2", status = 200, body = '{"id":"o-2"}' },
    })
    assert.are.equal('req-2 answered {"id":"o-2"}, another request with the same key {"id":"o-1"}',
      sim.evaluate(invs[2], twice).message)
    local orders = state_of { orders = { columns = { "id", "idem_key" }, rows = { { id = "o-1", idem_key = "k" }, { id = "o-2", idem_key = "k" } } } }
    assert.are.equal('2 rows of shop/orders in DO:ORDERS share idem_key = "k"', sim.evaluate(invs[1], orders).message)
  end)

  it("check the invoice against the usage", function()
    local inv = load_scenario("scenarios/alarm-double", "billing.sim.lua").invariants[1]
    local function state(total)
      return state_of {
        usage = { columns = { "period", "amount", "recorded_at" }, rows = { { period = 0, amount = 30 }, { period = 0, amount = 12 } } },
        invoice = { columns = { "id", "total" }, rows = { { id = 1, total = total } } },
      }
    end
    assert.is_nil(sim.evaluate(inv, state(42)))
    assert.are.equal("the invoice total is 84 but the usage adds up to 42", sim.evaluate(inv, state(84)).message)
  end)
end)

describe("sim.variant", function()
  local DIR = "scenarios/lease-pool/"
  local saved_path
  setup(function()
    saved_path = package.path
    package.path = DIR .. "?.lua;" .. package.path  -- as the checker does: the scenario's folder first
  end)
  teardown(function() package.path = saved_path end)

  it("is the other file's scenario with its name and worker replaced", function()
    local planted = dofile(DIR .. "leases.sim.lua")
    local fixed = sim.variant("../" .. DIR .. "leases.sim.lua", {
      name = "leases-fixed", worker = { entry = "./worker_fixed.lua", config = "./wrangler.jsonc" } })
    assert.are.equal("leases-fixed", fixed.name)
    assert.are.equal("leases-fixed", fixed.seed)
    assert.are.equal("./worker_fixed.lua", fixed.worker.entry)
    assert.are.same(planted.bounds, fixed.bounds)
    assert.are.equal(#planted.invariants, #fixed.invariants)
    assert.are.equal(planted.drive.requests[2].path, fixed.drive.requests[2].path)
  end)

  it("refuses to replace what makes the scenario what it is", function()
    local ok, err = pcall(sim.variant, "../" .. DIR .. "leases.sim.lua", { drive = {} })
    assert.is_false(ok)
    assert.matches('variant: field "drive" %(fields: name, seed, worker, vars, bounds, faults, regressions%) cannot be '
      .. "replaced", err)
  end)

  it("names a file that does not exist", function()
    local ok, err = pcall(sim.variant, "nowhere.sim.lua", { name = "x" })
    assert.is_false(ok)
    assert.matches("variant: cannot open .*nowhere%.sim%.lua", err)
  end)
end)
