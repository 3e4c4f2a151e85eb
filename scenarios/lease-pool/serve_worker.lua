--- The repaired pool (worker_fixed.lua) as a server runs it. In the
-- scenarios the pool's tables come from schema.lua, as a migration would lay
-- them; a served object lays them itself the first time it is built, in the
-- same turn as its first call, so no call ever sees half a schema.
local fixed = require "worker_fixed"
local schema = require "schema"

local LeasePool = fixed.LeasePool:extend("LeasePool")

function LeasePool:init()
  local sql = self.ctx.storage.sql
  local have = sql:exec("SELECT count(*) AS n FROM sqlite_master WHERE type = 'table' AND name = 'slots'"):one().n
  if have == 0 then
    sql:exec(schema.schema)
    for _, row in ipairs(schema.rows.slots) do
      sql:exec("INSERT INTO slots (id) VALUES (?)", row.id)
    end
  end
end

return { LeasePool = LeasePool, fetch = fixed.fetch }
