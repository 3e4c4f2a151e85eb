---@meta eutaxy.url
-- LuaLS annotations for eutaxy.url (also `require "eutaxy.url"`).

---@class eutaxy.url
local url = {}

--- Parses an absolute URL, or a path starting with "/" resolved against
--- http://localhost. Returns nil and "invalid URL: ..." for anything else.
---@param s string
---@return eutaxy.URL|nil
---@return string|nil error
function url.parse(s) end

--- Percent-decodes s ("%41" is "A"; "+" stays "+").
---@param s string
---@return string
function url.decode(s) end

--- Percent-encodes s as encodeURIComponent does.
---@param s string
---@return string
function url.encode(s) end

--- A query string ("a=1&b=2", without "?") as a table; "+" is a space, the last value wins.
---@param s string
---@return table<string, string>
function url.parse_query(s) end

--- A parsed URL, with the WHATWG URL's field names.
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

return url
