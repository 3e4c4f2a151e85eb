---@meta
-- LuaLS annotations for the object's scheduler, named alarms and durable
-- operations: eutaxy.scheduler(ctx), eutaxy.alarms{...}, eutaxy.durable{...}.

--- Keeps the object's one alarm at the earliest due time of its participants.
---@class eutaxy.Scheduler
---@field agenda table the agenda's C functions (eutaxy.core.durability().agenda)
local Scheduler = {}

--- Attaches a participant: its run_due runs, in order of registration, whenever the alarm fires.
---@param participant eutaxy.Participant
function Scheduler:register(participant) end

--- Moves the object's alarm to the earliest due time of every participant
--- (or deletes it), in the current turn.
function Scheduler:reconcile() end

--- The alarm handler: runs every participant's due work, then sets the alarm
--- again; a participant that raises makes the alarm retry.
---@param info? { retryCount: integer, isRetry: boolean }
function Scheduler:alarm(info) end

---@class eutaxy.Participant
---@field name string the agenda name it keeps its due time under
---@field run_due fun(now: integer, info: table|nil) runs the work due at now

--- A handler as a function, or with its own retry policy.
---@alias eutaxy.Handler function|{ handler: function, maxAttempts?: integer, delay?: integer|fun(attempt: integer): integer }

---@class eutaxy.AlarmsConfig
---@field ctx? eutaxy.DurableObjectState the object's ctx, to use its scheduler
---@field scheduler? eutaxy.Scheduler or the scheduler itself
---@field handlers table<string, fun(info: eutaxy.AlarmInfo)|eutaxy.Handler> by alarm name
---@field maxAttempts? integer default of every handler
---@field delay? integer|fun(attempt: integer): integer ms before a retry; default exponential with jitter

---@class eutaxy.AlarmInfo
---@field name string
---@field payload any
---@field scheduledAt integer the time it was scheduled for, ms
---@field attempt integer 1 for the first run, more for retries

---@class eutaxy.PendingAlarm
---@field name string
---@field due integer when it runs next, ms
---@field scheduledAt integer
---@field payload any
---@field attempt integer attempts made so far
---@field lastError string|nil

--- Named alarms: eutaxy.alarms{ ctx = self.ctx, handlers = { remind = function(info) ... end } }.
---@class eutaxy.Alarms
local Alarms = {}

--- Schedules name to run at atMs (or { inMs = ms } from now) with payload,
--- replacing a pending occurrence of the name. Returns the due time.
---@param name string
---@param when integer|{ inMs: integer }
---@param payload? any
---@return integer
function Alarms:schedule(name, when, payload) end

--- Cancels the name's pending occurrence; true if there was one.
---@param name string
---@return boolean
function Alarms:cancel(name) end

--- The pending alarms, by due time then name.
---@return eutaxy.PendingAlarm[]
function Alarms:pending() end

---@class eutaxy.DurableConfig
---@field ctx? eutaxy.DurableObjectState the object's ctx, to use its scheduler
---@field scheduler? eutaxy.Scheduler or the scheduler itself
---@field handlers table<string, fun(payload: any, op: eutaxy.OpInfo): any|eutaxy.Handler> by handler name
---@field maxAttempts? integer default of every handler
---@field delay? integer|fun(attempt: integer): integer ms before a retry; default exponential with jitter

---@class eutaxy.OpInfo
---@field id string
---@field handler string
---@field attempt integer
---@field maxAttempts integer

---@class eutaxy.OpResult
---@field status "pending"|"done"|"failed"
---@field result any the handler's result, when done
---@field error string|nil the last attempt's error
---@field attempts integer attempts made

--- Durable operations: eutaxy.durable{ ctx = self.ctx, handlers = { charge = function(payload, op) ... end } }.
---@class eutaxy.Durable
local Durable = {}

--- Registers an operation in the current turn; it runs from the alarm, with
--- retries, until it succeeds or its attempts run out. The same id with the
--- same work is a no-op (false); with other work, an error. handler may be
--- left out when there is exactly one.
---@param spec { id: string, handler?: string, payload?: any, maxAttempts?: integer }
---@return string id
---@return boolean registered
function Durable:op(spec) end

--- What became of an operation, or nil for an id never registered.
---@param id string
---@return eutaxy.OpResult|nil
function Durable:getResult(id) end
