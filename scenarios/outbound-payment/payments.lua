--- The payment provider, as the checker runs it (sim.service): POST
-- /charges with {order, amount} makes a charge and answers its id. A
-- request with an Idempotency-Key it has seen before is answered with the
-- charge that key made, and charges nothing, as real providers do.
local eutaxy = require "eutaxy"

local function fetch(request, env, ctx)
  local sql = ctx.storage.sql
  if request.method ~= "POST" or eutaxy.url.parse(request.url).pathname ~= "/charges" then
    return eutaxy.Response.new("not found", { status = 404 })
  end
  local key = request.headers:get("idempotency-key")
  if key then
    local seen = sql:exec("SELECT id FROM charges WHERE idempotency_key = ?", key):toArray()[1]
    if seen then return eutaxy.Response.json({ id = seen.id }) end
  end
  local charge = eutaxy.json.decode(request.body)
  local id = "ch-" .. (sql:exec("SELECT COUNT(*) AS n FROM charges"):one().n + 1)
  sql:exec("INSERT INTO charges (id, order_id, amount, idempotency_key) VALUES (?, ?, ?, ?)",
    id, charge.order, charge.amount, key)
  return eutaxy.Response.json({ id = id })
end

return { fetch = fetch }
