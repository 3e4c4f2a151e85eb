-- `eutaxy serve` under clients and code that misbehave: slow and idle
-- clients time out, a crowd of connections waits in the backlog instead of
-- taking the server's descriptors, runaway Lua is stopped with a 500, and
-- bad options are refused.

local h = dofile("spec/fixtures/serve/harness.lua")

-- Runs a shell script with the server's port and pid as $1 and $2.
local function script(server, text)
  local path = server.state .. "/client.sh"
  local f = assert(io.open(path, "w"))
  f:write(text)
  f:close()
  return h.sh(("bash %s %s %s"):format(path, server.port, server.pid))
end

describe("eutaxy serve, limits", function()
  local state

  before_each(function()
    state = h.begin()
    if not state then pending("curl is not installed (the .ci/packages list has it)") end
  end)

  after_each(function() h.finish(state) end)

  it("answers 408 and closes when a request does not arrive within --header-timeout", function()
    local server = h.start(state, "--header-timeout 0.3")
    local out = script(server, [[
exec 3<>/dev/tcp/127.0.0.1/$1
printf 'GET /count HTTP/1.1\r\nHost: x\r\n' >&3
timeout 10 cat <&3
echo "exit=$?"
]])
    assert.truthy(out:find("^HTTP/1%.1 408 "), out)
    assert.truthy(out:find("exit=0\n$"), out)
    assert.same({ 200, '{"n":0}' }, { h.request(server, "GET", "/count") })
  end)

  it("closes a connection with nothing asked after --idle-timeout", function()
    local server = h.start(state, "--idle-timeout 0.3")
    local out = script(server, [[
exec 3<>/dev/tcp/127.0.0.1/$1
printf 'GET /count HTTP/1.1\r\nHost: x\r\n\r\n' >&3
timeout 10 cat <&3
echo "exit=$?"
]])
    assert.truthy(out:find("^HTTP/1%.1 200 "), out)
    assert.truthy(out:find('{"n":0}exit=0\n$'), out)
  end)

  it("leaves connections beyond --max-connections in the backlog, not in its descriptors", function()
    local server = h.start(state, "--max-connections 3 --idle-timeout 0.3")
    local out = script(server, [[
for fd in $(seq 10 29); do eval "exec $fd<>/dev/tcp/127.0.0.1/$1"; done
echo "sockets=$(ls -l /proc/$2/fd | grep -c socket:)"
curl -s --max-time 20 http://127.0.0.1:$1/count
]])
    local sockets = tonumber(out:match("sockets=(%d+)"))
    -- the listener, three connections, and the one libuv has taken from the
    -- backlog and holds until the server accepts it
    assert.truthy(sockets and sockets <= 5, out)
    assert.truthy(out:find('{"n":0}$'), out)
  end)

  it("stops a runaway loop in fetch or in an object at --cpu-limit with a 500, and goes on", function()
    local server = h.start(state, "--cpu-limit 2000000")
    assert.same({ 500, "Internal Server Error" }, { h.request(server, "GET", "/spin") })
    assert.same({ 500, "Internal Server Error" }, { h.request(server, "GET", "/spin-object") })
    assert.same({ 200, '{"n":1}' }, { h.request(server, "POST", "/hit") })
    h.stop(server)
    local log = h.log(server)
    local _, limits = log:gsub("CPU limit exceeded: more than 2000000 VM instructions", "")
    assert.equal(2, limits, log)
  end)

  it("stops an object that allocates without end at --memory-limit with a 500, and goes on", function()
    local server = h.start(state, "--memory-limit 32")
    assert.same({ 500, "Internal Server Error" }, { h.request(server, "GET", "/hog") })
    assert.same({ 200, '{"n":1}' }, { h.request(server, "POST", "/hit") })
    h.stop(server)
    assert.truthy(h.log(server):find("memory limit exceeded: the isolate may use 32 MiB", 1, true), h.log(server))
  end)

  it("answers request headers over the limit with a 431", function()
    local server = h.start(state)
    local out = script(server, [[
big=$(head -c 20000 /dev/zero | tr '\0' a)
printf 'GET /count HTTP/1.1\r\nHost: x\r\nX-Big: %s\r\n\r\n' "$big" | curl -s --max-time 10 telnet://127.0.0.1:$1
]])
    assert.truthy(out:find("^HTTP/1%.1 431 "), out)
  end)

  it("refuses bad options with a message and exit code 2", function()
    local cases = {
      { "--durability fast", "--durability must be full or process, got fast" },
      { "--header-timeout 0", "--header-timeout must be a number of seconds above 0, got 0" },
      { "--max-resident x", "--max-resident must be an integer within 1..100000000, got x" },
      { "--max-awake -1", "--max-awake must be an integer within 0..100000000, got -1" },
      { "--memory-limit", "--memory-limit needs a value" },
      { "--max-object-bytes 10", "--max-object-bytes must be an integer within 65536..1125899906842624, got 10" },
      { "--bogus", "unknown option --bogus" },
    }
    for _, case in ipairs(cases) do
      local out = h.sh(("%s serve %s %s 2>&1; echo \"exit=$?\""):format(h.bin, h.config, case[1]))
      assert.truthy(out:find("eutaxy serve: " .. case[2], 1, true), out)
      assert.truthy(out:find("exit=2\n$"), out)
    end
  end)
end)
