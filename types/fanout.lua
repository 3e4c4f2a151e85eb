---@meta
-- LuaLS annotations for durable fanout: eutaxy.fanout{...}.

---@class eutaxy.FanoutConfig
---@field ctx? eutaxy.DurableObjectState the object's ctx, to use its scheduler
---@field scheduler? eutaxy.Scheduler or the scheduler itself
---@field targets table<string, eutaxy.FanoutTarget> by target name
---@field dlq? fun(stored: eutaxy.StoredMessage) the dead-letter sink; without it, what gives up is dropped
---@field maxBatchSize? integer messages per deliver call (10, at most 10000)
---@field batchDelayMs? integer hold first deliveries to the next multiple of this after now, so they share batches (0)
---@field maxAttempts? integer the default of every target (5)
---@field delay? integer|fun(attempt: integer): number the default of every target
---@field attemptTimeoutMs? integer the default of every target (5 minutes)
---@field onLifecycleEvent? fun(event: eutaxy.FanoutEvent)

---@class eutaxy.FanoutTarget
---@field deliver fun(messages: eutaxy.FanoutMessage[]) called with each batch; may yield
---@field ackOnReturn? boolean ack what deliver leaves unsettled when it returns (not when it raises)
---@field maxAttempts? integer attempts before the dead letter, the first included (5)
---@field delay? integer|fun(attempt: integer): number ms before a retry (default: exponential with jitter)
---@field attemptTimeoutMs? integer how long an attempt may run, and its claim's lease (5 minutes)

---@class eutaxy.FanoutError
---@field name string
---@field message string

---@class eutaxy.StoredMessage
---@field id string the delivery's id
---@field messageId string
---@field target string
---@field body any
---@field enqueuedAt integer
---@field storedAt integer when it was dead-lettered
---@field attempts integer attempts made
---@field failure { reason: "explicit"|"exhausted", error: eutaxy.FanoutError|nil }

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
---@field pending integer deliveries not yet settled
---@field delivering integer messages in attempts running now in this instance

---@class eutaxy.EnqueueResult
---@field success boolean
---@field value string[]|nil the messages' ids, in order
---@field error eutaxy.FanoutError|nil why the whole batch was refused
---@field load eutaxy.FanoutLoad

---@class eutaxy.FanoutMessageInput
---@field id? string
---@field body any
---@field deduplicationKey? string defaults to the id

--- A fanout: create it in init, so that it is there again after a reset.
---@class eutaxy.Fanout
local Fanout = {}

--- Accepts the whole batch in the current turn, or none of it. The same
--- deduplication key with the same work is a no-op; with other work the
--- batch is refused (success = false).
---@param messages eutaxy.FanoutMessageInput|eutaxy.FanoutMessageInput[]
---@param options? { targets?: string[] } some of the configured targets (all by default)
---@return eutaxy.EnqueueResult
function Fanout:enqueue(messages, options) end

--- Adds a lifecycle hook beside onLifecycleEvent; returns a function that removes it.
---@param hook fun(event: eutaxy.FanoutEvent)
---@return fun()
function Fanout:lifecycle(hook) end

--- How much work is pending (exact, one row to read).
---@return eutaxy.FanoutLoad
function Fanout:load() end

--- The object's alarm, for an object whose only participant is this fanout.
---@param info? table
function Fanout:alarm(info) end

--- A message as deliver receives it; the first settlement wins.
---@class eutaxy.FanoutMessage
---@field id string the message's id
---@field deliveryId string this delivery's id (its generation and target)
---@field target string the target's name
---@field body any the message's body, as enqueued
---@field attempt integer this attempt, from 1
---@field enqueuedAt integer when the message was enqueued, ms
local FanoutMessage = {}

--- This target is done with the message.
function FanoutMessage:ack() end

--- Retries the message after delayMs (default: the target's policy); the last attempt dead-letters instead.
---@param delayMs? integer
function FanoutMessage:retry(delayMs) end

--- Sends the message to the dead-letter sink (or drops it, without one).
function FanoutMessage:deadLetter() end

--- The result of fn for this delivery under key, computed once and kept
--- across the delivery's retries. fn may yield.
---@generic R
---@param key string
---@param fn fun(): R
---@return R
function FanoutMessage:memoize(key, fn) end
