--- A pool of build runners shared by many projects. One Durable Object hands
-- out a runner for five minutes, records each grant for billing, and its
-- alarm takes expired leases back. The worker asks the pool for a lease and
-- retries a call that failed, with the same token.
--
-- The retry is right for a call that never reached the pool and wrong for
-- one that committed but lost its answer: acquire then takes a second
-- runner for the same request. `eutaxy check leases.sim.lua` finds it;
-- worker_fixed.lua is the repair.
local eutaxy = require "eutaxy"

local LEASE_MS = 5 * 60 * 1000

---@class LeasePool: eutaxy.DurableObject
local LeasePool = eutaxy.DurableObject:extend("LeasePool")

--- The first free runner, leased to project until five minutes from now; nil when none is free.
---@param project string
---@param token string
function LeasePool:acquire(project, token)
  local sql = self.ctx.storage.sql
  local free = sql:exec("SELECT id FROM slots WHERE project IS NULL ORDER BY id LIMIT 1"):toArray()[1]
  if not free then return nil end
  return self:_grant(free.id, project, token)
end

-- Names starting with _ are not callable over RPC.
function LeasePool:_grant(slot, project, token)
  local storage = self.ctx.storage
  local now = eutaxy.now()
  local expires_at = now + LEASE_MS
  storage.sql:exec("UPDATE slots SET project = ?, token = ?, expires_at = ? WHERE id = ?",
    project, token, expires_at, slot)
  storage.sql:exec("INSERT INTO grants (token, project, slot, granted_at) VALUES (?, ?, ?, ?)",
    token, project, slot, now)
  local alarm = storage:getAlarm()
  if alarm == nil or expires_at < alarm then storage:setAlarm(expires_at) end
  return { slot = slot, token = token, expiresAt = expires_at }
end

--- Takes back every expired lease, closes its grant, and wakes again for the next expiry.
function LeasePool:alarm()
  local storage = self.ctx.storage
  local now = eutaxy.now()
  local expired = storage.sql:exec(
    "SELECT id, token FROM slots WHERE project IS NOT NULL AND expires_at <= ?", now):toArray()
  for _, lease in ipairs(expired) do
    storage.sql:exec("UPDATE grants SET ended_at = ? WHERE token = ? AND slot = ?", now, lease.token, lease.id)
    storage.sql:exec("UPDATE slots SET project = NULL, token = NULL, expires_at = NULL WHERE id = ?", lease.id)
  end
  local next_at = storage.sql:exec("SELECT MIN(expires_at) AS at FROM slots WHERE project IS NOT NULL"):one().at
  if next_at ~= nil then storage:setAlarm(next_at) end
end

local function fetch(request, env)
  local project = eutaxy.url.parse(request.url).pathname:match("^/projects/([%w_-]+)/lease$")
  if request.method ~= "POST" or not project then
    return eutaxy.Response.new("not found", { status = 404 })
  end
  local pool = env.POOL:getByName("pool")
  local token = eutaxy.uuid()
  -- One retry: a call can fail before it reaches the pool.
  for attempt = 1, 2 do
    local ok, lease = pcall(pool.acquire, pool, project, token)
    if ok then
      if lease then return eutaxy.Response.json(lease) end
      return eutaxy.Response.new("no free runner", { status = 409 })
    end
    if attempt == 2 then return eutaxy.Response.new("pool unavailable", { status = 503 }) end
  end
end

return { LeasePool = LeasePool, fetch = fetch, LEASE_MS = LEASE_MS }
