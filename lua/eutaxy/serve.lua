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

local function integer(flag, v, lo, hi)
  local n = tonumber(v)
  if math_type(n) ~= "integer" or n < lo or n > hi then
    return nil, flag .. " must be an integer within " .. lo .. ".." .. hi .. ", got " .. v
  end
  return n
end

local function seconds(flag, v, allow_zero)
  local n = tonumber(v)
  if n == nil or n ~= n or n < 0 or n > 1e9 or (n == 0 and not allow_zero) then
    return nil, flag .. " must be a number of seconds" .. (allow_zero and "" or " above 0")
      .. ", got " .. v
  end
  return n
end

local function millis(n)
  return math.max(1, math.floor(n * 1000))
end

-- Each option taking a value: how it is read into opts; a message if it is wrong.
local valued = {
  ["--port"] = function(opts, v)
    local n, err = integer("--port", v, 0, 65535)
    opts.port = n
    return err
  end,
  ["--host"] = function(opts, v) opts.host = v end,
  ["--state"] = function(opts, v) opts.state = v end,
  ["--durability"] = function(opts, v)
    if v ~= "full" and v ~= "process" then
      return "--durability must be full or process, got " .. v
    end
    opts.durability = v
  end,
  ["--max-resident"] = function(opts, v)
    local n, err = integer("--max-resident", v, 1, 100000000)
    opts.max_resident = n
    return err
  end,
  ["--max-awake"] = function(opts, v)
    local n, err = integer("--max-awake", v, 0, 100000000)
    if n then opts.max_awake = n == 0 and -1 or n end
    return err
  end,
  ["--evict-after"] = function(opts, v)
    local n, err = seconds("--evict-after", v, true)
    if n then opts.evict_after_ms = n == 0 and -1 or millis(n) end
    return err
  end,
  ["--header-timeout"] = function(opts, v)
    local n, err = seconds("--header-timeout", v)
    if n then opts.header_timeout_ms = millis(n) end
    return err
  end,
  ["--idle-timeout"] = function(opts, v)
    local n, err = seconds("--idle-timeout", v)
    if n then opts.idle_timeout_ms = millis(n) end
    return err
  end,
  ["--max-connections"] = function(opts, v)
    local n, err = integer("--max-connections", v, 1, 100000000)
    opts.max_connections = n
    return err
  end,
  ["--cpu-limit"] = function(opts, v)
    local n, err = integer("--cpu-limit", v, 1000, 1 << 50)
    opts.cpu_limit = n
    return err
  end,
  ["--memory-limit"] = function(opts, v)
    local n, err = integer("--memory-limit", v, 1, 1 << 20)
    if n then opts.memory_limit = n * 1024 * 1024 end
    return err
  end,
  ["--max-object-bytes"] = function(opts, v)
    local n, err = integer("--max-object-bytes", v, 65536, 1 << 50)
    opts.max_object_bytes = n
    return err
  end,
  ["--test-clock"] = function(opts, v)
    local n, err = integer("--test-clock", v, 1, 1 << 52)
    opts.test_clock = n
    return err
  end,
  ["--fetch-timeout"] = function(opts, v)
    local n, err = seconds("--fetch-timeout", v)
    if n then opts.fetch_timeout_ms = millis(n) end
    return err
  end,
  ["--fetch-max-bytes"] = function(opts, v)
    local n, err = integer("--fetch-max-bytes", v, 1, 32 * 1024 * 1024)
    opts.fetch_max_bytes = n
    return err
  end,
  ["--ws-max-message"] = function(opts, v)
    local n, err = integer("--ws-max-message", v, 1, 32 * 1024 * 1024)
    opts.ws_max_message = n
    return err
  end,
  ["--ca-file"] = function(opts, v)
    local f = io.open(v, "rb")
    if not f then return "--ca-file: cannot read " .. v end
    local pem = f:read(4096) or ""
    f:close()
    if not pem:find("-----BEGIN CERTIFICATE-----", 1, true) then
      return "--ca-file: " .. v .. " holds no PEM certificate (-----BEGIN CERTIFICATE-----)"
    end
    opts.ca_file = v
  end,
}

--- Parses argv; returns the options, or nil and a message.
---@param argv string[]
---@return table|nil, string|nil
function serve.parse(argv)
  local opts = { port = 8787, host = "127.0.0.1", state = ".eutaxy/state", quiet = false,
                 durability = "full" }
  local i = 1
  while i <= #argv do
    local a = argv[i]
    local key, inline = a:match("^(%-%-[%w-]+)=(.*)$")
    if key and valued[key] then a = key end
    if a == "--quiet" and inline == nil then
      opts.quiet = true
    elseif valued[a] then
      local v = inline
      if v == nil then
        v = argv[i + 1]
        if v == nil then return nil, a .. " needs a value" end
        i = i + 1
      end
      local err = valued[a](opts, v)
      if err then return nil, err end
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
    bindings = cfg.bindings, vars = cfg.vars, host = opts.host, port = opts.port, state = opts.state,
    quiet = opts.quiet, durability_process = opts.durability == "process",
    max_resident = opts.max_resident, max_awake = opts.max_awake, evict_after_ms = opts.evict_after_ms,
    header_timeout_ms = opts.header_timeout_ms, idle_timeout_ms = opts.idle_timeout_ms,
    max_connections = opts.max_connections, cpu_limit = opts.cpu_limit,
    memory_limit = opts.memory_limit, max_object_bytes = opts.max_object_bytes,
    crons = cfg.crons, test_clock = opts.test_clock,
    fetch_timeout_ms = opts.fetch_timeout_ms, fetch_max_bytes = opts.fetch_max_bytes, ca_file = opts.ca_file,
    ws_max_message = opts.ws_max_message,
  }
  if not started then
    -- a cron names the config that lists it
    if msg:find("^triggers%.crons") then msg = cfg.path .. ": " .. msg end
    io_stderr:write("eutaxy serve: ", msg, "\n")
    return 1
  end
  return 0
end

return serve
