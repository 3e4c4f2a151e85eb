--- `eutaxy check` on sim.always and sim.sometimes: the real binary on
-- scenarios/lock-check/, scenarios/never-reached/ and
-- spec/fixtures/properties/. An always is looked at after every turn that
-- wrote and stops the run at the first that breaks it; a sometimes never
-- reached makes the verdict INCONCLUSIVE, whatever the number of workers.
-- Budgets are lifted so a slow machine changes no verdict.
local C = dofile("spec/helpers/check.lua")

local LOCKS = "scenarios/lock-check/locks.sim.lua"
local PROPS = "spec/fixtures/properties/"
local NO_BUDGET = C.NO_BUDGET

local function check(args) return C.run(args .. NO_BUDGET) end
local function check_json(args) return C.json(args .. NO_BUDGET) end
local lines, has_line, trace_section = C.lines, C.has_line, C.trace_section

describe("sim.always", function()
  describe("on the check-then-act lock", function()
    local out, err, code = check(LOCKS)

    it("is what finds it: VIOLATED with exit 1", function()
      assert.are.equal(1, code, out .. err)
      assert.are.equal("VIOLATED  locks  (seed locks)", lines(out)[1])
      assert.matches("\nInvariant one%-holder is violated: 2 requests hold the lock at once %(", out)
    end)

    it("says after which turn, in which object and at what virtual time it broke", function()
      assert.is_true(has_line(out, "  broken after the turn of req-2>LOCKS.start in DO:LOCKS(nightly) at 0.000s, "
        .. "where the run stopped"), out)
    end)

    it("cuts the trace at that turn: no request lets go of the lock in it", function()
      local trace = trace_section(out)
      assert.matches("req%-2>LOCKS%.start  always one%-holder fails after this turn: the run stops here\n", trace)
      assert.is_nil(trace:find("release", 1, true), trace)
      assert.is_nil(trace:find("answered", 1, true), trace)
    end)

    it("replays to the same turn and the same trace", function()
      local schedule = out:match("\nReplay: eutaxy check %S+ %-%-replay (%S+)\n")
      local again, again_err, again_code = check(LOCKS .. " --replay " .. schedule)
      assert.are.equal(1, again_code, again .. again_err)
      assert.are.equal(trace_section(out), trace_section(again))
      assert.are.equal(out:match("\n  broken after [^\n]*\n"), again:match("\n  broken after [^\n]*\n"))
    end)

    -- Under valgrind (EUTAXY_VALGRIND, see CMakeLists.txt) the whole tree takes
    -- minutes: 40 random schedules of it, none violated, INCONCLUSIVE.
    it("is missed by the end-state invariant alone: BOUNDED", function()
      if os.getenv("EUTAXY_VALGRIND") then
        local end_out, end_err, end_code = check(PROPS .. "locks_end_only.sim.lua --quiet --random 40 --seed 1")
        assert.are.equal(3, end_code, end_out .. end_err)
        assert.are.equal("INCONCLUSIVE  locks-end-only\n", end_out)
        return
      end
      local end_out, end_err, end_code = check(PROPS .. "locks_end_only.sim.lua --quiet")
      assert.are.equal(0, end_code, end_out .. end_err)
      assert.are.equal("BOUNDED  locks-end-only\n", end_out)
    end)

    it("finds the same with every schedule run twice, and with two workers", function()
      local twice, _, twice_code = check(LOCKS .. " --quiet --check-determinism")
      assert.are.equal(1, twice_code, twice)
      local parallel, _, parallel_code = check(LOCKS .. " --quiet -j 2")
      assert.are.equal(1, parallel_code, parallel)
      assert.are.equal("VIOLATED  locks\n", parallel)
    end)
  end)

  it("fails mid-run on a state that is fine again at the end", function()
    local doc, code = check_json(PROPS .. "midrun.sim.lua")
    assert.are.equal(1, code)
    assert.are.equal("never-one", doc.invariant)
    assert.are.equal("1 bump", doc.message)
    assert.are.same({ task = "req-1>COUNTER.bump", object = "DO:COUNTER(c)", atMs = 0 }, doc.turn)
  end)

  it("is not looked at after a turn that only read", function()
    local doc, code = check_json(PROPS .. "readonly.sim.lua")
    assert.are.equal(0, code)
    assert.are.equal(1, doc.counts.schedules)
    assert.are.equal(0, doc.counts.turnChecks)
  end)

  it("is looked at once after each turn that wrote", function()
    local doc, code = check_json(PROPS .. "onewrite.sim.lua")
    assert.are.equal(0, code)
    assert.are.equal(1, doc.counts.schedules)
    assert.are.equal(1, doc.counts.turnChecks)
  end)

  it("costs nothing between turns in a scenario without always or sometimes", function()
    local doc, code = check_json("scenarios/lease-pool/leases.fixed.sim.lua")
    assert.are.equal(0, code)
    assert.are.equal(0, doc.counts.turnChecks)
  end)

  it("that raises is the scenario's error: exit 2 with its file and line", function()
    local out, err, code = check(PROPS .. "always_raises.sim.lua")
    assert.are.equal(2, code, out .. err)
    assert.matches('always "typo" %(spec/fixtures/properties/always_raises%.sim%.lua:6%) raised: '
      .. "spec/fixtures/properties/always_raises%.sim%.lua:7: no such column", err)
  end)
end)

describe("sim.sometimes", function()
  it("never reached makes a search that found nothing INCONCLUSIVE, exit 3, one line a name", function()
    local out, err, code = check(PROPS .. "order.sim.lua")
    assert.are.equal(3, code, out .. err)
    assert.are.equal("INCONCLUSIVE  order  (seed order)", lines(out)[1])
    assert.is_true(has_line(out, "never reached: c-bumps"), out)
    assert.is_false(has_line(out, "never reached: b-first"), out)
    assert.matches("\nNo explored schedule reached this sometimes probe: the path the scenario means to test never ran", out)
  end)

  it("reached in some schedules only leaves the verdict BOUNDED", function()
    local out, err, code = check(PROPS .. "order_reached.sim.lua --quiet")
    assert.are.equal(0, code, out .. err)
    assert.are.equal("BOUNDED  order-reached\n", out)
  end)

  it("reached by one of two workers counts for the whole search", function()
    local one = check_json(PROPS .. "order.sim.lua")
    local two, code = check_json(PROPS .. "order.sim.lua -j 2")
    assert.are.equal(3, code)
    assert.are.same(one.neverReached, two.neverReached)
    assert.are.same(one.reached, two.reached)
    local bounded, bounded_code = check_json(PROPS .. "order_reached.sim.lua -j 2")
    assert.are.equal(0, bounded_code)
    assert.are.same({ "b-first" }, bounded.reached)
  end)

  it("is reported per shard: a shard cannot know whether another reached it", function()
    local reached_in = 0
    for k = 1, 3 do
      local out, err, code = check(PROPS .. "order_reached.sim.lua --shard " .. k .. "/3")
      if code == 0 then
        reached_in = reached_in + 1
      else
        assert.are.equal(3, code, out .. err)
        assert.is_true(has_line(out, "not reached in this shard: b-first"), out)
      end
    end
    assert.is_true(reached_in >= 1)
  end)

  it("never reached in random runs is listed with their INCONCLUSIVE", function()
    local doc, code = check_json(PROPS .. "order.sim.lua --random 5 --seed 1")
    assert.are.equal(3, code)
    assert.are.equal("INCONCLUSIVE", doc.verdict)
    assert.matches("^Random exploration of 5 schedules", doc.reason)
    assert.are.same({ "c-bumps" }, doc.neverReached)
  end)

  it("turns the untested bug of never-reached into INCONCLUSIVE, and the corrected path finds it", function()
    local out, err, code = check("scenarios/never-reached/redeem.unreached.sim.lua")
    assert.are.equal(3, code, out .. err)
    assert.is_true(has_line(out, "never reached: a-coupon-is-redeemed"), out)
    local planted, _, planted_code = check("scenarios/never-reached/redeem.sim.lua --quiet")
    assert.are.equal(1, planted_code)
    assert.are.equal("VIOLATED  redeem\n", planted)
    local fixed, _, fixed_code = check("scenarios/never-reached/redeem.fixed.sim.lua --quiet")
    assert.are.equal(0, fixed_code)
    assert.are.equal("BOUNDED  redeem-fixed\n", fixed)
  end)

  it("that raises is the scenario's error: exit 2 with its file and line", function()
    local out, err, code = check(PROPS .. "probe_raises.sim.lua")
    assert.are.equal(2, code, out .. err)
    assert.matches('sometimes "typo" %(spec/fixtures/properties/probe_raises%.sim%.lua:6%) raised: '
      .. "spec/fixtures/properties/probe_raises%.sim%.lua:7: attempt to index a nil value", err)
  end)
end)

describe("always and sometimes in --json and --html", function()
  it("give the probes reached and never reached, and why", function()
    local doc = check_json(PROPS .. "order.sim.lua")
    assert.are.same({ "b-first" }, doc.reached)
    assert.are.same({ "c-bumps" }, doc.neverReached)
    assert.matches("^No explored schedule reached", doc.neverReachedReason)
    assert.are.equal("Every schedule within the bounds was explored, but a sometimes probe was never reached.",
      doc.reason)
  end)

  it("give an empty neverReached when every probe was reached", function()
    local doc = check_json(PROPS .. "order_reached.sim.lua")
    assert.are.equal("BOUNDED", doc.verdict)
    assert.are.same({}, doc.neverReached)
  end)

  it("give the turn of an always's violation", function()
    local doc = check_json(LOCKS)
    assert.are.same({ task = "req-2>LOCKS.start", object = "DO:LOCKS(nightly)", atMs = 0 }, doc.turn)
  end)

  it("show the breaking turn and the probes never reached on the page", function()
    local page = os.tmpname()
    check(LOCKS .. " --quiet --html " .. page)
    local f = assert(io.open(page))
    local html = f:read("a")
    f:close()
    assert.matches("Broken after the turn of <code>req%-2&gt;LOCKS%.start</code>", html)
    check(PROPS .. "order.sim.lua --quiet --html " .. page)
    f = assert(io.open(page))
    html = f:read("a")
    f:close()
    os.remove(page)
    assert.matches("<li>never reached: c%-bumps</li>", html)
  end)
end)
