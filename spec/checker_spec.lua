--- `eutaxy check` from the command line: the real binary on the example
-- scenarios and on spec/fixtures/checker/, its reports, JSON, exit codes and
-- options. Every run that counts schedules gets a budget it cannot reach, so
-- a slow machine (or a sanitizer build) changes no verdict.
local C = dofile("spec/helpers/check.lua")

local LEASES = "scenarios/lease-pool/leases.sim.lua"
local FIXED = "scenarios/lease-pool/leases.fixed.sim.lua"
local FIX = "spec/fixtures/checker/"
local NO_BUDGET = " --budget-ms 600000"

local check, check_json = C.run, C.json
local lines, has_line, trace_section = C.lines, C.has_line, C.trace_section

local function sum_by_faults(counts)
  local n = 0
  for _, c in ipairs(counts.byFaults) do n = n + c.schedules end
  return n
end

describe("eutaxy check on the planted lease pool", function()
  local out, err, code = check(LEASES .. NO_BUDGET)

  it("answers VIOLATED with exit 1 and nothing on stderr", function()
    assert.are.equal(1, code, out .. err)
    assert.are.equal("", err)
    assert.are.equal("VIOLATED  leases  (seed leases)", lines(out)[1])
  end)

  it("names the invariant and the token two grants share", function()
    local token = out:match("\nInvariant one%-runner%-per%-request is violated: "
      .. '2 rows of pool/grants in DO:POOL share token = "([%x%-]+)"\n')
    assert.is_truthy(token, out)
    -- the offending rows: the same token on two runners
    assert.matches("\n  " .. token:gsub("%-", "%%-") .. "  p%-1      r%-1  ", out)
    assert.matches("\n  " .. token:gsub("%-", "%%-") .. "  p%-1      r%-2  ", out)
  end)

  it("keeps only the first request, and the one ambiguous call", function()
    assert.matches("\nSchedule %(run seed [^)]+%), events kept: req%-1\n", out)
    assert.is_true(has_line(out, "  ambiguous at req-1#1 effect #0 (DO:POOL acquire)"), out)
  end)

  it("traces the lost answer, the retry that takes r-2, and the alarm", function()
    local trace = trace_section(out)
    local lost = trace:find("req%-1>POOL%.acquire  returned { [^\n]*slot = \"r%-1\"")
    local gone = trace:find("req%-1>POOL%.acquire  its answer is lost")
    local retry = trace:find("req%-1>POOL%.acquire  returned { [^\n]*slot = \"r%-2\"")
    local fires = trace:find("300%.000s  alarm DO:POOL%(pool%)#1  fires")
    assert.is_truthy(lost and gone and retry and fires, trace)
    assert.is_true(lost < gone and gone < retry and retry < fires, trace)
    assert.matches("fault  ambiguous at req%-1#1 effect #0 %(DO:POOL acquire%)", trace)
  end)

  it("ends with the command that replays it", function()
    local all = lines(out)
    assert.matches("^Replay: eutaxy check " .. LEASES:gsub("[%-%.]", "%%%0") .. " %-%-replay %d+:[%d.]+:%w+$",
      all[#all])
  end)

  it("replays that schedule in a new process to the same trace, byte for byte", function()
    local schedule = out:match("\nReplay: eutaxy check %S+ %-%-replay (%S+)\n")
    local again, again_err, again_code = check(LEASES .. " --replay " .. schedule)
    assert.are.equal(1, again_code, again .. again_err)
    assert.are.equal(lines(out)[1], lines(again)[1])
    assert.are.equal(trace_section(out), trace_section(again))
    assert.are.equal(out:match("\nInvariant [^\n]*\n"), again:match("\nInvariant [^\n]*\n"))
    assert.matches("\nReplay: eutaxy check %S+ %-%-replay " .. schedule .. "\n", again)
  end)

  it("prints the same bytes on stdout every time it replays, its wall time on stderr", function()
    local schedule = out:match("\nReplay: eutaxy check %S+ %-%-replay (%S+)\n")
    local first, first_err = check(LEASES .. " --replay " .. schedule)
    local second, second_err = check(LEASES .. " --replay " .. schedule)
    assert.are.equal(first, second)
    assert.is_nil(first:find(" ms", 1, true), first)
    assert.matches("^eutaxy check: replayed " .. schedule .. " in %d+ ms\n$", first_err)
    assert.matches("^eutaxy check: replayed " .. schedule .. " in %d+ ms\n$", second_err)
    -- a schedule that holds replays to the same bytes too
    local fixed = check(FIXED .. " --replay 0:1.2:")
    local fixed_again = check(FIXED .. " --replay 0:1.2:")
    assert.matches("^HOLDS ", fixed)
    assert.are.equal(fixed, fixed_again)
  end)
end)

describe("eutaxy check on the fixed lease pool", function()
  it("answers BOUNDED with exit 0 after more than one schedule, alarm faults included", function()
    local out, err, code = check(FIXED .. NO_BUDGET)
    assert.are.equal(0, code, out .. err)
    assert.are.equal("BOUNDED  leases-fixed  (seed leases-fixed)", lines(out)[1])
    local n = tonumber(out:match("No invariant is violated in any of the (%d+) schedules within the bounds"))
    assert.is_truthy(n, out)
    assert.is_true(n > 1, out)
    assert.matches("\nFaults: [^\n]*alarm%-fail, alarm%-lost", out)
    assert.is_true(has_line(out, "Bounds: maxFaultsPerRun 1, maxRedeliveries 2, maxConcurrentInvocations 1, "
      .. "alarmsPerObject POOL 6, budgetMs 600000"), out)
  end)
end)

describe("eutaxy check --json", function()
  it("gives a violation's invariant, rows, schedule, faults, trace, counts and replay", function()
    local doc, code = check_json(LEASES .. NO_BUDGET)
    assert.are.equal(1, code)
    assert.are.equal("VIOLATED", doc.verdict)
    assert.are.equal("leases", doc.scenario)
    assert.are.equal("one-runner-per-request", doc.invariant)
    assert.matches('^2 rows of pool/grants in DO:POOL share token = "', doc.message)
    assert.matches("^%d+:[%d.]+:%w+$", doc.schedule)
    assert.are.same({ "req-1" }, doc.events)
    assert.are.same({ "ambiguous at req-1#1 effect #0 (DO:POOL acquire)" }, doc.faults)
    assert.are.same({ "token", "project", "slot", "granted_at", "ended_at" }, doc.columns)
    assert.are.equal(2, #doc.rows)
    assert.are.equal(doc.rows[1].token, doc.rows[2].token)
    assert.are.same({ "r-1", "r-2" }, { doc.rows[1].slot, doc.rows[2].slot })
    assert.are.equal("eutaxy check " .. LEASES .. " --replay " .. doc.schedule, doc.replay)
    -- the trace is the text report's, line for line
    local text = check(LEASES .. NO_BUDGET)
    local expected = {}
    for _, l in ipairs(lines(trace_section(text))) do expected[#expected + 1] = l:sub(3) end
    assert.are.same(expected, doc.trace)
    -- counts: the schedules by number of faults, in order, adding up
    assert.is_true(doc.counts.schedules >= 1)
    assert.are.equal(doc.counts.schedules, sum_by_faults(doc.counts))
    for i, c in ipairs(doc.counts.byFaults) do
      assert.is_truthy(math.tointeger(c.faults))
      assert.is_true(c.schedules > 0)
      if i > 1 then assert.is_true(c.faults > doc.counts.byFaults[i - 1].faults) end
    end
    assert.are.equal(1, doc.counts.byFaults[#doc.counts.byFaults].faults)
    assert.is_true(doc.counts.shrinkRuns >= 1)
  end)

  it("gives BOUNDED with its counts and bounds, and no schedule", function()
    local doc, code = check_json(FIXED .. NO_BUDGET)
    assert.are.equal(0, code)
    assert.are.equal("BOUNDED", doc.verdict)
    assert.is_nil(doc.schedule)
    assert.is_nil(doc.trace)
    assert.is_nil(doc.faults)
    assert.is_nil(doc.replay)
    assert.is_true(doc.counts.schedules > 1)
    assert.are.equal(doc.counts.schedules, sum_by_faults(doc.counts))
    assert.are.same({ faults = 0, schedules = 1 }, doc.counts.byFaults[1])
    assert.are.equal(1, doc.bounds.maxFaultsPerRun)
    assert.are.equal(600000, doc.bounds.budgetMs)
    assert.are.same({ POOL = 6 }, doc.bounds.alarmsPerObject)
    -- no resend: the drive has retries = 0
    assert.are.same({ "rpc-fail", "ambiguous", "caller-crash", "alarm-fail", "alarm-lost", "reset",
      "delivery-fail", "delivery-timeout", "overloaded" }, doc.faultKinds)
  end)
end)

describe("eutaxy check --quiet", function()
  it("prints the verdict line only", function()
    local out, _, code = check(LEASES .. " --quiet" .. NO_BUDGET)
    assert.are.equal("VIOLATED  leases\n", out)
    assert.are.equal(1, code)
    out, _, code = check(FIXED .. " --quiet" .. NO_BUDGET)
    assert.are.equal("BOUNDED  leases-fixed\n", out)
    assert.are.equal(0, code)
  end)
end)

describe("eutaxy check --shard and -j", function()
  -- The full search's shards (shard_split_spec has the reduced ones). Under
  -- valgrind (EUTAXY_VALGRIND) the shards, which run the C of any check, are
  -- left to the -j runs: the forked workers are what is new there.
  local whole = check_json(FIXED .. NO_BUDGET .. " --no-reduction")
  local shard_it = os.getenv("EUTAXY_VALGRIND") and pending or it

  shard_it("splits the fixed lease pool into three BOUNDED shards whose schedules add up", function()
    local sum, by_faults = 0, {}
    for k = 1, 3 do
      local doc, code = check_json(FIXED .. " --shard " .. k .. "/3" .. NO_BUDGET .. " --no-reduction")
      assert.are.equal(0, code)
      assert.are.equal("BOUNDED", doc.verdict)
      sum = sum + doc.counts.schedules
      for _, c in ipairs(doc.counts.byFaults) do
        by_faults[c.faults + 1] = (by_faults[c.faults + 1] or 0) + c.schedules
      end
    end
    assert.are.equal(whole.counts.schedules, sum)
    for _, c in ipairs(whole.counts.byFaults) do assert.are.equal(c.schedules, by_faults[c.faults + 1]) end
  end)

  it("explores as many schedules with two processes as with one", function()
    local doc, code = check_json(FIXED .. " -j 2" .. NO_BUDGET .. " --no-reduction")
    assert.are.equal(0, code)
    assert.are.equal("BOUNDED", doc.verdict)
    assert.are.equal(whole.counts.schedules, doc.counts.schedules)
  end)


  shard_it("still finds the planted bug in one of the shards", function()
    local verdicts = {}
    for k = 1, 3 do
      local out, _, code = check(LEASES .. " --quiet --shard " .. k .. "/3" .. NO_BUDGET)
      verdicts[#verdicts + 1] = out
      assert.is_true(code == 0 or code == 1, out)
    end
    assert.is_truthy(table.concat(verdicts):find("VIOLATED in shard %d/3  leases\n"), table.concat(verdicts))
  end)

  it("still finds the planted bug with two processes", function()
    local doc, code = check_json(LEASES .. " -j 2" .. NO_BUDGET)
    assert.are.equal(1, code)
    assert.are.equal("one-runner-per-request", doc.invariant)
    assert.are.equal(1, #doc.faults)
  end)
end)

describe("eutaxy check --random", function()
  it("finds the planted bug within 200 random schedules, replayably", function()
    local doc, code = check_json(LEASES .. " --random 200 --seed 1" .. NO_BUDGET)
    assert.are.equal(1, code)
    assert.are.equal("VIOLATED", doc.verdict)
    assert.are.equal("one-runner-per-request", doc.invariant)
    assert.is_true(doc.counts.schedules <= 200)
    local again = check_json(LEASES .. " --replay " .. doc.schedule)
    assert.are.equal("VIOLATED", again.verdict)
    assert.are.same(doc.trace, again.trace)
  end)

  it("draws the same schedules for the same seed", function()
    local a = check_json(LEASES .. " --random 200 --seed 7" .. NO_BUDGET)
    local b = check_json(LEASES .. " --random 200 --seed 7" .. NO_BUDGET)
    assert.are.equal(a.schedule, b.schedule)
    assert.are.equal(a.counts.schedules, b.counts.schedules)
  end)

  it("never proves the fixed pool: INCONCLUSIVE, exit 3", function()
    local out, err, code = check(FIXED .. " --random 50 --seed 1" .. NO_BUDGET)
    assert.are.equal(3, code, out .. err)
    assert.are.equal("INCONCLUSIVE  leases-fixed  (seed leases-fixed)", lines(out)[1])
    assert.is_true(has_line(out,
      "Random exploration of 50 schedules found no violation; that proves nothing about the rest."), out)
    local doc = check_json(FIXED .. " --random 50 --seed 1" .. NO_BUDGET)
    assert.are.equal("INCONCLUSIVE", doc.verdict)
    assert.are.equal(50, doc.counts.schedules)
  end)
end)

describe("eutaxy check with a budget too small", function()
  it("answers INCONCLUSIVE, exit 3, with what it explored", function()
    local out, err, code = check(FIX .. "big.sim.lua --budget-ms 1")
    assert.are.equal(3, code, out .. err)
    assert.are.equal("INCONCLUSIVE  big  (seed big)", lines(out)[1])
    assert.is_true(has_line(out, "The budget of 1 ms ran out before every schedule was explored."), out)
    assert.matches("\n%d+ schedules? explored[^\n]* in %d+ ms; no violation among them%.\n", out)
    assert.matches("budgetMs 1\n", out)
    local doc, json_code = check_json(FIX .. "big.sim.lua --budget-ms 1")
    assert.are.equal(3, json_code)
    assert.are.equal("INCONCLUSIVE", doc.verdict)
    assert.is_truthy(math.tointeger(doc.counts.schedules))
    assert.are.equal(doc.counts.schedules, sum_by_faults(doc.counts))
    assert.is_true(doc.counts.runs >= doc.counts.schedules)
    assert.are.equal(1, doc.bounds.budgetMs)
    assert.matches("budget of 1 ms", doc.reason)
  end)
end)

describe("eutaxy check --check-determinism", function()
  local examples = {}
  local p = assert(io.popen("ls scenarios/*/*.sim.lua"))
  for file in p:lines() do examples[#examples + 1] = file end
  p:close()

  it("finds a planted and a fixed scenario in every example", function()
    local folders, planted, fixed = {}, 0, 0
    for _, file in ipairs(examples) do
      folders[file:match("^scenarios/([^/]+)/")] = true
      if file:match("%.fixed%.sim%.lua$") then fixed = fixed + 1
      elseif not file:match("%.unreached%.sim%.lua$") then planted = planted + 1 end
    end
    local n = 0
    for _ in pairs(folders) do n = n + 1 end
    assert.is_true(n >= 4, table.concat(examples, " "))
    assert.are.equal(planted, fixed)
  end)

  -- Every example's verdict under --check-determinism is a check/* test of
  -- its own (CMakeLists.txt). Here: the option changes nothing a report says,
  -- on every planted example (each found in a few schedules) and the fixed
  -- lease pool; under valgrind (EUTAXY_VALGRIND), where each run costs
  -- seconds, on the lease pool's two.
  local valgrind = os.getenv("EUTAXY_VALGRIND") ~= nil
  for _, file in ipairs(examples) do
    local fixed = file:match("%.fixed%.sim%.lua$") ~= nil
    local unreached = file:match("%.unreached%.sim%.lua$") ~= nil
    if (not fixed or file == FIXED) and (not valgrind or file:match("^scenarios/lease%-pool/")) then
      it("prints what a plain run prints for " .. file, function()
        local args = file .. " --quiet" .. NO_BUDGET
        local plain, _, plain_code = check(args)
        local out, err, code = check(args .. " --check-determinism")
        assert.are.equal(unreached and 3 or fixed and 0 or 1, code, out .. err)
        assert.matches(unreached and "^INCONCLUSIVE  " or fixed and "^BOUNDED  " or "^VIOLATED  ", out)
        assert.are.equal(plain, out)
        assert.are.equal(plain_code, code)
      end)
    end
  end

  -- The fixture read /dev/urandom; an isolate has no such source any more
  -- (spec/sandbox_spec.lua), so nothing a worker does can differ by run.
  pending("fails loudly on a worker whose answer changes from run to run (no source of nondeterminism is left)")
end)

describe("eutaxy check on an error nobody catches", function()
  it("reports a run whose fetch raised as a violation of no-uncaught-errors", function()
    local out, err, code = check(FIX .. "uncaught.sim.lua" .. NO_BUDGET)
    assert.are.equal(1, code, out .. err)
    assert.are.equal("VIOLATED  uncaught  (seed uncaught)", lines(out)[1])
    assert.matches("\nInvariant no%-uncaught%-errors is violated: fetch raised [^\n]+ %(uncaught%)\n", out)
    assert.is_true(has_line(out, "  rpc-fail at req-1#1 effect #0 (DO:COUNTER hit)"), out)
    assert.matches("req%-1  raised ", trace_section(out))
  end)

  it("reports an object's error out of a driven RPC call the same way", function()
    local out, err, code = check(FIX .. "rpc.sim.lua" .. NO_BUDGET)
    assert.are.equal(1, code, out .. err)
    assert.is_true(has_line(out,
      "Invariant no-uncaught-errors is violated: call-2 raised Error: a hit needs a request (uncaught)"), out)
    assert.matches("\nSchedule %(run seed [^)]+%), events kept: call%-2\n  no fault: ", out)
  end)

  it("passes driven RPC calls that answer", function()
    local out, err, code = check(FIX .. "rpc.fixed.sim.lua --quiet" .. NO_BUDGET)
    assert.are.equal(0, code, out .. err)
    assert.are.equal("BOUNDED  rpc-fixed\n", out)
  end)
end)

describe("eutaxy check usage", function()
  local function usage_error(args, message)
    local out, err, code = check(args)
    assert.are.equal(2, code, out .. err)
    assert.are.equal("", out)
    assert.is_truthy(err:find("eutaxy check: " .. message, 1, true), err)
    return err
  end

  it("asks for a scenario when there is none", function()
    local err = usage_error("", "which scenario? eutaxy check SCENARIO.lua\n")
    assert.matches("usage: eutaxy check SCENARIO%.lua %[options%]", err)
  end)

  it("refuses an unknown option", function()
    usage_error(LEASES .. " --bogus", "unknown option --bogus\n")
  end)

  it("refuses a shard that is not K/N with 1 <= K <= N", function()
    for _, shard in ipairs({ "4/3", "0/3", "x", "1/0" }) do
      usage_error(LEASES .. " --shard " .. shard, ('--shard expects K/N with 1 <= K <= N, got "%s"\n'):format(shard))
    end
  end)

  it("refuses a number of processes that is not positive", function()
    usage_error(LEASES .. " -j0", '-j expects a positive whole number, got "0"\n')
    usage_error(LEASES .. " -j x", '-j expects a positive whole number, got "x"\n')
  end)

  it("refuses a schedule that does not parse", function()
    usage_error(LEASES .. " --replay garbage", 'schedule "garbage": it starts with the fault count')
  end)

  it("refuses a schedule that does not fit the scenario", function()
    usage_error(LEASES .. " --replay 1:1:999999", 'schedule "1:1:999999" does not fit this scenario')
    usage_error(LEASES .. " --replay 1:7:0", 'schedule "1:7:0" names a drive event the scenario does not have')
  end)

  it("refuses --replay with --random or --shard", function()
    usage_error(LEASES .. " --replay 1:1:2 --random 3", "--replay runs one schedule")
  end)

  it("names a scenario file that does not exist", function()
    usage_error("spec/fixtures/checker/nowhere.sim.lua", "cannot open spec/fixtures/checker/nowhere.sim.lua")
  end)
end)
