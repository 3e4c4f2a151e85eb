-- wrk script: GET /counter/<k> with k walking 0..999 over and over, so the
-- load spreads evenly over 1,000 objects. Each wrk thread has its own Lua
-- state and counter; threads start half the range apart.
local threads = 0

function setup(thread)
  thread:set("id", threads)
  threads = threads + 1
end

local n = 0

function request()
  local k = ((id or 0) * 500 + n) % 1000
  n = n + 1
  return wrk.format("GET", "/counter/" .. k)
end
