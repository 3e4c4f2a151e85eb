---@meta eutaxy
-- LuaLS annotations for `require "eutaxy"`: the API that workers and objects
-- use. Point an editor at this folder (a .luarc.json's workspace.library);
-- nothing here runs.

---@class eutaxy
---@field DurableObject eutaxy.DurableObject the base class of every object
---@field Request eutaxy.RequestClass
---@field Response eutaxy.ResponseClass
---@field WebSocketPair eutaxy.WebSocketPairClass
---@field Headers eutaxy.Headers the Headers class: eutaxy.Headers.new(init)
---@field json eutaxy.json deterministic JSON (sorted keys)
---@field url eutaxy.url
local eutaxy = {}

--- Virtual time in ms since 1970 (the wall clock under `eutaxy serve`).
--- Only inside a worker or an object; a spec moves time with world:advance.
---@return integer
function eutaxy.now() end

--- Waits ms of virtual time: a yield point, where other invocations may run
--- and the turn's writes are committed.
---@param ms integer
function eutaxy.sleep(ms) end

--- A random (version 4) UUID from the run's seed.
---@return string
function eutaxy.uuid() end

--- Runs the functions side by side, as Promise.all does: each is a task of
--- its own in this isolate, so their calls, fetches and sleeps are in flight
--- at once (and `eutaxy check` explores every order of their turns). Returns
--- the first value each returned, in the order of the functions, once all
--- have returned; raises the first error one raises, as soon as it does (the
--- others run on, their results dropped). A yield point, as an RPC call is.
--- `local a, b = eutaxy.all { function() return x:get() end, function() return y:get() end }`
---@param fns (fun(): any)[]
---@return any ...
function eutaxy.all(fns) end

--- Calls a service outside the worker: an absolute http: or https: URL or
--- a Request, and init as for Request.new (init.redirect: "follow", the
--- default, up to 20 redirects; "manual" answers a redirect as it is;
--- "error" raises). A yield point, as an RPC call is: the turn's writes
--- commit there; raises as a failed RPC does. In `eutaxy check` and in
--- specs only the services a scenario declares (sim.service) or a world is
--- given answer. Under `eutaxy serve` it is a real HTTP(S) request, sent
--- once the writes before it are durable; certificates are verified. It
--- raises TimeoutError past --fetch-timeout (30 s) and NetworkError for a
--- connection that fails, an untrusted certificate or a body past
--- --fetch-max-bytes (16 MiB), with `retryable` true where trying again
--- may work.
---@param input string|eutaxy.Request
---@param init? eutaxy.RequestInit
---@return eutaxy.Response
function eutaxy.fetch(input, init) end

--- A new error value, like the ones RPC raises: `error(eutaxy.Error("Conflict", "taken"))`.
---@param name string
---@param message string
---@param fields? { remote?: boolean, retryable?: boolean } extra fields
---@return eutaxy.Error
function eutaxy.Error(name, message, fields) end

--- True for an error value made by eutaxy.Error or raised by an RPC call.
---@param v any
---@return boolean
function eutaxy.isError(v) end

--- The object's scheduler, which shares its one alarm between fanout, named
--- alarms and durable operations. Delegate the alarm to it:
--- `function Obj:alarm(info) return eutaxy.scheduler(self.ctx):alarm(info) end`.
---@param ctx eutaxy.DurableObjectState
---@return eutaxy.Scheduler
function eutaxy.scheduler(ctx) end

--- Named alarms on the object's scheduler; create them in init.
---@param opts eutaxy.AlarmsConfig
---@return eutaxy.Alarms
function eutaxy.alarms(opts) end

--- Durable operations, run from the alarm with retries; create them in init.
---@param opts eutaxy.DurableConfig
---@return eutaxy.Durable
function eutaxy.durable(opts) end

--- Durable, independent delivery of messages to named targets; create it in init.
---@param config eutaxy.FanoutConfig
---@return eutaxy.Fanout
function eutaxy.fanout(config) end

--- An object class. Subclass it with extend; every method not starting with
--- `_` (and not init, alarm or fetch) is callable over RPC.
---@class eutaxy.DurableObject
---@field ctx eutaxy.DurableObjectState the object's id and storage, set before init runs
---@field env eutaxy.Env the bindings of wrangler.jsonc (env.POOL, ...), its vars and .dev.vars' secrets
---@field super eutaxy.DurableObject|nil the class it extends
local DurableObject = {}

--- Makes a subclass. Annotate it for completion:
--- `---@class Counter: eutaxy.DurableObject` above `local Counter = eutaxy.DurableObject:extend("Counter")`.
---@param name string the class name, as wrangler.jsonc's class_name gives it
---@return eutaxy.DurableObject
function DurableObject:extend(name) end

--- True for a class made with DurableObject:extend.
---@param v any
---@return boolean
function DurableObject.is_class(v) end

--- Optional: runs when the instance is built, after a reset too; ctx and env are set.
function DurableObject:init() end

--- Optional: runs when the object's alarm is due. An alarm that raises is
--- retried after 2, 4, 8, 16, 32 and 64 s, then dropped.
---@param info { retryCount: integer, isRetry: boolean }
function DurableObject:alarm(info) end

--- Optional: answers stub:fetch(request).
---@param request eutaxy.Request
---@return eutaxy.Response
function DurableObject:fetch(request) end

--- What an object's ctx holds.
---@class eutaxy.DurableObjectState
---@field id eutaxy.Id the object's own id
---@field storage eutaxy.Storage its database, key-value pairs and alarm
local DurableObjectState = {}

--- Runs fn once this invocation has answered, as an invocation of its own
--- in this object (its own turns: it may call, fetch and sleep). What it
--- returns goes nowhere; an error it raises is logged, fails no request, and
--- is an uncaught error to `eutaxy check`. A reset of the object before it
--- starts drops it. Only while an invocation runs (not in init).
---@param fn fun()
function DurableObjectState.waitUntil(fn) end

--- Runs fn with the object's input gate shut: until fn returns, its waits
--- (calls, fetches, sleeps) included, no other event reaches the object (no
--- call, no answer another invocation waits for, no alarm); they wait, and
--- go on after. Returns what fn returns; nests. If fn raises, the object is
--- reset as on Cloudflare: the invocation ends with the error even if it is
--- caught, the calls kept waiting get it, every invocation in flight ends.
--- A gate shut for more than 30 s resets the object too. In init, fn runs
--- once init has returned, before anything is delivered (init does not see
--- what it does), and returns nothing.
---@param fn fun(): ...
---@return any ...
function DurableObjectState.blockConcurrencyWhile(fn) end

--- Resets the object, as on Cloudflare: the invocation that calls it ends
--- there (nothing catches it, and its turn's writes are undone), and the
--- caller of every invocation in flight, this one's included, gets an error
--- whose message is reason (remote, not retryable). Only while one of the
--- object's invocations runs.
---@param reason? string
function DurableObjectState.abort(reason) end

--- Accepts the server end of a WebSocketPair (pair[2]) with the
--- Hibernation API: the socket is the host's from now on, so it stays open
--- while the object hibernates, and its messages arrive as
--- webSocketMessage(ws, message, isBinary) and webSocketClose(ws, code,
--- reason, wasClean). Answer the upgrade with
--- `eutaxy.Response.new(nil, { status = 101, webSocket = pair[1] })`.
--- At most 10 tags of at most 256 bytes; at most 32,768 sockets per object.
---@param ws eutaxy.WebSocket
---@param tags? string[]
function DurableObjectState:acceptWebSocket(ws, tags) end

--- The sockets this object accepted that are not closed, in the order
--- accepted; with tag, those that have it. After a hibernation, new ends
--- for the same sockets.
---@param tag? string
---@return eutaxy.WebSocket[]
function DurableObjectState:getWebSockets(tag) end

--- The tags the socket was accepted with.
---@param ws eutaxy.WebSocket
---@return string[]
function DurableObjectState:getTags(ws) end

--- A client text message equal to request is answered with response by the
--- host, without waking the object (each at most 2,048 bytes). No arguments
--- clear it. A reset clears it too.
---@param request? string
---@param response? string
function DurableObjectState:setWebSocketAutoResponse(request, response) end

--- When the host last answered the socket's auto-response request (ms since 1970), or nil.
---@param ws eutaxy.WebSocket
---@return integer|nil
function DurableObjectState:getWebSocketAutoResponseTimestamp(ws) end

--- Optional: a client's message on a socket the object accepted; isBinary
--- for a binary one (message is a string of its bytes either way).
---@param ws eutaxy.WebSocket
---@param message string
---@param isBinary boolean
function DurableObject:webSocketMessage(ws, message, isBinary) end

--- Optional: a client closed (its close frame: wasClean true) or went
--- (code 1006, wasClean false). The socket is closed; its attachment can
--- still be read.
---@param ws eutaxy.WebSocket
---@param code integer
---@param reason string
---@param wasClean boolean
function DurableObject:webSocketClose(ws, code, reason, wasClean) end

--- Optional: the connection failed (under serve, a protocol error or a
--- message over the size limit: the host closed it with 1002 or 1009). The
--- socket is closed; webSocketClose is not called after it.
---@param ws eutaxy.WebSocket
---@param err eutaxy.Error
function DurableObject:webSocketError(ws, err) end

--- One end of a WebSocketPair.
---@class eutaxy.WebSocket
---@field readyState integer 0 connecting, 1 open, 2 closing, 3 closed
local WebSocket = {}

--- Sends a message, once the turn commits (the output gate); a turn that
--- raises sends nothing. Text must be valid UTF-8; { binary = true } sends bytes.
---@param message string
---@param opts? { binary?: boolean }
function WebSocket:send(message, opts) end

--- Starts the close handshake: code 1000 (the default) or 3000-4999, a
--- reason of at most 123 bytes.
---@param code? integer
---@param reason? string
function WebSocket:close(code, reason) end

--- Keeps a copy of value with the socket, through hibernation, until it
--- closes: at most 2,048 bytes serialized (eutaxy's clone).
---@param value any
function WebSocket:serializeAttachment(value) end

--- A copy of what serializeAttachment kept, or nil.
---@return any
function WebSocket:deserializeAttachment() end

--- eutaxy.WebSocketPair
---@class eutaxy.WebSocketPairClass
local WebSocketPair = {}

--- A new pair: pair[1] the client end (for the 101 response), pair[2] the
--- server end (for ctx:acceptWebSocket).
---@return { [1]: eutaxy.WebSocket, [2]: eutaxy.WebSocket }
function WebSocketPair.new() end

--- The third argument of the worker's fetch(request, env, ctx) and scheduled(controller, env, ctx).
---@class eutaxy.WorkerContext
local WorkerContext = {}

--- Runs fn once this invocation has answered (under serve, once its
--- response is on its way), as an invocation of its own in the worker (its
--- own turns: it may call, fetch and sleep). What it returns goes nowhere; an
--- error it raises is logged, fails no request, and is an uncaught error to
--- `eutaxy check`.
---@param fn fun()
function WorkerContext.waitUntil(fn) end

--- Accepted for code written for Cloudflare; does nothing.
function WorkerContext.passThroughOnException() end

--- A var of wrangler.jsonc's vars (a string, number, boolean, or a table of
--- them as JSON holds) or a secret of .dev.vars (a string). Each isolate has
--- its own copy.
---@alias eutaxy.Var string|number|boolean|table

--- What env holds: a namespace per Durable Object binding, and the vars and
--- secrets by name (secrets over vars of the same name). Reading a name it
--- does not have raises; rawget(env, NAME) is nil for an optional one.
---@alias eutaxy.Env table<string, eutaxy.Namespace|eutaxy.Var>

--- A binding of env: makes ids and stubs of one class.
---@class eutaxy.Namespace
---@field binding string the binding's name (POOL)
local Namespace = {}

--- The id of the object named name: the same name, the same object.
---@param name string
---@return eutaxy.Id
function Namespace:idFromName(name) end

--- A new random id, from the run's seed.
---@return eutaxy.Id
function Namespace:newUniqueId() end

--- The id whose toString() gave hex (64 lowercase hex digits).
---@param hex string
---@return eutaxy.Id
function Namespace:idFromString(hex) end

--- A stub for the object with this id.
---@param id eutaxy.Id
---@return eutaxy.Stub
function Namespace:get(id) end

--- A stub for the object named name: `env.POOL:getByName("pool"):acquire(...)`.
---@param name string
---@return eutaxy.Stub
function Namespace:getByName(name) end

--- An object's id. It crosses RPC as an id: passed to a method or returned
--- from one (inside a table too), it arrives as an eutaxy.Id that
--- env.NS:get(id) takes. An id made by hand whose name does not give its hex
--- is a DataCloneError at the call.
---@class eutaxy.Id
---@field name string|nil the name it was made from, if any
---@field binding string the binding it belongs to
---@field hex string the id as 64 hex digits
local Id = {}

--- The id as 64 hex digits.
---@return string
function Id:toString() end

--- True for the same object's id.
---@param other eutaxy.Id
---@return boolean
function Id:equals(other) end

--- A handle on an object. `stub:method(...)` runs method in the object (a
--- yield point) and returns its cloned results; a failure raises an
--- eutaxy.Error, so `pcall(stub.method, stub, ...)` works as try does.
---@class eutaxy.Stub
---@field id eutaxy.Id
---@field name string|nil the object's name, if it was made from one
---@field [string] fun(self: eutaxy.Stub, ...: any): any
local Stub = {}

--- Sends a request to the object's fetch method.
---@param input string|eutaxy.Request a URL or path, or a Request
---@param init? eutaxy.RequestInit
---@return eutaxy.Response
function Stub:fetch(input, init) end

--- What RPC raises, and what eutaxy.Error makes.
---@class eutaxy.Error
---@field name string "TypeError", "DataCloneError", the name user code gave, ...
---@field message string
---@field remote boolean user code in the target raised it
---@field retryable boolean the call was interrupted (a lost answer, a reset): it may be retried
---@field overloaded boolean the object was too busy to take the call: not to be retried (retryable is false)
---@field stack string|nil the target's traceback, for remote errors

--- The first argument of the worker's scheduled(controller, env, ctx): which
--- cron of wrangler.jsonc's triggers.crons fired, and when it was due.
---@class eutaxy.ScheduledController
---@field cron string the cron expression that fired, exactly as triggers.crons writes it
---@field scheduledTime integer when the firing was due, ms since 1970 (UTC); a retry keeps it
---@field type "scheduled"
local ScheduledController = {}

--- The platform does not retry this invocation if it fails (it would
--- otherwise, after 2, 4, 8, 16, 32 and 64 s).
function ScheduledController:noRetry() end

--- What a worker module returns: its fetch handler, its scheduled handler
--- (for triggers.crons) and its classes by name.
---@class eutaxy.Worker
---@field fetch fun(request: eutaxy.Request, env: eutaxy.Env, ctx: eutaxy.WorkerContext): eutaxy.Response
---@field scheduled? fun(controller: eutaxy.ScheduledController, env: eutaxy.Env, ctx: eutaxy.WorkerContext)
---@field [string] eutaxy.DurableObject

return eutaxy
