-- The eutaxy side of bench/serve; bench/serve/workerd/worker.js is the same
-- worker in JavaScript, and both must stay request for request the same work.
--   GET  /counter/<name>   one write in object <name>: UPDATE ... RETURNING n
--   GET  /touch/<k>        the same write in object "touch-<k>", fresh on first use
--   POST /lease/acquire    a lease on one of RUNNERS runners of the pool "pool"
local eutaxy = require "eutaxy"

-- Leases last LEASE_MS and are never released, so the pool turns over at
-- RUNNERS / LEASE_MS leases per ms: 10,000 per second, above what either
-- server serves, so a 409 (no free runner) under load says the pool is too small.
local RUNNERS = 1000
local LEASE_MS = 100

local Counter = eutaxy.DurableObject:extend("Counter")

function Counter:init()
  local sql = self.ctx.storage.sql
  sql:exec("CREATE TABLE IF NOT EXISTS counter (id INTEGER PRIMARY KEY, n INTEGER NOT NULL)")
  sql:exec("INSERT OR IGNORE INTO counter (id, n) VALUES (1, 0)")
end

function Counter:hit()
  return self.ctx.storage.sql:exec("UPDATE counter SET n = n + 1 WHERE id = 1 RETURNING n"):one().n
end

local LeasePool = eutaxy.DurableObject:extend("LeasePool")

function LeasePool:init()
  local sql = self.ctx.storage.sql
  sql:exec("CREATE TABLE IF NOT EXISTS runners (id INTEGER PRIMARY KEY, expires_at INTEGER NOT NULL)")
  sql:exec("CREATE INDEX IF NOT EXISTS runners_expiry ON runners (expires_at)")
  sql:exec("CREATE TABLE IF NOT EXISTS grants (token TEXT PRIMARY KEY, runner INTEGER NOT NULL,"
    .. " granted_at INTEGER NOT NULL, expires_at INTEGER NOT NULL)")
  if sql:exec("SELECT count(*) AS n FROM runners"):one().n == 0 then
    for id = 1, RUNNERS do sql:exec("INSERT INTO runners (id, expires_at) VALUES (?, 0)", id) end
  end
end

-- The runner whose lease ran out first, if it has: its row and the grant are one turn.
function LeasePool:acquire()
  local sql = self.ctx.storage.sql
  local now = eutaxy.now()
  local runner = sql:exec("UPDATE runners SET expires_at = ?1 WHERE id ="
    .. " (SELECT id FROM runners WHERE expires_at <= ?2 ORDER BY expires_at LIMIT 1) RETURNING id",
    now + LEASE_MS, now):toArray()[1]
  if not runner then return nil end
  local token = eutaxy.uuid()
  sql:exec("INSERT INTO grants (token, runner, granted_at, expires_at) VALUES (?, ?, ?, ?)",
    token, runner.id, now, now + LEASE_MS)
  return { runner = runner.id, token = token, expiresAt = now + LEASE_MS }
end

return {
  Counter = Counter,
  LeasePool = LeasePool,
  fetch = function(request, env)
    local path = eutaxy.url.parse(request.url).pathname
    local name = path:match("^/counter/([^/]+)$")
    if name and request.method == "GET" then
      return eutaxy.Response.json({ n = env.COUNTER:getByName(name):hit() })
    end
    local k = path:match("^/touch/(%d+)$")
    if k and request.method == "GET" then
      return eutaxy.Response.json({ n = env.COUNTER:getByName("touch-" .. k):hit() })
    end
    if path == "/lease/acquire" and request.method == "POST" then
      local lease = env.POOL:getByName("pool"):acquire()
      if not lease then return eutaxy.Response.new("no free runner\n", { status = 409 }) end
      return eutaxy.Response.json(lease)
    end
    return eutaxy.Response.new("not found\n", { status = 404 })
  end,
}
