--- The depth benchmarks' worker: POST /work/NAME has object WORK(NAME)
-- count three steps, sleeping between them; a failed call answers 503.
local eutaxy = require "eutaxy"

---@class Work: eutaxy.DurableObject
local Work = eutaxy.DurableObject:extend("Work")

function Work:step(who)
  local kv = self.ctx.storage
  for i = 1, 3 do
    kv:put(who, (kv:get(who) or 0) + 1)
    if i < 3 then eutaxy.sleep(10) end
  end
  return kv:get(who)
end

local function fetch(request, env)
  local name = eutaxy.url.parse(request.url).pathname:match("^/work/([%w%-]+)$")
  if not name then return eutaxy.Response.new("not found", { status = 404 }) end
  local ok, steps = pcall(function() return env.WORK:getByName(name):step(name) end)
  if not ok then return eutaxy.Response.new("try again", { status = 503 }) end
  return eutaxy.Response.json({ steps = steps })
end

return { Work = Work, fetch = fetch }
