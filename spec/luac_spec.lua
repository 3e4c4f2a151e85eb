--- eutaxy's own modules load from the bytecode the build compiled them to
-- (host/luac.c) when it is the bytecode of the very file found and not
-- older than it, in the command's state and in the isolates alike, with
-- the same file and line in errors as from the source; every other Lua
-- file loads as text only.
--
-- A copy of lua/eutaxy in a temporary folder (EUTAXY_LUADIR) holds one
-- more module, eutaxy.probe, whose bytecode (EUTAXY_LUACDIR) says "bytecode"
-- where its source says "source", on the same lines: what a run prints
-- tells which was loaded. Time stamps are set with touch -d, never waited for.
local testing = require "eutaxy.testing"
local fingerprint = require "eutaxy.fingerprint"
local luac = require "eutaxy.luac"
local process = dofile("spec/helpers/process.lua")

local q = process.quote

local PROBE = [[
local probe = { from = "%s" }
function probe.fail()
  error("the probe fails")
end
return probe
]]

-- Prints which probe loaded and the traceback of its error.
local RUN = [[
local probe = require "eutaxy.probe"
local _, trace = xpcall(probe.fail, debug.traceback)
print(probe.from)
print(trace)
]]

-- The same from inside an isolate: the worker requires the probe.
local WORKER = [[
local eutaxy = require "eutaxy"
local probe = require "eutaxy.probe"
return {
  fetch = function()
    local _, trace = xpcall(probe.fail, debug.traceback)
    return eutaxy.Response.new(probe.from .. "\n" .. trace)
  end,
}
]]

local WORLD = [[
local testing = require "eutaxy.testing"
local world = testing.world { main = arg[1] }
print(world:fetch("http://x/"):text())
world:close()
]]

local function write(path, text)
  local f = assert(io.open(path, "wb"))
  assert(f:write(text))
  assert(f:close())
end

local function touch(path, when)
  process.sh("touch -d " .. q(when) .. " " .. q(path))
end

local tmp, lib, bc, probe_src, probe_bc

-- The file at src compiled as luac compiles it: debug information kept,
-- the chunk named by the path it was given.
local function compile(src, out)
  write(out, string.dump(assert(loadfile(src)), false))
end

-- `eutaxy run` of a script with env set before it; stdout, stderr, exit code.
local function run(env, script, ...)
  local args = {}
  for _, a in ipairs({ ... }) do args[#args + 1] = q(a) end
  return process.run(env .. " " .. process.bin .. " run " .. q(script) .. " " .. table.concat(args, " "))
end

-- The folder the binary loads eutaxy's modules from, as it names it: a
-- spec's own state finds them by .busted's ./lua instead.
local built_libdir
local function libdir_of_binary()
  if not built_libdir then
    local script = os.tmpname()
    write(script, 'print(require("eutaxy.config").libdir())\n')
    built_libdir = process.sh(process.bin .. " run " .. q(script)):gsub("\n$", "")
    os.remove(script)
  end
  return built_libdir
end

local function env(luadir, luacdir)
  return "EUTAXY_LUADIR=" .. q(luadir) .. " EUTAXY_LUACDIR=" .. q(luacdir)
end

before_each(function()
  tmp = os.tmpname()
  os.remove(tmp)
  lib, bc = tmp .. "/lua", tmp .. "/luac"
  process.sh("mkdir -p " .. q(lib) .. " " .. q(bc .. "/eutaxy") .. " " .. q(tmp .. "/proj")
             .. " && cp -R lua/eutaxy " .. q(lib .. "/eutaxy"))
  probe_src, probe_bc = lib .. "/eutaxy/probe.lua", bc .. "/eutaxy/probe.luac"
  write(probe_src, PROBE:format("bytecode"))
  compile(probe_src, probe_bc)
  write(probe_src, PROBE:format("source"))
  touch(probe_src, "2020-01-01 00:00:00")
  touch(probe_bc, "2021-01-01 00:00:00")
  write(tmp .. "/run.lua", RUN)
  write(tmp .. "/world.lua", WORLD)
  write(tmp .. "/proj/worker.lua", WORKER)
end)

after_each(function()
  process.sh("rm -rf " .. q(tmp))
end)

describe("a module of eutaxy's in the command's state", function()
  it("loads from its bytecode with the same file and line in its error and traceback as from its source", function()
    local from_bc, err1, code1 = run(env(lib, bc), tmp .. "/run.lua")
    local from_src, err2, code2 = run(env(lib, "/dev/null"), tmp .. "/run.lua")
    assert.are.equal(0, code1, err1)
    assert.are.equal(0, code2, err2)
    assert.are.equal("bytecode\n", from_bc:match("^[^\n]*\n"))
    assert.are.equal("source\n", from_src:match("^[^\n]*\n"))
    local trace = from_src:gsub("^[^\n]*\n", "")
    assert.are.equal(trace, (from_bc:gsub("^[^\n]*\n", "")))
    assert.truthy(trace:find(probe_src .. ":3: the probe fails\nstack traceback:\n", 1, true), trace)
    assert.truthy(trace:find("\n\t" .. probe_src .. ":3: in function 'eutaxy.probe.fail'", 1, true), trace)
  end)

  it("loads from its source once the source is newer than the bytecode", function()
    touch(probe_src, "2022-01-01 00:00:00")
    local out, err = run(env(lib, bc), tmp .. "/run.lua")
    assert.are.equal("source\n", out:match("^[^\n]*\n"), err)
  end)

  it("loads from its source when its bytecode does not load, silently", function()
    local code = string.dump(assert(loadfile(probe_src)), false)
    write(probe_bc, code:sub(1, 4) .. "\x53" .. code:sub(6))  -- the header of Lua 5.3's bytecode
    touch(probe_bc, "2021-01-01 00:00:00")
    local out, err, status = run(env(lib, bc), tmp .. "/run.lua")
    assert.are.equal(0, status, err)
    assert.are.equal("", err)
    assert.are.equal("source\n", out:match("^[^\n]*\n"))
  end)

  it("loads from its source when found under another name than its bytecode was compiled from", function()
    local out, err = run(env(lib .. "/.", bc), tmp .. "/run.lua")
    assert.are.equal("source\n", out:match("^[^\n]*\n"), err)
    assert.truthy(out:find(lib .. "/./eutaxy/probe.lua:3: the probe fails", 1, true), out)
  end)
end)

describe("a module of eutaxy's in an isolate", function()
  it("loads from its bytecode with the same file and line in its traceback as from its source", function()
    local from_bc, err1, code1 = run(env(lib, bc), tmp .. "/world.lua", tmp .. "/proj/worker.lua")
    local from_src, err2, code2 = run(env(lib, "/dev/null"), tmp .. "/world.lua", tmp .. "/proj/worker.lua")
    assert.are.equal(0, code1, err1)
    assert.are.equal(0, code2, err2)
    assert.are.equal("bytecode\n", from_bc:match("^[^\n]*\n"))
    assert.are.equal("source\n", from_src:match("^[^\n]*\n"))
    local trace = from_src:gsub("^[^\n]*\n", "")
    assert.are.equal(trace, (from_bc:gsub("^[^\n]*\n", "")))
    assert.truthy(trace:find(probe_src .. ":3: the probe fails\nstack traceback:\n", 1, true), trace)
    assert.truthy(trace:find(lib .. "/eutaxy/runtime.lua:%d+: in ", 1), trace)
  end)

  it("loads from its source once the source is newer than the bytecode", function()
    touch(probe_src, "2022-01-01 00:00:00")
    local out, err = run(env(lib, bc), tmp .. "/world.lua", tmp .. "/proj/worker.lua")
    assert.are.equal("source\n", out:match("^[^\n]*\n"), err)
  end)
end)

describe("the build's bytecode", function()
  it("is, for every module not edited since, what Lua makes of the source under the path the binary finds it by",
     function()
    if not luac.dir then return end
    local libdir = libdir_of_binary()
    local fresh = process.sh("cd " .. q(luac.dir .. "/eutaxy") .. " 2>/dev/null && for f in *.luac; do s="
      .. q(libdir .. "/eutaxy/") .. '"${f%c}"; [ -f "$f" ] && [ -f "$s" ] && ! [ "$s" -nt "$f" ] && echo "${f%.luac}";'
      .. " done; true")
    local n = 0
    for name in fresh:gmatch("[^\n]+") do
      local code = process.read(luac.dir .. "/eutaxy/" .. name .. ".luac")
      local dumped = string.dump(assert(loadfile(libdir .. "/eutaxy/" .. name .. ".lua")), false)
      assert.is_true(dumped == code, name .. ".luac is not the bytecode of " .. libdir .. "/eutaxy/" .. name .. ".lua")
      n = n + 1
    end
    -- a build with luac compiled them all; one edited since is left out
    local built = process.sh("ls " .. q(luac.dir .. "/eutaxy") .. " 2>/dev/null; true")
    if built:find("%.luac\n") then assert.is_true(n > 0) end
  end)
end)

describe("a project's file", function()
  it("never loads as bytecode in an isolate, even named as one of eutaxy's modules", function()
    -- the build's bytecode of eutaxy.json is newer than this file, and it is refused as not this file's
    process.sh("mkdir -p " .. q(tmp .. "/proj/eutaxy"))
    write(tmp .. "/proj/eutaxy/json.lua", 'return "the project\'s"\n')
    touch(tmp .. "/proj/eutaxy/json.lua", "2020-01-01 00:00:00")
    write(tmp .. "/proj/helper.lua", string.dump(function() return "forged" end))
    write(tmp .. "/proj/worker.lua", [[
local eutaxy = require "eutaxy"
return {
  fetch = function()
    local ok, err = pcall(require, "helper")
    return eutaxy.Response.new(tostring(ok) .. " " .. tostring(err) .. "\n" .. require("eutaxy/json"))
  end,
}
]])
    local world = testing.world { main = tmp .. "/proj/worker.lua" }
    local said = world:fetch("http://x/"):text()
    world:close()
    assert.truthy(said:find("^false error loading module 'helper' from file '" .. tmp .. "/proj/helper.lua':\n\t"
      .. "[^\n]*attempt to load a binary chunk %(mode is 't'%)\n"), said)
    assert.truthy(said:find("\nthe project's$"), said)
  end)

  it("never loads as bytecode in the command's state: not a script, a module or a scenario", function()
    write(tmp .. "/forged.lua", string.dump(function() print("forged") end))
    write(tmp .. "/bin.sim.lua", string.dump(function() return {} end))
    write(tmp .. "/requires.lua", "package.path = " .. string.format("%q", tmp .. "/?.lua;") .. " .. package.path\n"
      .. "print(pcall(require, 'forged'))\n")
    local out, err, code = run("", tmp .. "/forged.lua")
    assert.are.equal(2, code)
    assert.are.equal("", out)
    assert.truthy(err:find("attempt to load a binary chunk (mode is 't')", 1, true), err)
    out, err = run("", tmp .. "/requires.lua")
    assert.truthy(out:find("^false\terror loading module 'forged' from file '" .. tmp .. "/forged.lua':\n\t"
      .. "[^\n]*attempt to load a binary chunk %(mode is 't'%)"), out .. err)
    out, err, code = process.run(process.bin .. " check " .. q(tmp .. "/bin.sim.lua"))
    assert.are.equal(2, code)
    assert.truthy(err:find("attempt to load a binary chunk (mode is 't')", 1, true), err)
  end)
end)

describe("the build's digest of eutaxy's modules", function()
  it("holds the hash fingerprint gives each module", function()
    local n = 0
    for path, hash in pairs(luac.digest()) do
      assert.are.equal(fingerprint.hash(process.read(path)), hash, path)
      n = n + 1
    end
    local built = luac.dir and io.open(luac.dir .. "/eutaxy.fnv")
    if built then
      built:close()
      assert.is_true(n > 0)
    end
  end)

  it("leaves the fingerprint as it is without the digest", function()
    local s = {
      scenario = "scenarios/lease-pool/leases.fixed.sim.lua", scenario_dir = "scenarios/lease-pool", project = ".",
      config = "wrangler.jsonc", libdir = libdir_of_binary(), version = "test", options = {},
    }
    local known = luac.digest()[s.libdir .. "/eutaxy/json.lua"]
    if known then assert.are.equal(fingerprint.hash(process.read(s.libdir .. "/eutaxy/json.lua")), known) end
    local with, with_inputs = fingerprint.compute(s)
    local digest = luac.digest
    luac.digest = function() return {} end
    local ok, without, without_inputs = pcall(fingerprint.compute, s)
    -- and the digest is what fingerprint took the hashes from
    luac.digest = function()
      local d = digest()
      for path in pairs(d) do d[path] = "0000000000000000" end
      return d
    end
    local ok_zeros, zeros = pcall(fingerprint.compute, s)
    luac.digest = digest
    assert.is_true(ok, without)
    assert.are.equal(without, with)
    assert.are.same(without_inputs, with_inputs)
    assert.is_true(ok_zeros, zeros)
    if known then assert.are_not.equal(with, zeros) end
  end)

  it("is not used for a module changed since", function()
    local a, b = lib .. "/eutaxy/a.lua", lib .. "/eutaxy/b.lua"
    write(a, "return 1\n")
    write(b, "return 2\n")
    write(bc .. "/eutaxy.fnv", "0000000000000001 " .. a .. "\n0000000000000002 " .. b .. "\n")
    touch(a, "2020-01-01 00:00:00")
    touch(bc .. "/eutaxy.fnv", "2021-01-01 00:00:00")
    touch(b, "2022-01-01 00:00:00")
    write(tmp .. "/digest.lua", 'for path, hash in pairs(require("eutaxy.luac").digest()) do print(path, hash) end\n')
    local out, err = run(env(lib, bc), tmp .. "/digest.lua")
    assert.are.equal(a .. "\t0000000000000001\n", out, err)
  end)
end)
