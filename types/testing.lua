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

--- Runs the object's alarm now, if one is set: whether one ran, and the error it raised if it did.
---@param binding string
---@param name string
---@return boolean ran
---@return eutaxy.Error|nil err
function World:runAlarm(binding, name) end

--- Runs the worker's scheduled() for a cron of triggers.crons now, as if it
--- fired (controller.scheduledTime is now): what the handler returned, or
--- its error raised. A run asked for is not retried. Crons also fire by
--- themselves as advance() passes their due times.
---@param expr string the cron expression, as triggers.crons writes it
---@return any ...
function World:runCron(expr) end

--- Rows of a query on an object's database, each keyed by column.
---@param binding string
---@param name string
---@param sql string
---@param ... nil|boolean|integer|number|string bindings
---@return table<string, any>[]
function World:rows(binding, name, sql, ...) end

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
---@param binding string
---@param name string
---@return boolean
function World:hibernate(binding, name) end

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
---@param binding string
---@param name string
function World:reset(binding, name) end

--- Whether the object's isolate is alive (constructed and not reset since).
---@param binding string
---@param name string
---@return boolean
function World:isLive(binding, name) end

--- Every event of the run, one line each, with virtual times.
---@return string
function World:trace() end

--- Frees the world.
function World:close() end

return testing
