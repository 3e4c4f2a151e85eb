--- `eutaxy serve` with WebSockets, against Debian's python3-websockets
-- (spec/helpers/wsclient.py): many clients on one object, hibernation and
-- wake-up with no message lost, a restart's 1012, and the protocol's
-- failures on raw frames. The room is spec/fixtures/websocket/worker.lua.
-- With --test-clock the spec moves the server's clock itself, so nothing
-- here waits for time to pass.
local h = dofile("spec/fixtures/serve/harness.lua")
local json = require "eutaxy.json"

local CONFIG = "spec/fixtures/websocket/wrangler.jsonc"
local PY = "/usr/bin/python3"
local CLIENT = "spec/helpers/wsclient.py"
local START = 1767225600000
-- Under valgrind the server runs many times slower: the many clients'
-- test is left to the other passes (the tests after it run the same C).
local VALGRIND = os.getenv("EUTAXY_VALGRIND")
local MANY = 1000

local function have_websockets()
  return h.sh(PY .. " -c 'import websockets; print(1)' 2>/dev/null"):find("1", 1, true) ~= nil
end

local function run(args)
  local out = h.sh(PY .. " " .. CLIENT .. " " .. args .. " 2>&1")
  local ok, doc = pcall(json.decode, out:match("[^\n]*$") ~= "" and out:match("[^\n]*$") or out:match("([^\n]*)\n$"))
  assert(ok, out)
  return doc
end

-- A long-lived set of clients that take commands (wsclient.py hold):
-- two FIFOs carry its commands and its answers.
local function hold(state, url, n, env)
  local dir = state .. ".fifo"
  h.sh(("mkdir -p %s && mkfifo %s/cmd %s/out"):format(dir, dir, dir))
  os.execute(("%s%s %s hold %s %d < %s/cmd > %s/out 2>%s/err &")
    :format(env and env .. " " or "", PY, CLIENT, url, n, dir, dir, dir))
  local clients = { cmd = assert(io.open(dir .. "/cmd", "w")), out = assert(io.open(dir .. "/out", "r")), dir = dir }
  local ready = clients.out:read("l")
  assert(ready == "ready", (ready or "") .. h.sh("cat " .. dir .. "/err"))
  function clients.ask(line, answered)
    clients.cmd:write(line, "\n")
    clients.cmd:flush()
    local reply = clients.out:read("l")
    assert(reply, "the clients stopped: " .. h.sh("cat " .. dir .. "/err"))
    if answered then return json.decode(reply) end
    return reply
  end
  function clients.finish()
    clients.cmd:close()
    clients.out:close()
    h.sh("rm -rf " .. dir)
  end
  return clients
end

describe("eutaxy serve with WebSockets", function()
  local state

  before_each(function()
    if not have_websockets() then pending("python3-websockets is not installed (the .ci/packages list has it)") end
    state = h.begin()
    if not state then pending("curl is not installed (the .ci/packages list has it)") end
  end)

  after_each(function() h.finish(state) end)

  it("connects " .. MANY .. " clients to one object and broadcasts to every one", function()
    if VALGRIND then return pending("left to the plain and sanitizer passes") end
    local server = h.start(state, "--max-connections " .. (MANY + 50), CONFIG)
    local doc = run(("broadcast ws://127.0.0.1:%s/r/lobby %d"):format(server.port, MANY))
    assert.same({ connected = MANY, welcomed = MANY, heard = MANY }, doc)
    assert.equal(0, h.stop(server))
  end)

  it("hibernates an idle room with its sockets open, and wakes it for the next message with none lost", function()
    local server = h.start(state, "--test-clock " .. START .. " --evict-after 1", CONFIG)
    local clients = hold(state, ("ws://127.0.0.1:%s/r/lobby"):format(server.port), 3)
    -- (what a client got counts from after its welcome)
    clients.ask("send 0 memory")
    local doc = clients.ask("expect 1 0 0", true)
    assert.equal("remembered", doc.got[1][1])
    -- two seconds on the server's clock: the room is idle past --evict-after
    assert.equal(200, (h.request(server, "POST", "/__eutaxy/clock?advance=2000")))
    local _, files = h.open_files(server)
    assert.equal(0, files)
    clients.ask("send 0 memory")
    doc = clients.ask("expect 2 0 0", true)
    assert.equal("fresh", doc.got[1][2])
    clients.ask("say")
    doc = clients.ask("expect 5 3 3", true)
    for i = 1, 3 do
      local heard = {}
      for _, m in ipairs(doc.got[i]) do heard[m] = true end
      for j = 0, 2 do assert.is_true(heard[("c%d: from c%d"):format(j, j)], json.encode(doc.got[i])) end
    end
    -- the tags and attachments came through the hibernation
    clients.ask("send 1 tags")
    doc = clients.ask("expect 5 4 3", true)
    assert.equal("c1,all", doc.got[2][4])
    clients.finish()
    assert.equal(0, h.stop(server))
  end)

  -- The server preloads spec/helpers/synclog.c, which adds "sync" to a log
  -- as each fsync, fdatasync or syncfs returns; the client adds "sent" and
  -- "got" to the same log. A message sent in a turn that wrote must come
  -- after a sync that began after that turn: after the "sent" of the message
  -- that started the turn. (A server that let it go at once would mostly
  -- show no sync in between; one that holds it always does.)
  it("holds what an object sends until the writes of the turn that sent it are durable", function()
    local preload = os.getenv("EUTAXY_SYNCLOG")
    if not preload then return pending("EUTAXY_SYNCLOG (the built spec/helpers/synclog.c) is not set: run it with ctest") end
    local log = state .. ".order"
    finally(function() os.remove(log) end)
    local asan = os.getenv("ASAN_OPTIONS")
    -- the preload comes before the sanitizer's runtime, which asks to be first
    local env = ("LD_PRELOAD=%s EUTAXY_SYNC_LOG=%s ASAN_OPTIONS=%s"):format(preload, log,
      ((asan and asan ~= "") and asan .. ":" or "") .. "verify_asan_link_order=0")
    local server = h.start(state, "--test-clock " .. START, CONFIG, nil, env)
    local clients = hold(state, ("ws://127.0.0.1:%s/r/lobby"):format(server.port), 1, "EUTAXY_SYNC_LOG=" .. log)
    for k = 1, 5 do
      clients.ask("send 0 memory")
      local doc = clients.ask("expect " .. k, true)
      assert.equal("remembered", doc.got[1][k])
    end
    clients.finish()
    assert.equal(0, h.stop(server))
    local lines, rounds = {}, 0
    for line in io.lines(log) do lines[#lines + 1] = line end
    for i, line in ipairs(lines) do
      if line == "got remembered" then
        local synced = false
        for j = i - 1, 1, -1 do
          if lines[j] == "sent memory" then break end
          synced = synced or lines[j] == "sync"
        end
        assert.is_true(synced, "a message left before its turn's writes were synced:\n" .. table.concat(lines, "\n"))
        rounds = rounds + 1
      end
    end
    assert.equal(5, rounds)
  end)

  it("closes every socket with 1012 when it stops, as a deploy does", function()
    local server = h.start(state, "", CONFIG)
    local clients = hold(state, ("ws://127.0.0.1:%s/r/lobby"):format(server.port), 3)
    assert.equal(0, h.stop(server))
    local doc = clients.ask("closed", true)
    for i = 1, 3 do assert.same({ code = 1012, reason = "service restart" }, doc.closes[i]) end
    clients.finish()
  end)

  it("tells the object of a client that closes, and of one that goes without a close frame", function()
    local server = h.start(state, "", CONFIG)
    local url = ("ws://127.0.0.1:%s/r/lobby"):format(server.port)
    run(("broadcast %s 2"):format(url))  -- both close cleanly at the end
    local doc = run(("raw 127.0.0.1 %s /r/lobby?name=raw fragmented"):format(server.port))
    assert.equal(101, doc.status)
    assert.equal(0, h.stop(server))
  end)

  describe("speaks RFC 6455 on raw frames", function()
    local server
    local function raw(case)
      return run(("raw 127.0.0.1 %s /r/raw?name=raw %s"):format(server.port, case))
    end
    -- The frames of one kind (close, pong, or op = 1 text), in order: the
    -- welcome the room sent may come before or after the others.
    local function only(frames, key)
      local out = {}
      for _, f in ipairs(frames) do if f[key] then out[#out + 1] = f end end
      return out
    end
    before_each(function() server = h.start(state, "--ws-max-message 65536", CONFIG) end)

    it("joins a fragmented message", function()
      local doc = raw("fragmented")
      assert.equal(101, doc.status)
      assert.same({ { op = 1, data = "welcome raw" }, { op = 1, data = "raw: fragmented" } }, only(doc.frames, "op"))
      assert.same({ close = 1000, reason = "" }, doc.frames[#doc.frames])
    end)

    it("answers a ping in the middle of a fragmented message, and keeps the message whole", function()
      local doc = raw("ping-in-fragment")
      assert.same({ { pong = "are you there" } }, only(doc.frames, "pong"))
      assert.same({ { op = 1, data = "welcome raw" }, { op = 1, data = "raw: ping" } }, only(doc.frames, "op"))
    end)

    it("closes with 1002 on a bad frame", function()
      for case, reason in pairs({ unmasked = "unmasked frame from the client",
                                  ["reserved-bits"] = "reserved bits set without an extension" }) do
        local frames = raw(case).frames
        assert.same({ { close = 1002, reason = reason } }, only(frames, "close"))
        assert.same({ close = 1002, reason = reason }, frames[#frames])
        assert.same({}, only(frames, "pong"))
      end
    end)

    it("closes with 1007 on text that is not UTF-8, and 1009 on a message over --ws-max-message", function()
      local closes = only(raw("bad-utf8").frames, "close")
      assert.equal(1, #closes)
      assert.equal(1007, closes[1].close)
      closes = only(raw("oversized").frames, "close")
      assert.equal(1, #closes)
      assert.equal(1009, closes[1].close)
    end)

    it("refuses a bad handshake without reaching the worker", function()
      local out = h.sh(("curl -s -i --max-time 10 -H 'Upgrade: websocket' -H 'Connection: Upgrade' "
        .. "-H 'Sec-WebSocket-Version: 8' -H 'Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==' "
        .. "http://127.0.0.1:%s/r/lobby"):format(server.port))
      assert.matches("^HTTP/1.1 426", out)
      assert.matches("Sec%-WebSocket%-Version: 13", out)
    end)
  end)
end)
