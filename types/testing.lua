---@meta eutaxy.testing
-- LuaLS annotations for `require "eutaxy.testing"`: a worker and its
-- objects in an in-process world with a virtual clock, for busted specs.

---@class eutaxy.testing
---@field World eutaxy.World the World class
local testing = {}

---@class eutaxy.WorldOptions
---@field config? string a wrangler.jsonc; a relative path here, in main, dir or a service's module is relative to the calling file's folder, else to the working directory
---@field main? string the worker's entry; overrides the config's (then relative to the config's folder)
---@field bindings? table<string, string> { NS = "Class" }, to work without a config
---@field vars? table<string, eutaxy.Var> env's vars, over the config's vars and its .dev.vars
---@field crons? string[] cron expressions the worker's scheduled() answers, to work without a config
---@field dir? string the folder main is relative to, without a config (without dir, main is found as config is)
---@field sql? table<string, table<string, eutaxy.check.SqlSeed>> { NS = { name = { schema =, rows = } } }
---@field services? table<string, { module: string, sql?: eutaxy.check.SqlSeed }> by origin: the services eutaxy.fetch reaches
---@field seed? integer the seed of uuid, math.random and newUniqueId (0)
---@field start? integer the virtual clock's start, ms since 1970
---@field echo? boolean print the trace as it happens
---@field memLimit? integer each isolate's memory cap, bytes
---@field cpuLimit? integer each turn's limit, VM instructions

--- A new world.
---@param opts? eutaxy.WorldOptions
---@return eutaxy.World
function testing.world(opts) end

--- A world: calls from a spec are synchronous; the world runs until the
--- answer is in, firing whatever comes due on the way.
---@class eutaxy.World
---@field env eutaxy.Env stubs callable from the spec (world.env.POOL:getByName("pool"):acquire(...)), and the vars
local World = {}

--- Sends a request to the worker's fetch and returns its Response.
---@param input string|eutaxy.Request a URL or path, or a Request
---@param init? eutaxy.RequestInit
---@return eutaxy.Response
function World:fetch(input, init) end

--- Virtual time, ms since 1970.
---@return integer
function World:now() end

--- Runs everything due in the next ms of virtual time, alarms and crons included.
---@param ms integer
---@return integer now
function World:advance(ms) end

---@alias eutaxy.ObjectRef eutaxy.Stub|eutaxy.Id a stub (world.env.NS:getByName(name), :get(id)) or an id

--- Runs the object's alarm now, if one is set: whether one ran, and the error it raised if it did.
--- The object: a stub, an id, or a binding and a name.
---@param object eutaxy.ObjectRef|string
---@param name? string the object's name, after a binding
---@return boolean ran
---@return eutaxy.Error|nil err
function World:runAlarm(object, name) end

--- Runs fn(instance, state) inside the object as one invocation, as
--- cloudflare:test's runInDurableObject does, and returns what fn returns;
--- an error fn raises is raised again. fn runs in the spec (its upvalues and
--- asserts work); what it does to instance and state goes into the object,
--- each a turn of that invocation: reading instance.field gives a clone,
--- setting it sets a clone, instance:method(...) calls any method of the
--- instance (private ones, fetch, alarm) and returns clones, state.storage
--- is the object's storage with the same API as inside, state.id its id.
--- An object's error raises at the spec's line and rolls back what that
--- request wrote. Between requests other events may reach the object, as
--- while an invocation awaits a call.
---@param object eutaxy.ObjectRef|string a stub, an id, or a binding (then its name, then fn)
---@param fn fun(instance: eutaxy.Instance, state: eutaxy.InstanceState): ...
---@return any ...
---@overload fun(self: eutaxy.World, binding: string, name: string, fn: fun(instance: eutaxy.Instance, state: eutaxy.InstanceState): ...): ...
function World:runInDurableObject(object, fn) end

--- The ids of the objects of a namespace that exist in the world (made by a
--- call, a seed, or a look at their storage), named or made with
--- newUniqueId, in the order they came to be.
---@param namespace eutaxy.Namespace|string world.env.NS, or the binding's name
---@return eutaxy.Id[]
function World:listDurableObjectIds(namespace) end

--- An object's key-value storage (what storage:put wrote), as a table by key.
---@param object eutaxy.ObjectRef|string a stub, an id, or a binding
---@param name? string the object's name, after a binding
---@return table<string, any>
function World:kv(object, name) end

--- Arms faults of the checker's kinds (eutaxy.check's FAULT_KINDS but
--- resend): each strikes once, at the first fault point that offers its
--- kind and matches, in the order armed; nothing else of the run changes.
--- Without a list: the faults armed that have not struck yet.
---@param list? eutaxy.ArmedFault[]
---@return eutaxy.ArmedFault[]|nil
function World:faults(list) end

--- Raises an error naming every armed fault that never struck, and where it was armed.
function World:assertFaultsStruck() end

--- Disarms the faults that have not struck, and returns them.
---@return eutaxy.ArmedFault[]
function World:clearFaults() end

--- Runs the worker's scheduled() for a cron of triggers.crons now, as if it
--- fired (controller.scheduledTime is now): what the handler returned, or
--- its error raised. A run asked for is not retried. Crons also fire by
--- themselves as advance() passes their due times.
---@param expr string the cron expression, as triggers.crons writes it
---@return any ...
function World:runCron(expr) end

--- Rows of a query on an object's database, each keyed by column. The
--- object: a stub or an id, then the query; or a binding, a name, then the query.
---@param object eutaxy.ObjectRef|string
---@param sql string
---@param ... nil|boolean|integer|number|string bindings
---@return table<string, any>[]
---@overload fun(self: eutaxy.World, binding: string, name: string, sql: string, ...: nil|boolean|integer|number|string): table<string, any>[]
function World:rows(object, sql, ...) end

--- Rows of a query on a service's database (WorldOptions.services).
---@param origin string
---@param sql string
---@param ... nil|boolean|integer|number|string bindings
---@return table<string, any>[]
function World:serviceRows(origin, sql, ...) end

--- Opens a WebSocket to the worker: an upgrade request (the client's
--- headers added) to its fetch. A client when the answer is 101 with a
--- webSocket, else nil and the response.
---@param input string|eutaxy.Request
---@param init? eutaxy.RequestInit
---@return eutaxy.WebSocketClient|nil, eutaxy.Response
function World:websocket(input, init) end

--- The object hibernates, as the platform does with an idle one: its
--- isolate goes (in-memory state lost), its storage and WebSockets stay,
--- the next event wakes it. False when an invocation is in flight.
---@param object eutaxy.ObjectRef|string a stub, an id, or a binding
---@param name? string the object's name, after a binding
---@return boolean
function World:hibernate(object, name) end

--- A fault for World:faults.
---@class eutaxy.ArmedFault
---@field kind string a fault kind: "rpc-fail", "ambiguous", "caller-crash", "overloaded", "fetch-timeout", "alarm-fail", "alarm-lost", "reset", "hibernate", "cron-fail", "cron-lost", "delivery-fail", "delivery-timeout", "ws-drop", "ws-close"
---@field call? string "BINDING.method" or "BINDING": the invocation at the point (a call made, "POOL.alarm", the one a reset strikes before or in)
---@field object? eutaxy.ObjectRef|string[] the object struck: a stub, an id, or { "BINDING", "name" }
---@field when? "before"|"waiting" reset and hibernate: as an invocation starts, or while one waits at a yield point
---@field skip? integer matching points to let pass first (0)

--- The object inside runInDurableObject's function: fields read as clones,
--- set as clones, methods called on the instance; ctx is state, env the world's env.
---@class eutaxy.Instance
---@field ctx eutaxy.InstanceState
---@field env eutaxy.Env
---@field [string] any

--- state in runInDurableObject's function.
---@class eutaxy.InstanceState
---@field id eutaxy.Id
---@field storage eutaxy.Storage the object's storage, as inside (transactionSync aside)

--- A WebSocket client of a world (World:websocket). Each call runs what it starts.
---@class eutaxy.WebSocketClient
---@field label string "ws-1", ...
---@field response eutaxy.Response the 101 answer
local WebSocketClient = {}
---@param message string
---@param opts? { binary?: boolean }
---@return boolean sent false once the socket is closed
function WebSocketClient:send(message, opts) end
--- Closes with a close frame (1000 by default).
---@param code? integer
---@param reason? string
---@return boolean
function WebSocketClient:close(code, reason) end
--- Goes without a close frame: the object sees 1006.
---@return boolean
function WebSocketClient:drop() end
--- The connection fails as a protocol error would (serve closes it with
--- code, 1002 by default): the object sees webSocketError(ws, error).
---@param message? string
---@param code? integer
---@return boolean
function WebSocketClient:error(message, code) end
--- Everything received: { type = "text"|"binary", data, at } and { type = "close"|"drop", code, reason, at }.
---@return table[]
function WebSocketClient:received() end
--- The text and binary messages received, as strings.
---@return string[]
function WebSocketClient:messages() end
---@return "connecting"|"open"|"closing"|"closed"
function WebSocketClient:state() end
--- How the connection ended ({ code, reason }), or nil while it is open.
---@return { code: integer, reason: string }|nil
function WebSocketClient:closed() end

--- The object loses its in-memory state and keeps its storage.
---@param object eutaxy.ObjectRef|string a stub, an id, or a binding
---@param name? string the object's name, after a binding
function World:reset(object, name) end

--- Whether the object's isolate is alive (constructed and not reset since).
---@param object eutaxy.ObjectRef|string a stub, an id, or a binding
---@param name? string the object's name, after a binding
---@return boolean
function World:isLive(object, name) end

--- Every event of the run, one line each, with virtual times.
---@return string
function World:trace() end

--- Frees the world.
function World:close() end

return testing
