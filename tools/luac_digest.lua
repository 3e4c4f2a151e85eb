--- `eutaxy run tools/luac_digest.lua OUT FILE...`: writes OUT, a line
-- "HASH PATH" for each FILE, HASH the FNV-1a 64 of its bytes as
-- eutaxy.fingerprint hashes files. The build runs it on eutaxy's own
-- modules; host/luac.c reads it back (eutaxy.luac's digest()).
local core = require "eutaxy.core"

local out = arg[1]
if not out then
  io.stderr:write("usage: eutaxy run tools/luac_digest.lua OUT FILE...\n")
  os.exit(2)
end
local lines = {}
for i = 2, #arg do
  local f = assert(io.open(arg[i], "rb"))
  lines[#lines + 1] = core.fnv1a64(f:read("a")) .. " " .. arg[i] .. "\n"
  f:close()
end
-- whole or not at all: a digest cut short would leave modules out
local f = assert(io.open(out .. ".tmp", "wb"))
assert(f:write(table.concat(lines)))
assert(f:close())
assert(os.rename(out .. ".tmp", out))
