-- eutaxy.http: Headers, Request and Response with the Web's names.
--
-- Users arrive with code written against fetch, so the shapes and the
-- errors follow it (a GET cannot have a body, a status must be within
-- 200-599, a 204 cannot have a body). Bodies are strings rather than
-- streams: an invocation runs to a yield point with the whole body in
-- hand, and a string clones cheaply between isolates.
--
-- Only plain data crosses between isolates, and each isolate has its own
-- copy of this module (so its own metatables). to_wire/from_wire turn a
-- Request or Response into a plain table and back for that crossing.

-- Loaded on first use: an object that never answers fetch never pays for JSON.
-- Found through require each time rather than kept: a module the worker's
-- requests share changes nothing once loaded (host/heapprint.h).
local json = setmetatable({}, { __index = function(_, k) return require("eutaxy.json")[k] end })
local url = require "eutaxy.url"

local type, tostring, setmetatable, getmetatable = type, tostring, setmetatable, getmetatable
local string_byte = string.byte
local ipairs, next, pairs = ipairs, next, pairs
local math_type, math_tointeger = math.type, math.tointeger

local function fail(msg)
  error(msg, 0)
end

-- Headers -----------------------------------------------------------------

---@class eutaxy.Headers
---@field private _list { [1]: string, [2]: string }[]  lowercase name, value
local Headers = {}
Headers.__index = Headers
Headers.__name = "Headers"

-- RFC 9110 token characters.
local function check_name(where, name)
  if type(name) ~= "string" or not name:find("^[!#$%%&'*+%-.^_`|~%w]+$") then
    fail(where .. ": invalid header name " .. (type(name) == "string"
      and ("%q"):format(name) or "(a " .. type(name) .. ")"))
  end
  return name:lower()
end

local function check_value(where, name, value)
  local vt = math_type(value) or type(value)
  if vt == "integer" or vt == "float" then
    value = tostring(value)
  elseif vt ~= "string" then
    fail(where .. ": the value of header " .. name .. " must be a string, got " .. vt)
  end
  -- fetch trims surrounding whitespace; line breaks would split the header.
  local first, last = string_byte(value, 1), string_byte(value, -1)
  if first == 32 or first == 9 or last == 32 or last == 9 then
    value = value:gsub("^[ \t]+", ""):gsub("[ \t]+$", "")
  end
  if value:find("[\r\n%z]") then
    fail(where .. ": the value of header " .. name .. " contains a line break or NUL")
  end
  return value
end

local function is_headers(v)
  return getmetatable(v) == Headers
end

--- Builds headers from nil, another Headers, an array of {name, value}
--- pairs (kept in order) or a {name = value} table (added in name order,
--- since a table has no order of its own; a value may be an array of
--- values for repeated headers).
---@param init? eutaxy.Headers|table
---@return eutaxy.Headers
function Headers.new(init)
  local self = setmetatable({ _list = {} }, Headers)
  if init == nil then return self end
  if is_headers(init) then
    for _, entry in ipairs(init._list) do
      self._list[#self._list + 1] = { entry[1], entry[2] }
    end
    return self
  end
  if type(init) ~= "table" then
    fail("Headers.new: expected a table of headers, got " .. type(init))
  end
  if init[1] ~= nil then
    local n = #init
    for k in next, init do
      if math_type(k) ~= "integer" or k < 1 or k > n then
        fail("Headers.new: expected an array of {name, value} pairs or a {name = value}"
          .. " table, not both")
      end
    end
    for i, pair in ipairs(init) do
      if type(pair) ~= "table" or pair[1] == nil or pair[2] == nil then
        fail("Headers.new: entry " .. i .. " must be a {name, value} pair")
      end
      self:append(pair[1], pair[2])
    end
    return self
  end
  local names = {}
  for name in next, init do
    if type(name) ~= "string" then
      fail("Headers.new: header names must be strings, got " .. type(name))
    end
    names[#names + 1] = name
  end
  -- By lowercase name, the name headers are known by from then on.
  table.sort(names, function(a, b)
    local la, lb = a:lower(), b:lower()
    if la ~= lb then return la < lb end
    return a < b
  end)
  for _, name in ipairs(names) do
    local value = init[name]
    if type(value) == "table" then
      for _, item in ipairs(value) do self:append(name, item) end
    else
      self:append(name, value)
    end
  end
  return self
end

--- All values of `name` joined with ", ", or nil when absent.
---@param name string
---@return string|nil
function Headers:get(name)
  local key = check_name("Headers:get", name)
  local values = {}
  for _, entry in ipairs(self._list) do
    if entry[1] == key then values[#values + 1] = entry[2] end
  end
  if #values == 0 then return nil end
  return table.concat(values, ", ")
end

---@param name string
---@return boolean
function Headers:has(name)
  local key = check_name("Headers:has", name)
  for _, entry in ipairs(self._list) do
    if entry[1] == key then return true end
  end
  return false
end

--- Replaces every value of `name` with `value`, at the place of the first.
---@param name string
---@param value string|number
function Headers:set(name, value)
  local key = check_name("Headers:set", name)
  value = check_value("Headers:set", key, value)
  local kept, placed = {}, false
  for _, entry in ipairs(self._list) do
    if entry[1] ~= key then
      kept[#kept + 1] = entry
    elseif not placed then
      kept[#kept + 1] = { key, value }
      placed = true
    end
  end
  if not placed then kept[#kept + 1] = { key, value } end
  self._list = kept
end

--- Adds a value for `name`, keeping the ones it has (e.g. Set-Cookie).
---@param name string
---@param value string|number
function Headers:append(name, value)
  local key = check_name("Headers:append", name)
  value = check_value("Headers:append", key, value)
  self._list[#self._list + 1] = { key, value }
end

---@param name string
function Headers:delete(name)
  local key = check_name("Headers:delete", name)
  local kept = {}
  for _, entry in ipairs(self._list) do
    if entry[1] ~= key then kept[#kept + 1] = entry end
  end
  self._list = kept
end

--- Iterates lowercase name, value in insertion order; a repeated header
--- gives one step per value. Changes during the loop are not seen.
---@return fun(): string, string
function Headers:entries()
  local snapshot = self:toList()
  local i = 0
  return function()
    i = i + 1
    local entry = snapshot[i]
    if entry then return entry[1], entry[2] end
  end
end

--- The headers as a new array of {lowercase name, value} pairs.
---@return { [1]: string, [2]: string }[]
function Headers:toList()
  local list = {}
  for i, entry in ipairs(self._list) do list[i] = { entry[1], entry[2] } end
  return list
end

-- Bodies ------------------------------------------------------------------

local function check_body(where, body)
  if body ~= nil and type(body) ~= "string" then
    fail(where .. ": body must be a string or nil, got " .. type(body)
      .. (type(body) == "table" and " (use Response.json or json.encode for tables)" or ""))
  end
  return body
end

local function body_json(where, body)
  if body == nil or body == "" then fail(where .. ": the body is empty") end
  return json.decode(body)
end

-- Request -----------------------------------------------------------------

---@class eutaxy.RequestInit
---@field method? string default "GET"
---@field headers? eutaxy.Headers|table
---@field body? string
---@field redirect? "follow"|"manual"|"error" what eutaxy.fetch does with a redirect; default "follow"

---@class eutaxy.Request
---@field method string uppercase
---@field url string absolute, normalized
---@field headers eutaxy.Headers
---@field body string|nil
---@field redirect "follow"|"manual"|"error"
local request_methods = {}

local redirect_modes = { follow = true, manual = true, error = true }

---@class eutaxy.RequestClass
local Request = {}

-- Instances get their methods from request_methods rather than the class
-- table, as for Response below.
local request_mt = { __index = request_methods, __name = "Request" }

local function is_request(v)
  return getmetatable(v) == request_mt
end

--- Builds a request. `input` is a URL (a path such as "/items?id=1" is
--- resolved against http://localhost) or a Request to copy; `init`
--- overrides its parts. A GET or HEAD with a body is an error, as in fetch.
---@param input string|eutaxy.Request
---@param init? eutaxy.RequestInit
---@return eutaxy.Request
function Request.new(input, init)
  if init ~= nil and type(init) ~= "table" then
    fail("Request.new: init must be a table, got " .. type(init))
  end
  init = init or {}
  local method, href, headers, body, redirect = "GET", nil, nil, nil, "follow"
  if is_request(input) then
    method, href, headers, body, redirect = input.method, input.url, input.headers, input.body, input.redirect
  elseif type(input) == "string" then
    local err
    href, err = url._href(input)
    if not href then fail("Request.new: " .. err) end
  else
    fail("Request.new: expected a URL string or a Request, got " .. type(input))
  end

  if init.method ~= nil then
    if type(init.method) ~= "string" or not init.method:find("^[!#$%%&'*+%-.^_`|~%w]+$") then
      fail("Request.new: invalid method " .. tostring(init.method))
    end
    method = init.method:upper()
  end
  if init.headers ~= nil then headers = init.headers end
  if init.body ~= nil then body = check_body("Request.new", init.body) end
  if init.redirect ~= nil then
    if not redirect_modes[init.redirect] then
      fail("Request.new: redirect must be \"follow\", \"manual\" or \"error\", got " .. tostring(init.redirect))
    end
    redirect = init.redirect
  end
  if body ~= nil and (method == "GET" or method == "HEAD") then
    fail("Request.new: a " .. method .. " request cannot have a body")
  end

  return setmetatable({
    method = method,
    url = href,
    headers = Headers.new(headers),
    body = body,
    redirect = redirect,
  }, request_mt)
end

--- The body, or "" when there is none.
---@return string
function request_methods:text()
  return self.body or ""
end

--- The body decoded as JSON; an error when the body is empty or malformed.
---@return any
function request_methods:json()
  return body_json("Request:json", self.body)
end

--- A copy with its own headers.
---@return eutaxy.Request
function request_methods:clone()
  return Request.new(self)
end

-- Response ----------------------------------------------------------------

---@class eutaxy.ResponseInit
---@field status? integer default 200
---@field statusText? string default ""
---@field headers? eutaxy.Headers|table
---@field webSocket? eutaxy.WebSocket the client end of a WebSocketPair, with status 101

---@class eutaxy.Response
---@field status integer
---@field statusText string
---@field headers eutaxy.Headers
---@field ok boolean status is 200-299
---@field body string|nil
---@field webSocket eutaxy.WebSocket|nil the client end, in a 101 response to an upgrade
local response_methods = {}

---@class eutaxy.ResponseClass
local Response = {}

-- Instances get their methods from a table of their own, because the Web
-- has both a static Response.json(value) and a method response:json().
local response_mt = { __index = response_methods, __name = "Response" }

local function is_response(v)
  return getmetatable(v) == response_mt
end

-- Statuses whose responses carry no body, where fetch refuses one.
local null_body_status = { [204] = true, [205] = true, [304] = true }

-- A response of parts already checked; headers becomes its own.
local function make_response(status, status_text, headers, body, ws)
  return setmetatable({
    status = status,
    statusText = status_text,
    headers = headers,
    ok = status >= 200 and status <= 299,
    body = body,
    webSocket = ws,
  }, response_mt)
end

--- Builds a response. The status must be an integer within 200-599 (as in
--- fetch), or 101 with a webSocket (the client end of a WebSocketPair whose
--- server end the object accepted); 204, 205 and 304 cannot have a body.
---@param body? string
---@param init? eutaxy.ResponseInit
---@return eutaxy.Response
function Response.new(body, init)
  if init ~= nil and type(init) ~= "table" then
    fail("Response.new: init must be a table, got " .. type(init))
  end
  init = init or {}
  check_body("Response.new", body)

  local status = init.status
  if status == nil then
    status = 200
  elseif type(status) ~= "number" or math_tointeger(status) == nil then
    fail("Response.new: status must be an integer, got "
      .. (type(status) == "number" and tostring(status) or type(status)))
  end
  status = math_tointeger(status)
  local ws = init.webSocket
  if ws ~= nil or status == 101 then
    if status ~= 101 then fail("Response.new: a response with a webSocket must have status 101, got " .. status) end
    if ws == nil then fail("Response.new: a 101 response needs a webSocket (the client end of a WebSocketPair)") end
    if body ~= nil then fail("Response.new: a 101 response cannot have a body") end
    local _, err = require("eutaxy.websocket").client_id(ws)
    if err then fail("Response.new: " .. err) end
  elseif status < 200 or status > 599 then
    fail("Response.new: status " .. status .. " is outside 200-599")
  end
  if body ~= nil and null_body_status[status] then
    fail("Response.new: a " .. status .. " response cannot have a body")
  end

  local status_text = init.statusText
  if status_text == nil then
    status_text = ""
  elseif type(status_text) ~= "string" or status_text:find("[\r\n]") then
    fail("Response.new: statusText must be a string without line breaks")
  end

  return make_response(status, status_text, Headers.new(init.headers), body, ws)
end

--- A response whose body is json.encode(value), with content-type
--- application/json unless init.headers gives one.
---@param value any
---@param init? eutaxy.ResponseInit
---@return eutaxy.Response
function Response.json(value, init)
  if init ~= nil and type(init) ~= "table" then
    fail("Response.json: init must be a table, got " .. type(init))
  end
  if init == nil then
    -- what the general path below makes of no init, without checking a name and value known good
    local headers = setmetatable({ _list = { { "content-type", "application/json" } } }, Headers)
    return make_response(200, "", headers, json.encode(value), nil)
  end
  local headers = Headers.new(init.headers)
  if not headers:has("content-type") then headers:set("content-type", "application/json") end
  local with_headers = {}
  for k, v in pairs(init) do with_headers[k] = v end
  with_headers.headers = headers
  return Response.new(json.encode(value), with_headers)
end

local redirect_status = { [301] = true, [302] = true, [303] = true, [307] = true, [308] = true }

--- A redirect to `location` (a path is resolved against http://localhost).
---@param location string
---@param status? integer 301, 302 (default), 303, 307 or 308
---@return eutaxy.Response
function Response.redirect(location, status)
  status = status or 302
  if not redirect_status[status] then
    fail("Response.redirect: status " .. tostring(status) .. " is not a redirect status")
  end
  local parsed, err = url.parse(location)
  if not parsed then fail("Response.redirect: " .. err) end
  return Response.new(nil, { status = status, headers = { { "location", parsed.href } } })
end

--- The body, or "" when there is none.
---@return string
function response_methods:text()
  return self.body or ""
end

--- The body decoded as JSON; an error when the body is empty or malformed.
---@return any
function response_methods:json()
  return body_json("Response:json", self.body)
end

--- A copy with its own headers.
---@return eutaxy.Response
function response_methods:clone()
  return Response.new(self.body, self)
end

-- Crossing between isolates -----------------------------------------------

---@class eutaxy.WireMessage
---@field kind "request"|"response"
---@field method? string
---@field url? string
---@field status? integer
---@field statusText? string
---@field headers { [1]: string, [2]: string }[]
---@field body? string
---@field redirect? "manual"|"error" a request's, when not "follow"
---@field webSocket? integer a 101 response's socket, the host's id

--- The plain-data form of a Request or Response.
---@param obj eutaxy.Request|eutaxy.Response
---@return eutaxy.WireMessage
local function to_wire(obj)
  if is_request(obj) then
    return { kind = "request", method = obj.method, url = obj.url,
             headers = obj.headers:toList(), body = obj.body,
             redirect = obj.redirect ~= "follow" and obj.redirect or nil }
  elseif is_response(obj) then
    return { kind = "response", status = obj.status, statusText = obj.statusText,
             headers = obj.headers:toList(), body = obj.body,
             webSocket = obj.webSocket and (require("eutaxy.websocket").client_id(obj.webSocket)) or nil }
  end
  fail("http.to_wire: expected a Request or Response, got " .. type(obj))
end

--- Rebuilds a Request or Response from its plain-data form, checking it
--- as the constructors do.
---@param t eutaxy.WireMessage
---@return eutaxy.Request|eutaxy.Response
local function from_wire(t)
  if type(t) ~= "table" then
    fail("http.from_wire: expected a table, got " .. type(t))
  end
  local headers = t.headers
  if headers ~= nil and (type(headers) ~= "table" or headers[1] == nil and next(headers) ~= nil) then
    fail("http.from_wire: headers must be an array of {name, value} pairs")
  end
  if t.kind == "request" then
    return Request.new(t.url, { method = t.method, headers = headers, body = t.body, redirect = t.redirect })
  elseif t.kind == "response" then
    local ws = t.webSocket
    if ws ~= nil then
      if math_type(ws) ~= "integer" then fail("http.from_wire: webSocket must be a socket id") end
      ws = require("eutaxy.websocket").client_end(ws)
    end
    return Response.new(t.body, { status = t.status, statusText = t.statusText, headers = headers, webSocket = ws })
  end
  fail("http.from_wire: kind must be \"request\" or \"response\", got " .. tostring(t.kind))
end

return {
  Headers = Headers,
  Request = Request,
  Response = Response,
  to_wire = to_wire,
  from_wire = from_wire,
  is_request = is_request,
  is_response = is_response,
  ---@param v any
  ---@return boolean
  is_headers = is_headers,
}
