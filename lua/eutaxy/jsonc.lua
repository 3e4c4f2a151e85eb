-- eutaxy.jsonc: JSON with comments and trailing commas, as wrangler.jsonc
-- allows.
--
-- Rather than a second parser, comments and trailing commas are blanked
-- out with spaces and the rest goes to cjson. Blanking keeps every byte
-- where it was (newlines inside block comments stay newlines), so cjson's
-- "at character N" is still a position in the original text and can be
-- reported as FILE:LINE:COL. The two errors blanking itself can meet, an
-- unterminated comment or string, are reported here with their start.

local cjson = require "cjson"
local json = require "eutaxy.json"

local byte, sub, concat = string.byte, string.sub, table.concat

---@class eutaxy.jsonc
local jsonc = {}

local SLASH, STAR, QUOTE, BACKSLASH = byte("/"), byte("*"), byte('"'), byte("\\")
local COMMA, NEWLINE, CR = byte(","), byte("\n"), byte("\r")
local CLOSE_OBJECT, CLOSE_ARRAY = byte("}"), byte("]")

local function is_space(b)
  return b == 32 or b == 9 or b == NEWLINE or b == CR
end

-- Line and column (both from 1) of byte `pos`. Columns count characters,
-- not bytes, so they match what an editor shows for UTF-8 text.
local function line_col(text, pos)
  local line, line_start = 1, 1
  local i = 1
  while true do
    local nl = text:find("\n", i, true)
    if not nl or nl >= pos then break end
    line, line_start, i = line + 1, nl + 1, nl + 1
  end
  local prefix = sub(text, line_start, pos - 1)
  local _, continuation = prefix:gsub("[\128-\191]", "")
  return line, #prefix - continuation + 1
end

local function fail_at(filename, text, pos, what)
  local line, col = line_col(text, pos)
  error(("%s:%d:%d: %s"):format(filename, line, col, what), 0)
end

-- Returns text with comments and trailing commas replaced by spaces.
local function blank(text, filename)
  local out = {}
  local n = #text
  local i = 1
  local pending_comma = nil -- position of a comma not yet followed by a value

  local function blank_range(from, to)
    for j = from, to do
      local b = byte(text, j)
      out[j] = (b == NEWLINE or b == CR) and sub(text, j, j) or " "
    end
  end

  -- A UTF-8 byte order mark is not JSON; editors on Windows add one.
  if sub(text, 1, 3) == "\239\187\191" then
    blank_range(1, 3)
    i = 4
  end

  while i <= n do
    local b = byte(text, i)
    if b == QUOTE then
      local start = i
      i = i + 1
      while true do
        local c = byte(text, i)
        if c == nil or c == NEWLINE or c == CR then
          fail_at(filename, text, start, "unterminated string")
        elseif c == BACKSLASH then
          local escaped = byte(text, i + 1)
          if escaped == nil or escaped == NEWLINE or escaped == CR then
            fail_at(filename, text, start, "unterminated string")
          end
          i = i + 2
        elseif c == QUOTE then
          break
        else
          i = i + 1
        end
      end
      out[start] = sub(text, start, i)
      for j = start + 1, i do out[j] = "" end
      pending_comma = nil
      i = i + 1
    elseif b == SLASH and byte(text, i + 1) == SLASH then
      local stop = text:find("\n", i + 2, true) or n + 1
      blank_range(i, stop - 1)
      i = stop
    elseif b == SLASH and byte(text, i + 1) == STAR then
      local _, stop = text:find("*/", i + 2, true)
      if not stop then fail_at(filename, text, i, "unterminated /* comment") end
      blank_range(i, stop)
      i = stop + 1
    else
      if b == CLOSE_OBJECT or b == CLOSE_ARRAY then
        if pending_comma then out[pending_comma] = " " end
        pending_comma = nil
      elseif b == COMMA then
        pending_comma = i
      elseif not is_space(b) then
        pending_comma = nil
      end
      out[i] = sub(text, i, i)
      i = i + 1
    end
  end
  return concat(out, "", 1, n)
end

local token_names = {
  T_OBJ_BEGIN = "'{'", T_OBJ_END = "'}'", T_ARR_BEGIN = "'['", T_ARR_END = "']'",
  T_STRING = "a string", T_NUMBER = "a number", T_BOOLEAN = "a boolean",
  T_NULL = "null", T_COLON = "':'", T_COMMA = "','", T_END = "the end of the text",
  T_WHITESPACE = "whitespace", T_ERROR = "an invalid token",
}

-- cjson says "Expected colon but found T_NUMBER at character 6"; users
-- should not have to know cjson's token names.
local function readable(message)
  message = message:gsub("T_[%u_]+", token_names)
  return (message:gsub("^%u", string.lower))
end

--- Decodes JSON with // and /* */ comments and trailing commas. null
--- becomes nil and integral numbers become integers, as in json.decode.
--- Raises "FILENAME:LINE:COL: <what>" (with error level 0) on bad text.
---@param text string
---@param filename? string used in error messages (default "<jsonc>")
---@return any
function jsonc.decode(text, filename)
  filename = filename or "<jsonc>"
  if type(text) ~= "string" then
    error(filename .. ": expected text, got " .. type(text), 0)
  end
  -- cjson stops at a NUL byte and ignores what follows it; JSON has no
  -- place for one (a control character in a string is escaped).
  local nul = text:find("\0", 1, true)
  if nul then fail_at(filename, text, nul, "NUL byte in the text") end
  local clean = blank(text, filename)
  local ok, result = pcall(cjson.decode, clean)
  if not ok then
    local message = tostring(result)
    local what, pos = message:match("^(.-)%s+at character (%d+)$")
    if what then
      fail_at(filename, text, tonumber(pos), readable(what))
    end
    error(filename .. ": " .. readable(message), 0)
  end
  return json.normalize(result)
end

--- Reads and decodes a JSONC file; errors name the file as given.
---@param path string
---@return any
function jsonc.read(path)
  local file, err = io.open(path, "rb")
  if not file then
    -- io.open's message starts with the path; keep only the reason.
    local reason = tostring(err):gsub("^" .. path:gsub("%p", "%%%0") .. ": ", "")
    error("cannot read " .. path .. ": " .. reason, 0)
  end
  local text, read_err = file:read("a")
  file:close()
  if not text then error("cannot read " .. path .. ": " .. tostring(read_err), 0) end
  return jsonc.decode(text, path)
end

return jsonc
