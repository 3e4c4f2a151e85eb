--- What invariants read of objects in `eutaxy check`: key-value storage
-- (state:kv), the objects of a binding (state:listDurableObjectIds), and
-- objects made with newUniqueId, by their ids.
local process = dofile("spec/helpers/process.lua")
local C = dofile("spec/helpers/check.lua")
local sim = require "eutaxy.check"

local FIX = "spec/fixtures/world-helpers/"

describe("an invariant", function()
  it("reads counters made with newUniqueId by the ids the state lists, rows and key-value storage alike", function()
    local out, err, code = C.run(FIX .. "unique.sim.lua" .. C.NO_BUDGET)
    assert.are.equal(0, code, out .. err)
    assert.matches("^BOUNDED  unique%-counters", out)
  end)

  it("reads an object's key-value storage, and finds the note a lost answer left behind", function()
    local doc, code = C.json(FIX .. "pay.sim.lua" .. C.NO_BUDGET)
    assert.are.equal(1, code)
    assert.are.equal("the counter notes what the ledger holds", doc.invariant)
    assert.are.equal("the ledger holds 5, the counter noted 0", doc.message)
    assert.are.same({ "ambiguous at req-1#1 effect #1 (DO:LEDGER record)" }, doc.faults)
    local fixed, fixed_code = C.json(FIX .. "pay.fixed.sim.lua" .. C.NO_BUDGET)
    assert.are.equal(0, fixed_code)
    assert.are.equal("BOUNDED", fixed.verdict)
  end)

  describe("that reads what the world does not have", function()
    local dir
    before_each(function()
      dir = process.sh("mktemp -d"):gsub("\n$", "")
      process.sh("cp " .. FIX .. "worker.lua " .. FIX .. "wrangler.jsonc " .. dir)
    end)
    after_each(function() os.execute("rm -rf " .. process.quote(dir)) end)

    local function scenario(body)
      local path = dir .. "/bad.sim.lua"
      local f = assert(io.open(path, "w"))
      f:write('local sim = require "eutaxy.check"\n\nreturn sim.defineScenario {\n  name = "bad",\n'
        .. '  worker = { entry = "./worker.lua", config = "./wrangler.jsonc" },\n'
        .. '  drive = sim.http({ { path = "/unique" } }),\n  faults = {},\n  invariants = {\n'
        .. '    sim.invariant("reads", function(state)\n      ' .. body .. '\n      return true\n    end),\n'
        .. '  },\n}\n')
      f:close()
      local out, err, code = C.run(path)
      assert.are.equal(2, code, out .. err)
      return (err:gsub(dir:gsub("%p", "%%%0") .. "/", ""))
    end

    it("is a mistake in the scenario, at the invariant's line", function()
      local raised = 'eutaxy check: invariant "reads" (bad.sim.lua:9) raised: bad.sim.lua:10: '
      assert.are.equal(raised .. "state:kv: reading DO:NOPE(x): no durable object binding named NOPE\n",
        scenario('state:kv("NOPE", "x")'))
      assert.are.equal(raised .. "state:listDurableObjectIds: no Durable Object binding named NOPE\n",
        scenario('state:listDurableObjectIds("NOPE")'))
      assert.are.equal(raised .. "state:kv expects a handle from sim.durableObjectKv, or a binding and an object, "
        .. "got number\n", scenario("state:kv(7)"))
      assert.are.equal(raised .. "state:kv: durableObjectKv: the object name (second argument) must be a non-empty "
        .. "string or an id, got nil\n", scenario('state:kv("COUNTER")'))
    end)
  end)
end)

describe("sim.durableObjectTable and sim.durableObjectKv", function()
  local id = { binding = "POOL", hex = string.rep("ab", 32) }

  it("name an object by its name or by an id of the binding", function()
    local by_name = sim.durableObjectTable("POOL", "pool", "grants")
    assert.are.equal("pool", by_name.name)
    assert.is_nil(by_name.hex)
    local by_id = sim.durableObjectTable("POOL", id, "grants")
    assert.is_nil(by_id.name)
    assert.are.equal(id.hex, by_id.hex)
    local kv = sim.durableObjectKv("POOL", { binding = "POOL", hex = id.hex, name = "pool" })
    assert.are.same({ "eutaxy.kv", "POOL", "pool", id.hex }, { kv.kind, kv.binding, kv.name, kv.hex })
  end)

  it("refuse an id of another binding, or anything else, at the caller's line", function()
    local line = debug.getinfo(1, "l").currentline + 1
    local ok, e = pcall(function() local h = sim.durableObjectTable("LEDGER", id, "entries"); return h end)
    assert.is_false(ok)
    assert.are.equal("spec/check_objects_spec.lua:" .. line .. ": durableObjectTable: the object (second argument) "
      .. "is an id of POOL, not of LEDGER", e)
    ok, e = pcall(function() return sim.durableObjectKv("POOL", 7) end)
    assert.is_false(ok)
    assert.matches("durableObjectKv: the object name %(second argument%) must be a non%-empty string or an id, got 7$", e)
    ok, e = pcall(function() return sim.durableObjectKv("POOL", { binding = "POOL", hex = "abc" }) end)
    assert.matches("must be a non%-empty string or an id, got a table$", e)
  end)
end)
