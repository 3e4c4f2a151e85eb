--- A nightly job that must never run twice at once. POST /jobs/nightly
-- asks the lock to start the job, does the work and lets the lock go.
--
-- Lock:start asks whether the lock is free, then notes the run in the
-- audit log (an RPC to another object: an await), then takes the lock. The
-- await lets another invocation of the lock in between the question and
-- the take, and it hears the same answer: both requests take the lock, run
-- the job at once, and let go. By the end the lock is free again, so a
-- check of the end state finds nothing; `eutaxy check locks.sim.lua` also
-- looks after every turn that wrote (sim.always) and sees two holders.
-- worker_fixed.lua is the repair.
local eutaxy = require "eutaxy"

---@class Lock: eutaxy.DurableObject
local Lock = eutaxy.DurableObject:extend("Lock")

--- Starts the job under token: false when another request holds the lock.
---@param token string
---@return boolean
function Lock:start(token)
  local sql = self.ctx.storage.sql
  if sql:exec("SELECT token FROM holders LIMIT 1"):toArray()[1] then return false end
  self.env.AUDIT:getByName("log"):started(token)
  sql:exec("INSERT INTO holders (token, taken_at) VALUES (?, ?)", token, eutaxy.now())
  return true
end

--- Lets the lock go, if token holds it.
---@param token string
function Lock:release(token)
  self.ctx.storage.sql:exec("DELETE FROM holders WHERE token = ?", token)
end

---@class Audit: eutaxy.DurableObject
local Audit = eutaxy.DurableObject:extend("Audit")

--- Notes that the job started under token.
---@param token string
function Audit:started(token)
  self.ctx.storage.sql:exec("INSERT INTO runs (token, started_at) VALUES (?, ?)", token, eutaxy.now())
end

local function fetch(request, env)
  if request.method ~= "POST" or eutaxy.url.parse(request.url).pathname ~= "/jobs/nightly" then
    return eutaxy.Response.new("not found", { status = 404 })
  end
  local lock = env.LOCKS:getByName("nightly")
  local token = eutaxy.uuid()
  if not lock:start(token) then
    return eutaxy.Response.new("the job is running already", { status = 409 })
  end
  -- the job's work would run here, holding the lock
  lock:release(token)
  return eutaxy.Response.new("done")
end

return { Lock = Lock, Audit = Audit, fetch = fetch }
