-- WebSockets with the Hibernation API in a world: accepting and answering
-- the upgrade, messages both ways, tags, attachments through hibernation,
-- auto-responses, closes, drops and resets, and the checker's faults and
-- state for WebSocket clients (sim.websocket).
local testing = require "eutaxy.testing"
local process = dofile("spec/helpers/process.lua")

local FIX = "spec/fixtures/websocket/"

local function log(world)
  local out = {}
  for _, r in ipairs(world:rows("ROOM", "lobby", "SELECT what FROM log ORDER BY seq")) do out[#out + 1] = r.what end
  return out
end

local function count(list, value)
  local n = 0
  for _, v in ipairs(list) do n = n + (v == value and 1 or 0) end
  return n
end

describe("WebSockets in a world", function()
  local world
  before_each(function() world = testing.world { config = FIX .. "wrangler.jsonc", seed = 1 } end)
  after_each(function() world:close() end)

  it("answers an upgrade with 101, and what the object sent before it reaches the client first", function()
    local ann, response = world:websocket("http://localhost/?name=ann")
    assert.is_truthy(ann)
    assert.equal(101, response.status)
    assert.same({ "welcome ann" }, ann:messages())
    assert.equal("open", ann:state())
  end)

  it("delivers each client's messages in order and broadcasts to every socket", function()
    local ann = world:websocket("http://localhost/?name=ann")
    local bob = world:websocket("http://localhost/?name=bob")
    assert.is_true(ann:send("one"))
    assert.is_true(bob:send("two"))
    assert.is_true(ann:send("three"))
    assert.same({ "welcome ann", "ann: one", "bob: two", "ann: three" }, ann:messages())
    assert.same({ "welcome bob", "ann: one", "bob: two", "ann: three" }, bob:messages())
  end)

  it("keeps tags and lists sockets by tag", function()
    local ann = world:websocket("http://localhost/?name=ann")
    local bob = world:websocket("http://localhost/?name=bob")
    ann:send("tags")
    assert.equal("ann,all", ann:messages()[2])
    bob:send("to ann")
    assert.same({ "welcome ann", "ann,all", "for ann" }, ann:messages())
    assert.same({ "welcome bob" }, bob:messages())
  end)

  it("passes binary messages as binary", function()
    local ann = world:websocket("http://localhost/?name=ann")
    ann:send("\0\1\2", { binary = true })
    local got = ann:received()
    assert.equal("binary", got[2].type)
    assert.equal("\0\1\2", got[2].data)
    assert.equal("ann binary \0\1\2", log(world)[#log(world)])
  end)

  it("hibernates: memory is lost, sockets, tags and attachments stay, the next message wakes the object", function()
    local ann = world:websocket("http://localhost/?name=ann")
    ann:send("memory")
    assert.equal("remembered", ann:messages()[2])
    assert.is_true(world:hibernate("ROOM", "lobby"))
    assert.is_false(world:isLive("ROOM", "lobby"))
    ann:send("memory")
    assert.equal("fresh", ann:messages()[3])
    ann:send("tags")
    assert.equal("ann,all", ann:messages()[4])
    assert.equal(2, count(log(world), "init"))
    assert.equal("open", ann:state())
  end)

  it("closes every socket with 1006 when the object is reset, and calls no handler", function()
    local ann = world:websocket("http://localhost/?name=ann")
    world:reset("ROOM", "lobby")
    assert.same({ code = 1006, reason = "" }, ann:closed())
    assert.equal("closed", ann:state())
    assert.is_false(ann:send("after"))
    for _, what in ipairs(log(world)) do assert.is_nil(what:find("^close")) end
  end)

  it("calls webSocketClose for a client's close frame and for a drop, with the attachment", function()
    local ann = world:websocket("http://localhost/?name=ann")
    local bob = world:websocket("http://localhost/?name=bob")
    ann:close(1000, "done")
    bob:drop()
    local l = log(world)
    assert.equal("close ann 1000 done true", l[#l - 1])
    assert.equal("close bob 1006  false", l[#l])
  end)

  it("calls webSocketError when the connection fails, and closes the socket", function()
    local ann = world:websocket("http://localhost/?name=ann")
    ann:error("message too big", 1009)
    local l = log(world)
    assert.equal("error ann message too big", l[#l])
    assert.equal("closed", ann:state())
  end)

  it("closes from the object: the client gets the close frame, its echo reaches webSocketClose", function()
    local ann = world:websocket("http://localhost/?name=ann")
    ann:send("bye")
    assert.same({ code = 4000, reason = "asked to leave" }, ann:closed())
    local l = log(world)
    assert.equal("close ann 4000 asked to leave true", l[#l])
  end)

  it("drops what a handler sent when it raises", function()
    local ann = world:websocket("http://localhost/?name=ann")
    ann:send("raise")
    assert.same({ "welcome ann" }, ann:messages())
    assert.matches("the handler fails", world:trace(), 1, true)
  end)

  it("refuses an attachment over 2,048 bytes", function()
    local ann = world:websocket("http://localhost/?name=ann")
    ann:send("big")
    assert.matches("serializeAttachment: the value is %d+ bytes serialized, over the limit of 2048", world:trace())
  end)

  it("answers an auto-response request without waking the object, and records when", function()
    local ann = world:websocket("http://localhost/?name=ann")
    ann:send("auto")
    assert.is_true(world:hibernate("ROOM", "lobby"))
    world:advance(5000)
    ann:send("ping")
    assert.equal("pong", ann:messages()[2])
    assert.is_false(world:isLive("ROOM", "lobby"))
    ann:send("auto-at")
    assert.equal(tostring(world:now()), ann:messages()[3])
  end)

  it("reports readyState 1 for an open socket", function()
    local ann = world:websocket("http://localhost/?name=ann")
    ann:send("state")
    assert.equal("1", ann:messages()[2])
  end)

  it("refuses a 101 whose socket was never accepted", function()
    assert.has_error(function() world:websocket("http://localhost/?noaccept") end)
  end)
end)

describe("eutaxy check with WebSocket clients", function()
  it("finds the chat room that keeps its members in memory, and bounds the fixed one", function()
    local bin = process.quote(process.bin)
    local out, _, code = process.run(bin .. " check scenarios/chat-room/chat.sim.lua")
    assert.equal(1, code, out)
    assert.matches("VIOLATED", out)
    assert.matches("hibernate at req%-1 message#1", out)
    out, _, code = process.run(bin .. " check scenarios/chat-room/chat.fixed.sim.lua")
    assert.equal(0, code, out)
    assert.matches("BOUNDED", out)
    assert.matches("Faults: .*hibernate, ws%-drop, ws%-close", out)
  end)

  it("reaches the same end states reduced and in full, restored and rebuilt", function()
    local C = dofile("spec/helpers/check.lua")
    local function ends(extra)
      local doc, code, err = C.json(FIX .. "race.sim.lua --end-states --quiet" .. extra)
      assert.equal(0, code, err)
      assert.equal("BOUNDED", doc.verdict)
      return doc
    end
    local reduced, full, rebuilt = ends(""), ends(" --no-reduction"), ends(" --no-restore")
    assert.is_true(full.counts.schedules > reduced.counts.schedules)
    assert.is_true(#reduced.endStates > 1)
    assert.same(full.endStates, reduced.endStates)
    assert.same(reduced.endStates, rebuilt.endStates)
    assert.equal(reduced.counts.schedules, rebuilt.counts.schedules)
  end)

  it("leaves the WebSocket fault kinds out of a scenario without clients", function()
    local out = process.run(process.quote(process.bin) .. " check scenarios/lease-pool/leases.fixed.sim.lua")
    assert.is_nil(out:find("hibernate", 1, true))
  end)
end)
