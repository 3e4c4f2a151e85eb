---@meta
-- LuaLS annotations for Request, Response and Headers (eutaxy.Request, ...).

--- HTTP headers: case-insensitive names, repeated headers kept in order.
---@class eutaxy.Headers
local Headers = {}

--- Headers from nil, another Headers, an array of {name, value} pairs (kept
--- in order) or a {name = value} table (a value may be an array of values).
---@param init? eutaxy.Headers|table
---@return eutaxy.Headers
function Headers.new(init) end

--- All values of name joined with ", ", or nil when absent.
---@param name string
---@return string|nil
function Headers:get(name) end

---@param name string
---@return boolean
function Headers:has(name) end

--- Replaces every value of name with value.
---@param name string
---@param value string|number
function Headers:set(name, value) end

--- Adds a value to name, after the ones it has.
---@param name string
---@param value string|number
function Headers:append(name, value) end

---@param name string
function Headers:delete(name) end

--- An iterator over (lowercase name, value), in order: `for name, value in headers:entries() do`.
---@return fun(): string, string
function Headers:entries() end

--- The headers as an array of {lowercase name, value} pairs.
---@return { [1]: string, [2]: string }[]
function Headers:toList() end

---@class eutaxy.RequestInit
---@field method? string default "GET"
---@field headers? eutaxy.Headers|table<string, string|string[]>|{ [1]: string, [2]: string }[]
---@field body? string
---@field redirect? "follow"|"manual"|"error" what eutaxy.fetch does with a redirect (3xx with a Location): follow it (the default, up to 20), answer it as it is, or raise

--- An HTTP request, as the worker's fetch receives it.
---@class eutaxy.Request
---@field method string uppercase
---@field url string absolute, normalized: eutaxy.url.parse(request.url).pathname
---@field headers eutaxy.Headers
---@field body string|nil
---@field redirect "follow"|"manual"|"error" for eutaxy.fetch; "follow" unless init said otherwise
local Request = {}

--- The body, or "" when there is none.
---@return string
function Request:text() end

--- The body decoded as JSON; an error when the body is empty or malformed.
---@return any
function Request:json() end

--- A copy with its own headers.
---@return eutaxy.Request
function Request:clone() end

--- eutaxy.Request
---@class eutaxy.RequestClass
local RequestClass = {}

--- A request to input (a URL, or a path resolved against http://localhost,
--- or a Request to copy), init overriding its parts. A GET or HEAD with a
--- body is an error, as in fetch.
---@param input string|eutaxy.Request
---@param init? eutaxy.RequestInit
---@return eutaxy.Request
function RequestClass.new(input, init) end

---@class eutaxy.ResponseInit
---@field status? integer 200 by default; 200-599, or 101 with a webSocket
---@field statusText? string
---@field headers? eutaxy.Headers|table<string, string|string[]>|{ [1]: string, [2]: string }[]
---@field webSocket? eutaxy.WebSocket the client end of a WebSocketPair whose server end was accepted (status 101)

--- An HTTP response, as fetch returns it.
---@class eutaxy.Response
---@field status integer
---@field statusText string
---@field headers eutaxy.Headers
---@field ok boolean status is 200-299
---@field body string|nil
---@field webSocket eutaxy.WebSocket|nil a 101 response's client end
local Response = {}

--- The body, or "" when there is none.
---@return string
function Response:text() end

--- The body decoded as JSON; an error when the body is empty or malformed.
---@return any
function Response:json() end

--- A copy with its own headers.
---@return eutaxy.Response
function Response:clone() end

--- eutaxy.Response
---@class eutaxy.ResponseClass
local ResponseClass = {}

--- A response; 204, 205 and 304 cannot have a body.
---@param body? string
---@param init? eutaxy.ResponseInit
---@return eutaxy.Response
function ResponseClass.new(body, init) end

--- A response whose body is the JSON of value (keys sorted), with
--- content-type application/json unless init.headers gives one.
---@param value any
---@param init? eutaxy.ResponseInit
---@return eutaxy.Response
function ResponseClass.json(value, init) end

--- A redirect to location (a path is resolved against http://localhost).
---@param location string
---@param status? integer 301, 302 (default), 303, 307 or 308
---@return eutaxy.Response
function ResponseClass.redirect(location, status) end
