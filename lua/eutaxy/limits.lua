--- Limits for user code that runs outside an isolate.
--
-- A scenario file as it loads and a custom invariant run in the checker's
-- own Lua state, not in an isolate with its own allocator and CPU limit
-- (host/isolate.c). limits.pcall gives them the same bounds: a count hook
-- stops the code once it has run more VM instructions than an invocation
-- may (EUTAXY_CPU_LIMIT, default 200,000,000) or has grown the state by
-- more than an isolate may hold (EUTAXY_MEM_LIMIT MiB, default 128). The
-- hook looks at memory every STEP instructions, so one allocation larger
-- than the rest of the limit is seen only after it is made.
local limits = {}

local STEP = 10000
local DEFAULT_CPU = 200000000
local DEFAULT_MEM_MIB = 128

-- The value of the variable, or nil and the message world.c would give.
local function env_limit(name, default, most)
  local s = os.getenv(name)
  if s == nil or s == "" then return default end
  local n = s:match("^%d+$") and math.tointeger(tonumber(s))
  if not n or n < 1 or n > most then
    return nil, string.format('%s must be a whole number from 1 to %d, got "%s"', name, most, s:sub(1, 40))
  end
  return n
end

--- Like pcall(fn, ...), but fn fails with a message naming its line once
--- it runs past the CPU or memory limit; false and a message, without
--- running fn, when a limit in the environment is not a number.
---@param fn function
---@return boolean, ...
function limits.pcall(fn, ...)
  local cpu, err = env_limit("EUTAXY_CPU_LIMIT", DEFAULT_CPU, math.maxinteger)
  if not cpu then return false, err end
  local mem_mib
  mem_mib, err = env_limit("EUTAXY_MEM_LIMIT", DEFAULT_MEM_MIB, 1 << 20)
  if not mem_mib then return false, err end
  local mem_kib = mem_mib * 1024
  local budget = cpu
  local base = collectgarbage("count")
  local hook, mask, count = debug.gethook()
  -- A hook the host set in C ("external hook") cannot be put back from Lua:
  -- it stays, and bounds the code as the host sees fit. But the one that
  -- counts lines under `eutaxy test --coverage`, which core puts back: the
  -- bounds stay the same with coverage on, and what runs here (a scenario,
  -- an invariant) is a test, which coverage does not count anyway.
  local external = hook ~= nil and type(hook) ~= "function"
  local core = external and require "eutaxy.core"  -- only then: the scenario DSL loads without the C module
  local covered = external and core.coverage_hooked()
  if external and not covered then return pcall(fn, ...) end
  debug.sethook(function()
    budget = budget - STEP
    if budget < 0 then
      error(string.format("CPU limit exceeded: more than %d VM instructions without returning", cpu), 2)
    end
    if collectgarbage("count") - base > mem_kib then
      collectgarbage()
      if collectgarbage("count") - base > mem_kib then
        error(string.format("memory limit exceeded: it took more than %d MiB", mem_kib // 1024), 2)
      end
    end
  end, "", STEP)
  local r = table.pack(pcall(fn, ...))
  if covered then core.coverage_rehook() else debug.sethook(hook, mask, count) end
  return table.unpack(r, 1, r.n)
end

return limits
