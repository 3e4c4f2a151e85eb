--- `eutaxy run tools/luac_install.lua OUT DATADIR MODULE...`: what
-- `cmake --install` runs once eutaxy's modules are installed in
-- DATADIR/lua/eutaxy (under $DESTDIR when it is set). Compiles each MODULE
-- (NAME.lua) into OUT/eutaxy/NAME.luac with, as its chunk name, the path
-- the installed binary loads it by, and writes their hashes, under the same
-- paths, into OUT/eutaxy.fnv; the install then copies OUT into DATADIR/luac.
-- host/luac.c uses a module's bytecode only when that name is the path of
-- the file it found, so the build's bytecode, named after the source
-- tree's files, would never be used by an installed binary.
--
-- The installed binary finds DATADIR from its own path with no symbolic
-- links (host/main.c), so DATADIR is named by its real path; under
-- $DESTDIR the files are not yet where they will run from, and DATADIR is
-- named as given.
local core = require "eutaxy.core"
local fs = require "eutaxy.fs"

local out, datadir = arg[1], arg[2]
if not out or not datadir or #arg < 3 then
  io.stderr:write("usage: eutaxy run tools/luac_install.lua OUT DATADIR MODULE...\n")
  os.exit(2)
end
local destdir = os.getenv("DESTDIR") or ""
if destdir == "" then datadir = assert(fs.realpath(datadir)) end

local function write(path, bytes)
  local f = assert(io.open(path, "wb"))
  assert(f:write(bytes))
  assert(f:close())
end

if not fs.entries(out) then assert(fs.mkdir(out)) end
if not fs.entries(out .. "/eutaxy") then assert(fs.mkdir(out .. "/eutaxy")) end
local lines = {}
for i = 3, #arg do
  local module = arg[i]
  local name = datadir .. "/lua/eutaxy/" .. module
  local f = assert(io.open(destdir .. name, "rb"))
  local text = f:read("a")
  f:close()
  -- as luac compiles the file: debug information kept, the file's path as the chunk's name
  write(out .. "/eutaxy/" .. module:gsub("%.lua$", ".luac"), string.dump(assert(load(text, "@" .. name, "t")), false))
  lines[#lines + 1] = core.fnv1a64(text) .. " " .. name .. "\n"
end
write(out .. "/eutaxy.fnv", table.concat(lines))
