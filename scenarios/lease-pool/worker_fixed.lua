--- The same pool, made safe to retry: acquire looks for the project's lease
-- first and hands it back when the token matches, so a retry after a lost
-- answer gets the runner it already holds, and another caller for the same
-- project waits its turn. `eutaxy check leases.fixed.sim.lua` reports BOUNDED.
local planted = require "worker"

local LeasePool = planted.LeasePool:extend("LeasePool")

function LeasePool:acquire(project, token)
  local held = self.ctx.storage.sql:exec(
    "SELECT id, token, expires_at FROM slots WHERE project = ?", project):toArray()[1]
  if held then
    if held.token == token then return { slot = held.id, token = token, expiresAt = held.expires_at } end
    return nil
  end
  return planted.LeasePool.acquire(self, project, token)
end

return { LeasePool = LeasePool, fetch = planted.fetch, LEASE_MS = planted.LEASE_MS }
