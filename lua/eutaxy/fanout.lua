--- eutaxy.fanout: durable, independent delivery of messages to static named
-- targets (DESIGN.md: "Durable fanout"), attached to an object.
--
--   function Shop:init()
--     self.fanout = eutaxy.fanout {
--       ctx = self.ctx,                     -- or scheduler = eutaxy.scheduler(self.ctx)
--       targets = {
--         email = { ackOnReturn = true, deliver = function(messages) ... end },
--         ledger = { maxAttempts = 8, deliver = function(messages)
--           for _, m in ipairs(messages) do book(m.body); m:ack() end
--         end },
--       },
--       dlq = function(stored) ... end,     -- gets what gave up, with its failure
--     }
--   end
--   function Shop:place(order) return self.fanout:enqueue({ { id = order.id, body = order } }) end
--   function Shop:alarm(info) return eutaxy.scheduler(self.ctx):alarm(info) end
--
-- The engine in C (host/fanout.c, through host/lfanout.c) keeps the
-- messages in the object's database and makes every decision durable; this
-- module is the runner. It registers with the object's scheduler as the
-- participant "fanout", and when the alarm fires it claims each target's
-- next batch (committed before the callback runs), calls the target's
-- deliver with the batch, and settles each message as the callback says:
-- ack, retry, dead letter, or, for a message it left unsettled (the
-- callback returned, raised or ran past its deadline), a retry by the
-- target's policy. Enqueued messages are due at once (or at the next
-- batchDelayMs boundary after now), so the alarm fires right after the enqueuing turn.
-- Targets take their turns one after another within an alarm (a callback
-- that calls other objects waits for them), each with its own batches, so
-- a failing target never holds the others' messages back.
--
-- Delivery is at least once: an attempt that never settles (the isolate was
-- reset, the invocation died) comes back when its claim's lease ends, so a
-- target must be idempotent, and memoize(key, fn) helps it be.
-- Inside an isolate eutaxy.core is the third argument of this chunk, and
-- user code cannot require it; in a host Lua state require finds it.
local core = select(3, ...) or require "eutaxy.core"
local errors = require "eutaxy.errors"

local type, pcall, error, ipairs, pairs, setmetatable, tostring, select =
  type, pcall, error, ipairs, pairs, setmetatable, tostring, select
local pack, unpack, sort, concat = table.pack, table.unpack, table.sort, table.concat

local fanout = {}

local DEFAULT_MAX_ATTEMPTS = 5
local DEFAULT_ATTEMPT_TIMEOUT_MS = 5 * 60 * 1000
local DEFAULT_MAX_BATCH = 10
local MAX_BATCH = 10000  -- EU_FANOUT_MAX_BATCH
-- A failed dead-letter sink is tried again after this long, and the work of
-- a target no longer configured waits this long between looks.
local INFRA_RETRY_MS = 60 * 1000
-- Messages one alarm takes before it hands the rest to the next firing (the
-- alarm, still due, fires again at once): an invocation's CPU limit counts
-- from its last yield, and the claims' commits are not yields.
local MAX_PER_RUN = 1000
-- The fault points the checker may strike before a target's callback.
local FAULTS = { "delivery-fail", "delivery-timeout" }

---@class eutaxy.FanoutError
---@field name string
---@field message string

---@class eutaxy.FanoutMessage
---@field id string the message's id
---@field deliveryId string this delivery's id (its generation and target)
---@field target string the target's name
---@field body any the message's body, as enqueued
---@field attempt integer this attempt, from 1
---@field enqueuedAt integer when the message was enqueued, ms
local Message = {}
Message.__index = Message
Message.__name = "eutaxy.FanoutMessage"

---@class eutaxy.FanoutTarget
---@field deliver fun(messages: eutaxy.FanoutMessage[]) called with each batch
---@field ackOnReturn boolean|nil ack what deliver leaves unsettled when it returns (not when it raises)
---@field maxAttempts integer|nil attempts before the dead letter, the first included (5)
---@field delay integer|(fun(attempt: integer): number)|nil ms before a retry (default: exponential with jitter)
---@field attemptTimeoutMs integer|nil how long an attempt may run, and its claim's lease (5 minutes)

---@class eutaxy.StoredMessage
---@field id string the delivery's id
---@field messageId string
---@field target string
---@field body any
---@field enqueuedAt integer
---@field storedAt integer when it was dead-lettered
---@field attempts integer attempts made
---@field failure { reason: "explicit"|"exhausted", error: eutaxy.FanoutError|nil }

---@class eutaxy.FanoutConfig
---@field scheduler table|nil the object's scheduler (eutaxy.scheduler(self.ctx))
---@field ctx table|nil the object's ctx, to use its scheduler
---@field targets table<string, eutaxy.FanoutTarget>
---@field dlq (fun(stored: eutaxy.StoredMessage))|nil the dead-letter sink; without it, what gives up is dropped
---@field maxBatchSize integer|nil messages per deliver call (10, at most 10000)
---@field batchDelayMs integer|nil hold first deliveries to the next multiple of this after now, so they share batches (0)
---@field maxAttempts integer|nil the default of every target
---@field delay integer|(fun(attempt: integer): number)|nil the default of every target
---@field attemptTimeoutMs integer|nil the default of every target
---@field onLifecycleEvent (fun(event: eutaxy.FanoutEvent))|nil

---@class eutaxy.FanoutEvent
---@field type "registered"|"attempt_started"|"attempt_settled"|"terminal"
---@field entityKind "fanout_delivery"
---@field id string the message's id
---@field target string
---@field generation string
---@field timestamp integer
---@field attempt integer
---@field outcome "completed"|"retry_scheduled"|nil attempt_settled
---@field nextAttemptAt integer|nil retry_scheduled
---@field durationMs integer|nil attempt_settled
---@field reason "dead_lettered"|"attempts_exhausted"|nil terminal
---@field error eutaxy.FanoutError|nil

---@class eutaxy.FanoutLoad
---@field pending integer deliveries not yet settled (dead letters waiting for their sink included)
---@field delivering integer messages in attempts running now in this instance

---@class eutaxy.EnqueueResult
---@field success boolean
---@field value string[]|nil the messages' ids, in order
---@field error eutaxy.FanoutError|nil why the whole batch was refused
---@field load eutaxy.FanoutLoad

---@class eutaxy.Fanout
---@field private _fns table
local Fanout = {}
Fanout.__index = Fanout
Fanout.__name = "eutaxy.Fanout"

-- Each message's settlement state, out of the message's own table so that
-- the message holds data only.
local private = setmetatable({}, { __mode = "k" })

local function is_ms(v)
  return math.type(v) == "integer" or (type(v) == "number" and v == math.floor(v) and v == v
    and v > -2^62 and v < 2^62)
end

local function fail(name, message, level)
  error(errors.new(name, message), level and level + 1 or 0)
end

-- A plain { name, message } for any error value.
local function describe(e)
  if type(e) == "table" then
    local name = type(e.name) == "string" and e.name or "Error"
    local mt = getmetatable(e)
    if type(e.message) == "string" then return { name = name, message = e.message } end
    if mt and mt.__tostring then return { name = name, message = tostring(e) } end
    return { name = name, message = tostring(e.message or "error") }
  end
  return { name = "Error", message = tostring(e) }
end

-- Raises again what a C function of the engine raised, at the caller's line.
local function call(level, fn, ...)
  local r = pack(pcall(fn, ...))
  if r[1] then return unpack(r, 2, r.n) end
  if type(r[2]) == "string" then error("fanout: " .. r[2]:gsub("^fanout: ", ""), level + 1) end
  error(r[2], 0)
end

-- ---- configuration ----------------------------------------------------

local function check_positive(v, what, level)
  if v ~= nil and not (math.type(v) == "integer" and v >= 1) then
    error("eutaxy.fanout: " .. what .. " must be a positive integer", level + 1)
  end
end

local function check_delay(v, what, level)
  if v ~= nil and type(v) ~= "function" and not (is_ms(v) and v >= 0) then
    error("eutaxy.fanout: " .. what .. " must be whole ms or a function(attempt) giving them", level + 1)
  end
end

local function resolve_policy(name, t, config, fns)
  local where = "targets." .. name
  check_positive(t.maxAttempts, where .. ".maxAttempts", 4)
  check_positive(t.attemptTimeoutMs, where .. ".attemptTimeoutMs", 4)
  check_delay(t.delay, where .. ".delay", 4)
  local delay = t.delay
  if delay == nil then delay = config.delay end
  local fn
  if type(delay) == "function" then
    fn = delay
  elseif delay ~= nil then
    local ms = math.tointeger(delay)
    fn = function() return ms end
  else
    fn = fns.backoff  -- min(1000 * 2^(attempt-1), 300000) ms, less up to a fifth: the world's jitter
  end
  return {
    maxAttempts = t.maxAttempts or config.maxAttempts or DEFAULT_MAX_ATTEMPTS,
    attemptTimeoutMs = t.attemptTimeoutMs or config.attemptTimeoutMs or DEFAULT_ATTEMPT_TIMEOUT_MS,
    delay = fn,
  }
end

local function attach(config)
  if config.scheduler ~= nil then
    local s = config.scheduler
    if type(s) ~= "table" or type(s.register) ~= "function" then
      error("eutaxy.fanout: scheduler must be the object's scheduler (eutaxy.scheduler(self.ctx))", 4)
    end
    return s
  end
  if type(config.ctx) ~= "table" then
    error("eutaxy.fanout needs scheduler = eutaxy.scheduler(self.ctx) or ctx = self.ctx", 4)
  end
  return require("eutaxy.scheduler").for_ctx(config.ctx)
end

--- Attaches a fanout to the object; create it in init, so that it is there
--- again after a reset when the alarm fires. Applies the fanout's migrations.
---@param config eutaxy.FanoutConfig
---@return eutaxy.Fanout
function fanout.new(config)
  if type(config) ~= "table" then error("eutaxy.fanout expects a table of options", 2) end
  if type(config.targets) ~= "table" then
    error("eutaxy.fanout expects targets = { name = { deliver = function(messages) ... end } }", 2)
  end
  check_positive(config.maxBatchSize, "maxBatchSize", 2)
  if config.maxBatchSize and config.maxBatchSize > MAX_BATCH then
    error("eutaxy.fanout: maxBatchSize must be at most " .. MAX_BATCH, 2)
  end
  check_positive(config.maxAttempts, "maxAttempts", 2)
  check_positive(config.attemptTimeoutMs, "attemptTimeoutMs", 2)
  check_delay(config.delay, "delay", 2)
  local batch_delay = config.batchDelayMs or 0
  if not (math.type(batch_delay) == "integer" and batch_delay >= 0) then
    error("eutaxy.fanout: batchDelayMs must be a non-negative integer", 2)
  end
  if config.dlq ~= nil and type(config.dlq) ~= "function" then
    error("eutaxy.fanout: dlq must be a function(stored)", 2)
  end
  if config.onLifecycleEvent ~= nil and type(config.onLifecycleEvent) ~= "function" then
    error("eutaxy.fanout: onLifecycleEvent must be a function(event)", 2)
  end
  if not core.isolate then error("eutaxy.fanout runs inside an object; a spec reaches it through a world", 2) end
  local ok, d = pcall(core.durability)
  if not ok then error(d, 2) end
  local fns = d.fanout
  local names, targets, policies = {}, {}, {}
  for name, t in pairs(config.targets) do
    if type(name) ~= "string" or name == "" or name:find("\0", 1, true) then
      error("eutaxy.fanout: target names must be non-empty strings", 2)
    end
    if type(t) ~= "table" or type(t.deliver) ~= "function" then
      error("eutaxy.fanout: target " .. name .. " needs deliver = function(messages)", 2)
    end
    names[#names + 1] = name
    targets[name] = t
    policies[name] = resolve_policy(name, t, config, fns)
  end
  if #names == 0 then error("eutaxy.fanout needs at least one target", 2) end
  sort(names)
  local sched = attach(config)
  call(2, fns.migrate)
  local self = setmetatable({
    _fns = fns,
    _sched = sched,
    _names = names,
    _targets = targets,
    _policies = policies,
    _dlq = config.dlq,
    _max_batch = config.maxBatchSize or DEFAULT_MAX_BATCH,
    _batch_delay = batch_delay,
    _on_event = config.onLifecycleEvent,
    _hooks = {},
    _running = {},     -- target -> true while a pass of it runs
    _delivering = {},  -- target -> messages in its running attempt
  }, Fanout)
  local registered, err = pcall(sched.register, sched, {
    name = "fanout",
    run_due = function(now) return self:_run_due(now) end,
  })
  if not registered then error("eutaxy.fanout: " .. tostring(err):gsub("^[^:]*:%d+: ", ""), 2) end
  return self
end

-- ---- lifecycle --------------------------------------------------------

-- Hooks are best effort: one that raises is ignored, and never changes
-- what happens to a message.
local function emit(self, event)
  event.entityKind = "fanout_delivery"
  if self._on_event then pcall(self._on_event, event) end
  local hooks = self._hooks
  if #hooks == 0 then return end
  local copy = {}
  for i, h in ipairs(hooks) do copy[i] = h end
  for _, h in ipairs(copy) do pcall(h, event) end
end

local function event_of(row, type_, fields)
  local e = { type = type_, id = row.messageId, target = row.target, generation = row.generation,
              attempt = row.attempt }
  for k, v in pairs(fields) do e[k] = v end
  return e
end

--- Adds a lifecycle hook beside onLifecycleEvent; returns a function that
--- removes it.
---@param hook fun(event: eutaxy.FanoutEvent)
---@return fun()
function Fanout:lifecycle(hook)
  if type(hook) ~= "function" then error("fanout:lifecycle expects a function(event)", 2) end
  local hooks = self._hooks
  hooks[#hooks + 1] = hook
  return function()
    for i, h in ipairs(hooks) do
      if h == hook then
        table.remove(hooks, i)
        return
      end
    end
  end
end

--- How much work is pending: read from the counter the engine keeps in the
--- same transactions as the deliveries, so it is exact (a rolled-back turn
--- takes its count back) and costs one row, however large the backlog.
---@return eutaxy.FanoutLoad
function Fanout:load()
  local delivering = 0
  for _, n in pairs(self._delivering) do delivering = delivering + n end
  return { pending = call(2, self._fns.pending), delivering = delivering }
end

--- The object's alarm, for an object whose only participant is this fanout:
--- the same as eutaxy.scheduler(self.ctx):alarm(info).
---@param info table|nil
function Fanout:alarm(info)
  return self._sched:alarm(info)
end

-- ---- enqueue ----------------------------------------------------------

-- The batch's entries and sorted targets, or raises a FanoutEnqueueError.
local function prepare(self, messages, options)
  if type(messages) ~= "table" then
    fail("FanoutEnqueueError", "enqueue expects a message or an array of messages", 0)
  end
  if options ~= nil and type(options) ~= "table" then
    fail("FanoutEnqueueError", "enqueue options must be a table", 0)
  end
  local list = messages
  if #messages == 0 and next(messages) ~= nil then list = { messages } end  -- one message
  local targets = {}
  local chosen = options and options.targets
  if chosen ~= nil then
    if type(chosen) ~= "table" then fail("FanoutEnqueueError", "targets must be an array of target names", 0) end
    for i, name in ipairs(chosen) do targets[i] = name end
  else
    for i, name in ipairs(self._names) do targets[i] = name end
  end
  local seen = {}
  for _, name in ipairs(targets) do
    if type(name) ~= "string" or not self._targets[name] or seen[name] then
      fail("FanoutEnqueueError", "enqueue targets must be distinct configured target names", 0)
    end
    seen[name] = true
  end
  if #targets == 0 then fail("FanoutEnqueueError", "enqueue needs at least one target", 0) end
  sort(targets)
  local entries = {}
  for i, m in ipairs(list) do
    if type(m) ~= "table" then fail("FanoutEnqueueError", "message " .. i .. " must be a table { id =, body = }", 0) end
    local id = m.id
    if id == nil then id = core.uuid() end
    local key = m.deduplicationKey
    if key == nil then key = id end
    if type(id) ~= "string" or id == "" or type(key) ~= "string" or key == ""
       or id:find("\0", 1, true) or key:find("\0", 1, true) then
      fail("FanoutEnqueueError", "message ids and deduplication keys must be non-empty strings", 0)
    end
    entries[i] = { key = key, id = id, body = m.body }
  end
  return entries, targets
end

--- Accepts the whole batch in the current turn, each message with its
--- frozen target set, or none of it. A message whose deduplication key
--- (its id by default) is pending with the same id, body and targets is
--- accepted again without a second delivery; the same key with different
--- work refuses the batch (success = false). A failure to write raises:
--- it is never reported as a definite refusal.
---@param messages { id: string|nil, body: any, deduplicationKey: string|nil }|{ id: string|nil, body: any, deduplicationKey: string|nil }[]
---@param options { targets: string[]|nil }|nil targets: some of the configured ones (all by default)
---@return eutaxy.EnqueueResult
function Fanout:enqueue(messages, options)
  local ok, entries, targets = pcall(prepare, self, messages, options)
  if not ok then return { success = false, error = describe(entries), load = self:load() } end
  local now = core.now()
  local first_at = now
  local d = self._batch_delay
  -- The next boundary strictly after now makes every message of the window
  -- due together, and holds each for at most d ms (a message enqueued on a
  -- boundary waits for the next one, or it would share no batch at all).
  if d > 0 then first_at = (now // d + 1) * d end
  local accepted, results, pending = call(2, self._fns.enqueue, entries, targets, first_at)
  if not accepted then
    return { success = false, error = { name = results, message = pending }, load = self:load() }
  end
  local ids = {}
  for i, entry in ipairs(entries) do
    ids[i] = entry.id
    local r = results[i]
    if r.fresh then
      for _, target in ipairs(targets) do
        emit(self, { type = "registered", id = entry.id, target = target, generation = r.generation,
                     timestamp = r.createdAt, attempt = 0 })
      end
    end
  end
  return { success = true, value = ids, load = self:load() }
end

-- ---- settlements --------------------------------------------------------

local function settlement_error(row, why)
  return errors.new("FanoutSettlementError",
    ("message %s for target %s %s"):format(row.messageId, row.target, why))
end

local function json_string(v)
  return '"' .. v:gsub('[%c"\\]', function(c)
    if c == '"' or c == "\\" then return "\\" .. c end
    return ("\\u%04x"):format(c:byte())
  end) .. '"'
end

-- What names a delivery to its consumer: its generation and target.
local function delivery_identity(row)
  return "[" .. json_string(row.generation) .. "," .. json_string(row.target) .. "]"
end

-- The dead-letter step: the decision is committed before the sink runs; the
-- delivery is removed once the sink has taken it (or at once, with no sink).
-- strict: a stale attempt raises (the consumer asked), else it is skipped.
function Fanout:_dead_letter(row, reason, failure, strict)
  local fns = self._fns
  local now = core.now()
  local err = failure
  if err == nil and row.lastError then err = { name = row.lastErrorName or "Error", message = row.lastError } end
  if not self._dlq then
    -- Nothing could ever take it, and retrying the step would keep the
    -- object awake forever: it is dropped, and the terminal event says so.
    if not call(3, fns.remove, row.id, row.generation, row.attempt, true) then
      if strict then error(settlement_error(row, "was settled by a newer attempt"), 0) end
      return
    end
  else
    local at = row.deadLetteredAt or now
    if not call(3, fns.dead_letter, row.id, row.generation, row.attempt, reason, at, now + INFRA_RETRY_MS,
                err and err.name, err and err.message) then
      if strict then error(settlement_error(row, "was settled by a newer attempt"), 0) end
      return
    end
    local stored = {
      id = delivery_identity(row), messageId = row.messageId, target = row.target, body = row.body,
      enqueuedAt = row.createdAt, storedAt = at, attempts = row.attempt,
      failure = { reason = reason, error = err },
    }
    local ok, sink_err = pcall(self._dlq, stored)
    if not ok then
      -- The decision stands; the sink is tried again when the row comes due.
      print(("fanout: the dead-letter sink failed for message %s, target %s (tried again in %ds): %s")
        :format(row.messageId, row.target, INFRA_RETRY_MS // 1000, describe(sink_err).message))
      return
    end
    call(3, fns.remove, row.id, row.generation, row.attempt, true)
  end
  emit(self, event_of(row, "terminal", {
    timestamp = core.now(),
    reason = reason == "explicit" and "dead_lettered" or "attempts_exhausted",
    error = err or { name = "DeadLetter", message = "Dead-lettered by consumer" },
  }))
end

-- Schedules the next attempt by the policy (or override), or dead-letters
-- an attempt that was the last one.
function Fanout:_retry(row, policy, override, failure, started, strict)
  if row.attempt >= policy.maxAttempts then
    return self:_dead_letter(row, "exhausted", failure, strict)
  end
  local delay = override
  if delay == nil then
    local ok, v = pcall(policy.delay, row.attempt)
    if not (ok and type(v) == "number" and v >= 0 and v < 2^53) then  -- NaN fails too
      -- A policy that cannot say when to retry ends the delivery, visibly.
      return self:_dead_letter(row, "exhausted", { name = "DurableRetryPolicyError",
        message = "the retry delay of target " .. row.target .. " is not a non-negative number of ms"
          .. (ok and "" or (": " .. describe(v).message)) }, strict)
    end
    delay = math.tointeger(math.floor(v + 0.5))
  end
  local now = core.now()
  local next_at = now + delay
  if not call(3, self._fns.retry, row.id, row.generation, row.attempt, next_at, failure.name, failure.message) then
    if strict then error(settlement_error(row, "was settled by a newer attempt"), 0) end
    return
  end
  emit(self, event_of(row, "attempt_settled", {
    timestamp = now, durationMs = now - started, outcome = "retry_scheduled",
    nextAttemptAt = next_at, error = failure,
  }))
end

-- Runs a consumer's settlement: the first one wins, and none is taken once
-- the attempt is over (its callback returned, or it ran past its deadline).
local function settle(msg, outcome, action, ...)
  local p = private[msg]
  local st, batch = p.state, p.batch
  if not batch.closed and core.now() > batch.deadline then batch.closed = "timed out" end
  if batch.closed then
    error(settlement_error(st.row, "can no longer be settled: its attempt "
      .. (batch.closed == "timed out" and "timed out" or "is over")), 3)
  end
  if st.outcome then
    error(settlement_error(st.row, "is already settled (" .. st.outcome .. ")"), 3)
  end
  st.outcome = outcome
  local ok, err = pcall(action, ...)
  if not ok then
    st.failed = true  -- the end of the attempt retries it, if it is still ours
    error(err, 0)
  end
  st.completed = true
end

--- Acknowledges the message: this target is done with it.
function Message:ack()
  local p = private[self]
  settle(self, "ack", function()
    local row, fo = p.state.row, p.fanout
    if not call(4, fo._fns.remove, row.id, row.generation, row.attempt, false) then
      error(settlement_error(row, "was settled by a newer attempt"), 0)
    end
    local now = core.now()
    emit(fo, event_of(row, "attempt_settled", { timestamp = now, durationMs = now - p.started,
                                                 outcome = "completed" }))
  end)
end

--- Retries the message after delayMs (default: the target's policy). Its
--- last attempt goes to the dead letter instead.
---@param delayMs integer|nil
function Message:retry(delayMs)
  local p = private[self]
  if delayMs ~= nil and not (is_ms(delayMs) and delayMs >= 0) then
    error(errors.new("RangeError", "retry: delayMs must be a non-negative whole number of ms"), 2)
  end
  settle(self, "retry", function()
    p.fanout:_retry(p.state.row, p.policy, delayMs and math.tointeger(delayMs),
      { name = "Retry", message = "Retried by consumer" }, p.started, true)
  end)
end

--- Sends the message to the dead-letter sink (or drops it, without one).
function Message:deadLetter()
  local p = private[self]
  settle(self, "deadLetter", function()
    p.fanout:_dead_letter(p.state.row, "explicit", nil, true)
  end)
end

--- The result of fn for this delivery under key: computed once and kept
--- across the delivery's retries (deleted when it settles), so a retried
--- callback does not repeat the work. fn may yield.
---@param key string
---@param fn fun(): any
---@return any ...
function Message:memoize(key, fn)
  local p = private[self]
  if type(key) ~= "string" or key == "" or key:find("\0", 1, true) then
    error("memoize: the key must be a non-empty string", 2)
  end
  if type(fn) ~= "function" then error("memoize: expects a function", 2) end
  local row, fns = p.state.row, p.fanout._fns
  local found = pack(call(2, fns.memo_get, row.id, row.generation, key))
  if found[1] then return unpack(found, 2, found.n) end
  local r = pack(fn())
  call(2, fns.memo_put, row.id, row.generation, row.attempt, key, unpack(r, 1, r.n))
  return unpack(r, 1, r.n)
end

local function new_message(self, state, batch, policy, started)
  local row = state.row
  local msg = setmetatable({
    id = row.messageId, deliveryId = delivery_identity(row), target = row.target, body = row.body,
    attempt = row.attempt, enqueuedAt = row.createdAt,
  }, Message)
  private[msg] = { fanout = self, state = state, batch = batch, policy = policy, started = started }
  return msg
end

-- ---- the runner -------------------------------------------------------

-- ackOnReturn: every message the callback left unsettled, in one transaction.
function Fanout:_ack_unsettled(states, started)
  local refs, list = {}, {}
  for _, st in ipairs(states) do
    if st.outcome == nil then
      list[#list + 1] = st
      refs[#refs + 1] = { st.row.id, st.row.generation, st.row.attempt }
      st.outcome = "ack"
    end
  end
  if #list == 0 then return end
  local ok, removed = pcall(self._fns.remove_many, refs)
  if not ok then
    for _, st in ipairs(list) do st.failed = true end
    return
  end
  local now = core.now()
  for i, st in ipairs(list) do
    if removed[i] then
      st.completed = true
      emit(self, event_of(st.row, "attempt_settled", { timestamp = now, durationMs = now - started,
                                                       outcome = "completed" }))
    end
  end
end

-- One attempt of a batch: the fault point, the callback, then the
-- settlement of what it left.
function Fanout:_deliver(name, claims, policy)
  local target = self._targets[name]
  local started = core.now()
  local batch = { closed = false, deadline = started + policy.attemptTimeoutMs }
  local states, messages = {}, {}
  for i, row in ipairs(claims) do
    states[i] = { row = row }
    messages[i] = new_message(self, states[i], batch, policy, started)
  end
  self._delivering[name] = #claims
  for _, row in ipairs(claims) do
    emit(self, event_of(row, "attempt_started", { timestamp = started }))
  end
  local first = claims[1]
  local fault = core.fault(FAULTS, ("fanout %s %s attempt %d"):format(name, first.messageId, first.attempt))
  local ok, err
  if fault == "delivery-fail" then
    ok, err = false, errors.new("DeliveryFailed", "the callback of target " .. name .. " failed (an injected fault)")
  elseif fault == "delivery-timeout" then
    -- The callback runs, but its attempt is already past its deadline: it
    -- settles nothing, and its messages come back when their leases end.
    batch.closed = "timed out"
    pcall(target.deliver, messages)
    return
  else
    ok, err = pcall(target.deliver, messages)
  end
  if not batch.closed and core.now() > batch.deadline then batch.closed = "timed out" end
  local timed_out = batch.closed == "timed out"
  batch.closed = batch.closed or "over"
  local failure
  if timed_out then
    failure = { name = "FanoutTimeoutError", message = ("the attempt took longer than %d ms"):format(policy.attemptTimeoutMs) }
  elseif not ok then
    failure = describe(err)
  else
    if target.ackOnReturn then self:_ack_unsettled(states, started) end
    failure = { name = "FanoutSettlementError", message = "Consumer returned without settling the message" }
  end
  for _, st in ipairs(states) do
    if not st.completed and (st.outcome == nil or st.failed) then
      st.outcome = "retry"
      self:_retry(st.row, policy, nil, failure, started, false)
    end
  end
end

-- One pass over a target: claim its next batch, dead-letter what has no
-- attempt left, deliver the rest. Returns how many rows it found.
function Fanout:_run_target(name)
  if self._running[name] then return 0 end
  self._running[name] = true
  local ok, found = pcall(function()
    local policy = self._policies[name]
    local rows = call(4, self._fns.claim, name, self._max_batch, policy.maxAttempts, policy.attemptTimeoutMs)
    if #rows == 0 then return 0 end
    local claims = {}
    for _, row in ipairs(rows) do
      if row.terminal then
        local failure
        if row.phase == "delivery" and not row.lastError then
          failure = { name = "FanoutTimeoutError",
                      message = ("attempt %d never settled before its lease ran out"):format(row.attempt) }
        end
        self:_dead_letter(row, row.reason or "exhausted", failure, false)
      else
        claims[#claims + 1] = row
      end
    end
    if #claims > 0 then self:_deliver(name, claims, policy) end
    return #rows
  end)
  self._running[name] = nil
  self._delivering[name] = nil
  if not ok then error(found, 0) end
  return found
end

-- Work of targets that are no longer configured is kept, not delivered:
-- put off so that it does not hold the alarm at now.
function Fanout:_postpone_unknown(now)
  local fns = self._fns
  for _, name in ipairs(call(3, fns.targets)) do
    if not self._targets[name] then
      local n = call(3, fns.postpone, name, now + INFRA_RETRY_MS)
      if n > 0 then
        print(("fanout: target %s is not configured: %d deliveries kept, looked at again in %ds")
          :format(name, n, INFRA_RETRY_MS // 1000))
      end
    end
  end
end

-- The scheduler's participant: each target advances independently, one
-- batch per pass, until nothing is due (or MAX_PER_RUN messages, and the
-- alarm, still due, fires again for the rest).
function Fanout:_run_due(now)
  self:_postpone_unknown(now or core.now())
  local taken = 0
  repeat
    local found = 0
    for _, name in ipairs(self._names) do found = found + self:_run_target(name) end
    taken = taken + found
  until found == 0 or taken >= MAX_PER_RUN
end

fanout.Fanout = Fanout
fanout.Message = Message
return fanout
