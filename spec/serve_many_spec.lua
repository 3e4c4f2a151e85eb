-- `eutaxy serve` with many objects and few descriptors: the stores of
-- resident objects are a pool of open connections the size of what the
-- descriptor limit leaves, the rest parked and reopened on their next
-- use, so a thousand objects under a limit of 128 descriptors are all
-- answered, and each keeps what it wrote.

local h = dofile("spec/fixtures/serve/harness.lua")

local OBJECTS = 1000

-- The server under a limit of n descriptors (soft and hard, so the server
-- cannot raise it), with extra options.
local function start_limited(state, n, extra)
  local bin = h.bin
  h.bin = ("ulimit -n %d; exec %s"):format(n, bin)
  local ok, server = pcall(h.start, state, extra)
  h.bin = bin
  assert(ok, server)
  return server
end

-- POSTs /touch/1 .. /touch/OBJECTS, 16 at a time; the statuses, one a
-- line, and each answer's body by its object's number.
local function touch_all(server, dir)
  os.execute("mkdir -p " .. dir)
  local statuses = h.sh(("curl -s --max-time 60 --parallel --parallel-max 16 -X POST -w '%%{http_code}\\n' "
    .. "-o '%s/#1' 'http://127.0.0.1:%s/touch/[1-%d]' 2>/dev/null"):format(dir, server.port, OBJECTS))
  local bodies = {}
  for k = 1, OBJECTS do
    local f = io.open(dir .. "/" .. k)
    bodies[k] = f and f:read("a")
    if f then f:close() end
  end
  return statuses, bodies
end

local function count(text, pattern)
  local _, n = text:gsub(pattern, "")
  return n
end

-- The objects whose answer is not body, as a short list for a message.
local function wrong(bodies, body)
  local out = {}
  for k = 1, OBJECTS do
    if bodies[k] ~= body and #out < 10 then out[#out + 1] = ("%d: %s"):format(k, tostring(bodies[k])) end
  end
  return table.concat(out, "; ")
end

describe("eutaxy serve, many objects", function()
  local state

  before_each(function()
    state = h.begin()
    if not state then pending("curl is not installed (the .ci/packages list has it)") end
  end)

  after_each(function() h.finish(state) end)

  it("answers a thousand objects under a limit of 128 descriptors, each keeping its count", function()
    -- 200 resident: the last of the first round are still resident (their
    -- stores mostly parked) when the second round starts, the first ones evicted.
    local server = start_limited(state, 128, "--max-resident 200")
    local statuses, bodies = touch_all(server, state .. "/first")
    assert.equal(OBJECTS, count(statuses, "200\n"), statuses)
    assert.equal("", wrong(bodies, '{"n":1}'))
    local _, files = h.open_files(server)
    assert.truthy(files <= 32, ("%d database files open"):format(files))
    statuses, bodies = touch_all(server, state .. "/second")
    assert.equal(OBJECTS, count(statuses, "200\n"), statuses)
    assert.equal("", wrong(bodies, '{"n":2}'))
    assert.equal(0, h.stop(server))
    assert.falsy(h.log(server):find("cannot open", 1, true), h.log(server))
  end)
end)
