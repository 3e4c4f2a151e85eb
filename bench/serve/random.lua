-- wrk script: GET /counter/<k> with k uniform in 0..OBJECTS-1 (wrk's
-- arguments after `--`: OBJECTS, default 10,000), so every request may reach
-- any of the objects and a server keeping fewer resident must load some back.
-- Each wrk thread draws from its own Park-Miller generator (MINSTD) with a
-- fixed seed, not math.random: the same sequence in every run, under LuaJIT
-- or Lua 5.4 alike (every product stays below 2^53, exact in a double).
local threads = 0

function setup(thread)
  thread:set("id", threads)
  threads = threads + 1
end

local objects = 10000
local state = 1

function init(args)
  objects = tonumber(args[1]) or objects
  state = 12345 + (id or 0) * 7919
end

function request()
  state = state * 48271 % 2147483647
  return wrk.format("GET", "/counter/" .. (state % objects))
end
