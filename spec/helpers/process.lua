--- What the specs that run the eutaxy binary share:
--   local process = dofile("spec/helpers/process.lua")
local process = {}

--- The binary under test (ctest passes EUTAXY_BIN).
process.bin = os.getenv("EUTAXY_BIN") or "build/eutaxy"

--- Runs a shell command; returns its stdout, its stderr and its exit code.
---@param command string
---@return string, string, integer
function process.run(command)
  return process.start(command)()
end

--- Starts a shell command; the function it returns waits for it and returns
--- its stdout, its stderr and its exit code. Commands started before the
--- first is waited for run at once.
---@param command string
---@return fun(): string, string, integer
function process.start(command)
  local errfile = os.tmpname()
  local p = assert(io.popen(command .. " 2>" .. errfile))
  return function()
    local out = p:read("a")
    local _, _, code = p:close()
    local f = assert(io.open(errfile))
    local err = f:read("a")
    f:close()
    os.remove(errfile)
    return out, err, code
  end
end

--- Runs a shell command that must succeed; returns its stdout.
---@param command string
---@return string
function process.sh(command)
  local out, err, code = process.run(command)
  assert(code == 0, command .. ": " .. out .. err)
  return out
end

--- s as one shell word, whatever it holds.
---@param s string
---@return string
function process.quote(s) return "'" .. s:gsub("'", "'\\''") .. "'" end

--- Starts `eutaxy check ARGS --json`; the function it returns waits for it
--- and returns what it did: the document (or nil when stdout is not one),
--- stdout, stderr, the exit code and the command.
---@param args string
---@return fun(): { doc: table|nil, out: string, err: string, code: integer, command: string }
function process.start_check(args)
  local cjson = require "cjson"
  local command = process.bin .. " check " .. args .. " --json"
  local wait = process.start(command)
  return function()
    local out, err, code = wait()
    local ok, doc = pcall(cjson.decode, out)
    return { doc = ok and type(doc) == "table" and doc or nil, out = out, err = err, code = code, command = command }
  end
end

--- The whole of a file, as bytes.
---@param path string
---@return string
function process.read(path)
  local f = assert(io.open(path, "rb"))
  local text = f:read("a")
  f:close()
  return text
end

--- Writes text as the whole of a file.
---@param path string
---@param text string
function process.write(path, text)
  local f = assert(io.open(path, "wb"))
  f:write(text)
  f:close()
end

return process
