--- `cmake --install`: an installed eutaxy finds its modules, their bytecode
-- and digest, its types and templates beside it, wherever the prefix is, and
-- the binary in the build folder keeps using the source tree. The build
-- folder is the one whose luac/ this binary uses; it is installed into a
-- temporary prefix named through a symbolic link, as /usr/local may be.
local process = dofile("spec/helpers/process.lua")
local luac = require "eutaxy.luac"

local function q(s)
  return "'" .. s:gsub("'", "'\\''") .. "'"
end

local read = process.read

local function write(path, text)
  local f = assert(io.open(path, "wb"))
  f:write(text)
  f:close()
end

local build = luac.dir and luac.dir:match("^(.*)/luac$")
local installable = build and io.open(build .. "/cmake_install.cmake") and os.execute("command -v cmake >/dev/null")

-- A script that prints where the binary running it found eutaxy's files.
local PROBE = [[
local luac = require "eutaxy.luac"
local n = 0
for _ in pairs(luac.digest()) do n = n + 1 end
print(require("eutaxy.config").libdir())
print(luac.dir)
print(n)
]]

describe("an installed eutaxy", function()
  local tmp, prefix, real, bin, probe

  setup(function()
    if not installable then return end
    tmp = os.tmpname()
    os.remove(tmp)
    process.sh("mkdir -p " .. q(tmp .. "/real") .. " && ln -s real " .. q(tmp .. "/prefix"))
    prefix, real = tmp .. "/prefix", process.sh("cd " .. q(tmp .. "/real") .. " && pwd -P"):gsub("\n$", "")
    -- the install writes its manifest into the build folder: the one of a real install is kept
    local manifest = build .. "/install_manifest.txt"
    local kept = io.open(manifest, "rb")
    local before = kept and kept:read("a")
    if kept then kept:close() end
    local out, err, code = process.run("cmake --install " .. q(build) .. " --prefix " .. q(prefix))
    if before then write(manifest, before) else os.remove(manifest) end
    assert(code == 0, out .. err)
    bin = prefix .. "/bin/eutaxy"
    probe = tmp .. "/probe.lua"
    write(probe, PROBE)
  end)

  teardown(function()
    if tmp then os.execute("rm -rf " .. q(tmp)) end
  end)

  before_each(function()
    if not installable then pending("no cmake, or no build folder beside this binary's luac/") end
  end)

  it("loads its modules from PREFIX/share/eutaxy, named by their real path, with every module in the digest", function()
    local modules = process.sh("ls " .. q(real .. "/share/eutaxy/lua/eutaxy"))
    local count = select(2, modules:gsub("%.lua\n", ""))
    assert.is_true(count >= 20)
    local out = process.sh("cd / && " .. q(bin) .. " run " .. q(probe))
    assert.are.equal(("%s/share/eutaxy/lua\n%s/share/eutaxy/luac\n%d\n"):format(real, real, count), out)
  end)

  it("installs bytecode compiled from each installed module under the path the binary loads it by", function()
    local dir = real .. "/share/eutaxy"
    for name in process.sh("ls " .. q(dir .. "/lua/eutaxy")):gmatch("(%S+)%.lua\n") do
      local source = dir .. "/lua/eutaxy/" .. name .. ".lua"
      local code = read(dir .. "/luac/eutaxy/" .. name .. ".luac")
      assert.are.equal("@" .. source, debug.getinfo(assert(load(code, nil, "b")), "S").source, name)
      assert.is_true(string.dump(assert(loadfile(source)), false) == code, name .. ".luac is not " .. source .. " compiled")
    end
  end)

  it("uses that bytecode, not the source", function()
    local help = real .. "/share/eutaxy/lua/eutaxy/help.lua"
    local luac_file = real .. "/share/eutaxy/luac/eutaxy/help.luac"
    local kept = read(luac_file)
    write(luac_file, string.dump(load("return { main = function() print('from bytecode') return 0 end }", "@" .. help)))
    local out = process.run(q(bin) .. " help")
    write(luac_file, kept)
    assert.are.equal("from bytecode\n", out)
    assert.matches("^usage: eutaxy COMMAND", (process.run(q(bin) .. " help")))
  end)

  it("writes a starter whose check and specs pass from another folder, with the installed types", function()
    local project = tmp .. "/starter"
    process.sh("cd / && " .. q(bin) .. " init " .. q(project))
    assert.is_truthy(read(project .. "/.luarc.json"):find('"' .. real .. '/share/eutaxy/types"', 1, true))
    assert.are.equal("BOUNDED  visits\n", process.sh("cd / && " .. q(bin) .. " check " .. q(project .. "/visits.sim.lua") .. " --quiet"))
    assert.matches("\n1..3\n$", process.sh("cd / && " .. q(bin) .. " test --output=TAP " .. q(project .. "/spec")))
  end)

  it("installs the man page", function()
    assert.are.equal(process.sh(q(bin) .. " help --man"), read(real .. "/share/man/man1/eutaxy.1"))
  end)

  it("leaves the build's binary on the source tree", function()
    local fs = require "eutaxy.fs"
    local out = process.sh(process.bin .. " run " .. q(probe))
    assert.are.equal(build .. "/luac", out:match("^[^\n]*\n([^\n]*)\n"))
    assert.are.equal(fs.realpath("lua"), fs.realpath(out:match("^[^\n]*")))
  end)
end)
