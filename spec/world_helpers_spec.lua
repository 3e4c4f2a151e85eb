--- cloudflare:test's helpers in a world: runInDurableObject,
-- listDurableObjectIds, runAlarm by stub or id, and an object's key-value
-- storage, for objects named or made with newUniqueId.
local testing = require "eutaxy.testing"
local ids = require "eutaxy.id"

local CONFIG = "spec/fixtures/world-helpers/wrangler.jsonc"

-- The line of the caller, for messages that must point at the spec.
local function here()
  local info = debug.getinfo(2, "Sl")
  return info.short_src .. ":" .. info.currentline
end

-- The message of what fn raises.
local function raised(fn)
  local ok, e = pcall(fn)
  assert.is_false(ok, "it did not raise")
  return tostring(e)
end

describe("runInDurableObject", function()
  local world, counter
  before_each(function()
    world = testing.world { config = CONFIG }
    counter = world.env.COUNTER:getByName("c")
  end)
  after_each(function() world:close() end)

  it("runs the function with the instance and its state: fields, private methods and storage", function()
    counter:hit(2)
    local hits, secret, count, id = world:runInDurableObject(counter, function(instance, state)
      return instance.hits, instance:_secret(), state.storage:get("count"), state.id
    end)
    assert.are.equal(1, hits)
    assert.are.equal("only from inside", secret)
    assert.are.equal(2, count)
    assert.are.equal(counter.id, id)
    assert.are.equal("c", id.name)
  end)

  it("calls methods on the instance itself, so its in-memory state moves with them", function()
    world:runInDurableObject(counter, function(instance)
      instance.hits = 10
      assert.are.equal(1, instance:hit())
      assert.are.equal(11, instance.hits)
    end)
    counter:hit()
    assert.are.equal(12, world:runInDurableObject(counter, function(instance) return instance.hits end))
  end)

  it("hands values out as clones: changing one changes nothing inside", function()
    world:runInDurableObject(counter, function(instance, state)
      state.storage:put("list", { 1, 2 })
      local list = state.storage:get("list")
      list[3] = 3
      assert.are.same({ 1, 2 }, state.storage:get("list"))
    end)
  end)

  it("runs SQL through state.storage.sql with the cursor's API", function()
    local rows = world:runInDurableObject(world.env.LEDGER:getByName("main"), function(instance, state)
      assert.are.equal(7, instance:record(7))
      local cursor = state.storage.sql:exec("SELECT amount FROM entries WHERE amount > ?", 1)
      assert.are.same({ "amount" }, cursor.columnNames)
      return cursor:toArray()
    end)
    assert.are.same({ { amount = 7 } }, rows)
  end)

  it("reaches the object's fetch with a Request and returns its Response", function()
    local response = world:runInDurableObject(counter, function(instance)
      return instance:fetch("https://counter.example/here")
    end)
    assert.are.equal(200, response.status)
    assert.are.same({ count = 1, path = "/here" }, response:json())
  end)

  it("builds the object first when nothing made it yet", function()
    local made = world.env.COUNTER:getByName("new")
    assert.are.equal(0, world:runInDurableObject(made, function(instance) return instance.hits end))
  end)

  it("gives instance.ctx as state, and instance.env as the world's env", function()
    world:runInDurableObject(counter, function(instance, state)
      assert.are.equal(state, instance.ctx)
      assert.are.equal(3, instance.env.LEDGER:getByName("main"):record(3))
    end)
  end)

  it("raises an error of the object's, and rolls back what that request wrote", function()
    world:runInDurableObject(counter, function(instance, state)
      local ok, e = pcall(function() instance:failAfterPut() end)
      assert.is_false(ok)
      assert.are.equal("failed after a put", e.message)
      assert.is_true(e.remote)
      assert.is_nil(state.storage:get("half"))
    end)
    assert.are.same({}, world:kv(counter))
  end)

  it("raises the function's own error unchanged, keeping what its requests committed", function()
    local ok, e = pcall(world.runInDurableObject, world, counter, function(instance)
      instance:hit()
      error({ mine = true })
    end)
    assert.is_false(ok)
    assert.are.same({ mine = true }, e)
    assert.are.same({ count = 1 }, world:kv(counter))
  end)

  it("lets other events reach the object between requests, as while an invocation awaits", function()
    world:runInDurableObject(counter, function(instance)
      counter:hit()
      assert.are.equal(1, instance.hits)
    end)
  end)

  it("ends when the object is reset under it, and says so at the spec's line", function()
    local line
    local msg = raised(function()
      world:runInDurableObject(counter, function(instance)
        instance:hit()
        world:reset(counter)
        line = here(); local _ = instance.hits
      end)
    end)
    assert.are.equal(line .. ": runInDurableObject: the invocation in DO:COUNTER(c) has ended while the function ran "
      .. "(a reset or a limit ended it)", msg)
  end)

  it("refuses instance and state once the function has returned", function()
    local kept
    world:runInDurableObject(counter, function(instance, state) kept = { instance, state } end)
    assert.matches("instance and state belong to its function, which has returned",
      raised(function() return kept[1].hits end))
    assert.matches("instance and state belong to its function, which has returned",
      raised(function() kept[2].storage:get("count") end))
  end)

  it("refuses what cannot cross into the object, at the argument that cannot", function()
    local msg = raised(function()
      world:runInDurableObject(counter, function(_, state) state.storage:put("f", function() end) end)
    end)
    assert.matches("DataCloneError: what the function sends into the object cannot be cloned: "
      .. "cannot clone a function %(at %[2%]%)", msg)
  end)

  it("refuses what a spec's function cannot do from outside: state's other fields, transactionSync", function()
    assert.matches("state%.waitUntil is not available to a spec's function",
      raised(function() world:runInDurableObject(counter, function(_, state) local _ = state.waitUntil end) end))
    assert.matches("storage:transactionSync: its function would run in the spec, not in the object",
      raised(function()
        world:runInDurableObject(counter, function(_, state) state.storage:transactionSync(function() end) end)
      end))
  end)

  it("takes a binding and a name, or an id, as well as a stub", function()
    counter:hit(4)
    assert.are.equal(4, world:runInDurableObject("COUNTER", "c", function(_, s) return s.storage:get("count") end))
    local id = world.env.COUNTER:idFromName("c")
    assert.are.equal(4, world:runInDurableObject(id, function(_, s) return s.storage:get("count") end))
  end)

  it("names a bad object or a missing function at the spec's line", function()
    local line
    local msg = raised(function() line = here(); world:runInDurableObject(42, function() end) end)
    assert.are.equal(line .. ": runInDurableObject expects a stub, an id, or a binding and a name, got 42", msg)
    msg = raised(function() line = here(); world:runInDurableObject("NOPE", "x", function() end) end)
    assert.are.equal(line .. ": runInDurableObject: no binding named NOPE (bindings: COUNTER, LEDGER)", msg)
    msg = raised(function() line = here(); world:runInDurableObject(counter) end)
    assert.are.equal(line .. ": runInDurableObject: after the object comes a function(instance, state), got nil", msg)
    msg = raised(function() line = here(); world:runInDurableObject("COUNTER", function() end) end)
    assert.are.equal(line .. ": runInDurableObject: after the binding COUNTER comes the object's name, got a function",
      msg)
  end)
end)

describe("objects made with newUniqueId", function()
  local world
  before_each(function() world = testing.world { config = CONFIG } end)
  after_each(function() world:close() end)

  -- The id of the object the worker made with newUniqueId, from the list.
  local function unique_id()
    local made = world:fetch("/unique"):json()
    for _, id in ipairs(world:listDurableObjectIds(world.env.COUNTER)) do
      if id.hex == made.id then return id end
    end
    error("the unique object is not listed")
  end

  it("are listed with the named ones, in the order they came to be", function()
    world.env.COUNTER:getByName("first"):hit()
    local made = world:fetch("/unique"):json()
    world.env.COUNTER:getByName("last"):hit()
    world.env.LEDGER:getByName("main"):record(1)
    local list = world:listDurableObjectIds(world.env.COUNTER)
    assert.are.equal(3, #list)
    assert.are.equal("first", list[1].name)
    assert.are.equal(made.id, list[2].hex)
    assert.is_nil(list[2].name)
    assert.are.equal("last", list[3].name)
    assert.are.equal(ids.Id, getmetatable(list[2]))
    assert.are.same(list, world:listDurableObjectIds("COUNTER"))
    assert.are.equal(1, #world:listDurableObjectIds(world.env.LEDGER))
  end)

  it("are reached by id or stub everywhere a spec names an object", function()
    local id = unique_id()
    local stub = world.env.COUNTER:get(id)
    assert.are.same({ count = 1 }, world:kv(id))
    assert.are.equal(1, world:runInDurableObject(stub, function(instance) return instance.hits end))
    stub:arm(1000)
    assert.are.equal(true, world:runAlarm(id))
    assert.are.same({ count = 1, alarms = 1, lastRetry = 0 }, world:kv(stub))
    assert.is_true(world:isLive(id))
    world:reset(stub)
    assert.is_false(world:isLive(stub))
    assert.are.same({ { one = 1 } }, world:rows(id, "SELECT 1 AS one"))
  end)

  it("run their alarm as runAlarm(stub) does for a named one, and report no alarm as false", function()
    local stub = world.env.COUNTER:get(unique_id())
    assert.is_false(world:runAlarm(stub))
    stub:arm(5000)
    local ran, err = world:runAlarm(stub)
    assert.is_true(ran)
    assert.is_nil(err)
    assert.are.equal(1, world:kv(stub).alarms)
    world.env.COUNTER:getByName("named"):arm(10)
    assert.is_true(world:runAlarm("COUNTER", "named"))
  end)
end)

describe("a world's look at an object", function()
  local world
  before_each(function() world = testing.world { config = CONFIG } end)
  after_each(function() world:close() end)

  it("reads its key-value storage as a table by key", function()
    local counter = world.env.COUNTER:getByName("c")
    assert.are.same({}, world:kv(counter))
    counter:hit(3)
    counter:arm(10)
    world:advance(10)
    assert.are.same({ count = 3, alarms = 1, lastRetry = 0 }, world:kv("COUNTER", "c"))
  end)

  it("reads rows by stub as by name", function()
    local ledger = world.env.LEDGER:getByName("main")
    ledger:record(2)
    assert.are.same({ { amount = 2 } }, world:rows(ledger, "SELECT amount FROM entries"))
    assert.are.same({ { amount = 2 } }, world:rows("LEDGER", "main", "SELECT amount FROM entries WHERE amount = ?", 2))
  end)

  it("lists no object of a namespace nothing made", function()
    assert.are.same({}, world:listDurableObjectIds(world.env.LEDGER))
  end)

  it("names a bad namespace, object or query at the spec's line", function()
    local line
    local msg = raised(function() line = here(); world:listDurableObjectIds({}) end)
    assert.are.equal(line .. ": listDurableObjectIds expects a namespace (world.env.NS) or a binding's name, "
      .. "got a table", msg)
    msg = raised(function() line = here(); world:listDurableObjectIds("POOL") end)
    assert.are.equal(line .. ": listDurableObjectIds: POOL is no Durable Object binding of this world "
      .. "(bindings: COUNTER, LEDGER)", msg)
    msg = raised(function() line = here(); world:kv("COUNTER") end)
    assert.are.equal(line .. ": kv: after the binding COUNTER comes the object's name, got nil", msg)
    msg = raised(function() line = here(); world:rows(world.env.LEDGER:getByName("main"), 7) end)
    assert.are.equal(line .. ": rows: the query must be a string, got 7", msg)
    msg = raised(function() line = here(); world:runAlarm({ id = "nope" }) end)
    assert.are.equal(line .. ": runAlarm expects a stub, an id, or a binding and a name, got a table", msg)
  end)
end)
