--- `eutaxy check --end-states` and `--no-reduction`: the testing aids that
-- spec/por_differential_spec.lua compares a reduced search with the full one
-- by. The fixtures are in spec/fixtures/end-states/.
local C = dofile("spec/helpers/check.lua")

local FIX = "spec/fixtures/end-states/"

local function end_states(file, extra)
  local doc, code, err = C.json(FIX .. file .. " --end-states --quiet" .. (extra or ""))
  assert.are.equal(0, code, err)
  assert.are.equal("BOUNDED", doc.verdict)
  return doc
end

describe("eutaxy check --end-states", function()
  it("finds one end state where two notes go in in either order", function()
    local doc = end_states("notes.sim.lua")
    assert.is_true(doc.counts.schedules > 1)
    assert.are.equal(1, doc.endStateCount)
    assert.are.equal(1, #doc.endStates)
    assert.matches("^%x+$", doc.endStates[1])
    assert.are.equal(16, #doc.endStates[1])
  end)

  it("tells apart the counts and answers of two bumps that may lose one", function()
    local doc = end_states("bump.sim.lua")
    -- n = 1 (both answered 1), n = 2 answered 1 then 2, n = 2 answered 2 then 1
    assert.are.equal(3, doc.endStateCount)
    local sorted = { table.unpack(doc.endStates) }
    table.sort(sorted)
    assert.are.same(sorted, doc.endStates)
  end)

  it("gives the same digests in another process, whatever its string hashes", function()
    assert.are.same(end_states("bump.sim.lua").endStates, end_states("bump.sim.lua").endStates)
  end)

  it("prints floats exactly and keeps an integer apart from the same float", function()
    local tenth = end_states("tenth.sim.lua").endStates
    assert.are.equal(1, #tenth)
    assert.are_not.same(tenth, end_states("tenth_next.sim.lua").endStates)
    assert.are_not.same(end_states("one.sim.lua").endStates, end_states("one_float.sim.lua").endStates)
    assert.are.same(tenth, end_states("tenth.sim.lua").endStates)
  end)

  it("says how many in the text report", function()
    local out, err, code = C.run(FIX .. "bump.sim.lua --end-states")
    assert.are.equal(0, code, err)
    assert.is_true(C.has_line(out, "End states: 3 distinct."), out)
  end)

  it("adds nothing to a report that did not ask", function()
    local doc = C.json(FIX .. "bump.sim.lua --quiet")
    assert.is_nil(doc.endStates)
    assert.is_nil(doc.endStateCount)
  end)

  for _, case in ipairs({
    { "-j 2", "it cannot be combined with %-j 2" },
    { "--random 5", "it cannot be combined with %-%-random" },
    { "--replay 0:1.2:", "it cannot be combined with %-%-replay" },
  }) do
    it("refuses " .. case[1] .. " with exit 2", function()
      local out, err, code = C.run(FIX .. "bump.sim.lua --end-states " .. case[1])
      assert.are.equal(2, code)
      assert.are.equal("", out)
      assert.matches("^eutaxy check: %-%-end%-states [^\n]*" .. case[2] .. "\n", err)
    end)
  end
end)

describe("eutaxy check --no-reduction", function()
  it("reaches the same verdict and end states as the reduced search", function()
    for _, file in ipairs({ "notes.sim.lua", "bump.sim.lua" }) do
      local full = end_states(file, " --no-reduction")
      local reduced = end_states(file)
      assert.are.same(full.endStates, reduced.endStates)
      assert.is_true(reduced.counts.schedules <= full.counts.schedules)
    end
  end)
end)
