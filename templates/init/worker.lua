--- The worker and its one object: a counter of visits that counts each
-- request once, even when the worker has to call it again.
local eutaxy = require "eutaxy"

---@class Counter: eutaxy.DurableObject
local Counter = eutaxy.DurableObject:extend("Counter")

function Counter:init()
  self.ctx.storage.sql:exec([[
    CREATE TABLE IF NOT EXISTS visits (
      n INTEGER PRIMARY KEY,
      request TEXT NOT NULL,
      at INTEGER NOT NULL
    )]])
end

--- Counts the visit of request (an id the caller keeps across retries) and
--- returns how many visits there have been. A request counted before is not
--- counted again: the worker may call twice for one request.
---@param request string
---@return integer
function Counter:visit(request)
  local sql = self.ctx.storage.sql
  sql:exec([[INSERT INTO visits (request, at) SELECT ?, ?
             WHERE NOT EXISTS (SELECT 1 FROM visits WHERE request = ?)]], request, eutaxy.now(), request)
  return sql:exec("SELECT count(*) AS n FROM visits"):one().n
end

return {
  Counter = Counter,

  ---@param request eutaxy.Request
  ---@param env { COUNTER: eutaxy.Namespace }
  ---@return eutaxy.Response
  fetch = function(request, env, ctx)
    local id = request.headers:get("x-request-id") or eutaxy.uuid()
    local counter = env.COUNTER:getByName("global")
    -- A call can fail after the counter committed (its answer lost): call
    -- again with the same id, which the counter recognises.
    local ok, visits = pcall(counter.visit, counter, id)
    if not ok then ok, visits = pcall(counter.visit, counter, id) end
    if not ok then return eutaxy.Response.new("the counter is unavailable", { status = 503 }) end
    return eutaxy.Response.json({ visits = visits })
  end,
}
