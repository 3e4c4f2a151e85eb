-- eutaxy.url: the parts of a URL a worker routes on.
--
-- Field names and shapes follow the Web's URL (protocol "http:", search
-- "?a=1", port a string) so code ported from a Worker reads the same. It
-- is not a full WHATWG parser: it handles scheme://[user@]host[:port]
-- URLs and paths relative to http://localhost, lowercases scheme and host,
-- drops default ports, resolves "." and ".." segments and percent-encodes
-- bytes that may not appear raw. Anything else is refused.

local string_format, string_char, tonumber = string.format, string.char, tonumber

-- Inside an isolate eutaxy.core is the third argument of this chunk; a host
-- Lua state requires it, and plain Lua without it parses in Lua.
local core = select(3, ...)
if not core then
  local ok, m = pcall(require, "eutaxy.core")
  core = ok and m or nil
end

---@class eutaxy.url
local url = {}

-- Requests built from a bare path (as specs and the scenario drive do)
-- are resolved against this origin.
local DEFAULT_BASE = "http://localhost"

local default_ports = { ["http:"] = "80", ["https:"] = "443", ["ws:"] = "80", ["wss:"] = "443" }

local function hex_byte(hex)
  return string_char(tonumber(hex, 16))
end

--- Percent-decodes `s` ("%41" -> "A"). "+" stays "+"; malformed escapes
--- are kept as they are.
---@param s string
---@return string
function url.decode(s)
  return (s:gsub("%%(%x%x)", hex_byte))
end

local function percent(c)
  return string_format("%%%02X", c:byte())
end

--- Percent-encodes `s` for use as one URL component, as JavaScript's
--- encodeURIComponent does: everything but A-Z a-z 0-9 - _ . ! ~ * ' ( )
--- is escaped, UTF-8 byte by byte.
---@param s string
---@return string
function url.encode(s)
  return (s:gsub("[^%w%-_%.!~%*'%(%)]", percent))
end

-- Bytes that may not appear raw in each part; "%" stays so that an
-- existing escape is not encoded twice.
local function encode_set(s, set)
  return (s:gsub(set, percent))
end
local PATH_SET = "[\0-\32\127-\255\"<>`{}%^|\\]"
local QUERY_SET = "[\0-\32\127-\255\"<>`\\{}|^']"
local FRAGMENT_SET = "[\0-\32\127-\255\"<>`]"

local function decode_form(s)
  return url.decode((s:gsub("%+", " ")))
end

--- Parses a query string ("a=1&b=x+y", with or without the leading "?")
--- into a table. Names and values are percent-decoded with "+" as a
--- space; a name without "=" gets ""; when a name repeats, the last wins.
---@param s string
---@return table<string, string>
function url.parse_query(s)
  local query = {}
  s = s:gsub("^%?", "")
  for part in s:gmatch("[^&]+") do
    local name, value = part:match("^([^=]*)=(.*)$")
    if not name then name, value = part, "" end
    query[decode_form(name)] = decode_form(value)
  end
  return query
end

-- RFC 3986 section 5.2.4, on an absolute path.
local function remove_dot_segments(path)
  local segments = {}
  local trailing = false
  for segment in (path:sub(2) .. "/"):gmatch("([^/]*)/") do
    trailing = false
    if segment == "." or segment:lower() == "%2e" then
      trailing = true
    elseif segment == ".." or segment:lower() == ".%2e" or segment:lower() == "%2e."
        or segment:lower() == "%2e%2e" then
      segments[#segments] = nil
      trailing = true
    else
      segments[#segments + 1] = segment
    end
  end
  local result = "/" .. table.concat(segments, "/")
  if trailing and result ~= "/" then result = result .. "/" end
  return result
end

---@class eutaxy.URL
---@field href string the whole URL, normalized
---@field origin string protocol .. "//" .. host
---@field protocol string scheme with its colon, lowercased: "http:"
---@field username string
---@field password string
---@field host string hostname plus ":port" unless the port is the default
---@field hostname string lowercased
---@field port string "" when absent or the scheme's default
---@field pathname string starts with "/"
---@field search string "?a=1", or "" when there is no query
---@field hash string "#frag", or "" when there is none
---@field query table<string, string> the decoded query, last value wins

local function invalid(s, why)
  return nil, "invalid URL: " .. why .. " (" .. string_format("%q", s) .. ")"
end

-- The definition of url.parse: the host's one-pass parser (host/lurl.c)
-- must give what this gives, which spec/url_spec.lua checks on random input.
local function parse_in_lua(s)
  if type(s) ~= "string" then
    return nil, "invalid URL: expected a string, got " .. type(s)
  end
  local input = s:gsub("^[\0-\32]+", ""):gsub("[\0-\32]+$", "")
  -- Tabs and newlines inside a URL are dropped, as browsers do.
  input = input:gsub("[\t\n\r]", "")

  local rest
  if input:sub(1, 2) == "//" then
    rest = "http:" .. input
  elseif input:sub(1, 1) == "/" then
    rest = DEFAULT_BASE .. input
  else
    rest = input
  end

  local scheme, after = rest:match("^(%a[%w+%-.]*):(.*)$")
  if not scheme then return invalid(s, "no scheme and not a path starting with /") end
  local protocol = scheme:lower() .. ":"
  if after:sub(1, 2) ~= "//" then
    return invalid(s, "expected " .. protocol .. "//host")
  end
  after = after:sub(3)

  local authority, tail = after:match("^([^/?#]*)(.*)$")
  local username, password = "", ""
  local userinfo, hostport = authority:match("^(.*)@(.*)$")
  if userinfo then
    username, password = userinfo:match("^([^:]*):?(.*)$")
    authority = hostport
  end

  local hostname, port
  if authority:sub(1, 1) == "[" then
    hostname, port = authority:match("^(%[[%x:.]+%])(.*)$")
    if not hostname then return invalid(s, "bad IPv6 address") end
  else
    hostname, port = authority:match("^([^:]*)(.*)$")
  end
  if hostname == "" then return invalid(s, "empty host") end
  if hostname:find("[%s%%<>\\^|\"`{}]") then return invalid(s, "bad character in host") end
  hostname = hostname:lower()

  if port ~= "" then
    port = port:match("^:(%d*)$")
    if not port then return invalid(s, "bad port") end
    port = port:gsub("^0+(%d)", "%1")
    if port ~= "" and tonumber(port) > 65535 then return invalid(s, "port out of range") end
  end
  if port == default_ports[protocol] then port = "" end
  local host = port == "" and hostname or hostname .. ":" .. port

  local pathname, search, hash = tail:match("^([^?#]*)(%??[^#]*)(#?.*)$")
  if pathname == "" then pathname = "/" end
  pathname = remove_dot_segments(encode_set(pathname, PATH_SET))
  if search == "?" then search = "" end
  search = encode_set(search, QUERY_SET)
  if hash == "#" then hash = "" end
  hash = encode_set(hash, FRAGMENT_SET)

  local credentials = ""
  if username ~= "" or password ~= "" then
    credentials = username .. (password ~= "" and ":" .. password or "") .. "@"
  end

  return {
    href = protocol .. "//" .. credentials .. host .. pathname .. search .. hash,
    origin = protocol .. "//" .. host,
    protocol = protocol,
    username = username,
    password = password,
    host = host,
    hostname = hostname,
    port = port,
    pathname = pathname,
    search = search,
    hash = hash,
    query = url.parse_query(search),
  }
end

local split = core and core.url_split

--- Parses an absolute URL, or a path starting with "/" which is resolved
--- against http://localhost ("//host/path" takes http: too). Returns nil
--- and "invalid URL: ..." for anything else.
---@param s string
---@return eutaxy.URL|nil
---@return string|nil error
function url.parse(s)
  if not split or type(s) ~= "string" then return parse_in_lua(s) end
  local parts, why = split(s)
  if not parts then return invalid(s, why) end
  parts.query = parts.search == "" and {} or url.parse_query(parts.search)
  return parts
end

local href_of = core and core.url_href

--- The href url.parse would give s, or nil and its error: for what only
--- normalizes a URL (Request.new), without the table of its parts.
---@param s string
---@return string|nil href
---@return string|nil error
function url._href(s)
  if not href_of or type(s) ~= "string" then
    local parts, err = parse_in_lua(s)
    return parts and parts.href, err
  end
  local href, why = href_of(s)
  if not href then return invalid(s, why) end
  return href
end

url._parse_in_lua = parse_in_lua

return url
