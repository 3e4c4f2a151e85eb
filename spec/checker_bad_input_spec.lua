--- Scenarios that are wrong in one way each (spec/fixtures/checker/bad/):
-- `eutaxy check` exits 2 with one message on stderr that says what is wrong
-- and where, and prints nothing on stdout.
local process = dofile("spec/helpers/process.lua")
local bin = os.getenv("EUTAXY_BIN") or "build/eutaxy"
local DIR = "spec/fixtures/checker/bad/"

-- Runs `eutaxy check` on a bad scenario; returns its stderr, checking the
-- exit code and that nothing went to stdout.
local function refused(file)
  local out, err, code = process.run(bin .. " check " .. DIR .. file)
  assert.are.equal(2, code, out .. err)
  assert.are.equal("", out)
  assert.not_matches("stack traceback", err)
  return err
end

local function message(text)
  return "eutaxy check: " .. text .. "\n"
end

describe("eutaxy check on a bad scenario", function()
  it("gives the file and line of a syntax error", function()
    local err = refused("syntax.sim.lua")
    assert.matches("^eutaxy check: spec/fixtures/checker/bad/syntax%.sim%.lua:7: '}' expected", err)
  end)

  it("refuses a file that returns nothing", function()
    assert.are.equal(message(DIR .. "nothing.sim.lua must return sim.defineScenario{ ... }, got nil"),
      refused("nothing.sim.lua"))
  end)

  it("refuses a file that returns a table of its own", function()
    assert.are.equal(message(DIR .. "plain_table.sim.lua must return sim.defineScenario{ ... }, got table"),
      refused("plain_table.sim.lua"))
  end)

  it("names a missing drive and the line of defineScenario", function()
    assert.are.equal(message(DIR .. 'no_drive.sim.lua:5: defineScenario: field "drive" is missing'),
      refused("no_drive.sim.lua"))
  end)

  it("names an unknown field and the one it is close to", function()
    assert.are.equal(
      message(DIR .. 'unknown_field.sim.lua:5: defineScenario: unknown field "invariant" (did you mean "invariants"?)'),
      refused("unknown_field.sim.lua"))
  end)

  it("names a bound of the wrong type", function()
    assert.are.equal(
      message(DIR .. 'bound_type.sim.lua:5: defineScenario: bounds.maxFaultsPerRun must be a non-negative integer, got "one"'),
      refused("bound_type.sim.lua"))
  end)

  it("names an unknown fault kind and the one it is close to", function()
    assert.are.equal(
      message(DIR .. 'unknown_fault.sim.lua:5: defineScenario: faults[1] is not a fault kind: "ambigous" (did you mean "ambiguous"?)'),
      refused("unknown_fault.sim.lua"))
  end)

  it("names a table the object does not have, where its handle was made, and the invariant reading it", function()
    assert.are.equal(
      message(DIR .. 'no_table.sim.lua:5: table counter/hit does not exist in DO:COUNTER at the end of the run'
        .. ' (invariant "one-row-per-request" reads it)'),
      refused("no_table.sim.lua"))
  end)

  it("names an invariant's binding that wrangler.jsonc does not have, and the ones it has", function()
    assert.are.equal(
      message(DIR .. "no_binding.sim.lua:9: invariant one-row-per-request: no binding named COUNTERS in "
        .. DIR .. "../wrangler.jsonc (bindings: COUNTER)"),
      refused("no_binding.sim.lua"))
  end)

  it("names a setup's binding that wrangler.jsonc does not have", function()
    assert.are.equal(
      message(DIR .. "no_setup_binding.sim.lua:10: durableObject: no binding named TIMER in "
        .. DIR .. "../wrangler.jsonc (bindings: COUNTER)"),
      refused("no_setup_binding.sim.lua"))
  end)

  it("names a wrangler.jsonc that is not there", function()
    assert.are.equal(
      message(DIR .. "no_config.sim.lua:5: worker.config: cannot read " .. DIR
        .. "missing.jsonc: No such file or directory"),
      refused("no_config.sim.lua"))
  end)

  it("gives the file and line of a worker that does not parse, without eutaxy's own stack", function()
    local err = refused("broken_worker.sim.lua")
    assert.matches("^eutaxy check: spec/fixtures/checker/bad/broken_worker%.lua:5: 'then' expected near 'return'\n$", err)
  end)

  it("names a class the worker does not export, and what it does export", function()
    assert.are.equal(
      message("binding COUNTER: class Counters is not exported by " .. DIR .. "../worker.lua (it exports: Counter, fetch)"),
      refused("no_class.sim.lua"))
  end)

  it("names a custom invariant that raises, where it is, and its error", function()
    local err = refused("custom_raises.sim.lua")
    local head = message('invariant "second-answer-is-ok" (' .. DIR .. "custom_raises.sim.lua:11) raised: "
      .. DIR .. "custom_raises.sim.lua:12: attempt to index a nil value")
    assert.are.equal(head:sub(1, -2), err:sub(1, #head - 1))
  end)
end)
