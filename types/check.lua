---@meta eutaxy.check
-- LuaLS annotations for `require "eutaxy.check"`: the scenario DSL of
-- `eutaxy check`.

---@alias eutaxy.check.FaultKind
---| "rpc-fail"         # an RPC call fails before it arrives (nothing ran)
---| "ambiguous"        # an RPC call ran and committed, but its answer is lost
---| "caller-crash"     # the caller crashes right after an RPC call answers
---| "alarm-fail"       # an alarm throws before it commits
---| "alarm-lost"       # an alarm ran and committed, but its completion was lost
---| "reset"            # an object loses its in-memory state between invocations, or while one waits
---| "resend"           # the client resends a drive request
---| "delivery-fail"    # a fanout target's callback fails
---| "delivery-timeout" # a fanout target's callback times out
---| "cron-fail"        # a cron's invocation fails before its scheduled() runs (and is retried)
---| "cron-lost"        # a cron's invocation ran, but its outcome was lost (so it runs again)
---| "overloaded"       # an object too busy refuses an RPC call: nothing ran, overloaded = true, retryable = false
---| "fetch-timeout"    # a service outside applies an eutaxy.fetch and never answers: the caller times out after 30 s

---@class eutaxy.check
---@field FAULT_KINDS eutaxy.check.FaultKind[] every fault kind check can inject, in a fixed order
---@field DEFAULT_BOUNDS eutaxy.check.Bounds the bounds a scenario gets for the ones it leaves out
---@field loading string|nil the scenario file being loaded, while check loads it
local sim = {}

--- A handle on one SQL table of one object, read at the end of every run.
--- The object: its name, or its id (state:listDurableObjectIds gives the ids
--- of objects made with newUniqueId).
---@param binding string the binding in wrangler.jsonc, e.g. "POOL"
---@param object string|eutaxy.Id the object's name, as getByName takes it, or its id
---@param table string the table's name
---@return eutaxy.check.Table
function sim.durableObjectTable(binding, object, table) end

--- A handle on one object's key-value storage, for state:kv.
---@param binding string the binding in wrangler.jsonc, e.g. "POOL"
---@param object string|eutaxy.Id the object's name or its id
---@return eutaxy.check.Kv
function sim.durableObjectKv(binding, object) end

--- A handle on one SQL table of a service the scenario declares (sim.service).
---@param origin string "https://payments.example"
---@param table string the table's name
---@return eutaxy.check.Table
function sim.serviceTable(origin, table) end

---@class eutaxy.check.Service

--- A service outside the worker that eutaxy.fetch reaches by its origin: a
--- module whose fetch(request, env, ctx) answers, keeping its state in
--- ctx.storage. Every call to it is a fault point as an RPC is.
---@param origin string "https://payments.example"
---@param entry string the module, relative to the scenario's folder
---@param opts? { sql?: eutaxy.check.SqlSeed } its tables and rows before every run
---@return eutaxy.check.Service
function sim.service(origin, entry, opts) end

--- Tables, rows and key-value pairs created in the binding's objects before every run.
---@param binding string the binding in wrangler.jsonc, e.g. "POOL"
---@param kv? table<string, table<string, any>> key-value storage per object name ({} for none)
---@param opts? { sql?: table<string, eutaxy.check.SqlSeed>, alarmsPerObject?: integer }
---@return eutaxy.check.Setup
function sim.durableObject(binding, kv, opts) end

--- Requests to the worker's fetch, as events req-1, req-2, ...; a client
--- with retries resends a request whose answer it lost. A request arrives
--- `at` ms of virtual time after the run's start (0 by default).
---@param requests eutaxy.check.Request[]
---@param opts? { retries?: integer }
---@return eutaxy.check.HttpDrive
function sim.http(requests, opts) end

--- A WebSocket client, as an element of sim.http's list: an upgrade
--- request to path (arriving at `at`), then, once the answer is 101, its
--- messages in order (a string is text; { data, binary = true, at = ms }),
--- then a close frame with code `close` (true for 1000) if given. What it
--- received is state.responses[i].websocket. With clients in a scenario the
--- faults hibernate, ws-drop and ws-close are in play.
---@param t { path: string, headers?: table<string, string>, at?: integer, messages?: (string|{ data: string, binary?: boolean, at?: integer })[], close?: boolean|integer }
---@return eutaxy.check.Request
function sim.websocket(t) end

--- Calls to objects' methods, as events call-1, call-2, ..., each arriving
--- `at` ms of virtual time after the run's start (0 by default).
---@param calls { binding: string, name: string, method: string, args?: any[], at?: integer }[]
---@param opts? { retries?: integer }
---@return eutaxy.check.RpcDrive
function sim.rpc(calls, opts) end

--- No two rows of the table share a value of column (NULLs aside).
---@param name string
---@param handle eutaxy.check.Table
---@param column string
---@return eutaxy.check.Invariant
function sim.unique(name, handle, column) end

--- Every row of the table meets every condition.
---@param name string
---@param handle eutaxy.check.Table
---@param conditions eutaxy.check.Condition[]
---@return eutaxy.check.Invariant
function sim.everyRow(name, handle, conditions) end

--- A check of your own: fn returns true, or false and a message.
---@param name string
---@param fn fun(state: eutaxy.check.State): boolean?, string?
---@return eutaxy.check.Invariant
function sim.invariant(name, fn) end

--- As sim.invariant, but looked at after every turn that wrote something
--- (and at the end of the run): a failure is reported at the first turn
--- after which it fails, and the run stops there.
---@param name string
---@param fn fun(state: eutaxy.check.State): boolean?, string?
---@return eutaxy.check.Invariant
function sim.always(name, fn) end

--- A reachability probe: fn(state) must return true after some turn, or at
--- the end, of at least one explored schedule; if it never does, a search
--- that found no violation is INCONCLUSIVE ("never reached: NAME").
---@param name string
---@param fn fun(state: eutaxy.check.State): boolean?
---@return eutaxy.check.Invariant
function sim.sometimes(name, fn) end

--- The scenario a *.sim.lua returns.
---@param t eutaxy.check.ScenarioSpec
---@return eutaxy.check.Scenario
function sim.defineScenario(t) end

--- The scenario another file of the same folder defines, with some of its
--- fields replaced: `return sim.variant("leases.sim.lua", { worker = {...} })`.
---@param file string the other scenario, relative to this file's folder
---@param overrides { name?: string, seed?: string|integer, worker?: { entry: string, config: string }, vars?: table<string, eutaxy.Var>, bounds?: table<string, integer>, faults?: eutaxy.check.FaultKind[], regressions?: (string|eutaxy.check.RegressionSpec)[] }
---@return eutaxy.check.Scenario
function sim.variant(file, overrides) end

--- One line saying what a fault kind does.
---@param kind eutaxy.check.FaultKind
---@return string
function sim.describe_fault(kind) end

--- A value as reports print it.
---@param v any
---@return string
function sim.format_value(v) end

--- Evaluates an invariant on a run's state: nil when it holds.
---@param invariant eutaxy.check.Invariant
---@param state eutaxy.check.State
---@return eutaxy.check.Violation|nil
function sim.evaluate(invariant, state) end

--- Whether a sometimes probe holds on a state.
---@param probe eutaxy.check.Invariant
---@param state eutaxy.check.State
---@return boolean
function sim.reached(probe, state) end

---@class eutaxy.check.ScenarioSpec
---@field name string
---@field seed? string|integer default: the name
---@field worker { entry: string, config: string } paths relative to the scenario's folder
---@field vars? table<string, eutaxy.Var> env's vars in every run, over the config's vars and its .dev.vars
---@field setup? eutaxy.check.Setup[]
---@field services? eutaxy.check.Service[] the services eutaxy.fetch reaches (sim.service)
---@field drive eutaxy.check.HttpDrive|eutaxy.check.RpcDrive
---@field invariants eutaxy.check.Invariant[]
---@field bounds? eutaxy.check.BoundsSpec
---@field faults? eutaxy.check.FaultKind[] the kinds to inject; all when absent, none for {}
---@field regressions? (string|eutaxy.check.RegressionSpec)[] schedules replayed before every exploration (eutaxy check --save-regression writes them)

---@class eutaxy.check.RegressionSpec
---@field schedule string a replay string, as a VIOLATED report prints it: "1:1:0002"
---@field invariant? string the invariant it violated when it was saved

---@class eutaxy.check.Regression
---@field schedule string
---@field invariant string|nil
---@field line integer|nil the scenario file's line that holds it

---@class eutaxy.check.BoundsSpec
---@field maxFaultsPerRun? integer faults injected in one run at most (1)
---@field maxRedeliveries? integer how often one event may run again because of a fault (2)
---@field maxConcurrentInvocations? integer drive requests in flight at once (1)
---@field budgetMs? integer wall-clock time the exploration may take
---@field maxEventsPerRun? integer events one run may take before it counts as runaway
---@field cronsPerRun? integer cron firings one run has: the first N in time order, all crons together (1 to 100000); left out, each cron fires once

---@class eutaxy.check.Bounds
---@field maxFaultsPerRun integer
---@field maxRedeliveries integer
---@field maxConcurrentInvocations integer
---@field budgetMs integer
---@field maxEventsPerRun integer
---@field cronsPerRun integer|nil

---@class eutaxy.check.Scenario
---@field kind "eutaxy.scenario"
---@field name string
---@field seed string|integer
---@field worker { entry: string, config: string }
---@field vars table<string, eutaxy.Var>|nil
---@field setup eutaxy.check.Setup[]
---@field drive eutaxy.check.HttpDrive|eutaxy.check.RpcDrive
---@field invariants eutaxy.check.Invariant[]
---@field bounds eutaxy.check.Bounds
---@field faults eutaxy.check.FaultKind[]|nil
---@field regressions eutaxy.check.Regression[]
---@field file string
---@field line integer

---@class eutaxy.check.Table
---@field kind "eutaxy.table"
---@field binding string
---@field name string|nil nil for an object named by its id
---@field hex string|nil the object's id, when the handle was made with one
---@field table string
---@field file string
---@field line integer

---@class eutaxy.check.Kv
---@field kind "eutaxy.kv"
---@field binding string
---@field name string|nil
---@field hex string|nil
---@field file string
---@field line integer

---@class eutaxy.check.SqlSeed
---@field schema string SQL run first, as a migration would
---@field rows? table<string, table<string, any>[]> rows per table, each keyed by column

---@class eutaxy.check.Setup
---@field kind "eutaxy.setup"
---@field binding string
---@field kv table<string, table<string, any>>
---@field sql table<string, eutaxy.check.SqlSeed>
---@field alarmsPerObject integer how many times an object's alarm may fire in one run
---@field file string
---@field line integer

---@class eutaxy.check.Request
---@field path string starts with "/"
---@field method? string GET by default
---@field headers? table<string, string>
---@field body? string
---@field at? integer virtual ms after the run's start at which it arrives (0)

---@class eutaxy.check.HttpDrive
---@field kind "http"
---@field requests eutaxy.check.Request[]
---@field retries integer
---@field file string
---@field line integer

---@class eutaxy.check.RpcDrive
---@field kind "rpc"
---@field calls { binding: string, name: string, method: string, args: any[], at: integer }[]
---@field retries integer
---@field file string
---@field line integer

---@class eutaxy.check.Condition
---@field column string
---@field op "notNull"|"isNull"|"eq"|"ne"|"lt"|"le"|"gt"|"ge"
---@field value? string|number required for eq, ne, lt, le, gt, ge

---@class eutaxy.check.Invariant
---@field kind "unique"|"everyRow"|"custom"|"always"|"sometimes"
---@field name string
---@field file string
---@field line integer

---@class eutaxy.check.Response
---@field event string "req-1", "call-1", ...
---@field deliveries integer how many times it was delivered, resends included
---@field status integer|nil sim.http: the response's status (500 when the request got an error)
---@field body string|nil sim.http: the response's body (the error's message when it got one)
---@field value any sim.rpc: what the method returned
---@field error table|nil the error the last delivery got (name, message, remote, retryable)
---@field lost true|nil sim.rpc: the last delivery never arrived (nothing ran); sim.http: the client went away before the answer
---@field websocket { state: "connecting"|"open"|"closing"|"closed", object: string, client: string, received: { type: "text"|"binary"|"close"|"drop", data?: string, code?: integer, reason?: string, at: integer }[] }|nil a sim.websocket client's, once its upgrade was answered 101

--- What an invariant sees of a run.
---@class eutaxy.check.State
---@field responses eutaxy.check.Response[] the drive's answers (after a turn: those collected so far)
local State = {}

--- The table's rows where the property looks (the end of the run, or just after a turn), each keyed by column.
---@param handle eutaxy.check.Table
---@return table<string, any>[]
function State:rows(handle) end

--- The table's columns, in table order.
---@param handle eutaxy.check.Table
---@return string[]
function State:columns(handle) end

--- An object's key-value storage where the property looks, as a table by key.
---@param handle eutaxy.check.Kv|string a handle, or a binding followed by the object's name or id
---@param object? string|eutaxy.Id
---@return table<string, any>
function State:kv(handle, object) end

--- The ids of the objects of a binding that exist where the property looks:
--- named ones by name, then those made with newUniqueId by id.
---@param binding string
---@return eutaxy.Id[]
function State:listDurableObjectIds(binding) end

---@class eutaxy.check.Violation
---@field invariant string its name
---@field message string
---@field columns string[]|nil
---@field rows table[]|nil the offending rows
---@field turn eutaxy.check.Turn|nil for an always: the turn after which it failed (nil: at the end)

---@class eutaxy.check.Turn
---@field task string the task whose turn it was: "req-2>POOL.acquire"
---@field object string the object it ran in: "DO:POOL(pool)"
---@field atMs integer virtual time since the run began

return sim
