--- eutaxy.starter: `eutaxy init DIR`, a small working project to start from.
--
-- The project's files are in templates/init beside the lua folder, so they
-- are checked and tested as they are (spec/init_spec.lua runs the written
-- project's check and specs). Only .luarc.json is filled in: it names this
-- installation's types/ folder, which editors need as an absolute path.
-- Lua cannot list or make folders; eutaxy.fs, built into the eutaxy binary,
-- does that part.
local config = require "eutaxy.config"
local help = require "eutaxy.help"

---@class eutaxy.starter
local starter = {}

--- The template's files, relative to templates/init and to DIR.
starter.FILES = {
  "README.md",
  "wrangler.jsonc",
  "worker.lua",
  "visits.sim.lua",
  "spec/counter_spec.lua",
  ".luarc.json",
}

local function fail(code, fmt, ...)
  error({ code = code, message = fmt:format(...) }, 0)
end

local function read(path)
  local f, err = io.open(path, "rb")
  if not f then fail(1, "cannot read the template: %s", err) end
  local text = f:read("a")
  f:close()
  return text
end

local function write(path, text)
  local f, err = io.open(path, "wb")
  if not f then fail(1, "%s", err) end
  local ok, werr = f:write(text)
  local closed, cerr = f:close()
  if not ok or not closed then fail(1, "%s: %s", path, tostring(werr or cerr)) end
end

-- DIR must be missing or an empty folder; true when it is to be made.
local function check_dir(fs, dir)
  local n, err, kind = fs.entries(dir)
  if n == nil and kind == "missing" then return true end
  if n == nil then fail(2, "%s", err) end
  if n > 0 then
    fail(2, "%s is not empty (%d %s): init writes only into a missing or empty folder",
      dir, n, n == 1 and "entry" or "entries")
  end
  return false
end

--- Writes the starter project into dir, which must be missing or empty.
--- Raises { code =, message = } on failure: code 2 for a folder that is not
--- empty or not a folder, 1 for a file that could not be written.
---@param dir string
---@param fs table eutaxy.fs (entries, mkdir, realpath)
function starter.write(dir, fs)
  local root = config.libdir() .. "/.."
  local templates = root .. "/templates/init"
  local make = check_dir(fs, dir)
  local types = fs.realpath(root .. "/types")
  if not types then fail(1, "cannot find eutaxy's types/ folder beside %s", config.libdir()) end
  if make then
    local ok, err = fs.mkdir(dir)
    if not ok then fail(1, "%s", err) end
  end
  for _, name in ipairs(starter.FILES) do
    local sub = name:match("^(.*)/[^/]*$")
    if sub and not fs.entries(dir .. "/" .. sub) then
      local ok, err = fs.mkdir(dir .. "/" .. sub)
      if not ok then fail(1, "%s", err) end
    end
    local text = read(templates .. "/" .. name)
    if name == ".luarc.json" then
      text = text:gsub("@EUTAXY_TYPES@", (types:gsub("[\\\"]", "\\%0"):gsub("%%", "%%%%")))
    end
    write(dir .. "/" .. name, text)
  end
end

-- s as one shell word.
local function shell_word(s)
  if s:find("^[%w/._+,:=@%%-]+$") then return s end
  return "'" .. s:gsub("'", "'\\''") .. "'"
end

--- How the user runs this eutaxy: `eutaxy`, as installed (cmake --install)
--- when that is what PATH finds, else the binary's own path (a build that
--- is not installed, or another eutaxy first on PATH).
---@param fs table eutaxy.fs
---@return string
function starter.command(fs)
  local exe = fs.exe and fs.exe()
  if not exe then return "eutaxy" end
  for dir in (os.getenv("PATH") or ""):gmatch("[^:]+") do
    local found = fs.realpath(dir .. "/eutaxy")
    if found then return found == exe and "eutaxy" or shell_word(exe) end
  end
  return shell_word(exe)
end

--- `eutaxy init DIR`; returns the exit code.
---@param argv string[]
---@return integer
function starter.main(argv)
  local dir
  for _, a in ipairs(argv) do
    if a == "-h" or a == "--help" then
      io.stdout:write(help.text("init"))
      return 0
    elseif a:sub(1, 1) == "-" then
      io.stderr:write("eutaxy init: unknown option ", a, "\n\n", help.text("init"))
      return 2
    elseif dir then
      io.stderr:write("eutaxy init: one folder only, got ", dir, " and ", a, "\n")
      return 2
    end
    dir = a
  end
  if not dir then
    io.stderr:write("eutaxy init: which folder? usage: eutaxy init DIR\n")
    return 2
  end
  local fs = require "eutaxy.fs"
  local ok, err = pcall(starter.write, dir, fs)
  if not ok then
    if type(err) ~= "table" then error(err, 0) end
    io.stderr:write("eutaxy init: ", err.message, "\n")
    return err.code
  end
  io.stdout:write(("eutaxy init: wrote %s (%s)\n"):format(dir, table.concat(starter.FILES, ", ")))
  local eutaxy = starter.command(fs)
  io.stdout:write(("next: cd %s && %s check visits.sim.lua && %s test\n"):format(shell_word(dir), eutaxy, eutaxy))
  return 0
end

return starter
