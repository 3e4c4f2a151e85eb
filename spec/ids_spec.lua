--- Ids keep their identity across RPC: an eutaxy.Id passed as an argument or
-- returned as a result arrives as an Id, in the world, under check and under
-- serve, and an id made by hand that its world would not have made does not
-- cross at all. Fixtures: spec/fixtures/ids/.
local testing = require "eutaxy.testing"
local ids = require "eutaxy.id"
local C = dofile("spec/helpers/check.lua")
local h = dofile("spec/fixtures/serve/harness.lua")

local FIX = "spec/fixtures/ids/"

describe("an id across RPC", function()
  local world, lobby
  before_each(function()
    world = testing.world { config = FIX .. "wrangler.jsonc", seed = 3 }
    lobby = world.env.LOBBY:getByName("main")
  end)
  after_each(function() world:close() end)

  it("arrives in an object as an Id that get, equals and toString take", function()
    local hall = world.env.ROOMS:idFromName("hall")
    local info = lobby:enter(hall, "spec")
    assert.are.same({
      isId = true, hex = hall:toString(), name = "hall", text = hall:toString(), same = true, back = true, count = 1,
    }, info)
  end)

  it("comes back from an object as an Id the spec can use", function()
    local id = lobby:open()
    assert.are.equal(ids.Id, getmetatable(id))
    assert.is_nil(id.name)
    assert.are.equal(64, #id:toString())
    assert.are.equal(0, world.env.ROOMS:get(id):count())
    assert.are.equal(1, lobby:enter(id, "spec").count)
    assert.are.equal(1, world.env.ROOMS:get(id):count())
  end)

  it("crosses inside tables, and a table shaped like an id stays a table", function()
    local hall = world.env.ROOMS:idFromName("hall")
    local lookalike = { binding = "ROOMS", hex = hall:toString(), name = "hall" }
    assert.are.same({ "id", "table", "string" }, lobby:sort({ hall, lookalike, "hall" }))
  end)

  it("refuses an id whose name does not give its hex, as a DataCloneError at the call", function()
    local ok, err = lobby:forge("hall")
    assert.is_false(ok)
    assert.matches("DataCloneError: the arguments of sort cannot be cloned: cannot clone an id its world did not make: "
      .. 'the name "someone else" does not give the id ' .. world.env.ROOMS:idFromName("hall"):toString(), err, 1, true)
  end)

  it("is still refused by a namespace of another binding", function()
    local ok, err = lobby:mixUp()
    assert.is_false(ok)
    assert.matches("get: the id belongs to LOBBY, not to ROOMS", err, 1, true)
  end)

  it("goes from an object to the worker and back", function()
    local body = world:fetch("http://localhost/open"):json()
    assert.is_true(body.info.isId and body.info.back and body.info.same)
    assert.is_nil(body.info.name)
    assert.are.equal(1, body.here)
  end)

  it("shows in the trace as the call that makes it", function()
    lobby:enter(world.env.ROOMS:idFromName("hall"), "spec")
    assert.matches('DO:LOBBY(main) "enter", ROOMS:idFromName("hall"), "spec"', world:trace(), 1, true)
  end)
end)

describe("ids under check", function()
  it("cross in every order of two requests, the same in every run of a schedule", function()
    local doc, code = C.json(FIX .. "rooms.sim.lua" .. C.DETERMINISM .. C.NO_BUDGET)
    assert.are.equal(0, code, doc.message)
    assert.are.equal("BOUNDED", doc.verdict)
    assert.is_true(doc.counts.schedules > 1)
  end)
end)

describe("ids under serve", function()
  local state
  before_each(function()
    state = h.begin()
    if not state then pending("curl is not installed (the .ci/packages list has it)") end
  end)
  after_each(function() h.finish(state) end)

  it("arrive as ids in the object and back in the worker", function()
    local server = h.start(state, nil, FIX .. "wrangler.jsonc")
    local status, body = h.request(server, "GET", "/named")
    assert.are.equal(200, status, body)
    assert.matches('"isId":true', body, 1, true)
    assert.matches('"name":"hall"', body, 1, true)
    assert.matches('"back":true', body, 1, true)
    status, body = h.request(server, "GET", "/open")
    assert.are.equal(200, status, body)
    assert.matches('"here":1', body, 1, true)
    assert.are.equal(0, h.stop(server))
  end)
end)
