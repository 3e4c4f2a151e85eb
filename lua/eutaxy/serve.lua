-- eutaxy.serve: `eutaxy serve WRANGLER.jsonc`, the command line side.
--
-- Reads the arguments and the config here, where a wrong field gets a clear
-- message; the server itself (sockets, the world on the wall clock, the
-- objects' files) is core.serve, in host/serve.c.

local config = require "eutaxy.config"
local core = require "eutaxy.core"

local io_stderr, io_stdout = io.stderr, io.stdout
local tonumber, math_type = tonumber, math.type

---@class eutaxy.serve
local serve = {}

-- lua/eutaxy/help.lua holds every command's text, flags included.
local usage = require("eutaxy.help").text("serve")

local function dirname(path)
  return path:match("^(.*)/[^/]*$") or "."
end

--- Parses argv; returns the options, or nil and a message.
---@param argv string[]
---@return table|nil, string|nil
function serve.parse(argv)
  local opts = { port = 8787, host = "127.0.0.1", state = ".eutaxy/state", quiet = false }
  local i = 1
  while i <= #argv do
    local a = argv[i]
    if a == "--quiet" then
      opts.quiet = true
    elseif a == "--port" or a == "--host" or a == "--state" then
      local v = argv[i + 1]
      if v == nil then return nil, a .. " needs a value" end
      if a == "--port" then
        local n = tonumber(v)
        if math_type(n) ~= "integer" or n < 0 or n > 65535 then
          return nil, "--port must be an integer within 0..65535, got " .. v
        end
        opts.port = n
      else
        opts[a:sub(3)] = v
      end
      i = i + 1
    elseif a:sub(1, 1) == "-" then
      return nil, "unknown option " .. a
    elseif opts.config == nil then
      opts.config = a
    else
      return nil, "one config file only, got " .. opts.config .. " and " .. a
    end
    i = i + 1
  end
  if opts.config == nil then return nil, "which wrangler.jsonc?" end
  return opts
end

--- Runs the server until SIGINT or SIGTERM; returns the exit code.
---@param argv string[]
---@return integer
function serve.main(argv)
  if argv[1] == "--help" or argv[1] == "-h" then
    io_stdout:write(usage)
    return 0
  end
  local opts, err = serve.parse(argv)
  if not opts then
    io_stderr:write("eutaxy serve: ", err, "\n\n", usage)
    return 2
  end
  local ok, cfg = pcall(config.load, opts.config)
  if not ok then
    io_stderr:write("eutaxy serve: ", tostring(cfg), "\n")
    return 2
  end
  local started, msg = core.serve {
    entry = cfg.main, projectdir = dirname(cfg.main), libdir = config.libdir(),
    bindings = cfg.bindings, host = opts.host, port = opts.port, state = opts.state,
    quiet = opts.quiet,
  }
  if not started then
    io_stderr:write("eutaxy serve: ", msg, "\n")
    return 1
  end
  return 0
end

return serve
