--- The lease pool in a world on the virtual clock: two projects lease a
-- runner, five minutes pass in no time, the alarm takes both leases back.
--   eutaxy run scenarios/lease-pool/demo.lua
-- The config's path is relative to this file, and require finds schema.lua
-- beside it, from whatever folder the command runs.
local testing = require "eutaxy.testing"

local world = testing.world {
  config = "wrangler.jsonc",
  sql = { POOL = { pool = require "schema" } },
}
for _, project in ipairs({ "p-1", "p-2" }) do
  local response = world:fetch("/projects/" .. project .. "/lease", { method = "POST" })
  print(("POST /projects/%s/lease -> %d %s"):format(project, response.status, response:text()))
end
world:advance(5 * 60 * 1000)
print()
print(world:trace())
for _, grant in ipairs(world:rows("POOL", "pool", "SELECT project, slot, granted_at, ended_at FROM grants")) do
  print(("grant %s %s granted %d ended %d"):format(grant.project, grant.slot, grant.granted_at, grant.ended_at))
end
world:close()
