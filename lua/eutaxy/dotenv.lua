-- eutaxy.dotenv: the .dev.vars file Wrangler reads secrets from, beside
-- wrangler.jsonc.
--
-- Wrangler parses it with the dotenv package, and so does this, rule for
-- rule: `NAME=value` (or `NAME: value`), an optional `export ` before the
-- name, names of letters, digits, `_`, `.` and `-`; a value is cut at `#`
-- and trimmed, unless it is quoted with ', " or `, when it is what the
-- quotes hold, across lines if need be (a backslash before the quote does
-- not close it, and stays). In double quotes `\n` and `\r` become a newline
-- and a carriage return; nothing else is unescaped. A later line wins over
-- an earlier one of the same name.
--
-- Where dotenv skips a line it cannot read, this stops with the file and
-- line: a secret that silently goes missing surfaces much later as a nil.

local sub, find = string.sub, string.find

---@class eutaxy.dotenv
local dotenv = {}

local function fail(filename, line, msg)
  error(("%s:%d: %s"):format(filename, line, msg), 0)
end

-- Newlines from byte i to byte j.
local function newlines(text, i, j)
  local _, n = sub(text, i, j):gsub("\n", "")
  return n
end

-- After a value: blanks, then a comment or the end of the line. Returns
-- where the next line starts, or nil when something else follows.
local function rest_of_line(text, pos)
  local stop = find(text, "\n", pos, true) or #text + 1
  local rest = sub(text, pos, stop - 1)
  if rest:find("^[ \t]*$") or rest:find("^[ \t]*#") then return stop + 1 end
  return nil
end

--- Reads .dev.vars text: the names and values, and the line each name was
--- last set on. Raises "FILENAME:LINE: ..." (error level 0) on a line it
--- cannot read.
---@param text string
---@param filename? string
---@return table<string, string> vars, table<string, integer> lines
function dotenv.parse(text, filename)
  filename = filename or "<.dev.vars>"
  local vars, lines = {}, {}
  text = text:gsub("\r\n?", "\n")
  if sub(text, 1, 3) == "\239\187\191" then text = sub(text, 4) end
  local nul = find(text, "\0", 1, true)
  if nul then fail(filename, newlines(text, 1, nul) + 1, "NUL byte in the file") end
  local pos, n, line = 1, #text, 1
  while pos <= n do
    local stop = find(text, "\n", pos, true) or n + 1
    local content = sub(text, pos, stop - 1)
    if content:find("^%s*$") or content:find("^%s*#") then
      pos, line = stop + 1, line + 1
    else
      local name, after = content:match("^%s*([%w_.%-]+)()")
      if name == "export" and content:find("^%s*export[ \t]+[%w_.%-]") then
        name, after = content:match("^%s*export[ \t]+([%w_.%-]+)()")
      end
      if not name then
        fail(filename, line, "expected NAME=value (a name of letters, digits, _, . and -), got "
          .. ("%q"):format(content))
      end
      local sep_end = content:match("^[ \t]*=[ \t]*()", after) or content:match("^:[ \t]+()", after)
      if not sep_end then
        fail(filename, line, "expected = after " .. name .. " (NAME=value)")
      end
      local start = pos + sep_end - 1
      local q = sub(text, start, start)
      if q == '"' or q == "'" or q == "`" then
        local i, close = start + 1, nil
        while i <= n do
          local c = sub(text, i, i)
          if c == "\\" and sub(text, i + 1, i + 1) == q then
            i = i + 2
          elseif c == q then
            close = i
            break
          else
            i = i + 1
          end
        end
        if not close then
          fail(filename, line, "the value of " .. name .. " opens a quote (" .. q .. ") that is never closed")
        end
        local value = sub(text, start + 1, close - 1)
        if q == '"' then value = value:gsub("\\n", "\n"):gsub("\\r", "\r") end
        local close_line = line + newlines(text, start, close)
        local next_pos = rest_of_line(text, close + 1)
        if not next_pos then
          fail(filename, close_line, "text after the closing quote of " .. name .. " (a comment starts with #)")
        end
        vars[name], lines[name] = value, line
        pos, line = next_pos, close_line + 1
      else
        vars[name], lines[name] = sub(text, start, stop - 1):gsub("#.*$", ""):match("^%s*(.-)%s*$"), line
        pos, line = stop + 1, line + 1
      end
    end
  end
  return vars, lines
end

--- Reads the file at path, if there is one: nil when it does not exist.
--- Raises "PATH:LINE: ..." on a line it cannot read and "cannot read PATH:
--- ..." when the file is there but cannot be read.
---@param path string
---@return table<string, string>|nil vars, table<string, integer>|nil lines
function dotenv.read(path)
  local file, err, code = io.open(path, "rb")
  if not file then
    if code == 2 then return nil end  -- ENOENT
    local reason = tostring(err):gsub("^" .. path:gsub("%p", "%%%0") .. ": ", "")
    error("cannot read " .. path .. ": " .. reason, 0)
  end
  local text, read_err = file:read("a")
  file:close()
  if not text then error("cannot read " .. path .. ": " .. tostring(read_err), 0) end
  return dotenv.parse(text, path)
end

return dotenv
