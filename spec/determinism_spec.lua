--- The same script, run in two separate processes, gives a byte-identical
-- trace: Lua seeds its string hashes per process, so this is where a
-- nondeterministic pairs, clock or random source would show.
local bin = os.getenv("EUTAXY_BIN") or "build/eutaxy"

local function run(seed)
  local p = assert(io.popen(bin .. " run spec/fixtures/determinism.lua " .. seed .. " 2>&1"))
  local out = p:read("a")
  local ok, _, code = p:close()
  return out, ok, code
end

describe("determinism across processes", function()
  it("gives a byte-identical trace for the same seed", function()
    local a, ok_a = run(7)
    local b, ok_b = run(7)
    assert.is_true(ok_a, a)
    assert.is_true(ok_b, b)
    assert.matches("alarm DO:POOL%(pool%)#1  fires", a)
    assert.are.equal(a, b)
  end)

  it("gives another trace for another seed", function()
    local a = run(7)
    local b = run(8)
    assert.are_not.equal(a, b)
  end)
end)
