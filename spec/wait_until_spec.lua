--- ctx.waitUntil(fn), in the worker and in objects: fn runs once the
-- invocation has answered, as an invocation of its own, in the world, under
-- check (where its turns interleave with everything else) and under serve
-- (once the response is on its way). Fixtures: spec/fixtures/wait-until/.
local testing = require "eutaxy.testing"
local C = dofile("spec/helpers/check.lua")
local h = dofile("spec/fixtures/serve/harness.lua")

local FIX = "spec/fixtures/wait-until/"

local function entries(world)
  local out = {}
  for _, row in ipairs(world:rows("LOG", "log", "SELECT what FROM entries ORDER BY seq")) do out[#out + 1] = row.what end
  return out
end

-- The line numbers of the trace lines that contain each of the given texts.
local function positions(trace, ...)
  local at, lines = {}, C.lines(trace)
  for k, text in ipairs({ ... }) do
    for i, line in ipairs(lines) do
      if line:find(text, 1, true) then
        at[k] = i
        break
      end
    end
    assert(at[k], "no trace line with " .. text .. " in:\n" .. trace)
  end
  return table.unpack(at)
end

describe("ctx.waitUntil in a world", function()
  local world
  before_each(function() world = testing.world { config = FIX .. "wrangler.jsonc", seed = 1 } end)
  after_each(function() world:close() end)

  it("runs the function after the answer, as an invocation of its own", function()
    local response = world:fetch("http://localhost/later")
    assert.are.equal("ok", response:text())
    assert.is_false(world:isLive("LOG", "log"))  -- not called yet
    world:advance(0)
    assert.are.same({ "later" }, entries(world))
    local answered, called = positions(world:trace(), "req-1  answered 200 ok", "req-1 waitUntil #1  calls DO:LOG(log)")
    assert.is_true(answered < called)
  end)

  it("gives each function its own turns, which may sleep and call", function()
    world:fetch("http://localhost/twice")
    world:advance(0)
    assert.are.same({ "second" }, entries(world))
    world:advance(10)
    assert.are.same({ "second", "first" }, entries(world))
  end)

  it("fails no request when the function raises, and traces the error", function()
    assert.are.equal(200, world:fetch("http://localhost/raise").status)
    world:advance(0)
    assert.matches("req%-1 waitUntil #1  raised Error: [^\n]*worker%.lua:%d+: late failure", world:trace())
    assert.are.equal(200, world:fetch("http://localhost/later").status)
  end)

  it("is an object's too, through its own ctx", function()
    assert.are.same({ before = 0 }, world:fetch("http://localhost/noted"):json())
    world:advance(5)
    assert.are.same({ "noted" }, entries(world))
  end)

  it("refuses what is no function, and a call outside an invocation", function()
    assert.matches("^false .*waitUntil expects a function to run after the answer, got string$",
      world:fetch("http://localhost/bad"):text())
    assert.is_false(world.env.LOG:getByName("log"):initWaited())
  end)

  it("drops a function whose object is reset before it starts", function()
    assert.is_true(world.env.LOG:getByName("log"):noteLater())
    world:reset("LOG", "log")
    world:advance(0)
    assert.are.same({}, entries(world))
    assert.matches("call-1 waitUntil #1  dropped: its object was reset", world:trace(), 1, true)
  end)
end)

describe("ctx.waitUntil under check", function()
  it("is a task whose turns interleave with the next request's", function()
    local doc, code = C.json(FIX .. "order.sim.lua" .. C.DETERMINISM .. C.NO_BUDGET)
    assert.are.equal(1, code)
    assert.are.equal("read-sees-the-write", doc.invariant)
    local trace = table.concat(doc.trace, "\n") .. "\n"
    local read, wrote = positions(trace, "req-2>LOG.entries  returned {}", "req-1 waitUntil #1>LOG.add  returned")
    assert.is_true(read < wrote)
  end)

  it("reports an error the function raises as uncaught, the request answered", function()
    local doc, code = C.json(FIX .. "raise.sim.lua" .. C.NO_BUDGET)
    assert.are.equal(1, code)
    assert.are.equal("no-uncaught-errors", doc.invariant)
    assert.matches("req%-1 waitUntil #1 raised Error: [^\n]*late failure", doc.message)
  end)

  it("numbers the calls of each function apart, so every order is one set of fault points", function()
    local doc, code = C.json(FIX .. "faults.sim.lua" .. C.DETERMINISM .. C.NO_BUDGET)
    assert.are.equal(0, code, doc.message)
    assert.are.same({ "rpc-fail", "reset" }, C.find_point(doc.coverage, "req-1 waitUntil #1 effect #0 (DO:LOG add)").tried)
    assert.are.same({ "rpc-fail", "reset" }, C.find_point(doc.coverage, "req-1 waitUntil #2 effect #0 (DO:LOG add)").tried)
    assert.are.same({ "reset" }, C.find_point(doc.coverage, "req-2 waitUntil #1 while DO:LOG(log) sleeps 5ms (sleep #0)").tried)
  end)
end)

describe("ctx.waitUntil under serve", function()
  local state
  before_each(function()
    state = h.begin()
    if not state then pending("curl is not installed (the .ci/packages list has it)") end
  end)
  after_each(function() h.finish(state) end)

  it("runs the function once the response is on its way, and logs what it raises", function()
    local server = h.start(state, nil, FIX .. "wrangler.jsonc", true)
    assert.are.same({ 200, "ok" }, { h.request(server, "GET", "/later") })
    assert.are.same({ 200, "ok" }, { h.request(server, "GET", "/raise") })
    assert.are.same({ 200, '["later"]' }, { h.request(server, "GET", "/read") })
    assert.are.equal(0, h.stop(server))
    local log = h.log(server)
    local answered = log:find("GET /later 200", 1, true)
    local wrote = log:find("[worker] wrote later, after the answer", 1, true)
    assert.is_truthy(answered and wrote and answered < wrote, log)
    assert.matches("%[worker%] waitUntil raised Error: [^\n]*late failure", log)
  end)
end)
