-- `eutaxy serve` and its data: a kill -9 in the middle of a stream of
-- writes loses no acknowledged write and leaves nothing half-written, the
-- lease pool works end to end, evicted objects come back with their state.

local h = dofile("spec/fixtures/serve/harness.lua")

local function ids(list)
  local out = {}
  for id in (list or ""):gmatch("%d+") do out[tonumber(id)] = true end
  return out
end

local function count(set)
  local n = 0
  for _ in pairs(set) do n = n + 1 end
  return n
end

-- Four streams of POSTs to path .. id, stream k sending ids k, k + 4, ...;
-- stream 1 kills the server with SIGKILL after its 40th answer. The ids
-- answered 200.
local function stream_and_kill(state, server, path)
  local script = state .. "/stream.sh"
  local f = assert(io.open(script, "w"))
  f:write(([[
port=%s; pid=%s; dir=%s
for k in 1 2 3 4; do
  ( i=$k; n=0
    while [ $n -lt 2000 ]; do
      code=$(curl -s -o /dev/null -w '%%{http_code}' --max-time 10 -X POST "http://127.0.0.1:$port%s$i")
      [ "$code" = 200 ] || break
      echo $i >> $dir/acked.$k
      n=$((n + 1))
      if [ $k = 1 ] && [ $n = 40 ]; then kill -9 $pid; fi
      i=$((i + 4))
    done ) &
done
wait
]]):format(server.port, server.pid, state, path))
  f:close()
  h.sh("sh " .. script)
  h.stop(server)
  return ids(h.sh("cat " .. state .. "/acked.* 2>/dev/null"))
end

describe("eutaxy serve, durability", function()
  local state

  before_each(function()
    state = h.begin()
    if not state then pending("curl is not installed (the .ci/packages list has it)") end
  end)

  after_each(function() h.finish(state) end)

  it("keeps every acknowledged write through a kill -9 in a stream of writes, and no half of one", function()
    -- each POST writes one id into two tables in one turn
    local server = h.start(state)
    local acked = stream_and_kill(state, server, "/pair?id=")
    assert.truthy(count(acked) >= 40, "the stream was acknowledged " .. count(acked) .. " times")

    server = h.start(state)
    local status, body = h.request(server, "GET", "/pairs")
    assert.equal(200, status)
    local a, b = ids(body:match('"a":%[(.-)%]')), ids(body:match('"b":%[(.-)%]'))
    for id in pairs(acked) do
      assert.truthy(a[id] and b[id], "acknowledged id " .. id .. " is missing after the restart")
    end
    -- A write may be durable with its answer lost in the kill; never half of one.
    assert.same(a, b)
  end)

  it("keeps the first write of every acknowledged new object through a kill -9", function()
    -- A new object's database is in memory until the round of syncs that
    -- covers its first write puts it in its file: one write each.
    local server = h.start(state)
    local acked = stream_and_kill(state, server, "/touch/")
    assert.truthy(count(acked) >= 40, "new objects were acknowledged " .. count(acked) .. " times")

    server = h.start(state)
    for id in pairs(acked) do
      assert.same({ 200, '{"n":1}' }, { h.request(server, "GET", "/touch/" .. id) }, "object " .. id)
    end
    assert.equal(0, h.stop(server))
    local log = h.log(server)
    assert.is_nil(log:find("eutaxy serve:", 1, true), log)
  end)

  it("keeps through a kill -9 the writes after a new object's file, and those of one kept in memory", function()
    local server = h.start(state)
    for n = 1, 5 do
      -- one object written five times, its file first written whole and
      -- then reopened for each write; one holding a temporary table, which
      -- keeps its database in memory, written whole at every round
      assert.same({ 200, ('{"n":%d}'):format(n) }, { h.request(server, "POST", "/touch/7") })
      assert.same({ 200, ('{"n":%d}'):format(n) }, { h.request(server, "POST", "/scratch/7") })
    end
    h.stop(server, "KILL")
    server = h.start(state, "--durability process")
    assert.same({ 200, '{"n":5}' }, { h.request(server, "GET", "/touch/7") })
    assert.same({ 200, '{"n":5}' }, { h.request(server, "GET", "/scratch/7") })
    -- and the same without syncs: each write is in the kernel before its answer
    assert.same({ 200, '{"n":1}' }, { h.request(server, "POST", "/touch/8") })
    assert.same({ 200, '{"n":6}' }, { h.request(server, "POST", "/scratch/7") })
    assert.same({ 200, '{"n":1}' }, { h.request(server, "POST", "/scratch/8") })
    h.stop(server, "KILL")
    server = h.start(state)
    assert.same({ 200, '{"n":1}' }, { h.request(server, "GET", "/touch/8") })
    assert.same({ 200, '{"n":6}' }, { h.request(server, "GET", "/scratch/7") })
    assert.same({ 200, '{"n":1}' }, { h.request(server, "GET", "/scratch/8") })
  end)

  it("removes at start what a crash or an earlier version left: a file half written, spare files", function()
    local new = state .. "/0123456789abcdef0123456789abcdef.sqlite.new"
    h.sh("mkdir -p " .. state .. "/.spare && echo x > " .. new .. " && echo x > " .. state .. "/.spare/3.sqlite")
    local server = h.start(state)
    assert.same({ 200, '{"n":1}' }, { h.request(server, "POST", "/hit") })
    assert.equal("", h.sh("ls -A " .. new .. " " .. state .. "/.spare 2>/dev/null"))
    assert.equal(0, h.stop(server))
  end)

  it("serves the lease pool end to end, its leases kept across a restart", function()
    local config = "scenarios/lease-pool/serve.jsonc"
    local server = h.start(state, "", config)
    local slots = {}
    for _, project in ipairs({ "p-1", "p-2", "p-3" }) do
      local status, body = h.request(server, "POST", "/projects/" .. project .. "/lease")
      assert.equal(200, status, body)
      slots[#slots + 1] = body:match('"slot":"(r%-%d)"')
    end
    assert.same({ "r-1", "r-2", "r-3" }, slots)
    assert.same({ 409, "no free runner" }, { h.request(server, "POST", "/projects/p-4/lease") })
    assert.same({ 404, "not found" }, { h.request(server, "GET", "/projects/p-4/lease") })
    assert.equal(0, h.stop(server))
    server = h.start(state, "", config)
    assert.same({ 409, "no free runner" }, { h.request(server, "POST", "/projects/p-5/lease") })
  end)

  it("evicts beyond --max-resident, and an evicted object comes back with its state", function()
    local server = h.start(state, "--max-resident 5")
    local most = 0
    for k = 1, 30 do
      assert.same({ 200, '{"n":1}' }, { h.request(server, "POST", "/touch/" .. k) })
      local _, files = h.open_files(server)
      if files > most then most = files end
    end
    assert.truthy(most <= 6, most .. " object files were open at once")
    for k = 1, 30 do
      assert.same({ 200, '{"n":2}' }, { h.request(server, "POST", "/touch/" .. k) })
    end
    assert.equal(0, h.stop(server))
  end)

  it("evicts an object idle for --evict-after", function()
    local server = h.start(state, "--evict-after 0.2")
    for k = 1, 3 do assert.same({ 200, '{"n":1}' }, { h.request(server, "POST", "/touch/" .. k) }) end
    local files
    for _ = 1, 100 do  -- the sweep runs every 50 ms: at most 10 s of tries
      files = select(2, h.open_files(server))
      if files == 0 then break end
      os.execute("sleep 0.1")
    end
    assert.equal(0, files)
    for k = 1, 3 do assert.same({ 200, '{"n":2}' }, { h.request(server, "POST", "/touch/" .. k) }) end
  end)

  it("keeps writes across a clean restart with --durability process", function()
    local server = h.start(state, "--durability process")
    assert.same({ 200, '{"n":1}' }, { h.request(server, "POST", "/hit") })
    assert.same({ 200, '{"n":2}' }, { h.request(server, "POST", "/hit") })
    assert.equal(0, h.stop(server))
    server = h.start(state, "--durability=process")
    assert.same({ 200, '{"n":2}' }, { h.request(server, "GET", "/count") })
  end)

  it("answers concurrent writes to one object, each exactly once", function()
    local server = h.start(state)
    h.sh(("for k in $(seq 1 40); do curl -s -o /dev/null --max-time 10 -X POST http://127.0.0.1:%s/hit & done; wait")
      :format(server.port))
    assert.same({ 200, '{"n":40}' }, { h.request(server, "GET", "/count") })
  end)
end)
