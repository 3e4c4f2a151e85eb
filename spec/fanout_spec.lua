--- Durable fanout (eutaxy.fanout): every point of its semantics, on the
-- virtual clock, through the scripted hub of
-- spec/fixtures/durability/fanout_worker.lua, which writes down everything
-- its targets, its sink and its lifecycle hooks see.
local testing = require "eutaxy.testing"

local MAIN = "spec/fixtures/durability/fanout_worker.lua"
local bin = os.getenv("EUTAXY_BIN") or "build/eutaxy"

local function new_world(seed)
  return testing.world { main = MAIN, bindings = { HUB = "Hub", LAZY = "Lazy" }, seed = seed }
end

-- The hub, built with config (the fanout is made in init, so a new
-- configuration takes a reset).
local function hub_of(world, config)
  local hub = world.env.HUB:getByName("h")
  if config then
    hub:configure(config)
    world:reset("HUB", "h")
  end
  return hub
end

local function targets(spec)
  local t = {}
  for name, action in pairs(spec) do
    t[name] = type(action) == "table" and action or { action = action }
  end
  return t
end

describe("eutaxy.fanout", function()
  local world, hub, t0
  local function rows(sql, ...) return world:rows("HUB", "h", sql, ...) end
  local function count(sql, ...) return rows(sql, ...)[1].n end
  local function log(target)
    if target then return rows("SELECT * FROM log WHERE target = ? ORDER BY n", target) end
    return rows("SELECT * FROM log ORDER BY n")
  end
  local function setup(config, seed)
    world = new_world(seed)
    hub = hub_of(world, config)
    t0 = world:now()
  end
  after_each(function() if world then world:close() end world = nil end)

  describe("attached to an object", function()
    before_each(function() setup() end)

    it("refuses a configuration it could not run", function()
      assert.matches("at least one target", hub:misconfigure("notargets"))
      assert.matches("target x needs deliver", hub:misconfigure("nodeliver"))
      assert.matches("needs scheduler = eutaxy.scheduler%(self.ctx%) or ctx = self.ctx", hub:misconfigure("noscheduler"))
      assert.matches("maxBatchSize must be a positive integer", hub:misconfigure("badbatch"))
      assert.matches("targets.x.maxAttempts must be a positive integer", hub:misconfigure("badattempts"))
      assert.matches("the fanout participant is already registered", hub:misconfigure("twice"))
    end)

    it("makes its tables again when the turn that made them was rolled back", function()
      local lazy = world.env.LAZY:getByName("l")
      local ok, err = pcall(lazy.start, lazy)
      assert.is_false(ok)
      assert.matches("the call that made the fanout failed", err.message)
      assert.is_true(lazy:enqueue("m-1").success)
      world:advance(0)
      assert.are.same({ "m-1" }, lazy:got())
    end)

    it("creates its tables by versioned migrations", function()
      hub:load()
      assert.are.same({ { capability = "fanout", version = 2 } },
        rows("SELECT * FROM eutaxy_migrations WHERE capability = 'fanout'"))
      for _, t in ipairs({ "eutaxy_fanout_messages", "eutaxy_fanout_deliveries", "eutaxy_fanout_seq",
                           "eutaxy_fanout_memos" }) do
        assert.are.equal(1, count("SELECT count(*) AS n FROM sqlite_schema WHERE name = ?", t))
      end
    end)
  end)

  describe("enqueue", function()
    before_each(function() setup({ targets = targets { a = "ack", b = "ack", c = "ack" }, dlq = "record" }) end)

    it("accepts a batch and gives its ids and the load", function()
      local r = hub:enqueue({ { id = "m-1", body = "one" }, { id = "m-2", body = { n = 2 } } })
      assert.is_true(r.success)
      assert.are.same({ "m-1", "m-2" }, r.value)
      assert.are.equal(6, r.load.pending)
    end)

    it("takes one message as well as an array, and makes up an id when none is given", function()
      local r = hub:enqueue({ body = "alone" })
      assert.is_true(r.success)
      assert.matches("^%x+%-%x+%-4%x+%-[89ab]%x+%-%x+$", r.value[1])
    end)

    it("writes a manifest with its frozen target set and a delivery per target, in one turn", function()
      hub:enqueue({ { id = "m-1", body = "one" } }, { targets = { "c", "a" } })
      local m = rows("SELECT * FROM eutaxy_fanout_messages")
      assert.are.equal(1, #m)
      assert.are.equal('["a","c"]', m[1].targets)
      assert.are.equal(2, m[1].remaining)
      assert.are.equal(t0, m[1].created_at)
      assert.are.same({ { id = '["m-1","a"]', target_id = "a", attempt = 0, phase = "delivery" },
                        { id = '["m-1","c"]', target_id = "c", attempt = 0, phase = "delivery" } },
        rows("SELECT id, target_id, attempt, phase FROM eutaxy_fanout_deliveries ORDER BY id"))
      world:advance(0)
      assert.are.equal(2, #log())
      assert.are.equal(0, #log("b"))
    end)

    it("refuses targets that are not distinct configured names, and writes nothing", function()
      for _, bad in ipairs({ { "a", "a" }, { "z" }, {} }) do
        local r = hub:enqueue({ { id = "m-1", body = "x" } }, { targets = bad })
        assert.is_false(r.success)
        assert.are.equal("FanoutEnqueueError", r.error.name)
        assert.are.equal(0, r.load.pending)
      end
      assert.are.equal(0, count("SELECT count(*) AS n FROM eutaxy_fanout_messages"))
    end)

    it("refuses a body that cannot be stored as a definite failure", function()
      local r = hub:enqueueFunction()
      assert.is_false(r.success)
      assert.are.equal("DataCloneError", r.error.name)
      assert.are.equal(0, count("SELECT count(*) AS n FROM eutaxy_fanout_messages"))
    end)

    it("is rolled back with the caller's turn, its pending count with it", function()
      hub:configure({ targets = targets { a = "leave" } })
      world:reset("HUB", "h")
      hub:enqueue({ { id = "kept", body = "x" } })
      assert.has_error(function() hub:enqueueThenFail({ { id = "lost", body = "x" } }) end)
      world:advance(0)
      assert.are.same({ { id = "kept" } }, rows("SELECT id FROM eutaxy_fanout_messages"))
      assert.are.equal(1, hub:load().pending)
      assert.are.equal(0, count("SELECT count(*) AS n FROM log WHERE message_id = 'lost'"))
      assert.are.equal(1, count("SELECT count(*) AS n FROM events WHERE type = 'registered'"))
    end)

    it("raises when storage fails instead of reporting a definite refusal", function()
      local how, what = hub:tryEnqueueHuge()
      assert.are.equal("raised", how)
      assert.matches("too big", what)
    end)

    it("keeps its tables out of the user's SQL", function()
      assert.matches("table eutaxy_fanout_seq is reserved for eutaxy", hub:dropEngineTable())
    end)
  end)

  describe("deduplication", function()
    before_each(function() setup({ targets = targets { a = "ack", b = "leave" }, dlq = "record" }) end)

    it("treats the same id, body and targets as a no-op while the message is pending", function()
      hub:enqueue({ { id = "m-1", body = { n = 1 } } })
      local again = hub:enqueue({ { id = "m-1", body = { n = 1 } } })
      assert.is_true(again.success)
      assert.are.same({ "m-1" }, again.value)
      world:advance(0)
      assert.are.equal(1, count("SELECT count(*) AS n FROM events WHERE type = 'registered' AND target = 'a'"))
      assert.are.equal(1, #log("a"))
      -- a is done, b still pending: still the same work
      assert.is_true(hub:enqueue({ { id = "m-1", body = { n = 1 } } }).success)
      world:advance(0)
      assert.are.equal(1, #log("a"))
    end)

    it("refuses the whole batch when a key already identifies different work", function()
      hub:enqueue({ { id = "m-1", body = "first" } })
      for _, other in ipairs({
        { { id = "m-2", body = "fresh" }, { id = "m-1", body = "changed" } },
        { { id = "m-1", body = "first" }, { id = "m-2", body = "fresh" }, { id = "m-2", body = "other" } },
      }) do
        local r = hub:enqueue(other)
        assert.is_false(r.success)
        assert.are.equal("FanoutEnqueueError", r.error.name)
        assert.matches("already identifies different work", r.error.message)
      end
      local r = hub:enqueue({ { id = "m-1", body = "first" } }, { targets = { "a" } })
      assert.is_false(r.success)
      assert.are.same({ { key = "m-1" } }, rows("SELECT key FROM eutaxy_fanout_messages"))
      assert.are.equal(2, count("SELECT count(*) AS n FROM events WHERE type = 'registered'"))
    end)

    it("keys by deduplicationKey when one is given", function()
      local r = hub:enqueue({ { id = "m-1", deduplicationKey = "order-9", body = "x" } })
      assert.is_true(r.success)
      assert.is_false(hub:enqueue({ { id = "m-2", deduplicationKey = "order-9", body = "x" } }).success)
      assert.is_true(hub:enqueue({ { id = "m-2", body = "x" } }).success)
    end)

    it("takes the same key as new work once its manifest is gone", function()
      hub:configure({ targets = targets { a = "ack" } })
      world:reset("HUB", "h")
      hub:enqueue({ { id = "m-1", body = "first" } })
      world:advance(0)
      assert.are.equal(0, count("SELECT count(*) AS n FROM eutaxy_fanout_messages"))
      assert.is_true(hub:enqueue({ { id = "m-1", body = "second" } }).success)
      world:advance(0)
      assert.are.same({ "first", "second" }, { log("a")[1].body, log("a")[2].body })
    end)
  end)

  describe("delivery", function()
    it("gives each target batches of at most maxBatchSize, first deliveries in sequence order", function()
      setup({ targets = targets { a = "ack", b = "ack" }, maxBatchSize = 10 })
      local batch = {}
      for i = 1, 25 do batch[i] = { id = ("m-%02d"):format(i), body = i } end
      hub:enqueue(batch)
      world:advance(0)
      local sizes = {}
      for _, b in ipairs(rows("SELECT size FROM batches WHERE target = 'a' ORDER BY n")) do sizes[#sizes + 1] = b.size end
      assert.are.same({ 10, 10, 5 }, sizes)
      for i, entry in ipairs(log("a")) do assert.are.equal(("m-%02d"):format(i), entry.message_id) end
      assert.are.equal(25, #log("b"))
      assert.are.equal(0, hub:load().pending)
    end)

    it("lets each target advance on its own when another keeps failing", function()
      setup({ targets = targets { a = "raise", b = "ack", c = "ack" } })
      hub:enqueue({ { id = "m-1", body = "x" }, { id = "m-2", body = "y" } })
      world:advance(0)
      assert.are.equal(2, #log("b"))
      assert.are.equal(2, #log("c"))
      assert.are.same({ { target_id = "a", attempt = 1 }, { target_id = "a", attempt = 1 } },
        rows("SELECT target_id, attempt FROM eutaxy_fanout_deliveries ORDER BY id"))
    end)

    it("delivers first deliveries before due retries", function()
      setup({ targets = targets { a = "ack" }, maxBatchSize = 2 })
      hub:script({ { "a", "m-1", 1, "retry:0" } })
      hub:enqueue({ { id = "m-1", body = 1 }, { id = "m-2", body = 2 }, { id = "m-3", body = 3 } })
      world:advance(0)
      local seen = {}
      for _, e in ipairs(log("a")) do seen[#seen + 1] = e.message_id .. "#" .. e.attempt .. "@" .. e.batch end
      assert.are.same({ "m-1#1@1", "m-2#1@1", "m-3#1@2", "m-1#2@2" }, seen)
    end)

    it("counts the attempt durably, with its lease, before the callback runs", function()
      setup({ targets = targets { a = "ack" } })
      hub:enqueue({ { id = "m-1", body = "x" } })
      world:advance(0)
      assert.are.same({ { attempt_in_db = 1, lease = t0 + 5 * 60 * 1000 } },
        rows("SELECT attempt_in_db, lease FROM batches"))
    end)

    it("gives an attempt cut short by a reset back when its lease ends", function()
      setup({ targets = targets { a = { action = "sleep:1000", attemptTimeoutMs = 10000 } } })
      hub:enqueue({ { id = "m-1", body = "x" } })
      world:advance(500)     -- the callback is asleep
      world:reset("HUB", "h")
      world:advance(9499)
      assert.are.equal(0, #log("a"))
      world:advance(1)       -- the lease ends: attempt 2, by a new instance
      world:advance(1000)
      assert.are.same({ { message_id = "m-1", attempt = 2 } }, rows("SELECT message_id, attempt FROM log"))
      assert.are.same({ 1, 2 }, { rows("SELECT attempt_in_db FROM batches ORDER BY n")[1].attempt_in_db,
                                  rows("SELECT attempt_in_db FROM batches ORDER BY n")[2].attempt_in_db })
      assert.are.equal(0, hub:load().pending)
    end)

    it("batches messages that arrive within batchDelayMs of each other", function()
      setup({ targets = targets { a = "ack" }, batchDelayMs = 1000 })
      world:advance(100)
      hub:enqueue({ { id = "m-1", body = 1 } })
      world:advance(500)
      hub:enqueue({ { id = "m-2", body = 2 } })
      world:advance(399)
      assert.are.equal(0, #log())
      world:advance(1)
      assert.are.same({ { size = 2, at = t0 + 1000 } }, rows("SELECT size, at FROM batches"))
    end)

    it("keeps the work of a target no longer configured, without keeping the alarm busy", function()
      setup({ targets = targets { a = "ack", b = { action = "leave", delay = 100 } } })
      hub:enqueue({ { id = "m-1", body = 1 } })
      world:advance(0)
      hub:configure({ targets = targets { a = "ack" } })
      world:reset("HUB", "h")
      world:advance(100)
      assert.are.same({ { target_id = "b", next_attempt_at = t0 + 100 + 60000 } },
        rows("SELECT target_id, next_attempt_at FROM eutaxy_fanout_deliveries"))
      assert.are.equal(t0 + 100 + 60000, hub:getAlarm())
      hub:configure({ targets = targets { a = "ack", b = "ack" } })
      world:reset("HUB", "h")
      world:advance(60000)
      assert.are.same({ 1, 2 }, { log("b")[1].attempt, log("b")[2].attempt })
      assert.are.equal(0, hub:load().pending)
    end)

    it("keeps the object's alarm at the fanout's earliest work", function()
      setup({ targets = targets { a = "retry:7000", b = "ack" } })
      hub:enqueue({ { id = "m-1", body = "x" } })
      world:advance(0)
      assert.are.equal(t0 + 7000, hub:getAlarm())
      assert.are.same({ { due = t0 + 7000 } }, rows("SELECT due FROM eutaxy_agenda WHERE participant = 'fanout'"))
    end)
  end)

  describe("settlement", function()
    it("acks, retries after the given delay, or dead-letters each message", function()
      setup({ targets = targets { a = "ack" }, dlq = "record" })
      hub:script({ { "a", "m-2", 1, "retry:2500" }, { "a", "m-3", nil, "dead" } })
      hub:enqueue({ { id = "m-1", body = 1 }, { id = "m-2", body = 2 }, { id = "m-3", body = 3 } })
      world:advance(0)
      assert.are.same({ { message_id = "m-2", attempt = 1, next_attempt_at = t0 + 2500, last_error_name = "Retry" } },
        rows("SELECT message_key AS message_id, attempt, next_attempt_at, last_error_name FROM eutaxy_fanout_deliveries"))
      assert.are.same({ { message_id = "m-3", reason = "explicit" } }, rows("SELECT message_id, reason FROM dead"))
      world:advance(2500)
      assert.are.same({ "m-1", "m-2", "m-3", "m-2" }, (function()
        local ids = {}
        for _, e in ipairs(log("a")) do ids[#ids + 1] = e.message_id end
        return ids
      end)())
      assert.are.equal(0, hub:load().pending)
    end)

    it("lets the first settlement win and raises on a second", function()
      setup({ targets = targets { a = "ack" } })
      hub:script({ { "a", "m-1", nil, "ack2" }, { "a", "m-2", 1, "retryack" } })
      hub:enqueue({ { id = "m-1", body = 1 }, { id = "m-2", body = 2 } })
      world:advance(0)
      assert.matches("message m%-1 for target a is already settled %(ack%)", log("a")[1].note)
      assert.matches("message m%-2 for target a is already settled %(retry%)", log("a")[2].note)
      assert.are.same({ message_id = "m-2", attempt = 2 },
        { message_id = log("a")[3].message_id, attempt = log("a")[3].attempt })  -- retried, not acked
    end)

    it("refuses a negative retry delay without settling the message", function()
      setup({ targets = targets { a = "badretry" } })
      hub:enqueue({ { id = "m-1", body = 1 } })
      world:advance(0)
      assert.matches("RangeError", log("a")[1].note)
      assert.are.equal(0, hub:load().pending)
    end)

    it("refuses a settlement once the attempt is over", function()
      setup({ targets = targets { a = "keep" } })
      hub:enqueue({ { id = "m-1", body = 1 } })
      world:advance(0)
      assert.matches("can no longer be settled: its attempt is over", hub:lateSettle("ack"))
      assert.matches("can no longer be settled", hub:lateSettle("deadLetter"))
    end)

    it("retries what deliver leaves unsettled when it returns", function()
      setup({ targets = targets { a = { action = "leave", delay = 100 } } })
      hub:script({ { "a", "m-1", 2, "ack" } })
      hub:enqueue({ { id = "m-1", body = 1 } })
      world:advance(0)
      assert.are.same({ { attempt = 1, last_error_name = "FanoutSettlementError", next_attempt_at = t0 + 100 } },
        rows("SELECT attempt, last_error_name, next_attempt_at FROM eutaxy_fanout_deliveries"))
      world:advance(100)
      assert.are.equal(2, log("a")[2].attempt)
      assert.are.equal(0, hub:load().pending)
    end)

    it("retries every unsettled message when deliver raises, keeping what was settled", function()
      setup({ targets = targets { a = { action = "ack", after = "raise", delay = 100 } } })
      hub:script({ { "a", "m-2", nil, "leave" } })
      hub:enqueue({ { id = "m-1", body = 1 }, { id = "m-2", body = 2 } })
      world:advance(0)
      local left = rows("SELECT message_key, attempt, last_error_name, last_error FROM eutaxy_fanout_deliveries")
      assert.are.equal(1, #left)
      assert.are.equal("m-2", left[1].message_key)
      assert.are.equal("Error", left[1].last_error_name)
      assert.matches("target a raised after its batch", left[1].last_error)
    end)

    it("retries what an attempt that ran past its timeout left, and refuses its late settlements", function()
      setup({ targets = targets { a = { action = "sleep:2000", attemptTimeoutMs = 1000, delay = 100 } } })
      hub:script({ { "a", "m-1", 2, "ack" } })
      hub:enqueue({ { id = "m-1", body = 1 } })
      world:advance(2000)
      assert.are.same({ { attempt = 1, last_error_name = "FanoutTimeoutError", next_attempt_at = t0 + 2100 } },
        rows("SELECT attempt, last_error_name, next_attempt_at FROM eutaxy_fanout_deliveries"))
      assert.are.equal(0, #log("a"))  -- its ack raised: the callback never got to its log
      world:advance(100)
      assert.are.equal(2, log("a")[1].attempt)
    end)

    it("acks what deliver leaves unsettled with ackOnReturn, in one transaction, but still honours retry and deadLetter", function()
      setup({ targets = targets { a = { action = "leave", ackOnReturn = true } }, dlq = "record" })
      hub:script({ { "a", "m-2", 1, "retry:50" }, { "a", "m-3", 1, "dead" } })
      hub:enqueue({ { id = "m-1", body = 1 }, { id = "m-2", body = 2 }, { id = "m-3", body = 3 }, { id = "m-4", body = 4 } })
      world:advance(0)
      assert.are.same({ { message_key = "m-2" } }, rows("SELECT message_key FROM eutaxy_fanout_deliveries"))
      assert.are.same({ { message_id = "m-3" } }, rows("SELECT message_id FROM dead"))
      local settled = rows("SELECT id FROM events WHERE type = 'attempt_settled' AND outcome = 'completed' ORDER BY n")
      assert.are.same({ { id = "m-1" }, { id = "m-4" } }, settled)
    end)

    it("does not ack on return when deliver raises", function()
      setup({ targets = targets { a = { action = "leave", ackOnReturn = true, after = "raise" } } })
      hub:enqueue({ { id = "m-1", body = 1 } })
      world:advance(0)
      assert.are.same({ { attempt = 1, last_error_name = "Error" } },
        rows("SELECT attempt, last_error_name FROM eutaxy_fanout_deliveries"))
    end)
  end)

  describe("the retry policy", function()
    -- The times of the attempts of m-1 at a target that always fails.
    local function attempt_times(seed, config)
      setup(config or { targets = targets { a = "raise" }, dlq = "record" }, seed)
      hub:enqueue({ { id = "m-1", body = 1 } })
      world:advance(60 * 60 * 1000)
      local times = {}
      for _, b in ipairs(rows("SELECT at FROM batches ORDER BY n")) do times[#times + 1] = b.at - t0 end
      return times
    end

    it("makes 5 attempts by default, backing off from 1 s with jitter below, then dead-letters", function()
      local times = attempt_times(1)
      assert.are.equal(5, #times)
      for n = 1, 4 do
        local base = 1000 * 2 ^ (n - 1)
        local gap = times[n + 1] - times[n]
        assert.is_true(gap <= base and gap >= base * 0.8, ("gap %d is %d ms"):format(n, gap))
      end
      assert.are.same({ { reason = "exhausted", attempts = 5, error_name = "Error" } },
        rows("SELECT reason, attempts, error_name FROM dead"))
      assert.matches("target a failed on m%-1", rows("SELECT error FROM dead")[1].error)
    end)

    it("draws its jitter from the run's seed", function()
      local first = attempt_times(7)
      world:close()
      assert.are.same(first, attempt_times(7))
      local differs = false
      for seed = 8, 12 do
        world:close()
        local other = attempt_times(seed)
        for i = 1, #first do if other[i] ~= first[i] then differs = true end end
      end
      assert.is_true(differs)
    end)

    it("takes maxAttempts and a delay per target, in ms or as a function of the attempt", function()
      assert.are.same({ 0, 250, 500 },
        attempt_times(1, { targets = targets { a = { action = "raise", maxAttempts = 3, delay = 250 } } }))
      world:close()
      assert.are.same({ 0, 100, 300, 600 },
        attempt_times(1, { targets = targets { a = { action = "raise", maxAttempts = 4, delay = "linear" } } }))
    end)

    it("dead-letters a delivery whose delay policy fails", function()
      attempt_times(1, { targets = targets { a = { action = "raise", delay = "broken" } }, dlq = "record" })
      assert.are.same({ { reason = "exhausted", error_name = "DurableRetryPolicyError", attempts = 1 } },
        rows("SELECT reason, error_name, attempts FROM dead"))
    end)

    it("dead-letters an attempt whose lease ran out after the last attempt", function()
      setup({ targets = targets { a = { action = "sleep:5000", maxAttempts = 1, attemptTimeoutMs = 1000 } },
              dlq = "record" })
      hub:enqueue({ { id = "m-1", body = 1 } })
      world:advance(500)
      world:reset("HUB", "h")
      world:advance(1000)
      assert.are.same({ { reason = "exhausted", attempts = 1, error_name = "FanoutTimeoutError" } },
        rows("SELECT reason, attempts, error_name FROM dead"))
    end)
  end)

  describe("dead letters", function()
    it("hands the sink the stored message and its failure, its decision already persisted", function()
      setup({ targets = targets { a = "dead", b = "ack" }, dlq = "record" })
      world:advance(10)
      hub:enqueue({ { id = "m-1", body = { order = 9 } } })
      world:advance(0)
      local d = rows("SELECT * FROM dead")
      assert.are.equal(1, #d)
      assert.matches('^%["%x+%-[%x-]+","a"%]$', d[1].id)
      assert.are.same({ "m-1", "a", '{"order":9}', 1, "explicit", t0 + 10, t0 + 10, "dead_letter" },
        { d[1].message_id, d[1].target, d[1].body, d[1].attempts, d[1].reason, d[1].stored_at,
          d[1].enqueued_at, d[1].phase })
      assert.are.equal(log("a")[1].delivery_id, d[1].id)
      assert.are.equal(0, hub:load().pending)
      assert.are.equal(0, count("SELECT count(*) AS n FROM eutaxy_fanout_messages"))
    end)

    it("never turns a dead letter back into a delivery when the object is reset during the sink", function()
      setup({ targets = targets { a = "dead" }, dlq = "sleep" })
      hub:enqueue({ { id = "m-1", body = 1 } })
      world:advance(500)       -- the sink is asleep
      world:reset("HUB", "h")
      assert.are.same({ { phase = "dead_letter", dead_letter_reason = "explicit" } },
        rows("SELECT phase, dead_letter_reason FROM eutaxy_fanout_deliveries"))
      world:advance(61 * 1000)  -- the sink's second try, and its sleep
      assert.are.equal(1, count("SELECT count(*) AS n FROM batches"))  -- the consumer saw it once
      assert.are.equal(2, count("SELECT count(*) AS n FROM sink_calls"))
      assert.are.same({ { reason = "explicit", phase = "dead_letter" } }, rows("SELECT reason, phase FROM dead"))
      assert.are.equal(0, hub:load().pending)
    end)

    it("tries a failing sink again a minute later", function()
      setup({ targets = targets { a = "dead" }, dlq = "fail-once" })
      hub:enqueue({ { id = "m-1", body = 1 } })
      world:advance(0)
      assert.are.equal(0, #rows("SELECT * FROM dead"))
      assert.are.equal(t0 + 60 * 1000, hub:getAlarm())
      world:advance(60 * 1000)
      assert.are.equal(1, #rows("SELECT * FROM dead"))
      assert.are.equal(1, #log("a"))
      assert.are.equal(0, hub:load().pending)
    end)

    it("drops a dead letter with a terminal event when there is no sink", function()
      setup({ targets = targets { a = "dead", b = { action = "raise", maxAttempts = 1 } }, dlq = false })
      hub:enqueue({ { id = "m-1", body = 1 } })
      world:advance(0)
      assert.are.equal(0, hub:load().pending)
      assert.are.equal(0, count("SELECT count(*) AS n FROM eutaxy_fanout_messages"))
      assert.are.same({ { target = "a", reason = "dead_lettered", error_name = "DeadLetter" },
                        { target = "b", reason = "attempts_exhausted", error_name = "Error" } },
        rows("SELECT target, reason, error_name FROM events WHERE type = 'terminal' ORDER BY target"))
    end)

    it("removes a message's manifest when its last target settles", function()
      setup({ targets = targets { a = "ack", b = "retry:1000" } })
      hub:script({ { "b", "m-1", 2, "ack" } })
      hub:enqueue({ { id = "m-1", body = 1 } })
      world:advance(0)
      assert.are.same({ { remaining = 1 } }, rows("SELECT remaining FROM eutaxy_fanout_messages"))
      world:advance(1000)
      assert.are.equal(0, count("SELECT count(*) AS n FROM eutaxy_fanout_messages"))
    end)
  end)

  describe("memoize", function()
    it("keeps a result across the delivery's retries and deletes it when the delivery settles", function()
      setup({ targets = targets { a = { action = "memo:ack", delay = 10 } } })
      hub:script({ { "a", "m-1", 1, "memo:raise" } })
      hub:enqueue({ { id = "m-1", body = 1 } })
      world:advance(0)
      assert.are.equal(1, count("SELECT count(*) AS n FROM eutaxy_fanout_memos"))
      world:advance(10)
      assert.are.same({ { attempt = 1, note = "memo 1 second" }, { attempt = 2, note = "memo 1 second" } },
        rows("SELECT attempt, note FROM log WHERE note LIKE 'memo%' ORDER BY n"))
      assert.are.equal(1, count("SELECT count(*) AS n FROM effects"))
      assert.are.equal(0, count("SELECT count(*) AS n FROM eutaxy_fanout_memos"))
    end)
  end)

  describe("lifecycle events", function()
    it("tells the hook of registration, each attempt, its settlement and the end", function()
      setup({ targets = targets { a = { action = "raise", maxAttempts = 2, delay = 100 } }, dlq = "record" })
      hub:enqueue({ { id = "m-1", body = 1 } })
      world:advance(1000)
      local seen = {}
      for _, e in ipairs(rows("SELECT * FROM events ORDER BY n")) do
        seen[#seen + 1] = table.concat({ e.type, e.attempt, e.outcome or e.reason or "", e.error_name or "",
                                         e.next_attempt_at and (e.next_attempt_at - t0) or "" }, " ")
      end
      assert.are.same({
        "registered 0   ",
        "attempt_started 1   ",
        "attempt_settled 1 retry_scheduled Error 100",
        "attempt_started 2   ",
        "terminal 2 attempts_exhausted Error ",
      }, seen)
      local ids = rows("SELECT DISTINCT id, target, generation FROM events")
      assert.are.equal(1, #ids)
      assert.are.equal("m-1", ids[1].id)
      assert.are.equal(36, #ids[1].generation)
    end)

    it("gives fanout:lifecycle hooks the same events until they are detached", function()
      setup({ targets = targets { a = "ack" }, extraHook = true })
      hub:enqueue({ { id = "m-1", body = 1 } })
      world:advance(0)
      assert.are.equal(count("SELECT count(*) AS n FROM events WHERE hook = 'config'"),
        count("SELECT count(*) AS n FROM events WHERE hook = 'extra'"))
      hub:detachHook()
      hub:enqueue({ { id = "m-2", body = 1 } })
      world:advance(0)
      assert.are.equal(3, count("SELECT count(*) AS n FROM events WHERE hook = 'extra'"))
      assert.are.equal(6, count("SELECT count(*) AS n FROM events WHERE hook = 'config'"))
    end)

    it("goes on delivering when a hook raises", function()
      setup({ targets = targets { a = "ack" }, hookRaises = true })
      assert.is_true(hub:enqueue({ { id = "m-1", body = 1 } }).success)
      world:advance(0)
      assert.are.equal(1, #log("a"))
      assert.are.equal(0, hub:load().pending)
    end)
  end)

  describe("load", function()
    it("counts pending deliveries and the messages of attempts running now", function()
      setup({ targets = targets { a = "sleep:1000", b = "leave" } })
      hub:enqueue({ { id = "m-1", body = 1 }, { id = "m-2", body = 2 } })
      assert.are.same({ pending = 4, delivering = 0 }, hub:load())
      world:advance(10)  -- a's callback sleeps on its batch of two
      assert.are.same({ pending = 4, delivering = 2 }, hub:load())
      world:advance(2000)
      assert.are.same({ pending = 2, delivering = 0 }, hub:load())
    end)

    it("survives a reset: the count lives with the rows", function()
      setup({ targets = targets { a = "leave" } })
      hub:enqueue({ { id = "m-1", body = 1 } })
      world:reset("HUB", "h")
      assert.are.equal(1, hub:load().pending)
    end)
  end)

  describe("fault points for the checker", function()
    local function check(action, fault)
      local p = assert(io.popen(("EUTAXY_FANOUT_ACTION=%s EUTAXY_FANOUT_FAULT=%s %s check "
        .. "spec/fixtures/durability/fanout_faults.sim.lua --budget-ms 600000 2>&1"):format(action, fault, bin)))
      local out = p:read("a")
      local _, _, code = p:close()
      return out, code
    end

    it("runs the callback again after a delivery-timeout, so an effect that is not idempotent doubles", function()
      local out, code = check("effect", "delivery-timeout")
      assert.are.equal(1, code)
      assert.matches("Invariant effect%-once is violated", out)
      assert.matches("delivery%-timeout at fanout a m%-1 attempt 1", out)
    end)

    it("retries after a delivery-fail without running the callback, and memoize makes a timeout safe", function()
      local out, code = check("effect", "delivery-fail")
      assert.are.equal(0, code, out)
      out, code = check("memo", "delivery-timeout")
      assert.are.equal(0, code, out)
      assert.matches("^BOUNDED", out)
    end)
  end)
end)
