--- eutaxy init DIR: the starter project it writes is checked and tested
-- here as a user would, from its own folder and from another one. Always
-- with the build's binary (EUTAXY_BIN), never an eutaxy installed on PATH.
local process = dofile("spec/helpers/process.lua")
local json = require "eutaxy.json"
local starter = require "eutaxy.starter"

local bin = os.getenv("EUTAXY_BIN") or "build/eutaxy"
if bin:sub(1, 1) ~= "/" then bin = os.getenv("PWD") .. "/" .. bin end

local sh = process.run

local read = process.read

-- A fresh path that does not exist yet.
local function fresh_dir()
  local path = os.tmpname()
  os.remove(path)
  return path
end

-- The real path of the binary under test (not the valgrind wrapper's).
local real_path
local function exe()
  if real_path then return real_path end
  local script = os.tmpname()
  local f = assert(io.open(script, "w"))
  f:write("print(require('eutaxy.fs').exe())\n")
  f:close()
  real_path = process.sh(bin .. " run " .. script):gsub("\n$", "")
  os.remove(script)
  return real_path
end

describe("eutaxy init", function()
  local dir

  before_each(function()
    dir = fresh_dir()
  end)

  after_each(function()
    os.execute("rm -rf '" .. dir .. "'")
  end)

  it("writes a project whose scenario is BOUNDED and whose specs pass, from its folder and from another", function()
    local out, err, code = sh(bin .. " init " .. dir)
    assert.are.equal("", err)
    assert.are.equal(0, code)
    assert.matches("wrote " .. dir:gsub("%p", "%%%0"), out)
    for _, name in ipairs(starter.FILES) do
      assert.is_truthy(io.open(dir .. "/" .. name), name .. " was not written")
    end
    local check, check_err, check_code = sh("cd / && " .. bin .. " check " .. dir .. "/visits.sim.lua --check-determinism --quiet")
    assert.are.equal("BOUNDED  visits\n", check, check_err)
    assert.are.equal(0, check_code)
    for _, where in ipairs({ "cd " .. dir .. " && " .. bin .. " test --output=TAP",
                             "cd / && " .. bin .. " test --output=TAP " .. dir .. "/spec" }) do
      local test, test_err, test_code = sh(where)
      assert.are.equal(0, test_code, where .. ": " .. test .. test_err)
      assert.matches("1..3\n", test)
      assert.not_matches("not ok", test)
    end
  end)

  it("says next how to run this eutaxy: its path when PATH finds no eutaxy, or another one", function()
    local out, _, code = sh("PATH=/usr/bin:/bin " .. bin .. " init " .. dir)
    assert.are.equal(0, code)
    local real = exe()
    assert.are.equal(("next: cd %s && %s check visits.sim.lua && %s test\n"):format(dir, real, real),
      out:match("\n(next: .*)$"))
  end)

  it("says next a bare eutaxy when PATH finds this one, as after cmake --install", function()
    local onpath = fresh_dir()
    assert.is_true(os.execute("mkdir '" .. onpath .. "'"))
    local real = exe()
    assert.is_true(os.execute("ln -s '" .. real .. "' '" .. onpath .. "/eutaxy'"))
    local out, _, code = sh("PATH='" .. onpath .. "':/usr/bin:/bin " .. bin .. " init " .. dir)
    os.execute("rm -rf '" .. onpath .. "'")
    assert.are.equal(0, code)
    assert.are.equal(("next: cd %s && eutaxy check visits.sim.lua && eutaxy test\n"):format(dir),
      out:match("\n(next: .*)$"))
  end)

  it("writes a scenario that finds the bug its README shows how to plant", function()
    assert.are.equal(0, select(3, sh(bin .. " init " .. dir)))
    local worker = read(dir .. "/worker.lua")
    local guarded = worker:match("  sql:exec%(%[%[INSERT INTO visits.-request%)\n")
    assert.is_truthy(guarded, "the guarded insert is not in worker.lua")
    local planted = '  sql:exec("INSERT INTO visits (request, at) VALUES (?, ?)", request, eutaxy.now())\n'
    assert.is_truthy(read(dir .. "/README.md"):find(planted:match("^%s*(.-)\n$"), 1, true),
      "the README does not show the planted line")
    local f = assert(io.open(dir .. "/worker.lua", "w"))
    f:write((worker:gsub(guarded:gsub("%p", "%%%0"), (planted:gsub("%%", "%%%%")))))
    f:close()
    local out, _, code = sh("cd " .. dir .. " && " .. bin .. " check visits.sim.lua")
    assert.are.equal(1, code)
    assert.matches("^VIOLATED  visits", out)
    assert.matches("Invariant each%-request%-counted%-once is violated", out)
    assert.matches("ambiguous at req%-1#1 effect #0 %(DO:COUNTER visit%)", out)
  end)

  it("points the project's .luarc.json at eutaxy's annotations", function()
    assert.are.equal(0, select(3, sh(bin .. " init " .. dir)))
    local luarc = json.decode(read(dir .. "/.luarc.json"))
    local types = luarc.workspace.library[1]
    assert.matches("^/", types)
    assert.is_truthy(io.open(types .. "/eutaxy.lua"), types .. "/eutaxy.lua is not there")
    assert.are.equal("Lua 5.4", luarc.runtime.version)
  end)

  it("writes into an empty folder", function()
    assert.is_true(os.execute("mkdir '" .. dir .. "'"))
    assert.are.equal(0, select(3, sh(bin .. " init " .. dir)))
    assert.is_truthy(io.open(dir .. "/worker.lua"))
  end)

  it("refuses a folder that is not empty, with exit 2, and writes nothing", function()
    assert.is_true(os.execute("mkdir '" .. dir .. "' && echo keep > '" .. dir .. "/notes.txt'"))
    local out, err, code = sh(bin .. " init " .. dir)
    assert.are.equal(2, code)
    assert.are.equal("", out)
    assert.are.equal("eutaxy init: " .. dir .. " is not empty (1 entry): init writes only into a missing or empty folder\n", err)
    assert.is_nil(io.open(dir .. "/worker.lua"))
  end)

  it("refuses a path that is a file, and a missing DIR, with exit 2", function()
    local file = os.tmpname()
    local _, err, code = sh(bin .. " init " .. file)
    os.remove(file)
    assert.are.equal(2, code)
    assert.are.equal("eutaxy init: " .. file .. ": not a folder\n", err)
    local _, err2, code2 = sh(bin .. " init")
    assert.are.equal(2, code2)
    assert.matches("which folder%?", err2)
  end)

  it("writes every file of templates/init, and only those", function()
    local p = assert(io.popen("cd templates/init && find . -type f | sed 's|^./||' | sort"))
    local found = {}
    for line in p:lines() do found[#found + 1] = line end
    p:close()
    local listed = { table.unpack(starter.FILES) }
    table.sort(listed)
    assert.are.same(found, listed)
  end)
end)
