--- What `eutaxy check` reports beyond the verdict: coverage of fault points
-- (text and JSON, the same with -j), the run's event log (--json timeline),
-- the HTML page (--html) and the live progress line on a terminal. The
-- browser's view of the page is in html_browser_spec.lua.
local process = dofile("spec/helpers/process.lua")
local C = dofile("spec/helpers/check.lua")
local report_html = require "eutaxy.report_html"

local bin = os.getenv("EUTAXY_BIN") or "build/eutaxy"
local LEASES = "scenarios/lease-pool/leases.sim.lua"
local FIXED = "scenarios/lease-pool/leases.fixed.sim.lua"
local INJECT = "spec/fixtures/checker/inject.sim.lua"
local TIE_FAULTS = "spec/fixtures/drive-at/tie_faults.sim.lua"
local RESEND = "spec/fixtures/checker/resend.sim.lua"
local NO_BUDGET = " --budget-ms 600000"

local run = process.run

local check, check_json = C.run, C.json

local read = process.read

local function count(s, pattern)
  local n = 0
  for _ in s:gmatch(pattern) do n = n + 1 end
  return n
end

local find_point = C.find_point

describe("coverage of fault points", function()
  local doc, code = check_json(FIXED .. NO_BUDGET)

  it("lists every fault point the schedules reached, with delivery numbers left out", function()
    assert.are.equal(0, code)
    local names = {}
    for _, c in ipairs(doc.coverage) do names[#names + 1] = c.point end
    assert.are.same({ "alarm DO:POOL(pool)", "req-1 effect #0 (DO:POOL acquire)", "req-1 effect #1 (DO:POOL acquire)",
                      "req-1 while the worker waits for effect #0 (DO:POOL acquire)",
                      "req-1 while the worker waits for effect #1 (DO:POOL acquire)",
                      "req-2 effect #0 (DO:POOL acquire)", "req-2 effect #1 (DO:POOL acquire)",
                      "req-2 while the worker waits for effect #0 (DO:POOL acquire)",
                      "req-2 while the worker waits for effect #1 (DO:POOL acquire)" }, names)
  end)

  it("says which kinds struck where, and how many schedules reached each point", function()
    local first = find_point(doc.coverage, "req-1 effect #0 (DO:POOL acquire)")
    assert.are.same({ "rpc-fail", "ambiguous", "caller-crash", "overloaded" }, first.tried)
    -- an instance to reset exists before this call only where req-1's client went away and
    -- req-2 reached the pool first: the run's one fault was spent by then
    assert.are.same({ "reset" }, first.untried)
    local waiting = find_point(doc.coverage, "req-1 while the worker waits for effect #0 (DO:POOL acquire)")
    assert.are.same({ "reset" }, waiting.tried)
    assert.are.equal(doc.counts.schedules, waiting.reached)
    assert.are.equal(doc.counts.schedules, first.reached)
    local alarm = find_point(doc.coverage, "alarm DO:POOL(pool)")
    assert.are.same({ "alarm-fail", "alarm-lost", "reset" }, alarm.tried)
  end)

  it("shows the call a retry makes as never faulted: the one fault per run was spent before it", function()
    local retry = find_point(doc.coverage, "req-1 effect #1 (DO:POOL acquire)")
    assert.are.same({}, retry.tried)
    assert.are.same({ "rpc-fail", "ambiguous", "caller-crash", "reset", "overloaded" }, retry.untried)
    assert.is_true(retry.reached > 0 and retry.reached < doc.counts.schedules)
  end)

  it("counts faults by kind over the explored schedules", function()
    local n = 0
    for _, v in pairs(doc.counts.faultsByKind) do n = n + v end
    assert.are.equal(doc.counts.faultsTried, n)
    local one_fault = 0
    for _, b in ipairs(doc.counts.byFaults) do
      if b.faults == 1 then one_fault = b.schedules end
    end
    assert.are.equal(one_fault, n)
  end)

  it("adds up the same over two processes", function()
    local one = check_json(FIXED .. NO_BUDGET .. " --no-reduction")
    local par = check_json(FIXED .. NO_BUDGET .. " -j 2 --no-reduction")
    assert.are.same(one.coverage, par.coverage)
    assert.are.same(one.counts.faultsByKind, par.counts.faultsByKind)
  end)

  it("tries the same kinds at the same points with and without reduction, and over two processes", function()
    local function tried(cov)
      local t = {}
      for _, row in ipairs(cov) do t[row.point] = table.concat(row.tried, ",") end
      return t
    end
    local full = check_json(FIXED .. NO_BUDGET .. " --no-reduction")
    assert.are.same(tried(full.coverage), tried(doc.coverage))
    if os.getenv("EUTAXY_VALGRIND") then return end  -- the processes run the same C as one
    local par = check_json(FIXED .. NO_BUDGET .. " -j 2")
    assert.are.same(tried(full.coverage), tried(par.coverage))
  end)

  it("is a table after the verdict in the text report", function()
    local out = check(FIXED .. NO_BUDGET)
    assert.matches("\nCoverage %(fault point, schedules that reached it, fault kinds tried there%):\n", out)
    assert.matches("\n  req%-1 effect #0 %(DO:POOL acquire%) +%d+  rpc%-fail, ambiguous, caller%-crash, overloaded[;\n]",
      out)
    assert.matches("\n  req%-1 effect #1 %(DO:POOL acquire%) +%d+  none; never rpc%-fail, ambiguous, caller%-crash, "
      .. "reset, overloaded %(the run's faults were spent: maxFaultsPerRun%)\n", out)
  end)
end)

describe("the reason a report gives for a kind never tried", function()
  it("is the fault budget only where a run reached the point after spending it", function()
    local doc = check_json(FIXED .. NO_BUDGET)
    local retry = find_point(doc.coverage, "req-1 effect #1 (DO:POOL acquire)")
    assert.are.equal("the run's faults were spent: maxFaultsPerRun", retry.whyUntried)
    -- every kind struck at req-2's first call: nothing to explain
    assert.is_nil(find_point(doc.coverage, "req-2 effect #0 (DO:POOL acquire)").whyUntried)
  end)

  it("never blames the budget when the violation needed no fault, though the sweep tried faults first", function()
    local path = os.tmpname()
    local out, err, code = check(TIE_FAULTS .. NO_BUDGET .. " --html " .. path)
    local page = read(path)
    os.remove(path)
    assert.are.equal(1, code, out .. err)
    assert.matches("\nSchedule %(run seed 0:", out)
    assert.is_nil(page:find("faults were spent", 1, true))
    local doc = check_json(TIE_FAULTS .. NO_BUDGET)
    assert.is_true(#doc.coverage > 0)
    assert.is_true(doc.counts.sweepRuns > 0)
    for _, c in ipairs(doc.coverage) do
      assert.is_true(c.whyUntried == nil or c.whyUntried == "not explored: the violation needed no fault", c.whyUntried)
    end
  end)
end)

describe("the fault kinds a report lists", function()
  it("leave resend out where the drive has retries = 0, in text, JSON and HTML", function()
    local out = check(FIXED .. NO_BUDGET)
    local line = assert(out:match("\nFaults: ([^\n]*)\n"), out)
    assert.is_nil(line:find("resend", 1, true), line)
    local doc = check_json(FIXED .. NO_BUDGET)
    for _, k in ipairs(doc.faultKinds) do assert.are_not.equal("resend", k) end
    local path = os.tmpname()
    check(FIXED .. NO_BUDGET .. " --html " .. path)
    local page = read(path)
    os.remove(path)
    local kinds = assert(page:match("Fault kinds in play:</b> ([^<]*)<"), "no fault kinds in the page")
    assert.is_nil(kinds:find("resend", 1, true), kinds)
  end)

  it("keep resend where the client may resend", function()
    local out = check(RESEND .. NO_BUDGET)
    assert.matches("\nFaults: [^\n]*resend", out)
    local doc = check_json(RESEND .. NO_BUDGET)
    assert.is_truthy(table.concat(doc.faultKinds, " "):find("resend", 1, true))
  end)
end)

describe("the event log of a violation", function()
  local doc = check_json(LEASES .. NO_BUDGET)

  it("has the request, the call, the fault, the lost answer and the alarm, in order", function()
    local kinds = {}
    for _, e in ipairs(doc.timeline) do kinds[#kinds + 1] = e.kind end
    local seq = table.concat(kinds, " ")
    assert.matches("^send fault call .*lost call .*answer answer .*alarm", seq)
    local lost
    for _, e in ipairs(doc.timeline) do
      if e.kind == "lost" then lost = e end
    end
    assert.are.equal("DO:POOL(pool)", lost.from)
    assert.are.equal("worker", lost.to)
    assert.matches('slot = "r%-1"', lost.text)
    assert.are.equal(300000, doc.timeline[#doc.timeline - 1].t)
  end)
end)

describe("eutaxy check --html", function()
  it("writes one page with the diagram, the rows and the replay command, and loads nothing", function()
    local path = os.tmpname()
    local out, err, code = check(LEASES .. NO_BUDGET .. " --html " .. path)
    assert.are.equal(1, code, out .. err)
    local page = read(path)
    os.remove(path)
    assert.matches("^<!DOCTYPE html>", page)
    assert.matches('<svg class="seq"', page)
    assert.are.equal(1, count(page, '<g class="arrow lost">'))
    assert.are.equal(1, count(page, '<g class="fault" data%-kind="ambiguous">'))
    assert.are.equal(1, count(page, '<g class="alarm">'))
    assert.matches('<table class="rows">', page)
    assert.matches("eutaxy check scenarios/lease%-pool/leases%.sim%.lua %-%-replay 1:1:%w+", page)
    -- nothing from the network: no src, no href, no url() but the markers
    assert.is_nil(page:find("src="), "an external source")
    assert.is_nil(page:find("href="), "a link")
    assert.are.equal(0, count(page, "url%([^#]"))
  end)

  it("shows what was explored and the coverage for BOUNDED", function()
    local path = os.tmpname()
    local _, _, code = check(FIXED .. NO_BUDGET .. " --html " .. path)
    assert.are.equal(0, code)
    local page = read(path)
    os.remove(path)
    assert.is_nil(page:find('<svg class="seq"'))
    assert.matches("Schedules explored:", page)
    assert.matches("Faults injected, by kind:</b> rpc%-fail: %d+", page)
    assert.matches('<td class="point">req%-1 effect #1 %(DO:POOL acquire%)</td>', page)
  end)

  it("shows markup in names, arguments and rows as text", function()
    local path = os.tmpname()
    local _, _, code = check(INJECT .. " --html " .. path)
    assert.are.equal(1, code)
    local page = read(path)
    os.remove(path)
    assert.are.equal(1, count(page, "<script"), "only the page's own script")
    assert.is_nil(page:find("<img", 1, true))
    assert.is_nil(page:find("<b>me</b>", 1, true))
    assert.is_nil(page:find("<i>never", 1, true))
    assert.truthy(page:find("DO:COUNTER(&lt;img src=x onerror=&quot;document.title=&#39;pwned&#39;&quot;&gt;)", 1, true))
    assert.truthy(page:find("&lt;script&gt;document.body.setAttribute(", 1, true))
  end)

  it("exits 2 when it cannot write the file", function()
    local out, err, code = check(FIXED .. NO_BUDGET .. " --html /nonexistent-dir/report.html")
    assert.are.equal(2, code, out)
    assert.matches("%-%-html: /nonexistent%-dir/report%.html", err)
  end)

  it("escapes every character that could open markup or close an attribute", function()
    assert.are.equal("&lt;a href=&quot;x&quot; title=&#39;y&#39;&gt;&amp;amp;", report_html.escape([[<a href="x" title='y'>&amp;]]))
  end)
end)

describe("the progress line", function()
  -- script(1) runs the command on a pseudo-terminal and copies what it wrote
  local function on_tty(args)
    return run("script -qec " .. string.format("%q", bin .. " check " .. args) .. " /dev/null < /dev/null")
  end

  it("is drawn on a terminal's stderr, then cleared", function()
    local out = on_tty(FIXED .. NO_BUDGET)
    assert.matches("\r\27%[Kexploring: %d+ schedules, %d+/s, %d+ faults tried, [%d.]+s elapsed, budget left [%d.]+s", out)
    assert.matches("\r\27%[KBOUNDED  leases%-fixed", out)
  end)

  it("is drawn with -j too, from the workers' counts", function()
    local out = on_tty(FIXED .. NO_BUDGET .. " -j 2")
    assert.matches("exploring: %d+ schedules", out)
  end)

  it("is not drawn with --quiet", function()
    local out = on_tty(FIXED .. NO_BUDGET .. " --quiet")
    assert.is_nil(out:find("exploring:", 1, true), out)
    assert.matches("BOUNDED  leases%-fixed", out)
  end)

  it("is not drawn when stderr is not a terminal", function()
    local out, err, code = check(FIXED .. NO_BUDGET)
    assert.are.equal(0, code)
    assert.are.equal("", err)
    assert.is_nil(out:find("exploring:", 1, true))
  end)
end)
