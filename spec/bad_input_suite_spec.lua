--- The bad-input suite: the mistakes users make, in each mode they can make
-- them in (eutaxy run, eutaxy check, eutaxy test, eutaxy serve), each with
-- its exact message (or the part of it that names file:line and the cause)
-- and its exit code. Syntax errors, unknown classes and bindings, malformed
-- configs and most scenario fields are in bad_input_spec.lua and
-- checker_bad_input_spec.lua; this file adds runaway code (loops, memory,
-- recursion), values that cannot cross, yields where none can happen, and
-- the checker's own user code (scenario files, invariants).
--
-- The fixtures are in spec/fixtures/bad/: worker.lua has one mistake per
-- method. Limits are lowered through EUTAXY_CPU_LIMIT and EUTAXY_MEM_LIMIT
-- so a runaway stops in milliseconds, also under valgrind.
local process = dofile("spec/helpers/process.lua")
local bin = os.getenv("EUTAXY_BIN") or "build/eutaxy"
local DIR = "spec/fixtures/bad/"
local WORKER = DIR .. "worker.lua"
local CPU = 2000000
local LIMITS = "EUTAXY_CPU_LIMIT=" .. CPU .. " EUTAXY_MEM_LIMIT=16 "

-- Runs `eutaxy ARGS` with env in front; returns stdout, stderr and the exit code.
local function eutaxy(env, args)
  return process.run(env .. bin .. " " .. args)
end

local function has(text, piece)
  assert.is_truthy(text:find(piece, 1, true), "expected to find\n  " .. piece .. "\nin\n" .. text)
end

local function cpu_limit(line)
  return WORKER .. ":" .. line .. ": CPU limit exceeded: more than " .. CPU .. " VM instructions without yielding"
end

local function mem_limit(line, mib)
  return WORKER .. ":" .. line .. ": memory limit exceeded: the isolate may use " .. (mib or 16) .. " MiB"
end

local function cannot_wait(line, what)
  return WORKER .. ":" .. line .. ": " .. what .. " cannot wait inside a function called from C (a table.sort "
    .. "comparator, a string.gsub replacement, transactionSync's function, a metamethod a library calls)"
end

-- The line of worker.lua where pattern is found, so an edit of the fixture
-- does not break every expected message.
local lines = {}
do
  local n = 0
  for text in io.lines(WORKER) do
    n = n + 1
    lines[#lines + 1] = { n = n, text = text }
  end
end
local function line_of(pattern, from)
  for _, l in ipairs(lines) do
    if l.n >= (from or 1) and l.text:find(pattern, 1, true) then return l.n end
  end
  error("no line of " .. WORKER .. " has " .. pattern)
end

local SPIN = line_of("while true do n = n + 1 end")
local SPIN_CAUGHT = line_of("pcall(function() while true do end end)")
local FETCH_SPIN = line_of('if path == "/spin" then') + 1
local ALARM_SPIN = line_of("function Bad:alarm()") + 1
local GROW = line_of('t[i] = ("x"):rep(1000) .. i')
local HUGE = line_of('string.rep("x", 0x7fffffff)')
local DEEP = line_of("return deep(n + 1) + 1")
local SORT_RPC = line_of("table.sort(t, function(a, b) return peer:echo(a) < b end)")
local SORT_SLEEP = line_of("eutaxy.sleep(1)", line_of("function Bad:sortWithSleep()"))
local GSUB = line_of('return (("ab"):gsub(')
local CLONE = "DataCloneError: the result of returnFunction cannot be cloned: cannot clone a function "
  .. "(at [1].items[2].callback)"

describe("eutaxy run, a script whose world's object", function()
  local function call(what, env, main)
    return eutaxy(env or LIMITS, "run " .. DIR .. "call.lua " .. (main or WORKER) .. " " .. what)
  end

  -- The error reaches the script uncaught: eutaxy run prints it and exits 1.
  local function fails(what, message, env)
    local out, err, code = call(what, env)
    assert.are.equal(1, code, out .. err)
    has(err, "eutaxy: ")
    has(err, message)
    return err
  end

  it("loops in an RPC method is stopped by the CPU limit", function()
    fails("spin", cpu_limit(SPIN))
  end)

  it("loops around a pcall that would catch the CPU limit's error is stopped all the same", function()
    fails("spinCaught", cpu_limit(SPIN_CAUGHT))
  end)

  it("loops in the worker's fetch is stopped by the CPU limit", function()
    fails("/spin", cpu_limit(FETCH_SPIN))
  end)

  it("loops in its alarm is stopped at every attempt, and retried six times", function()
    local out, err, code = call("alarm")
    assert.are.equal(0, code, out .. err)
    local n, at = 0, 1
    while true do
      at = out:find(cpu_limit(ALARM_SPIN), at, true)
      if not at then break end
      n, at = n + 1, at + 1
    end
    assert.are.equal(7, n, out)
    has(out, "alarm retry 6 of 6 in 64s")
  end)

  it("grows a table forever is stopped by the memory limit", function()
    fails("growTable", mem_limit(GROW))
  end)

  it("asks for a 2 GiB string is refused by the memory limit", function()
    fails("hugeString", mem_limit(HUGE))
  end)

  it("recurses without end gets a stack overflow", function()
    fails("recurse", WORKER .. ":" .. DEEP .. ": stack overflow", "EUTAXY_MEM_LIMIT=64 ")
  end)

  it("returns a function gets a DataCloneError naming where the function is", function()
    fails("returnFunction", CLONE)
  end)

  it("makes an RPC call in a table.sort comparator is refused before the call is sent", function()
    fails("sortWithRpc", cannot_wait(SORT_RPC, "an RPC call"))
  end)

  it("sleeps in a table.sort comparator is refused", function()
    fails("sortWithSleep", cannot_wait(SORT_SLEEP, "eutaxy.sleep"))
  end)

  it("makes an RPC call in a string.gsub callback is refused, naming the gsub line", function()
    fails("gsubWithRpc", cannot_wait(GSUB, "an RPC call"))
  end)

  it("sleeps inside a coroutine.wrap iterator of its own is refused", function()
    fails("wrapWithSleep", "eutaxy.sleep cannot run inside a coroutine of your own: call it from the invocation itself")
  end)

  it("makes an RPC call in an __index metamethod gets the answer: Lua 5.4 yields there", function()
    local out, err, code = call("indexWithRpc")
    assert.are.equal(0, code, err)
    assert.are.equal("x\n", out)
  end)

  it("sleeps in an __lt metamethod gets the answer", function()
    local out, err, code = call("ltWithSleep")
    assert.are.equal(0, code, err)
    assert.are.equal("true\n", out)
  end)

  it("loops while its module loads cannot be built, and the message says why", function()
    local out, err, code = call("ok", LIMITS, DIR .. "loop_module.lua")
    assert.are.equal(1, code, out .. err)
    has(err, DIR .. "loop_module.lua:3: CPU limit exceeded: more than " .. CPU .. " VM instructions without yielding")
  end)

  it("loops in its constructor is stopped by the CPU limit", function()
    local out, err, code = call("ok", LIMITS, DIR .. "loop_init.lua")
    assert.are.equal(1, code, out .. err)
    has(err, DIR .. "loop_init.lua:6: CPU limit exceeded: more than " .. CPU .. " VM instructions without yielding")
  end)

  it("takes all the memory while its module loads names the module and the limit", function()
    local out, err, code = call("ok", LIMITS, DIR .. "hog_module.lua")
    assert.are.equal(1, code, out .. err)
    has(err, DIR .. "hog_module.lua: memory limit exceeded while the worker was built: the isolate may use 16 MiB")
  end)

  it("refuses a limit that is not a positive whole number", function()
    local out, err, code = call("ok", "EUTAXY_CPU_LIMIT=lots ")
    assert.are.equal(1, code, out .. err)
    has(err, 'EUTAXY_CPU_LIMIT must be a whole number from 1 to 9223372036854775807, got "lots"')
  end)
end)

describe("eutaxy check, a scenario whose", function()
  local function check(file, env)
    return eutaxy(env or LIMITS, "check " .. DIR .. file)
  end

  -- A run that raises is a violation of no-uncaught-errors: exit 1.
  local function violated(file, message)
    local out, err, code = check(file)
    assert.are.equal(1, code, out .. err)
    assert.are.equal("", err)
    has(out, "\nInvariant no-uncaught-errors is violated: " .. message .. " (uncaught)\n")
  end

  -- The scenario's own mistake: exit 2, one message on stderr, nothing on stdout.
  local function refused(file, message, env)
    local out, err, code = check(file, env)
    assert.are.equal(2, code, out .. err)
    assert.are.equal("", out)
    assert.are.equal("eutaxy check: " .. message .. "\n", err)
  end

  it("RPC method loops is VIOLATED, the CPU limit named", function()
    violated("loop_rpc.sim.lua", "call-1 raised Error: " .. cpu_limit(SPIN))
  end)

  it("worker's fetch loops is VIOLATED, the CPU limit named", function()
    violated("loop_fetch.sim.lua", "fetch raised Error: " .. cpu_limit(FETCH_SPIN))
  end)

  it("alarm loops is VIOLATED, the CPU limit named", function()
    violated("loop_alarm.sim.lua", "alarm DO:BAD(bad)#1 raised Error: " .. cpu_limit(ALARM_SPIN))
  end)

  it("RPC method grows a table forever is VIOLATED, the memory limit named", function()
    violated("hog_rpc.sim.lua", "call-1 raised Error: " .. mem_limit(GROW))
  end)

  it("RPC method returns a function is VIOLATED with the DataCloneError", function()
    violated("return_function.sim.lua", "call-1 raised " .. CLONE)
  end)

  it("RPC method calls out of a table.sort comparator is VIOLATED with the refusal", function()
    violated("sort_rpc.sim.lua", "call-1 raised Error: " .. cannot_wait(SORT_RPC, "an RPC call"))
  end)

  it("custom invariant loops is stopped by the CPU limit and named", function()
    refused("loop_invariant.sim.lua", 'invariant "spins" (' .. DIR .. "loop_invariant.sim.lua:10) raised: " .. DIR
      .. "loop_invariant.sim.lua:11: CPU limit exceeded: more than " .. CPU .. " VM instructions without returning")
  end)

  it("custom invariant takes memory without end is stopped by the memory limit", function()
    refused("hog_invariant.sim.lua", 'invariant "hogs" (' .. DIR .. "hog_invariant.sim.lua:10) raised: " .. DIR
      .. "hog_invariant.sim.lua:12: memory limit exceeded: it took more than 16 MiB")
  end)

  it("custom invariant recurses without end gets a stack overflow", function()
    refused("recurse_invariant.sim.lua", 'invariant "recurses" (' .. DIR .. "recurse_invariant.sim.lua:11) raised: "
      .. DIR .. "recurse_invariant.sim.lua:5: stack overflow", "EUTAXY_MEM_LIMIT=64 ")
  end)

  it("own code loops while it builds the drive is stopped by the CPU limit", function()
    refused("loop_scenario.sim.lua", DIR .. "loop_scenario.sim.lua:6: CPU limit exceeded: more than " .. CPU
      .. " VM instructions without returning")
  end)

  it("custom invariant reads a table no object has names the table and the invariant", function()
    refused("rows_no_table.sim.lua", 'invariant "reads-missing" (' .. DIR .. "rows_no_table.sim.lua:10) raised: "
      .. DIR .. "rows_no_table.sim.lua:4: table bad/missing does not exist in DO:BAD at the end of the run "
      .. '(invariant "reads-missing" reads it)')
  end)

  it("bound is negative names the bound", function()
    refused("bound_negative.sim.lua", DIR .. "bound_negative.sim.lua:4: defineScenario: bounds.budgetMs must be "
      .. "a positive integer, got -5")
  end)

  it("bound is a fraction names the bound", function()
    refused("bound_fraction.sim.lua", DIR .. "bound_fraction.sim.lua:4: defineScenario: bounds.maxConcurrentInvocations "
      .. "must be a positive integer, got 1.5")
  end)

  it("drive's retries is a string names the option", function()
    refused("retries_string.sim.lua", DIR .. 'retries_string.sim.lua:7: http: opts.retries must be a non-negative '
      .. 'integer, got "2"')
  end)

  it("seed is a table names the field", function()
    refused("seed_table.sim.lua", DIR .. "seed_table.sim.lua:4: defineScenario: seed must be a string or an integer, "
      .. "got a table")
  end)

  it("limit in the environment is not a number is refused with exit 2", function()
    refused("loop_rpc.sim.lua", 'EUTAXY_MEM_LIMIT must be a whole number from 1 to 1048576, got "16MB"',
      "EUTAXY_MEM_LIMIT=16MB ")
  end)
end)

describe("eutaxy test, a spec", function()
  it("that does not parse fails with its file and line", function()
    local out, err, code = eutaxy("", "test --output=plainTerminal " .. DIR .. "specs/syntax.lua")
    assert.are.equal(1, code, out .. err)
    has(out, "0 successes / 0 failures / 1 error / 0 pending")
    has(out, "Error -> " .. DIR .. "specs/syntax.lua:5: ')' expected (to close '(' at line 4) near 'end'")
  end)

  it("whose objects run away fails those tests with the limits' messages and runs the rest", function()
    local out, err, code = eutaxy("", "test --output=TAP " .. DIR .. "specs/runaway.lua")
    assert.are.equal(1, code, out .. err)
    has(out, "not ok 1 - an object that runs away loops\n")
    has(out, "# Failure message: Error: ./" .. cpu_limit(SPIN):gsub(tostring(CPU), "5000000") .. "\n")
    has(out, "# Failure message: Error: ./" .. mem_limit(GROW) .. "\n")
    has(out, "# Failure message: Error: ./" .. cannot_wait(SORT_RPC, "an RPC call") .. "\n")
    has(out, "ok 4 - an object that runs away still answers\n")
  end)
end)

describe("eutaxy serve, a request whose code", function()
  local function sh(cmd)
    local p = assert(io.popen(cmd))
    local out = p:read("a")
    p:close()
    return out
  end

  local state, server

  before_each(function()
    if not sh("command -v curl"):find("curl") then pending("curl is not installed (the .ci/packages list has it)") end
    state = sh("mktemp -d"):gsub("%s+$", "")
  end)

  after_each(function()
    if server and server.pid then os.execute("kill -TERM " .. server.pid .. " 2>/dev/null") end
    if server and server.pipe then server.pipe:close() end
    server = nil
    os.execute("rm -rf " .. state .. " " .. state .. ".log")
  end)

  local function start()
    local cmd = ("sh -c '%s%s serve %swrangler.jsonc --port 0 --state %s --quiet 2>>%s.log & echo $!; wait $!'")
      :format(LIMITS, bin, DIR, state, state)
    server = { pipe = assert(io.popen(cmd)) }
    for _ = 1, 2 do
      local line = assert(server.pipe:read("l"), "the server printed no listening line")
      if line:find("^%d+$") then server.pid = line
      else server.port = assert(line:match("^eutaxy serve: listening on http://127%.0%.0%.1:(%d+)$"), line) end
    end
  end

  local function get(path)
    local out = sh(("curl -s --max-time 30 -o - -w '\\n%%{http_code}' http://127.0.0.1:%s%s"):format(server.port, path))
    local body, status = out:match("^(.*)\n(%d+)$")
    return tonumber(status), body
  end

  local function log()
    local f = assert(io.open(state .. ".log"))
    local text = f:read("a")
    f:close()
    return text
  end

  it("runs away gets a 500 and the server goes on serving", function()
    start()
    assert.are.equal(500, (get("/spin")))
    assert.are.equal(500, (get("/call/spin")))
    assert.are.equal(500, (get("/call/spinCaught")))
    assert.are.equal(500, (get("/call/growTable")))
    assert.are.equal(500, (get("/call/hugeString")))
    assert.are.equal(500, (get("/call/sortWithRpc")))
    assert.are.equal(500, (get("/call/returnFunction")))
    assert.same({ 200, "ok" }, { get("/") })
    os.execute("kill -TERM " .. server.pid)
    local _, _, code = server.pipe:close()
    server.pipe = nil
    assert.are.equal(0, code)
    local text = log()
    has(text, "eutaxy serve: GET /spin: fetch raised Error: " .. cpu_limit(FETCH_SPIN) .. "\n")
    has(text, "eutaxy serve: GET /call/spin: fetch raised Error: " .. cpu_limit(SPIN) .. "\n")
    has(text, "eutaxy serve: GET /call/spinCaught: fetch raised Error: " .. cpu_limit(SPIN_CAUGHT) .. "\n")
    has(text, "eutaxy serve: GET /call/growTable: fetch raised Error: " .. mem_limit(GROW) .. "\n")
    has(text, "eutaxy serve: GET /call/hugeString: fetch raised Error: " .. mem_limit(HUGE) .. "\n")
    has(text, "eutaxy serve: GET /call/sortWithRpc: fetch raised Error: " .. cannot_wait(SORT_RPC, "an RPC call") .. "\n")
    has(text, "eutaxy serve: GET /call/returnFunction: fetch raised " .. CLONE .. "\n")
  end)
end)
