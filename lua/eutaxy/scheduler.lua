--- eutaxy.scheduler: the object's one alarm, shared by fanout, named alarms
-- and durable operations (DESIGN.md: "the scheduler").
--
--   local Jobs = eutaxy.DurableObject:extend("Jobs")
--   function Jobs:init()
--     self.alarms = eutaxy.alarms{ ctx = self.ctx, handlers = { report = function(info) ... end } }
--     self.durable = eutaxy.durable{ ctx = self.ctx, handlers = { charge = function(payload, op) ... end } }
--   end
--   function Jobs:alarm(info) return eutaxy.scheduler(self.ctx):alarm(info) end
--
-- Each helper is a *participant*: it keeps its next due time in the agenda
-- (host/agenda.c), and every call that changes a due time moves the
-- object's alarm to the earliest of them in the same transaction, so a turn
-- that rolls back takes its scheduling back with it. When the alarm fires,
-- the scheduler runs each participant's due work in the order they were
-- registered and then sets the alarm again.
--
-- Create the helpers in init: after a reset the class is constructed again,
-- and an alarm that finds due work of a participant nobody registered raises
-- (and is retried) instead of firing again and again at the same time.
--
-- An attempt is claimed and committed before its handler runs, so it is
-- counted even if the invocation dies during the handler; a handler that
-- raises takes back what it wrote since its last yield point, and its
-- failure is recorded for a retry. Handlers may yield (call other objects,
-- sleep): an alarm runs them one after another.
-- Inside an isolate eutaxy.core is the third argument of this chunk, and
-- user code cannot require it; in a host Lua state require finds it.
local core = select(3, ...) or require "eutaxy.core"
local errors = require "eutaxy.errors"

local scheduler = {}

local type, pcall, error, ipairs, setmetatable, tostring = type, pcall, error, ipairs, setmetatable, tostring

local DEFAULT_MAX_ATTEMPTS = 5

-- One scheduler per object instance: keyed by its ctx, which lives as long
-- as the instance (a reset builds a new one).
local by_ctx = setmetatable({}, { __mode = "k" })

--- The text recorded for a handler's error.
local function describe(e)
  if type(e) == "table" then
    local mt = getmetatable(e)
    if mt and mt.__tostring then return tostring(e) end
    if type(e.message) == "string" then
      return (type(e.name) == "string" and e.name .. ": " or "") .. e.message
    end
  end
  if type(e) == "string" then return e end
  return tostring(e)
end

local function is_ms(v)
  return math.type(v) == "integer" or (type(v) == "number" and v == math.floor(v) and v == v
    and v > -2^62 and v < 2^62)
end

---@class eutaxy.Participant
---@field name string the agenda name it keeps its due time under ("fanout", "alarms", "durable")
---@field run_due fun(now: integer, info: table|nil) runs the participant's work due at now

---@class eutaxy.Scheduler
---@field agenda table the C functions of eutaxy.core.durability().agenda
---@field private _participants eutaxy.Participant[]
---@field private _by_name table<string, eutaxy.Participant>
local Scheduler = {}
Scheduler.__index = Scheduler
Scheduler.__name = "eutaxy.Scheduler"

--- The object's scheduler, made on first use (one per instance, cached by
--- ctx); it applies the agenda's migrations.
---@param ctx eutaxy.DurableObjectState
---@return eutaxy.Scheduler
function scheduler.for_ctx(ctx)
  if type(ctx) ~= "table" or ctx.storage == nil then
    error("eutaxy.scheduler expects the object's ctx (self.ctx)", 2)
  end
  local sched = by_ctx[ctx]
  if sched then return sched end
  if not core.isolate then
    error("eutaxy.scheduler runs inside an object; a spec reaches it through a world", 2)
  end
  local ok, d = pcall(core.durability)
  if not ok then error(d, 2) end
  sched = setmetatable({ agenda = d.agenda, _participants = {}, _by_name = {} }, Scheduler)
  d.agenda.migrate()
  by_ctx[ctx] = sched
  return sched
end

--- Attaches a participant: its run_due runs, in order of registration,
--- whenever the alarm fires.
---@param participant eutaxy.Participant
function Scheduler:register(participant)
  if type(participant) ~= "table" or type(participant.name) ~= "string" or participant.name == ""
     or type(participant.run_due) ~= "function" then
    error("scheduler:register expects { name = string, run_due = function(now, info) }", 2)
  end
  if self._by_name[participant.name] then
    error("the " .. participant.name .. " participant is already registered with this scheduler", 2)
  end
  self._participants[#self._participants + 1] = participant
  self._by_name[participant.name] = participant
end

--- Moves the object's alarm to the earliest due time of every participant
--- (or deletes it), in the current turn.
function Scheduler:reconcile()
  self.agenda.reconcile()
end

--- The alarm handler: runs every participant's due work, then sets the
--- alarm again. A participant that raises does not stop the others; once
--- they have run, what they did is committed and the error raised again, so
--- the alarm is retried.
---@param info table|nil the alarm's info (retryCount, isRetry)
function Scheduler:alarm(info)
  local agenda = self.agenda
  local now = core.now()
  local failures = {}
  for _, p in ipairs(self._participants) do
    -- A participant that raises takes back what it wrote since it last
    -- committed or yielded, and only that.
    agenda.unit_begin()
    local ok, err = pcall(p.run_due, now, info)
    agenda.unit_end(ok)
    if not ok then failures[#failures + 1] = { name = p.name, error = err } end
  end
  for name in pairs(agenda.due(now)) do
    if not self._by_name[name] then
      failures[#failures + 1] = { name = name, error = string.format(
        "the %s participant has work due but is not registered with the scheduler: "
        .. "create its helper in the object's init, before the alarm runs", name) }
    end
  end
  agenda.reconcile()
  if #failures == 0 then return end
  agenda.commit()
  if #failures == 1 and type(failures[1].error) ~= "string" then error(failures[1].error, 0) end
  local parts = {}
  for i, f in ipairs(failures) do parts[i] = f.name .. ": " .. describe(f.error) end
  error(errors.new("SchedulerError", "the alarm's work failed (" .. table.concat(parts, "; ") .. ")"), 0)
end

-- ---- helpers' shared machinery -------------------------------------------

--- The scheduler a helper attaches to: opts.scheduler, or the object's own from opts.ctx.
local function attach(opts, what)
  if type(opts) ~= "table" then error(what .. " expects a table of options", 3) end
  if opts.scheduler ~= nil then
    if getmetatable(opts.scheduler) ~= Scheduler then
      error(what .. ": scheduler must be a scheduler (eutaxy.scheduler(self.ctx))", 3)
    end
    return opts.scheduler
  end
  if type(opts.ctx) ~= "table" then error(what .. " needs scheduler = eutaxy.scheduler(self.ctx) or ctx = self.ctx", 3) end
  return scheduler.for_ctx(opts.ctx)
end

local function check_policy(p, where)
  if p.maxAttempts ~= nil and (math.type(p.maxAttempts) ~= "integer" or p.maxAttempts < 1) then
    error(where .. ": maxAttempts must be a positive integer", 4)
  end
  if p.delay ~= nil and type(p.delay) ~= "function" and not (is_ms(p.delay) and p.delay >= 0) then
    error(where .. ": delay must be whole ms or a function(attempt) giving them", 4)
  end
end

--- Handlers by name, each { fn, maxAttempts, delay }: given as a function
--- or as { handler = fn, maxAttempts = n, delay = ms | function(attempt) }.
local function read_handlers(opts, what)
  if type(opts.handlers) ~= "table" then error(what .. " expects handlers = { name = function ... }", 3) end
  check_policy(opts, what)
  local out = {}
  for name, h in pairs(opts.handlers) do
    if type(name) ~= "string" then error(what .. ": handler names must be strings", 3) end
    local entry
    if type(h) == "function" then
      entry = { fn = h }
    elseif type(h) == "table" and type(h.handler) == "function" then
      check_policy(h, what .. " handler " .. name)
      entry = { fn = h.handler, maxAttempts = h.maxAttempts, delay = h.delay }
    else
      error(what .. ": handler " .. name .. " must be a function or { handler = function, ... }", 3)
    end
    entry.maxAttempts = entry.maxAttempts or opts.maxAttempts or DEFAULT_MAX_ATTEMPTS
    if entry.delay == nil then entry.delay = opts.delay end
    out[name] = entry
  end
  return out
end

--- The delay before retrying after attempt failed: the handler's policy, or
--- nil for the default (exponential, with the world's jitter, in C).
local function retry_delay(entry, attempt)
  local d = entry and entry.delay
  if d == nil then return nil end
  if type(d) == "function" then
    local ok, v = pcall(d, attempt)
    if ok and is_ms(v) and v >= 0 then return math.tointeger(v) end
    return nil
  end
  return math.tointeger(d)
end

--- Takes every due item with take, commits the claims, then runs each with
--- run(item) -> ok, result|error and settles it with settle(item, ok, value).
local function run_batch(agenda, take, run, settle)
  local items = {}
  while true do
    local it = take()
    if not it then break end
    if not it.exhausted then items[#items + 1] = it end
  end
  if #items == 0 then return end
  agenda.commit()
  for _, it in ipairs(items) do
    agenda.unit_begin()
    local ok, value = pcall(run, it)
    agenda.unit_end(ok)
    settle(it, ok, value)
  end
end

-- ---- named alarms ---------------------------------------------------------

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

---@class eutaxy.Alarms
---@field private _agenda table
---@field private _handlers table
local Alarms = {}
Alarms.__index = Alarms
Alarms.__name = "eutaxy.Alarms"

--- Named alarms on the object's scheduler.
---@param opts { scheduler: eutaxy.Scheduler|nil, ctx: table|nil, handlers: table<string, function|table>, maxAttempts: integer|nil, delay: integer|fun(attempt: integer): integer|nil }
---@return eutaxy.Alarms
function scheduler.alarms(opts)
  local sched = attach(opts, "eutaxy.alarms")
  local self = setmetatable({ _agenda = sched.agenda, _handlers = read_handlers(opts, "eutaxy.alarms") }, Alarms)
  local ok, err = pcall(sched.register, sched, { name = "alarms", run_due = function(now) self:_run_due(now) end })
  if not ok then error("eutaxy.alarms: " .. tostring(err):gsub("^[^:]*:%d+: ", ""), 2) end
  return self
end

local function due_time(when, what)
  if is_ms(when) then return math.tointeger(when) end
  if type(when) == "table" then
    if when.inMs ~= nil then
      if not (is_ms(when.inMs) and when.inMs >= 0) then error(what .. ": inMs must be whole ms, not negative", 3) end
      return core.now() + math.tointeger(when.inMs)
    end
    if is_ms(when.at) then return math.tointeger(when.at) end
  end
  error(what .. ": the time must be ms since the epoch or { inMs = ms }", 3)
end

--- Schedules name to run at atMs (or { inMs = ms } from now) with payload.
--- A pending occurrence of the name is replaced. Returns the due time.
---@param name string
---@param when integer|{ inMs: integer }
---@param payload any
---@return integer
function Alarms:schedule(name, when, payload)
  if type(name) ~= "string" or name == "" then error("alarms:schedule: the name must be a non-empty string", 2) end
  local entry = self._handlers[name]
  if not entry then error("alarms:schedule: no handler named " .. name, 2) end
  local due = due_time(when, "alarms:schedule")
  local ok, err = pcall(self._agenda.alarm_schedule, name, due, payload, entry.maxAttempts)
  if not ok then error("alarms:schedule: " .. tostring(err), 2) end
  return due
end

--- Cancels the name's pending occurrence; true if there was one.
---@param name string
---@return boolean
function Alarms:cancel(name)
  if type(name) ~= "string" then error("alarms:cancel: the name must be a string", 2) end
  return self._agenda.alarm_cancel(name)
end

--- The pending alarms, by due time then name.
---@return eutaxy.PendingAlarm[]
function Alarms:pending()
  local out = {}
  for i, it in ipairs(self._agenda.alarm_list()) do
    out[i] = { name = it.key, due = it.due, scheduledAt = it.scheduledAt, payload = it.payload,
               attempt = it.attempt, lastError = it.lastError }
  end
  return out
end

function Alarms:_run_due()
  local agenda, handlers = self._agenda, self._handlers
  run_batch(agenda, agenda.alarm_take,
    function(it)
      local entry = handlers[it.key]
      if not entry then error("no handler named " .. it.key .. " for this alarm", 0) end
      entry.fn({ name = it.key, payload = it.payload, scheduledAt = it.scheduledAt, attempt = it.attempt })
    end,
    function(it, ok, err)
      if ok then
        agenda.alarm_settle(it.key, it.generation, it.attempt)
      else
        agenda.alarm_settle(it.key, it.generation, it.attempt, describe(err),
          retry_delay(handlers[it.key], it.attempt))
      end
    end)
end

-- ---- durable operations ---------------------------------------------------

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

---@class eutaxy.Durable
---@field private _agenda table
---@field private _handlers table
---@field private _only string|nil the one handler's name, when there is one
local Durable = {}
Durable.__index = Durable
Durable.__name = "eutaxy.Durable"

--- Durable operations on the object's scheduler.
---@param opts { scheduler: eutaxy.Scheduler|nil, ctx: table|nil, handlers: table<string, function|table>, maxAttempts: integer|nil, delay: integer|fun(attempt: integer): integer|nil }
---@return eutaxy.Durable
function scheduler.durable(opts)
  local sched = attach(opts, "eutaxy.durable")
  local handlers = read_handlers(opts, "eutaxy.durable")
  local names = {}
  for name in pairs(handlers) do names[#names + 1] = name end
  local self = setmetatable({ _agenda = sched.agenda, _handlers = handlers,
                              _only = #names == 1 and names[1] or nil }, Durable)
  local ok, err = pcall(sched.register, sched, { name = "durable", run_due = function(now) self:_run_due(now) end })
  if not ok then error("eutaxy.durable: " .. tostring(err):gsub("^[^:]*:%d+: ", ""), 2) end
  return self
end

--- Registers an operation in the current turn: it runs from the alarm,
--- with retries, until it succeeds or its attempts run out. The same id with
--- the same handler and payload is a no-op (false); with other work, an error.
--- handler may be left out when the helper has exactly one.
---@param spec { id: string, handler: string|nil, payload: any, maxAttempts: integer|nil }
---@return string id, boolean registered
function Durable:op(spec)
  if type(spec) ~= "table" then error("durable:op expects { id =, handler =, payload = }", 2) end
  local id, handler = spec.id, spec.handler
  if type(id) ~= "string" or id == "" then error("durable:op: id must be a non-empty string", 2) end
  if handler == nil then handler = self._only end
  if type(handler) ~= "string" then
    error("durable:op: handler must be a string (it may be left out only when there is one handler)", 2)
  end
  local entry = self._handlers[handler]
  if not entry then error("durable:op: no handler named " .. handler, 2) end
  if spec.maxAttempts ~= nil and (math.type(spec.maxAttempts) ~= "integer" or spec.maxAttempts < 1) then
    error("durable:op: maxAttempts must be a positive integer", 2)
  end
  local ok, registered = pcall(self._agenda.op_register, id, handler, spec.payload,
    spec.maxAttempts or entry.maxAttempts)
  if not ok then error(registered, 2) end
  return id, registered
end

--- What became of an operation, or nil for an id never registered.
---@param id string
---@return eutaxy.OpResult|nil
function Durable:getResult(id)
  if type(id) ~= "string" then error("durable:getResult: id must be a string", 2) end
  local r = self._agenda.op_get(id)
  if not r then return nil end
  return { status = r.status, result = r.result, error = r.error, attempts = r.attempts,
           createdAt = r.createdAt, settledAt = r.settledAt }
end

function Durable:_run_due()
  local agenda, handlers = self._agenda, self._handlers
  run_batch(agenda, agenda.op_take,
    function(it)
      local entry = handlers[it.handler]
      if not entry then error("no handler named " .. it.handler .. " for this operation", 0) end
      return (entry.fn(it.payload, { id = it.key, handler = it.handler, attempt = it.attempt,
                                     maxAttempts = it.maxAttempts }))
    end,
    function(it, ok, value)
      if ok then
        local stored, err = pcall(agenda.op_settle, it.key, it.attempt, true, value)
        if stored then return end
        value = err  -- a result that cannot be stored is a failure of the attempt
      end
      agenda.op_settle(it.key, it.attempt, false, describe(value), retry_delay(handlers[it.handler], it.attempt))
    end)
end

return scheduler
