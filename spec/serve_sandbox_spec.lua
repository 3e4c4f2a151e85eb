-- `eutaxy serve` against code that tries to reach the host: files, native
-- code, bytecode, the debug library, the runtime's core, C calls and SQL
-- that would run for ever, engine tables, another object's name, a full
-- disk. Each attack fails inside its own request while other clients keep
-- being answered, and the server goes on.

local h = dofile("spec/fixtures/serve/harness.lua")
local json = require "cjson"

local config = "spec/fixtures/serve-sandbox/wrangler.jsonc"

describe("eutaxy serve, the sandbox", function()
  local state, server, hits

  -- Runs path while another client hits the counter, and returns the
  -- attack's status and decoded body; the hit must be answered too.
  local function attack(path)
    local out = h.sh(([[
curl -s --max-time 60 -o - -w '\n%%{http_code}' 'http://127.0.0.1:%s%s' &
a=$!
curl -s --max-time 60 -X POST -o /dev/null -w 'hit=%%{http_code}\n' http://127.0.0.1:%s/hit
wait $a
]]):format(server.port, path, server.port))
    hits = hits + 1
    assert.truthy(out:find("hit=200\n", 1, true), out)
    local body, status = out:gsub("hit=200\n", ""):match("^(.*)\n(%d+)$")
    local ok, decoded = pcall(json.decode, body)
    return tonumber(status), ok and decoded or body
  end

  before_each(function()
    state = h.begin()
    if not state then pending("curl is not installed (the .ci/packages list has it)") end
    hits = 0
  end)

  after_each(function()
    if server then
      -- the server went on: the counter saw every hit
      assert.same({ 200, ('{"n":%d}'):format(hits + 1) }, { h.request(server, "POST", "/hit") })
    end
    server = nil
    h.finish(state)
  end)

  local refused = {
    io = "attempt to index a nil value %(global 'io'%)",
    loadlib = "attempt to call a nil value %(field 'loadlib'%)",
    cpath = "module 'lfs' not found",
    path = "module 'passwd' not found",
    binary = "dump",
    sethook = "attempt to call a nil value %(field 'sethook'%)",
    registry = "attempt to call a nil value %(field 'getregistry'%)",
    core = "module 'eutaxy.core' not found",
    dofile = "attempt to call a nil value %(global 'dofile'%)",
  }

  for name, why in pairs(refused) do
    it("refuses " .. name .. " to the worker and to an object", function()
      server = h.start(state, "", config)
      for _, where in ipairs({ "w", "o" }) do
        local status, body = attack("/" .. where .. "/" .. name)
        assert.are.equal(200, status, body)
        assert.is_false(body.ok, json.encode(body))
        assert.matches(why, body.err)
        assert.is_nil(tostring(body.err):find("root:", 1, true))
      end
    end)
  end

  it("stops a pattern that backtracks and a string.rep that loops at --cpu-limit", function()
    server = h.start(state, "--cpu-limit 1000000", config)
    for _, path in ipairs({ "/w/pattern", "/o/pattern", "/w/rep", "/o/rep" }) do
      local status, body = attack(path)
      assert.are.equal(500, status, path .. ": " .. tostring(body))
    end
    assert.same({ 200, ('{"n":%d}'):format(hits + 1) }, { h.request(server, "POST", "/hit") })
    h.stop(server)
    local log = h.log(server)
    server = nil
    local _, limits = log:gsub("CPU limit exceeded", "")
    assert.are.equal(4, limits, log)
  end)

  it("stops SQL that works inside its functions, and refuses its memory and pragmas", function()
    server = h.start(state, "--memory-limit 16", config)
    local cases = {
      hex = "the statement ran past the CPU limit",
      concat = "string or blob too big",
      memory = "memory limit exceeded: the object may use 16 MiB, its SQL included",
      heap = "PRAGMA hard_heap_limit is not allowed",
      tempdir = "PRAGMA temp_store_directory is not allowed",
      trigger = "reserved",
      rename = "reserved",
      engine = "reserved",
    }
    for _, name in ipairs({ "hex", "concat", "memory", "heap", "tempdir", "trigger", "rename", "engine" }) do
      local status, body = attack("/s/" .. name)
      assert.are.equal(200, status, name)
      assert.is_false(body.ok, name)
      assert.truthy(tostring(body.err):find(cases[name], 1, true), name .. ": " .. tostring(body.err))
    end
  end)

  it("gives names with the same bytes before a NUL different ids", function()
    server = h.start(state, "", config)
    local status, body = attack("/names")
    assert.are.equal(200, status)
    assert.same({ ab_ac = false, ab_a = false }, body)
  end)

  it("gives a function the same name in two servers", function()
    server = h.start(state, "", config)
    local _, one = attack("/o/address")
    local other = h.start(h.tempdir(), "", config)
    local _, body = h.request(other, "GET", "/o/address")
    assert.are.equal(one.value, json.decode(body).value)
    assert.is_nil(one.value:find("0x%x%x%x%x%x%x%x%x%x"))
  end)

  it("closes an object whose finalizer never ends, at eviction, and goes on", function()
    server = h.start(state, "--max-resident 2 --cpu-limit 1000000", config)
    assert.are.equal(200, (attack("/trap")))
    -- new objects push the trapped one out
    for i = 1, 4 do
      assert.same({ 200, { n = 1 } }, { attack("/fill/e-" .. i .. "?kb=1") })
    end
  end)

  it("fails the turn of an object past --max-object-bytes with 507, and serves the others", function()
    -- (the error the object's own code sees is in spec/sql_sandbox_spec.lua)
    server = h.start(state, "--max-object-bytes 262144", config)
    local function fill(query, name)
      local status, body = h.request(server, "GET", "/fill" .. (name or "") .. "?" .. query)
      local ok, decoded = pcall(json.decode, body)
      return status, ok and decoded or body
    end
    assert.same({ 200, { n = 100 } }, { fill("kb=100") })
    -- past the quota SQLite ends the whole batch of the object's turns, so
    -- the host answers 507 to what was in flight and resets the object
    assert.same({ 507, "Insufficient Storage" }, { fill("kb=400") })
    -- the object still has its first 100 rows, and others write freely
    assert.same({ 200, { n = 110 } }, { fill("kb=10") })
    assert.same({ 200, { n = 100 } }, { fill("kb=100", "/other") })
    h.stop(server)
    local log = h.log(server)
    server = nil
    assert.truthy(log:find("the object's storage is full: its database may hold 262144 bytes (--max-object-bytes); "
      .. "answering 507 to the requests in flight", 1, true), log)
  end)

end)
