-- `eutaxy serve` as a real server: started on a free loopback port with its
-- own state directory, talked to with curl, stopped with SIGTERM.

local h = dofile("spec/fixtures/serve/harness.lua")
local sh, start, stop, request = h.sh, h.start, h.stop, h.request

describe("eutaxy serve", function()
  local state, server

  before_each(function()
    state = h.begin()
    if not state then pending("curl is not installed (the .ci/packages list has it)") end
  end)

  after_each(function()
    server = nil
    h.finish(state)
  end)

  it("counts POSTs in an object and keeps the count across a clean restart", function()
    server = start(state)
    assert.same({ 200, '{"n":1}' }, { request(server, "POST", "/hit") })
    assert.same({ 200, '{"n":2}' }, { request(server, "POST", "/hit") })
    assert.equal(0, stop(server))
    server = start(state)
    assert.same({ 200, '{"n":2}' }, { request(server, "GET", "/count") })
    assert.same({ 200, '{"n":3}' }, { request(server, "POST", "/hit") })
    assert.equal(0, stop(server, "INT"))
  end)

  -- Under valgrind (EUTAXY_VALGRIND, see CMakeLists.txt) two requests can
  -- take more than a second: the alarm is set 10 s ahead there.
  local alarm_s = os.getenv("EUTAXY_VALGRIND") and 10 or 1

  it("fires after a restart an alarm set before the shutdown", function()
    server = start(state)
    assert.same({ 200, '{"armed":true}' }, { request(server, "POST", "/alarm?in=" .. alarm_s * 1000) })
    assert.same({ 200, '{"fired":0}' }, { request(server, "GET", "/fired") })
    assert.equal(0, stop(server))
    server = start(state)
    local body
    for _ = 1, 50 * alarm_s do  -- the alarm is due alarm_s after it was set: at most 5 * alarm_s of tries
      local _, b = request(server, "GET", "/fired")
      body = b
      if body == '{"fired":1}' then break end
      os.execute("sleep 0.1")
    end
    assert.equal('{"fired":1}', body)
  end)

  it("fires at start-up an alarm that came due while the server was down", function()
    server = start(state)
    assert.same({ 200, '{"armed":true}' }, { request(server, "POST", "/alarm?in=" .. alarm_s * 1000) })
    assert.equal(0, stop(server))
    os.execute("sleep " .. alarm_s + 0.2)  -- past the alarm's time, with no server running
    server = start(state)
    assert.same({ 200, '{"fired":1}' }, { request(server, "GET", "/fired") })
  end)

  it("runs a request at the wall clock's time, even after the server sat idle", function()
    server = start(state)
    assert.equal(200, (request(server, "GET", "/count")))
    os.execute("sleep 1")
    local before = tonumber(sh("date +%s%3N"))
    local _, body = request(server, "GET", "/now")
    local after = tonumber(sh("date +%s%3N"))
    local now = tonumber(body:match('"now":(%d+)'))
    assert.truthy(now >= before - 50 and now <= after + 50, body .. " not within " .. before .. ".." .. after)
  end)

  it("answers an error in fetch with a 500 and goes on serving", function()
    server = start(state)
    local status, body = request(server, "GET", "/boom")
    assert.equal(500, status)
    assert.equal("Internal Server Error", body)
    assert.same({ 200, '{"n":1}' }, { request(server, "POST", "/hit") })
    stop(server)
    local log = io.open(state .. ".log"):read("a")
    assert.truthy(log:find("boom on purpose", 1, true))
  end)

  -- An object's file opens on the thread pool while its calls wait; when it
  -- cannot be opened, each call waiting for it ends with the reason, the
  -- others are served, and the next call tries the file again.
  it("answers 500 to every call of an object whose file cannot be opened, and serves the others", function()
    server = start(state)
    assert.same({ 200, '{"n":1}' }, { request(server, "POST", "/touch/1") })
    assert.equal(0, stop(server))
    local file = sh("ls " .. state .. "/*.sqlite"):match("[^\n]+")
    assert.truthy(file)
    local f = assert(io.open(file, "wb"))
    f:write(("not a database "):rep(600))
    f:close()
    os.remove(file .. "-wal")
    server = start(state)
    local out = sh(("curl -s --max-time 20 -X POST --parallel -o /dev/null -w '%%{http_code}\\n' "
      .. "'http://127.0.0.1:%s/touch/1?[1-4]'"):format(server.port))
    assert.equal("500\n500\n500\n500\n", out)
    assert.same({ 200, '{"n":1}' }, { request(server, "POST", "/touch/2") })
    assert.equal(500, (request(server, "POST", "/touch/1")))
    assert.equal(0, stop(server))
    local _, n = h.log(server):gsub("fetch raised Error: cannot set up [^\n]*file is not a database", "")
    assert.equal(5, n, h.log(server))
  end)

  it("answers a malformed request with a 400 and goes on serving", function()
    server = start(state)
    local out = sh(("printf 'GARBAGE\\r\\n\\r\\n' | curl -s --max-time 5 telnet://127.0.0.1:%s")
      :format(server.port))
    assert.truthy(out:find("^HTTP/1%.1 400 "))
    assert.same({ 200, '{"n":1}' }, { request(server, "POST", "/hit") })
  end)

  it("refuses a body over the limit with a 413 and runs nothing of it", function()
    server = start(state)
    local out = sh(("printf 'POST /hit HTTP/1.1\\r\\nHost: x\\r\\nContent-Length: 2000000\\r\\n\\r\\n'"
      .. " | curl -s --max-time 5 telnet://127.0.0.1:%s"):format(server.port))
    assert.truthy(out:find("^HTTP/1%.1 413 "), out)
    assert.same({ 200, '{"n":0}' }, { request(server, "GET", "/count") })
  end)

  it("answers pipelined requests on one connection in the order they came", function()
    server = start(state)
    -- They may run concurrently; what is fixed is the order of the answers.
    local out = sh(("printf 'POST /hit HTTP/1.1\\r\\nHost: x\\r\\nContent-Length: 0\\r\\n\\r\\n"
      .. "GET /missing HTTP/1.1\\r\\nHost: x\\r\\n\\r\\n"
      .. "GET /boom HTTP/1.1\\r\\nHost: x\\r\\nConnection: close\\r\\n\\r\\n'"
      .. " | curl -s --max-time 5 telnet://127.0.0.1:%s"):format(server.port))
    local statuses = {}
    for status in out:gmatch("HTTP/1%.1 (%d+) ") do statuses[#statuses + 1] = tonumber(status) end
    assert.same({ 200, 404, 500 }, statuses)
  end)
end)
