--- Errors carry `overloaded` (false unless an object was too busy to take
-- the call), and `eutaxy check` injects the overloaded fault: a call an
-- object refuses, which never runs, and whose caller gets an error with
-- overloaded = true and retryable = false, as Cloudflare documents.
-- Fixtures: spec/fixtures/overloaded/.
local testing = require "eutaxy.testing"
local cjson = require "cjson"
local C = dofile("spec/helpers/check.lua")

local FIX = "spec/fixtures/overloaded/"

describe("an error's overloaded field", function()
  it("is false on an error user code raised in the object", function()
    local world = testing.world { config = FIX .. "wrangler.jsonc" }
    local response = world:fetch("http://localhost/boom")
    world:close()
    assert.are.equal(503, response.status)
    local e = response:json()
    assert.are.same({ true, false, false }, { e.remote, e.retryable, e.overloaded })
  end)

  it("is false on a call lost on the way, which may be retried", function()
    local doc, code = C.json(FIX .. "lost.sim.lua" .. C.NO_BUDGET)
    assert.are.equal(1, code)
    assert.are.same({ name = "Error", message = "Network connection lost.", remote = false, retryable = true,
                      overloaded = false }, cjson.decode(doc.message))
  end)
end)

describe("the overloaded fault", function()
  it("refuses the call before the object runs it, with overloaded = true and retryable = false", function()
    local doc, code = C.json(FIX .. "hit.sim.lua" .. C.DETERMINISM .. C.NO_BUDGET)
    assert.are.equal(1, code)
    assert.are.same({ "overloaded at req-1#1 effect #0 (DO:COUNTER hit)" }, doc.faults)
    assert.are.same({ name = "Error", message = "Durable Object is overloaded. Too many requests queued.",
                      remote = false, retryable = false, overloaded = true }, cjson.decode(doc.message))
    for _, line in ipairs(doc.trace) do
      assert.is_nil(line:find("COUNTER.hit", 1, true), line)  -- no invocation of hit ever began
    end
  end)

  it("strikes calls to objects only, not calls to a service outside", function()
    local doc, code = C.json(FIX .. "svc.sim.lua" .. C.NO_BUDGET)
    assert.are.equal(0, code)
    assert.are.same({ "rpc-fail", "ambiguous", "caller-crash", "fetch-timeout" },
      C.find_point(doc.coverage, "req-1 effect #0 (service https://svc.example fetch)").tried)
    assert.are.same({ "rpc-fail", "ambiguous", "caller-crash", "overloaded" },
      C.find_point(doc.coverage, "req-2 effect #0 (DO:COUNTER hit)").tried)
  end)

  it("comes last among the kinds, so a schedule recorded before it still replays", function()
    local out = C.run("scenarios/lease-pool/leases.sim.lua --replay 1:1:2")
    assert.is_true(C.has_line(out, "  ambiguous at req-1#1 effect #0 (DO:POOL acquire)"), out)
    out = C.run("scenarios/lease-pool/leases.sim.lua --replay 1:1:4")
    assert.is_true(C.has_line(out, "  overloaded at req-1#1 effect #0 (DO:POOL acquire)"), out)
  end)
end)
