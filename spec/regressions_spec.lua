--- A VIOLATED schedule kept as a regression: `eutaxy check --save-regression`
-- writes it into the scenario file's regressions list, and every later
-- check replays the list before it explores.
local process = dofile("spec/helpers/process.lua")
local cjson = require "cjson"
local regression = require "eutaxy.regression"
local sim = require "eutaxy.check"

local FIX = "spec/fixtures/world-helpers/"
local FILES = { "worker.lua", "wrangler.jsonc", "pay.sim.lua", "pay.fixed.sim.lua" }
local BIN = process.bin:sub(1, 1) == "/" and process.bin or os.getenv("PWD") .. "/" .. process.bin

local read, write = process.read, process.write

-- A folder with a copy of the pay project.
local function project()
  local dir = process.sh("mktemp -d"):gsub("\n$", "")
  for _, name in ipairs(FILES) do write(dir .. "/" .. name, read(FIX .. name)) end
  return dir
end

-- `eutaxy check ARGS` in dir: stdout, stderr, exit code.
local function check(dir, args)
  return process.run("cd " .. process.quote(dir) .. " && " .. BIN .. " check " .. args)
end

describe("eutaxy check --save-regression", function()
  local dir
  before_each(function() dir = project() end)
  after_each(function() os.execute("rm -rf " .. process.quote(dir)) end)

  it("writes the violation's schedule and invariant into the scenario's table, in its layout", function()
    local before = read(dir .. "/pay.sim.lua")
    local out, err, code = check(dir, "pay.sim.lua --save-regression --quiet")
    assert.are.equal(1, code, out .. err)
    assert.are.equal("VIOLATED  pay\n", out)
    assert.are.equal("eutaxy check: saved 1:1:01 (the counter notes what the ledger holds) in pay.sim.lua's "
      .. "regressions: every check replays it first\n", err)
    local expected = before:gsub('  faults = { "ambiguous" },\n}', '  faults = { "ambiguous" },\n  regressions = {\n'
      .. '    { schedule = "1:1:01", invariant = "the counter notes what the ledger holds" },\n  },\n}')
    assert.are.equal(expected, read(dir .. "/pay.sim.lua"))
  end)

  it("replays a saved regression before exploring: VIOLATED at once, naming it", function()
    check(dir, "pay.sim.lua --save-regression --quiet")
    local out, err, code = check(dir, "pay.sim.lua")
    assert.are.equal(1, code, out .. err)
    assert.are.equal("", err)
    assert.matches("\n  a regression of the scenario violates again: 1:1:01 %(pay%.sim%.lua:24, saved for the counter "
      .. "notes what the ledger holds%)\n", out)
    assert.matches("\nFound by replaying it before any exploration%.\n", out)
    local doc = cjson.decode((check(dir, "pay.sim.lua --json")))
    assert.are.equal("VIOLATED", doc.verdict)
    assert.are.equal("1:1:01", doc.schedule)
    assert.are.same({ index = 1, schedule = "1:1:01", invariant = "the counter notes what the ledger holds",
                      line = 24, outcome = "violated" }, doc.regression)
  end)

  it("does not write a schedule twice", function()
    check(dir, "pay.sim.lua --save-regression --quiet")
    local saved = read(dir .. "/pay.sim.lua")
    local _, err, code = check(dir, "pay.sim.lua --save-regression --quiet")
    assert.are.equal(1, code)
    assert.matches("is a regression of the scenario already", err)
    assert.are.equal(saved, read(dir .. "/pay.sim.lua"))
  end)

  it("reports a regression that holds now, and explores as before", function()
    write(dir .. "/pay.fixed.sim.lua", 'local sim = require "eutaxy.check"\n\n'
      .. 'return sim.variant("pay.sim.lua", {\n  name = "pay-fixed",\n  vars = { RECONCILE = "yes" },\n'
      .. '  regressions = { "1:1:01" },\n})\n')
    local out, err, code = check(dir, "pay.fixed.sim.lua")
    assert.are.equal(0, code, out .. err)
    assert.are.equal("", err)
    assert.matches("\nRegressions replayed first: 1%.\n  1:1:01 %(pay%.fixed%.sim%.lua:6%): holds\n", out)
    assert.matches("^BOUNDED  pay%-fixed", out)
  end)

  it("says a regression no longer fits when its decisions do not match the scenario's, on stdout and stderr", function()
    local text = read(dir .. "/pay.sim.lua"):gsub('\n}%s*$', '\n  regressions = { { schedule = "1:1:09" } },\n}\n')
    write(dir .. "/pay.sim.lua", text)
    local out, err, code = check(dir, "pay.sim.lua --json")
    assert.are.equal(1, code, out .. err)  -- the exploration still finds the violation
    assert.are.equal('eutaxy check: regression 1:1:09 (pay.sim.lua:23) no longer fits the scenario: schedule '
      .. '"1:1:09" does not fit this scenario: it was recorded against other code or bounds\n', err)
    assert.are.same({ { index = 1, schedule = "1:1:09", line = 23, outcome = "stale", why = 'schedule "1:1:09" does '
      .. "not fit this scenario: it was recorded against other code or bounds" } }, cjson.decode(out).regressions)
  end)

  it("says there is nothing to save when nothing is violated", function()
    local out, err, code = check(dir, "pay.fixed.sim.lua --save-regression --quiet")
    assert.are.equal(0, code, out .. err)
    assert.are.equal("eutaxy check: --save-regression: nothing to save: the result is BOUNDED\n", err)
    assert.are.equal(read(FIX .. "pay.fixed.sim.lua"), read(dir .. "/pay.fixed.sim.lua"))
  end)

  it("writes into sim.variant's table", function()
    write(dir .. "/pay.twin.sim.lua", 'local sim = require "eutaxy.check"\n\n'
      .. 'return sim.variant("pay.sim.lua", { name = "pay-twin" })\n')
    local _, err, code = check(dir, "pay.twin.sim.lua --save-regression --quiet")
    assert.are.equal(1, code, err)
    assert.are.equal('local sim = require "eutaxy.check"\n\nreturn sim.variant("pay.sim.lua", { name = "pay-twin", '
      .. 'regressions = { { schedule = "1:1:01", invariant = "the counter notes what the ledger holds" } } })\n',
      read(dir .. "/pay.twin.sim.lua"))
    local out = check(dir, "pay.twin.sim.lua")
    assert.matches("a regression of the scenario violates again", out)
  end)

  it("refuses, and leaves the file alone, when the scenario's table is not written in the file", function()
    local text = read(dir .. "/pay.sim.lua"):gsub("return sim%.defineScenario {", "local t = {")
      :gsub("\n}%s*$", "\n}\nreturn sim.defineScenario(t)\n")
    write(dir .. "/pay.sim.lua", text)
    local out, err, code = check(dir, "pay.sim.lua --save-regression --quiet")
    assert.are.equal(2, code, out .. err)
    assert.are.equal("VIOLATED  pay\n", out)
    assert.matches("^eutaxy check: %-%-save%-regression: cannot write the schedule into the scenario: pay%.sim%.lua: the "
      .. "argument of sim%.defineScenario on line %d+ is not a table written in the file\n$", err)
    assert.are.equal(text, read(dir .. "/pay.sim.lua"))
  end)

  it("is refused with --merge", function()
    local _, err, code = check(dir, "--merge a.json --save-regression")
    assert.are.equal(2, code)
    assert.matches("%-%-merge adds up shards' reports: it explores nothing, so it takes no %-%-save%-regression", err)
  end)
end)

describe("a scenario's regressions field", function()
  local dir
  before_each(function() dir = project() end)
  after_each(function() os.execute("rm -rf " .. process.quote(dir)) end)

  -- What loading pay.sim.lua with regressions = <field> raises.
  local function refused(field)
    local path = dir .. "/pay.sim.lua"
    write(path, read(FIX .. "pay.sim.lua"):gsub('\n}%s*$', "\n  regressions = " .. field .. ",\n}\n"))
    local ok, e = pcall(dofile, path)
    assert.is_false(ok, "it was accepted")
    return (tostring(e):gsub("^" .. dir:gsub("%p", "%%%0") .. "/", ""))
  end

  it("takes entries and schedule strings, and keeps the line of each", function()
    local path = dir .. "/pay.sim.lua"
    write(path, read(FIX .. "pay.sim.lua"):gsub('\n}%s*$', '\n  regressions = {\n    "0:1:",\n'
      .. '    { schedule = "1:1:01", invariant = "the counter notes what the ledger holds" },\n  },\n}\n'))
    local scenario = dofile(path)
    assert.are.same({ { schedule = "0:1:", line = 24 },
                      { schedule = "1:1:01", invariant = "the counter notes what the ledger holds", line = 25 } },
      scenario.regressions)
  end)

  it("names the file, the line and the entry that is wrong", function()
    assert.are.equal('pay.sim.lua:23: defineScenario: regressions[1].schedule must be a replay string such as '
      .. '"1:1:0002" (faults:events:decisions), got "1-1-01"', refused('{ { schedule = "1-1-01" } }'))
    assert.are.equal('pay.sim.lua:23: defineScenario: regressions[1].schedule must be a replay string such as '
      .. '"1:1:0002" (faults:events:decisions), got "1:1..2:0"', refused('{ "1:1..2:0" }'))
    assert.are.equal('pay.sim.lua:9: defineScenario: regressions[1] has an unknown field "shedule" (did you mean '
      .. '"schedule"?)', refused('{ { shedule = "1:1:01" } }'))
    assert.are.equal('pay.sim.lua:23: defineScenario: regressions[1].invariant: the scenario has no invariant '
      .. '"every-lease-ends" (invariants: the counter notes what the ledger holds, no-uncaught-errors, run-settles)',
      refused('{ { schedule = "1:1:01", invariant = "every-lease-ends" } }'))
    assert.are.equal('pay.sim.lua:23: defineScenario: regressions[1].invariant: the scenario has no invariant '
      .. '"the counter" (did you mean "the counter notes what the ledger holds"?)',
      refused('{ { schedule = "1:1:01", invariant = "the counter" } }'))
    assert.are.equal('pay.sim.lua:23: defineScenario: regressions[2]: the schedule "1:1:01" is listed twice',
      refused('{ "1:1:01", "1:1:01" }'))
    assert.are.equal("pay.sim.lua:9: defineScenario: regressions[1] must be { schedule = \"1:1:0002\", invariant = "
      .. "\"...\" } or a schedule string, got 7", refused("{ 7 }"))
    assert.are.equal('pay.sim.lua:9: defineScenario: regressions must be an array (a list of { schedule = "...", '
      .. 'invariant = "..." } entries), got "1:1:01"', refused('"1:1:01"'))
  end)
end)

describe("regression.save", function()
  local path
  before_each(function() path = os.tmpname() end)
  after_each(function() os.remove(path) end)

  local ENTRY = { schedule = "1:1.2:0a", invariant = 'a "quoted" one' }

  local function saved(text, line)
    write(path, text)
    local done, why = regression.save(path, line, ENTRY)
    assert.are.equal("added", done, why)
    return read(path)
  end

  it("appends to a list laid out on lines, adding the comma the last entry lacks", function()
    assert.are.equal('return sim.defineScenario {\n  name = "x",\n  regressions = {\n    "0:1:",  -- the first\n'
      .. '    { schedule = "0:1:1" }, -- the second\n    { schedule = "1:1.2:0a", invariant = "a \\"quoted\\" one" },\n'
      .. '  },\n}\n',
      saved('return sim.defineScenario {\n  name = "x",\n  regressions = {\n    "0:1:",  -- the first\n'
        .. '    { schedule = "0:1:1" } -- the second\n  },\n}\n', 1))
  end)

  it("appends to a list on one line, and to an empty one", function()
    assert.are.equal('return sim.defineScenario { name = "x", regressions = { "0:1:", '
      .. '{ schedule = "1:1.2:0a", invariant = "a \\"quoted\\" one" } } }\n',
      saved('return sim.defineScenario { name = "x", regressions = { "0:1:" } }\n', 1))
    assert.are.equal('return sim.defineScenario { name = "x", regressions = { '
      .. '{ schedule = "1:1.2:0a", invariant = "a \\"quoted\\" one" } } }\n',
      saved('return sim.defineScenario { name = "x", regressions = {} }\n', 1))
  end)

  it("adds the field after the last one, indented as the others, with tabs too", function()
    assert.are.equal('return sim.defineScenario({\n\tname = "x", -- "}"\n\tbounds = { a = 1 },\n\tregressions = {\n'
      .. '\t\t{ schedule = "1:1.2:0a", invariant = "a \\"quoted\\" one" },\n\t},\n})\n',
      saved('return sim.defineScenario({\n\tname = "x", -- "}"\n\tbounds = { a = 1 }\n})\n', 1))
  end)

  it("finds the call on the scenario's line among several, past braces in strings and comments", function()
    local text = '--[[ sim.defineScenario { ]]\nlocal a = sim.defineScenario { name = "a{" }\n'
      .. 'return sim.defineScenario { name = [==[b}]==] }\n'
    assert.are.equal('--[[ sim.defineScenario { ]]\nlocal a = sim.defineScenario { name = "a{" }\n'
      .. 'return sim.defineScenario { name = [==[b}]==], regressions = { '
      .. '{ schedule = "1:1.2:0a", invariant = "a \\"quoted\\" one" } } }\n', saved(text, 3))
  end)

  it("says present for a schedule the list has", function()
    write(path, 'return sim.defineScenario { regressions = { { schedule = "1:1.2:0a" } } }\n')
    assert.are.equal("present", regression.save(path, 1, ENTRY))
  end)

  it("refuses what it cannot find or would break, writing nothing", function()
    local function refusal(text, line)
      write(path, text)
      local done, why = regression.save(path, line, ENTRY)
      assert.is_nil(done)
      assert.are.equal(text, read(path))
      return (why:sub(#path + 1):gsub("^:%d+", ""):gsub("^: ", ""))
    end
    assert.are.equal("it has no sim.defineScenario or sim.variant call", refusal("return {}\n", 1))
    assert.are.equal("it has 2 sim.defineScenario and sim.variant calls, none on line 9",
      refusal("local a = sim.defineScenario {}\nreturn sim.variant('a', {})\n", 9))
    assert.are.equal("the argument of sim.defineScenario on line 1 is not a table written in the file",
      refusal("return sim.defineScenario(make())\n", 1))
    assert.are.equal("its regressions field (line 1) is not a list written in the file",
      refusal("return sim.defineScenario { regressions = saved }\n", 1))
    assert.are.equal("a string that never ends", refusal('return sim.defineScenario { name = "x }\n', 1))
  end)
end)

describe("sim.defineScenario", function()
  it("keeps no regressions when it is given none, and a variant none of its base's", function()
    assert.are.same({}, dofile(FIX .. "pay.sim.lua").regressions)
    sim.loading = FIX .. "pay.fixed.sim.lua"
    local ok, variant = pcall(dofile, sim.loading)
    sim.loading = nil
    assert(ok, variant)
    assert.are.same({}, variant.regressions)
    assert.is_function(sim.defineScenario)
  end)
end)
