--- `eutaxy test --coverage` and `eutaxy check --coverage`: the LCOV
-- tracefile of a known project (spec/fixtures/coverage), line by line.
--
-- worker.lua: POST /add runs the worker's fetch and Tally:add; Tally:clear
-- (lines 17-18) and the 405 answer (23) never run; the 503 answer (28) runs
-- only under the checker's faults. lib/words.lua: refuse (5) never runs,
-- shout (9) only in the fixture spec's own state.
local fs = require "eutaxy.fs"
local process = dofile("spec/helpers/process.lua")

local FIXTURE = "spec/fixtures/coverage"
local q = process.quote

-- bin as a path that works from any folder
local bin = process.bin:sub(1, 1) == "/" and process.bin
  or (process.sh("pwd"):gsub("\n$", "") .. "/" .. process.bin)

local function real(path) return assert(fs.realpath(path)) end

local WORKER = real(FIXTURE .. "/worker.lua")
local WORDS = real(FIXTURE .. "/lib/words.lua")
local SCHEMA = real(FIXTURE .. "/schema.lua")

-- The worker's lines that can run, and those of lib/words.lua.
local WORKER_LINES = { 5, 6, 8, 10, 11, 12, 13, 14, 16, 17, 18, 19, 22, 23, 25, 26, 27, 28, 30, 31, 33 }
local WORDS_LINES = { 2, 4, 5, 6, 8, 9, 10, 12 }

local function temp_dir() return (process.sh("mktemp -d"):gsub("\n$", "")) end

--- An LCOV tracefile as { [path] = { [line] = hits } } and the paths in
--- order, checking the records' shape on the way: TN, SF, DA lines in
--- order, LF and LH that agree with them, end_of_record.
local function parse_lcov(text)
  local files, order, cur, last = {}, {}, nil, 0
  local lf, lh = 0, 0
  for line in text:gmatch("([^\n]*)\n") do
    if line == "TN:" then
      assert.is_nil(cur, "TN: inside a record")
    elseif line:match("^SF:") then
      cur = line:sub(4)
      assert.is_nil(files[cur], "two records for " .. cur)
      files[cur], order[#order + 1], last, lf, lh = {}, cur, 0, 0, 0
    elseif line:match("^DA:") then
      local n, hits = line:match("^DA:(%d+),(%d+)$")
      assert.is_truthy(n, "a DA line that does not read: " .. line)
      n, hits = tonumber(n), tonumber(hits)
      assert.is_true(n > last, "DA lines out of order in " .. cur)
      files[cur][n], last, lf, lh = hits, n, lf + 1, lh + (hits > 0 and 1 or 0)
    elseif line:match("^LF:") then
      assert.are.equal(lf, tonumber(line:sub(4)))
    elseif line:match("^LH:") then
      assert.are.equal(lh, tonumber(line:sub(4)))
    elseif line == "end_of_record" then
      cur = nil
    else
      error("a line LCOV does not have: " .. line)
    end
  end
  assert.is_nil(cur, "the last record has no end_of_record")
  return files, order
end

-- The lines of a file's record that ran, and those that did not.
local function hits_and_misses(lines)
  local hit, missed = {}, {}
  local all = {}
  for n in pairs(lines) do all[#all + 1] = n end
  table.sort(all)
  for _, n in ipairs(all) do
    local list = lines[n] > 0 and hit or missed
    list[#list + 1] = n
  end
  return hit, missed
end

local function without(all, drop)
  local out, skip = {}, {}
  for _, n in ipairs(drop) do skip[n] = true end
  for _, n in ipairs(all) do if not skip[n] then out[#out + 1] = n end end
  return out
end

-- `eutaxy test ARGS` in the fixture's folder (or in dir, a copy of it).
local function test_in(dir, args, env)
  return process.run(string.format("cd %s && %s%s test %s", q(dir), env or "", q(bin), args))
end

describe("eutaxy test --coverage", function()
  local dir
  before_each(function() dir = temp_dir() end)
  after_each(function() os.execute("rm -rf " .. q(dir)) end)

  it("writes the lines the worker, its object and the spec's own state ran, and those they did not", function()
    local out = dir .. "/tally.info"
    local stdout, err, code = test_in(FIXTURE, "--coverage-out " .. q(out) .. " tally_spec.lua")
    assert.are.equal(0, code, stdout .. err)
    assert.matches("2 successes / 0 failures", stdout)
    assert.matches("eutaxy test: coverage: 25 of 30 lines ran, in 3 files; written to " .. out:gsub("%p", "%%%0"), err)
    local files, order = parse_lcov(process.read(out))
    -- the specs, busted, the system's modules and eutaxy's own are not the project's code
    assert.are.same({ WORDS, SCHEMA, WORKER }, order)
    local hit, missed = hits_and_misses(files[WORKER])
    assert.are.same(without(WORKER_LINES, { 17, 18, 23, 28 }), hit)
    assert.are.same({ 17, 18, 23, 28 }, missed)
    -- one POST: Tally:add's body ran once, in the object's isolate
    assert.are.equal(1, files[WORKER][11])
    assert.are.equal(1, files[WORKER][13])
    hit, missed = hits_and_misses(files[WORDS])
    assert.are.same(without(WORDS_LINES, { 5 }), hit)
    assert.are.same({ 5 }, missed)
    -- shout ran once, in the spec's state; the module loaded in the spec's
    -- state, the worker's isolate and the object's
    assert.are.equal(1, files[WORDS][9])
    assert.are.equal(3, files[WORDS][2])
  end)

  it("writes lcov.info in the working folder by default, and after a failing spec too", function()
    process.sh(string.format("cp -R %s/. %s", q(FIXTURE), q(dir)))
    local stdout, err, code = test_in(dir, "--coverage tally_spec.lua", "COVERAGE_FIXTURE_FAIL=1 ")
    assert.are.equal(1, code, stdout .. err)
    assert.matches("2 successes / 1 failure", stdout)
    assert.matches("written to lcov.info", err)
    local files = parse_lcov(process.read(dir .. "/lcov.info"))
    local _, missed = hits_and_misses(files[real(dir .. "/worker.lua")])
    assert.are.same({ 17, 18, 23, 28 }, missed)
  end)

  it("takes busted's -c as --coverage, so busted never looks for LuaCov", function()
    process.sh(string.format("cp -R %s/. %s", q(FIXTURE), q(dir)))
    local stdout, err, code = test_in(dir, "-c tally_spec.lua")
    assert.are.equal(0, code, stdout .. err)
    assert.not_matches("LuaCov", stdout .. err)
    assert.is_truthy(parse_lcov(process.read(dir .. "/lcov.info"))[real(dir .. "/worker.lua")])
  end)

  it("leaves limits.pcall its CPU limit in the spec's state, and counts on after it", function()
    local out = dir .. "/limits.info"
    local stdout, err, code = test_in(FIXTURE, "--coverage-out " .. q(out) .. " limits_spec.lua",
      "EUTAXY_CPU_LIMIT=100000 timeout 30 ")
    assert.are.equal(0, code, stdout .. err)
    assert.matches("1 success / 0 failures", stdout)
    assert.are.equal(1, parse_lcov(process.read(out))[WORDS][9])  -- shout, after the loop was stopped
  end)

  it("refuses a tracefile it cannot write before any spec runs", function()
    local stdout, err, code = test_in(FIXTURE, "--coverage-out " .. q(dir .. "/no/such/folder/lcov.info")
      .. " tally_spec.lua")
    assert.are.equal(2, code)
    assert.matches("eutaxy test: %-%-coverage: cannot write .*/no/such/folder/lcov.info: No such file or directory", err)
    assert.not_matches("success", stdout)
    stdout, err, code = test_in(FIXTURE, "--coverage-out")
    assert.are.equal(2, code)
    assert.matches("%-%-coverage%-out needs a file", err)
  end)

  it("writes a tracefile lcov reads and genhtml renders", function()
    if not process.run("command -v lcov && command -v genhtml"):find("genhtml", 1, true) then
      pending("lcov is not installed (the .ci/packages list has it)")
    end
    local out = dir .. "/tally.info"
    local _, _, code = test_in(FIXTURE, "--coverage-out " .. q(out) .. " tally_spec.lua")
    assert.are.equal(0, code)
    local summary, serr, scode = process.run("lcov --summary " .. q(out))
    assert.are.equal(0, scode, summary .. serr)
    assert.matches("lines%.*: 83%.3%% %(25 of 30 lines%)", summary .. serr)
    local html, herr, hcode = process.run(string.format("genhtml -q -o %s %s", q(dir .. "/html"), q(out)))
    assert.are.equal(0, hcode, html .. herr)
    -- genhtml drops the common prefix: the fixture's folder is "coverage"
    local page = process.read(dir .. "/html/coverage/worker.lua.gcov.html")
    assert.matches('<span class="lineNoCov">%s+0 :   self%.ctx%.storage%.sql:exec%(&quot;DELETE FROM adds', page)
    assert.matches('<span class="lineCov">%s+1 :   local sql = self%.ctx%.storage%.sql', page)
  end)
end)

describe("eutaxy check --coverage", function()
  local dir
  before_each(function() dir = temp_dir() end)
  after_each(function() os.execute("rm -rf " .. q(dir)) end)

  local function check(args)
    return process.run(string.format("%s check %s %s", q(bin), q(FIXTURE .. "/tally.sim.lua"), args))
  end

  it("writes the lines the worker and its object ran over every schedule explored", function()
    local out = dir .. "/tally.info"
    local stdout, err, code = check("--coverage-out " .. q(out))
    assert.are.equal(0, code, stdout .. err)
    assert.matches("^BOUNDED", stdout)
    assert.matches("eutaxy check: coverage: 24 of 29 lines ran, in 2 files; written to ", err)
    local files, order = parse_lcov(process.read(out))
    -- the scenario and the schema it requires run in the checker's state: not counted
    assert.are.same({ WORDS, WORKER }, order)
    local hit, missed = hits_and_misses(files[WORKER])
    -- the 503 answer ran: the checker failed the RPC call
    assert.are.same(without(WORKER_LINES, { 17, 18, 23 }), hit)
    assert.are.same({ 17, 18, 23 }, missed)
    hit, missed = hits_and_misses(files[WORDS])
    assert.are.same(without(WORDS_LINES, { 5, 9 }), hit)
    assert.are.same({ 5, 9 }, missed)
    -- every schedule's POSTs are counted, rewound runs included: far more than one
    assert.is_true(files[WORKER][26] > 13)
  end)

  it("counts the same lines with -j 2, merging what the workers counted", function()
    local out = dir .. "/tally.info"
    local stdout, err, code = check("-j 2 --quiet --coverage-out " .. q(out))
    assert.are.equal(0, code, stdout .. err)
    local files = parse_lcov(process.read(out))
    local _, missed = hits_and_misses(files[WORKER])
    assert.are.same({ 17, 18, 23 }, missed)
    _, missed = hits_and_misses(files[WORDS])
    assert.are.same({ 5, 9 }, missed)
    assert.is_true(files[WORKER][26] > 13)
  end)

  it("explores exactly what it explores without --coverage", function()
    local function doc(args)
      local stdout, _, code = check("--json " .. args)
      assert.are.equal(0, code)
      return (stdout:gsub('"elapsedMs":%d+', ""))
    end
    assert.are.equal(doc(""), doc("--coverage-out " .. q(dir .. "/tally.info")))
  end)

  it("writes lcov.info in the working folder by default", function()
    local _, err, code = process.run(string.format("cd %s && %s check %s --quiet --coverage", q(dir), q(bin),
      q(real(FIXTURE .. "/tally.sim.lua"))))
    assert.are.equal(0, code, err)
    assert.are.equal("", err)  -- --quiet: the verdict line alone
    assert.is_truthy(parse_lcov(process.read(dir .. "/lcov.info"))[WORKER])
  end)

  it("refuses a tracefile it cannot write, and --merge, which explores nothing", function()
    local _, err, code = check("--coverage-out " .. q(dir .. "/no/such/folder/lcov.info"))
    assert.are.equal(2, code)
    assert.matches("eutaxy check: %-%-coverage: cannot write .*: No such file or directory", err)
    _, err, code = process.run(string.format("%s check --merge a.json b.json --coverage", q(bin)))
    assert.are.equal(2, code)
    assert.matches("it explores nothing, so it takes no %-%-coverage", err)
    _, err, code = check("--coverage-out")
    assert.are.equal(2, code)
    assert.matches("%-%-coverage%-out needs a value", err)
  end)

  it("writes nothing for a scenario that does not load", function()
    local out = dir .. "/lcov.info"
    local _, err, code = process.run(string.format("%s check %s --coverage-out %s", q(bin),
      q(dir .. "/missing.sim.lua"), q(out)))
    assert.are.equal(2, code, err)
    assert.is_nil(io.open(out))
  end)
end)
