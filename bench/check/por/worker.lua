--- The partial-order benchmarks' worker.
-- POST /work/NAME: object WORK(NAME) counts three steps, sleeping between
-- them, so each request yields twice in its object.
-- POST /lock/NAME: the worker reads whether LOCK(lock) is free, then takes
-- it in a second call (check-then-act across an await), and releases it
-- in a third.
local eutaxy = require "eutaxy"

---@class Work: eutaxy.DurableObject
local Work = eutaxy.DurableObject:extend("Work")

function Work:step(who)
  local kv = self.ctx.storage
  for _ = 1, 3 do
    kv:put(who, (kv:get(who) or 0) + 1)
    if (kv:get(who) or 0) % 3 ~= 0 then eutaxy.sleep(10) end
  end
  return kv:get(who)
end

---@class Lock: eutaxy.DurableObject
local Lock = eutaxy.DurableObject:extend("Lock")

function Lock:holder() return self.ctx.storage:get("holder") end
function Lock:take(who) self.ctx.storage:put("holder", who) end
function Lock:release() self.ctx.storage:delete("holder") end

local function fetch(request, env)
  local kind, name = eutaxy.url.parse(request.url).pathname:match("^/(%a+)/([%w%-]+)$")
  if kind == "work" then
    return eutaxy.Response.json({ steps = env.WORK:getByName(name):step(name) })
  elseif kind == "lock" then
    local lock = env.LOCK:getByName("lock")
    if lock:holder() then return eutaxy.Response.new("busy", { status = 409 }) end
    lock:take(name)
    lock:release()
    return eutaxy.Response.new("done")
  end
  return eutaxy.Response.new("not found", { status = 404 })
end

return { Work = Work, Lock = Lock, fetch = fetch }
