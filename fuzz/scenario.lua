-- The Lua half of fuzz_scenario.c: a scenario's table, shape and values,
-- from a fuzz input, through the DSL that loads it (lua/eutaxy/check.lua).
--
-- The input is read as a value in the clone format (host/clone.c), but
-- leniently (see `read`), and the value is made into a scenario: a table with a `$call`
-- field becomes a call of the DSL function it names, with the table's array
-- part as arguments (after the same treatment), and the string "$fn" a
-- function. So the fuzzer builds scenarios as a file would, DSL calls nested
-- in tables, with any value in any place.
--
-- Clean outcomes: a DSL error (a string; never a runtime error raised inside
-- check.lua, which would reach the user as a traceback); or a scenario whose
-- drive the checker can prepare (http.Request.new and to_wire, exactly as
-- checker.lua does) and whose invariants evaluate against a fuzzed end
-- state to nil, a violation, or an error of the invariant's own.

local sim = require "eutaxy.check"
local http = require "eutaxy.http"

local CALLS = { "durableObjectTable", "durableObject", "http", "rpc", "unique", "everyRow",
                "invariant", "defineScenario" }

-- The DSL reads the file a scenario entry names to find a line; the
-- fuzzer's names must not reach the machine's files (a FIFO would block).
local real_open = io.open
io.open = function(path, mode)
  if path == SCENARIO_FILE then return real_open(path, mode) end
  return nil, tostring(path) .. ": not a file the fuzz target reads"
end

local state_of  -- the end state the invariants see, from the input

-- The clone format read leniently, so that every byte string is a value
-- and the fuzzer's mutations change the scenario rather than break the
-- encoding (fuzz_clone tests the strict decoder): tags are taken modulo 7,
-- lengths and counts are cut to what the input still holds, a key Lua
-- cannot hold or a nil value leaves the pair out, the input ends in nils.
-- A canonical encoding, as the seeds are, reads as clone.c would read it.
local function read(input)
  local pos, n = 1, #input
  local function byte()
    local b = input:byte(pos) or 0
    pos = pos + 1
    return b
  end
  local function varint()
    local x, shift = 0, 0
    repeat
      local b = byte()
      if shift < 64 then x = x | ((b & 0x7f) << shift) end
      shift = shift + 7
    until b < 0x80
    return x
  end
  local function left()
    return math.max(0, n - pos + 1)
  end
  local function value(depth)
    local tag = byte() % 7
    if tag == 0 then return nil end
    if tag == 1 or tag == 2 then return tag == 2 end
    if tag == 3 then
      local u = varint()
      return (u >> 1) ~ -(u & 1)
    end
    if tag == 4 then
      local s = input:sub(pos, pos + 7) .. ("\0"):rep(8)
      pos = pos + 8
      return (string.unpack("<d", s))
    end
    local count = varint()
    if count < 0 or count > left() then count = left() end
    if tag == 5 then
      local s = input:sub(pos, pos + count - 1)
      pos = pos + count
      return s
    end
    local t = {}
    if depth > 100 then return t end
    for _ = 1, count do
      local k, v = value(depth + 1), value(depth + 1)
      if k ~= nil and k == k and v ~= nil then t[k] = v end
    end
    return t
  end
  varint()  -- the count of values: one is read
  return value(0)
end

local function custom_fn(state)
  local s = state_of or {}
  if s.raise ~= nil then error(s.raise, 0) end
  return s.verdict, s.message
end

local function realize(v, depth)
  if v == "$fn" then return custom_fn end
  if type(v) ~= "table" then return v end
  if depth > 60 then return v end
  local out = {}
  for k, x in next, v do out[realize(k, depth + 1)] = realize(x, depth + 1) end
  local call = out["$call"]
  if math.type(call) == "integer" then
    local name = CALLS[call % #CALLS + 1]
    local n = out["$n"]
    if math.type(n) ~= "integer" or n < 0 or n > 8 then n = #out end
    -- a tail call sometimes, as `return sim.defineScenario { ... }` makes
    if out["$tail"] then return sim[name](table.unpack(out, 1, n)) end
    local r = sim[name](table.unpack(out, 1, n))
    return r
  end
  return out
end

-- A DSL error names its site (this file, or a file a scenario entry names)
-- and never comes from inside check.lua itself.
local function check_error(what, err)
  if type(err) ~= "string" then error(what .. " raised a " .. type(err), 0) end
  -- the message proper follows the first "FILE:LINE: "; the fuzzer's own
  -- strings are quoted inside it and may say anything
  local rest = err:match("^[^:]*:%d+: (.*)$") or err
  if err:find("^[^:]*eutaxy/check%.lua:%d+:") or rest:find("^attempt to ") or rest:find("^bad argument") then
    error(what .. " raised an error of its own code: " .. err, 0)
  end
end

-- The end state as checker.lua's State gives it: columns are names, rows
-- tables keyed by column with SQL's values (integers, floats, strings).
local function fake_state(s)
  s = type(s) == "table" and s or {}
  local columns, rows = {}, {}
  for _, c in ipairs(type(s.columns) == "table" and s.columns or {}) do
    if type(c) == "string" then columns[#columns + 1] = c end
  end
  for _, r in ipairs(type(s.rows) == "table" and s.rows or {}) do
    local row = {}
    if type(r) == "table" then
      for _, c in ipairs(columns) do
        if type(r[c]) == "string" or type(r[c]) == "number" then row[c] = r[c] end
      end
    end
    rows[#rows + 1] = row
  end
  local st = { responses = s.responses }
  function st:rows() return rows end
  function st:columns() return columns end
  return st
end

local function prepare(scenario)
  -- checker.lua's prepare, for the drive's requests
  if scenario.drive.kind == "http" then
    for _, r in ipairs(scenario.drive.requests) do
      local request = http.Request.new(r.path, { method = r.method, headers = r.headers, body = r.body })
      http.to_wire(request)
    end
  end
end

return function(input)
  local value = read(input)
  if type(value) ~= "table" then return end
  state_of = type(value["$state"]) == "table" and value["$state"] or nil
  local ok, scenario = pcall(realize, value, 0)
  if not ok then
    if type(scenario) == "string" and scenario:find("not enough memory") then return end
    check_error("the DSL", scenario)
    return
  end
  if type(scenario) ~= "table" or scenario.kind ~= "eutaxy.scenario" then return end
  local pok, perr = pcall(prepare, scenario)
  if not pok then
    error("a scenario the DSL accepted cannot be prepared: " .. tostring(perr), 0)
  end
  sim.format_value(scenario)
  for _, inv in ipairs(scenario.invariants) do
    local eok, v = pcall(sim.evaluate, inv, fake_state(state_of))
    if not eok then
      check_error("invariant " .. tostring(inv.name), v)
    elseif v ~= nil then
      if type(v.invariant) ~= "string" or type(v.message) ~= "string" then
        error("a violation without its invariant's name or a message", 0)
      end
    end
  end
end
