--- An isolate is a sandbox (DESIGN.md, "The object model"): no files,
-- native code, bytecode, debug hooks or eutaxy.core for user code, names
-- that do not show addresses, and a CPU limit that holds whatever the code
-- calls. Every probe runs in an object and in the worker
-- (spec/fixtures/sandbox/worker.lua); a few also through `eutaxy run` and
-- `eutaxy check`.
local testing = require "eutaxy.testing"
local process = dofile("spec/helpers/process.lua")

local MAIN = "spec/fixtures/sandbox/worker.lua"

local function world_with(cpu)
  return testing.world { main = MAIN, bindings = { PROBE = "Probe" }, cpuLimit = cpu }
end

-- The probe's answer in an object and in the worker (both must agree).
local function probe(name, cpu)
  local world = world_with(cpu or 100000)
  local ok1, in_object = pcall(function() return world.env.PROBE:getByName("p"):run(name) end)
  local ok2, in_worker = pcall(function() return world:fetch("http://x/" .. name):text() end)
  world:close()
  return ok1, in_object, ok2, in_worker
end

local function answers(name, want)
  local ok1, a, ok2, b = probe(name)
  assert.is_true(ok1, tostring(a and a.message or a))
  assert.are.equal(want, a)
  assert.is_true(ok2, tostring(b and b.message or b))
  assert.are.equal(want, b)
end

-- The CPU limit stops the probe at its line, naming the C function if one was running.
local function stopped(name, line, fn)
  local ok1, a, ok2, b = probe(name)
  local want = MAIN .. ":" .. line .. ": CPU limit exceeded: more than 100000 VM instructions without yielding"
    .. (fn and " (in " .. fn .. ")" or "")
  assert.is_false(ok1)
  assert.is_truthy(tostring(a.message):find(want, 1, true), a.message)
  assert.is_false(ok2)
  assert.is_truthy(tostring(b):find(want, 1, true) or tostring(b.message):find(want, 1, true), tostring(b))
end

describe("an isolate", function()
  it("has no io", function() answers("io", "nil") end)
  it("has no way to native code: no loadlib, cpath, searchpath or C searchers", function()
    answers("native", "nilnilnilnil false")
  end)
  it("ignores a package.path set by user code: require never reads /etc", function()
    answers("etc", "false false")
  end)
  it("resolves eutaxy's names in eutaxy's folder only, whatever the project holds", function()
    answers("shadow", "false")
  end)
  it("loads text only: no string.dump, dofile or loadfile, and load's mode b is text", function()
    answers("bytecode", "nilnilnil 1")
  end)
  it("keeps debug.traceback alone of the debug library", function()
    answers("debug", "nilnilnilfunction")
  end)
  it("cannot reach eutaxy.core", function() answers("core", "falsenilnilnil") end)
  it("cannot give an object a name its id was not made from", function()
    local world = world_with(100000)
    local said = world.env.PROBE:getByName("p"):forge()
    world:close()
    assert.matches("^false cannot call whoami on PROBE %x+ victim$", said)
  end)
  it("refuses __gc metamethods, which would run where no limit stops them", function()
    answers("gc", "false")
  end)
  it("names tables, functions and threads by a number per isolate, not by address", function()
    answers("names", "table: 0x00000001 function: 0x00000002 table: 0x00000001 0x00000001 thread: 0x00000003")
  end)
  it("steps next through the keys in pairs' order, skipping keys set to nil on the way", function()
    answers("order", "1,2,2.5,3,x,y,z,true 1,2,2.5,3,x,z,true")
  end)
end)

describe("the CPU limit", function()
  it("stops a backtracking string.find mid-match", function() stopped("find", 55, "string.find") end)
  it("stops string.rep of an empty string repeated 2^50 times", function() stopped("rep", 67, "string.rep") end)
  it("stops table.move over a range no table holds", function() stopped("move", 71, "table.move") end)
  it("is not swallowed by a pcall around a function called from C", function()
    stopped("swallow", 76, "string.rep")
  end)
  it("is not swallowed by a coroutine of the user's own", function() stopped("coroutine", 82) end)
  it("stops json.encode of a million values as it goes", function() stopped("json", 109, "json.encode") end)
  it("charges url.parse by the URL's length", function()
    -- the stop names url.lua's line that calls the host's parser, as it named the line of a
    -- pattern call when url.lua parsed with patterns
    local ok1, a, ok2, b = probe("url")
    local want = "url%.lua:%d+: CPU limit exceeded: more than 100000 VM instructions without yielding %(in url%.parse%)"
    assert.is_false(ok1)
    assert.is_truthy(tostring(a.message):find(want), a.message)
    assert.is_false(ok2)
    assert.is_truthy(tostring(b):find(want) or tostring(b.message):find(want), tostring(b))
  end)
  it("lets a next loop over 60,000 keys finish in a sort and a step per key", function()
    local ok1, a, ok2, b = probe("next", 5000000)
    assert.is_true(ok1, tostring(a and a.message))
    assert.are.equal("60000", a)
    assert.is_true(ok2)
    assert.are.equal("60000", b)
  end)
end)

describe("through the eutaxy binary", function()
  local function run(name)
    return process.run(process.bin .. " run spec/fixtures/sandbox/call.lua " .. name)
  end

  it("eutaxy run prints the same names in two processes", function()
    local first, err = run("names")
    assert.are.equal("table: 0x00000001 function: 0x00000002 table: 0x00000001 0x00000001 thread: 0x00000003\n"
      .. "table: 0x00000001 function: 0x00000002 table: 0x00000001 0x00000001 thread: 0x00000003\n", first, err)
    assert.are.equal(first, (run("names")))
  end)

  it("eutaxy run finds io, debug and eutaxy.core closed", function()
    assert.are.equal("nil\nnil\n", (run("io")))
    assert.are.equal("nilnilnilfunction\nnilnilnilfunction\n", (run("debug")))
    assert.are.equal("falsenilnilnil\nfalsenilnilnil\n", (run("core")))
  end)

  it("eutaxy run stops the backtracking find with the CPU limit's message", function()
    local _, err, code = run("find")
    assert.are.equal(1, code)
    assert.matches("worker%.lua:55: CPU limit exceeded: more than 100000 VM instructions without yielding %(in string%.find%)", err)
  end)

  it("eutaxy check finds every way out closed in the worker", function()
    local out, err, code = process.run("cd spec/fixtures/sandbox && " .. process.bin:gsub("^build/", "../../../build/")
      .. " check sandbox.sim.lua")
    assert.are.equal(0, code, out .. err)
    assert.matches("^BOUNDED  sandbox", out)
  end)
end)

describe("string patterns in an isolate", function()
  local CASES = {
    { { "find", 2, "hello world", "o w" }, "ok 5|7" },
    { { "find", 2, "hello world", "l+" }, "ok 3|4" },
    { { "find", 3, "hello", "l", -2 }, "ok 4|4" },
    { { "find", 4, "a.b", ".", 1, true }, "ok 2|2" },
    { { "find", 3, "abc", "", 10 }, "ok nil" },
    { { "find", 3, "abc", "", 4 }, "ok 4|3" },
    { { "find", 2, "  key = value", "(%w+)%s*=%s*(%w+)" }, "ok 3|13|key|value" },
    { { "find", 2, "abc", "()b()" }, "ok 2|2|2|3" },
    { { "match", 2, "hello 123 world", "%d+" }, "ok 123" },
    { { "match", 2, "2024-01-15", "(%d+)-(%d+)-(%d+)" }, "ok 2024|01|15" },
    { { "match", 2, "THE (quick) fox", "%((%a+)%)" }, "ok quick" },
    { { "match", 2, "f(a(b)c)d", "%b()" }, "ok (a(b)c)" },
    { { "match", 2, "THE (quick) fox", "%f[%a]%a+" }, "ok THE" },
    { { "match", 2, "hello", "^(h)(e)" }, "ok h|e" },
    { { "match", 2, "hello", "^e" }, "ok nil" },
    { { "match", 2, "hello", "o$" }, "ok o" },
    { { "match", 2, "a$b", "a$b" }, "ok a$b" },
    { { "match", 2, "abab", "(ab)%1" }, "ok ab" },
    { { "match", 2, "x = 'a' y", "(['\"])(.-)%1" }, "ok '|a" },
    { { "match", 2, "aaab", "a-b" }, "ok aaab" },
    { { "match", 2, "aaa", "a-" }, "ok " },
    { { "match", 2, "ab12", "[%a]+" }, "ok ab" },
    { { "match", 2, "a]b", "[]]" }, "ok ]" },
    { { "match", 2, "a-b", "[a%-]+" }, "ok a-" },
    { { "match", 2, "x^y", "[^%w]" }, "ok ^" },
    { { "match", 2, "0x1F", "0x(%x+)" }, "ok 1F" },
    { { "match", 2, "  trim  ", "^%s*(.-)%s*$" }, "ok trim" },
    { { "match", 2, "abc", "a?b?c?d?" }, "ok abc" },
    { { "match", 2, "abc", "[b-]" }, "ok b" },
    { { "match", 3, "hello", ".", -1 }, "ok o" },
    { { "match", 2, "\0a\0", "%z" }, "ok \0" },
    { { "match", 2, "a.b", "%." }, "ok ." },
    { { "match", 2, "ABC", "%u%l*" }, "ok A" },
    { { "match", 2, "abc", "%" }, "error malformed pattern (ends with '%')" },
    { { "match", 2, "abc", "[a" }, "error malformed pattern (missing ']')" },
    { { "match", 2, "abc", "(a" }, "error unfinished capture" },
    { { "match", 2, "abc", "a)" }, "error invalid pattern capture" },
    { { "match", 2, "abc", "%1" }, "error invalid capture index %1" },
    { { "match", 2, "abc", "%b" }, "error malformed pattern (missing arguments to '%b')" },
    { { "match", 2, "abc", "%fa" }, "error missing '[' after '%f' in pattern" },
    { { "match", 2, "abc", "(()" }, "error unfinished capture" },
    { { "gsub", 3, "hello world", "o", "0" }, "ok hell0 w0rld|2" },
    { { "gsub", 4, "hello world", "o", "0", 1 }, "ok hell0 world|1" },
    { { "gsub", 3, "hello world", "(%w+)", "<%1>" }, "ok <hello> <world>|2" },
    { { "gsub", 3, "hello world", "%w+", "%0 %0" }, "ok hello hello world world|2" },
    { { "gsub", 3, "abc", "", "-" }, "ok -a-b-c-|4" },
    { { "gsub", 3, "hello world", "%w+", "fn:upper" }, "ok HELLO WORLD|2" },
    { { "gsub", 3, "a b", "%w", "tbl" }, "ok A b|2" },
    { { "gsub", 3, "hello", "(h)(e)", "%2%1" }, "ok ehllo|1" },
    { { "gsub", 3, "abc", "b", "%%" }, "ok a%c|1" },
    { { "gsub", 3, "abc", "b", "%x" }, "error invalid use of '%' in replacement string" },
    { { "gsub", 3, "abc", "b", "%2" }, "error invalid capture index %2" },
    { { "gsub", 3, "abc", "%w", "fn:false" }, "ok abc|3" },
    { { "gsub", 3, "hello", "^h", "H" }, "ok Hello|1" },
    { { "gsub", 3, "x = 1, y = 2", "(%w+) = (%w+)", "%2 = %1" }, "ok 1 = x, 2 = y|2" },
    { { "gsub", 3, "abc", "()", "%1" }, "ok 1a2b3c4|4" },
    { { "gsub", 3, "hello hello", "hello", "tbl" }, "ok HI HI|2" },
    { { "gsub", 3, "a,b,,c", ",", ";" }, "ok a;b;;c|3" },
    { { "gmatch", 2, "one two  three", "%a+" }, "ok one/nil,two/nil,three/nil" },
    { { "gmatch", 2, "k1=v1, k2=v2", "(%w+)=(%w+)" }, "ok k1/v1,k2/v2" },
    { { "gmatch", 2, "abc", "" }, "ok /nil,/nil,/nil,/nil" },
    { { "gmatch", 3, "hello world", "%a+", 7 }, "ok world/nil" },
    { { "gmatch", 2, "^a^a", "^a" }, "ok ^a/nil,^a/nil" },
    { { "gmatch", 2, "a1b2", "()%d" }, "ok 2/nil,4/nil" },
  }

  it("give what Lua 5.4's string library gives, errors included", function()
    local world = world_with(1000000)
    local cases, want = {}, {}
    for i, c in ipairs(CASES) do cases[i], want[i] = c[1], c[2] end
    local got = world.env.PROBE:getByName("p"):patterns(cases)
    world:close()
    for i = 1, #want do
      assert.are.equal(want[i], got[i], "case " .. i .. ": string." .. cases[i][1] .. "(" .. tostring(cases[i][3])
        .. ", " .. tostring(cases[i][4]) .. ")")
    end
  end)
end)
