--- Drive events with `at`: a request or call that arrives later in virtual
-- time, as an event of the world's queue. Runs the real binary on the
-- scenarios in spec/fixtures/drive-at/ (their worker keeps a log of what
-- happened when, and answers a read with the log so far).
local C = dofile("spec/helpers/check.lua")

local FIX = "spec/fixtures/drive-at/"
local NO_BUDGET = C.NO_BUDGET
local check, check_json = C.run, C.json

-- The line of the trace that contains text (plain), and its position.
local function find_line(trace, text)
  for i, l in ipairs(trace) do
    if l:find(text, 1, true) then return i, l end
  end
end

-- The trace of the scenario's one schedule with both events and no decision.
local function only_trace(file)
  local doc, code = check_json(FIX .. file .. " --replay 0:1.2:")
  assert.are.equal(0, code)
  assert.are.equal("HOLDS", doc.verdict)
  return doc.trace
end

describe("a drive event with at", function()
  it("arrives after an alarm due earlier, in the one schedule there is", function()
    local doc, code = check_json(FIX .. "after_alarm.sim.lua" .. NO_BUDGET)
    assert.are.equal(0, code)
    assert.are.equal("BOUNDED", doc.verdict)
    assert.are.equal(1, doc.counts.schedules)
    local trace = only_trace("after_alarm.sim.lua")
    local fires = find_line(trace, "0.100s  alarm DO:LOG(log)#1  fires")
    local read = find_line(trace, "0.150s  req-2  worker fetch GET /read")
    assert.is_truthy(fires and read, table.concat(trace, "\n"))
    assert.is_true(fires < read)
    assert.is_truthy(find_line(trace, 'req-2>LOG.note  returned "arm alarm read"'))
  end)

  it("arrives after another request's sleep, the clock jumping to it", function()
    local doc = check_json(FIX .. "after_sleep.sim.lua" .. NO_BUDGET)
    assert.are.equal("BOUNDED", doc.verdict)
    local trace = only_trace("after_sleep.sim.lua")
    local woke = find_line(trace, '0.100s  req-1>LOG.note  returned "start end"')
    local read = find_line(trace, "0.150s  req-2  worker fetch GET /read")
    assert.is_truthy(woke and read, table.concat(trace, "\n"))
    assert.is_true(woke < read)
  end)

  it("holds no place under the limit before it arrives, and waits for room after", function()
    local doc = check_json(FIX .. "waits.sim.lua" .. NO_BUDGET)
    assert.are.equal("BOUNDED", doc.verdict)
    local trace = only_trace("waits.sim.lua")
    local slow = find_line(trace, "0.000s  req-2  worker fetch POST /slow")
    local waits = find_line(trace, "0.050s  req-1  arrives; waits while 1 is in flight (maxConcurrentInvocations)")
    local done = find_line(trace, "0.100s  req-2  answered 200 start end")
    local read = find_line(trace, "0.100s  req-1  worker fetch GET /read")
    assert.is_truthy(slow and waits and done and read, table.concat(trace, "\n"))
    assert.is_true(slow < waits and waits < done and done < read)
  end)

  it("ties with an alarm due at the same time, and the explorer takes both orders", function()
    -- each scenario claims one order; each finds the schedule of the other
    local first, code = check_json(FIX .. "tie.sim.lua" .. NO_BUDGET)
    assert.are.equal(1, code)
    assert.are.equal("the read at 100 ms answered arm read", first.message)
    local other = check_json(FIX .. "tie_read_first.sim.lua" .. NO_BUDGET)
    assert.are.equal("VIOLATED", other.verdict)
    assert.are.equal("the read at 100 ms answered arm alarm read", other.message)
    assert.are.same({ "req-1", "req-2" }, first.events)
    assert.are.same({ "req-1", "req-2" }, other.events)
    assert.is_truthy(find_line(first.trace, "0.100s  req-2  worker fetch GET /read"))
    assert.are_not.equal(first.schedule, other.schedule)
  end)

  it("is a call the drive's faults strike at its arrival, an ambiguous one losing the answer", function()
    local doc = check_json(FIX .. "rpc_at.sim.lua" .. NO_BUDGET)
    assert.are.equal("BOUNDED", doc.verdict)
    local late
    for _, c in ipairs(doc.coverage) do
      if c.point == "call-2 (DO:LOG note)" then late = c end
    end
    assert.are.same({ "rpc-fail", "ambiguous" }, late.tried)
    local replay = check_json(FIX .. "rpc_at.sim.lua --replay 1:1.2:02")
    assert.are.same({ "ambiguous at call-2#1 (DO:LOG note)" }, replay.faults)
    local fault = find_line(replay.trace, "0.050s  fault  ambiguous at call-2#1 (DO:LOG note)")
    local ran = find_line(replay.trace, '0.050s  call-2  returned "first late"')
    local lost = find_line(replay.trace, "0.050s  call-2  its answer is lost")
    assert.is_truthy(fault and ran and lost, table.concat(replay.trace, "\n"))
    assert.is_true(fault < ran and ran < lost)
  end)

  it("replays a tie's schedule to the same trace", function()
    local first = check_json(FIX .. "tie.sim.lua" .. NO_BUDGET)
    local again = check_json(FIX .. "tie.sim.lua --replay " .. first.schedule)
    assert.are.equal("VIOLATED", again.verdict)
    assert.are.same(first.trace, again.trace)
  end)
end)
