--- `eutaxy check` resets an object while one of its invocations waits at a
-- yield point, and ends a worker's request whose client goes away while it
-- waits: the fixtures in spec/fixtures/reset-waiting/ and the undo-reset
-- example, through the real binary.
local C = dofile("spec/helpers/check.lua")
local cjson = require "cjson"

local FIX = "spec/fixtures/reset-waiting/"
local NO_BUDGET = C.NO_BUDGET
local check, check_json, find_point = C.run, C.json, C.find_point

describe("a reset while an object waits", function()
  it("ends the object's invocation with a retryable error, as the README promises", function()
    local doc, code = check_json(FIX .. "relay.sim.lua" .. NO_BUDGET)
    assert.are.equal(1, code)
    assert.are.same({ "reset at req-1#1 while DO:FRONT(f) waits for effect #1 (DO:BACK note)" }, doc.faults)
    assert.are.same({ name = "Error", remote = false, retryable = true }, cjson.decode(doc.message))
  end)

  it("lets the call it waited for run on at its callee", function()
    local doc = check_json(FIX .. "relay.sim.lua" .. NO_BUDGET)
    local ended, returned
    for i, line in ipairs(doc.trace) do
      if line:find("req-1>FRONT.relay  ends: its object was reset", 1, true) then ended = i end
      if line:find('req-1>FRONT.relay>BACK.note  returned "relayed"', 1, true) then returned = i end
    end
    assert.is_truthy(ended and returned and ended < returned, table.concat(doc.trace, "\n"))
  end)

  it("retries an alarm it interrupted, which then runs to its end", function()
    local out, _, code = check(FIX .. "remind.sim.lua --replay 1:1:001")
    assert.are.equal(0, code, out)
    assert.matches("fault  reset at alarm DO:FRONT%(f%)#1 while DO:FRONT%(f%) waits for effect #0 %(DO:BACK note%)", out)
    assert.matches("alarm DO:FRONT%(f%)#1  ends: its object was reset\n", out)
    assert.matches("alarm DO:FRONT%(f%)#2  fires %(retry 1%)\n", out)
    assert.matches("alarm DO:FRONT%(f%)#2  done\n", out)
  end)

  it("is a coverage point of its own at every yield, alarms' included", function()
    local doc, code = check_json(FIX .. "remind.sim.lua" .. NO_BUDGET)
    assert.are.equal(0, code)
    local p = find_point(doc.coverage, "alarm DO:FRONT(f) while DO:FRONT(f) waits for effect #0 (DO:BACK note)")
    assert.are.same({ "reset" }, p.tried)
    assert.are.equal(doc.counts.schedules, p.reached)
  end)

  it("may strike after another invocation of the object ended, while the first still waits", function()
    local doc, code = check_json(FIX .. "busy.sim.lua" .. NO_BUDGET)
    assert.are.equal(0, code)
    local p = find_point(doc.coverage, "req-2 effect #0 (DO:FRONT quick) ended while DO:FRONT(f) waits")
    assert.are.same({ "reset" }, p.tried)
  end)

  it("is drawn in the HTML diagram on the lifeline of the object it resets", function()
    local html = os.tmpname()
    local _, _, code = check(FIX .. "relay.sim.lua --html " .. html .. NO_BUDGET)
    assert.are.equal(1, code)
    local f = assert(io.open(html))
    local page = f:read("a")
    f:close()
    os.remove(html)
    assert.matches('class="fault" data%-kind="reset"><title>reset at req%-1#1 while DO:FRONT%(f%) waits', page)
    assert.matches("FAULT reset: while it waits; its calls run on", page)
  end)
end)

describe("a client that goes away while its request waits", function()
  local doc, code = check_json(FIX .. "slow.sim.lua" .. NO_BUDGET)

  it("ends the worker's request with no answer, while its call runs on", function()
    assert.are.equal(1, code)
    assert.are.equal("noted, but the client got no answer", doc.message)
    assert.are.same({ "reset at req-1#1 while the worker waits for effect #0 (DO:BACK note)" }, doc.faults)
    local trace = table.concat(doc.trace, "\n")
    assert.matches("req%-1  ends: its client went away while it waited\n[^\n]*req%-1>BACK%.note  returned \"slow\"", trace)
  end)

  it("may go away during a sleep too", function()
    local out, _, rc = check(FIX .. "slow.sim.lua --replay 1:1:1")
    assert.are.equal(0, rc, out)
    assert.matches("reset at req%-1#1 while the worker sleeps 100ms %(sleep #0%)", out)
    assert.is_nil(out:find("calls DO:BACK", 1, true))
  end)
end)

describe("the undo-reset example", function()
  it("is VIOLATED by a reset while Orders waits for Books, and shrinks to that one fault", function()
    local doc, code = check_json("scenarios/undo-reset/bookings.sim.lua" .. NO_BUDGET)
    assert.are.equal(1, code)
    assert.are.equal("bookings-match-orders", doc.invariant)
    assert.are.same({ "reset at req-1#1 while DO:ORDERS(shop) waits for effect #1 (DO:BOOKS book)" }, doc.faults)
    assert.are.same({ "req-1" }, doc.events)
  end)

  it("replays its schedule to the same report, byte for byte", function()
    local doc = check_json("scenarios/undo-reset/bookings.sim.lua" .. NO_BUDGET)
    local a = check("scenarios/undo-reset/bookings.sim.lua --replay " .. doc.schedule .. " --json")
    local b = check("scenarios/undo-reset/bookings.sim.lua --replay " .. doc.schedule .. " --json")
    assert.are.same(cjson.decode(a).trace, cjson.decode(b).trace)
    assert.are.same(doc.trace, cjson.decode(a).trace)
  end)
end)
