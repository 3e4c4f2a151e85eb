--- A relative path a spec or a script gives testing.world is relative to
-- that file's folder, wherever busted or eutaxy run was started; when
-- nothing is there, to the working directory (the specs here name
-- "spec/fixtures/..." from the repository's root that way). Scenarios
-- already name their worker relative to their own folder (checker.lua).
local process = dofile("spec/helpers/process.lua")
local testing = require "eutaxy.testing"

-- the repository's root, where the specs run
local root = process.sh("pwd -P"):gsub("\n$", "")
local bin = process.bin
if bin:sub(1, 1) ~= "/" then bin = root .. "/" .. bin end

local function where(world)
  local said = world:fetch("http://x/"):text()
  world:close()
  return said
end

local function write(path, text)
  local f = assert(io.open(path, "w"))
  f:write(text)
  f:close()
end

describe("testing.world in a spec", function()
  it("finds a config relative to the spec's folder", function()
    assert.are.equal("spec/fixtures/paths", where(testing.world { config = "fixtures/paths/wrangler.jsonc" }))
  end)

  it("finds main and dir relative to the spec's folder too", function()
    assert.are.equal("spec/fixtures/paths",
      where(testing.world { main = "fixtures/paths/worker.lua", bindings = { NOTE = "Note" } }))
    assert.are.equal("spec/fixtures/paths",
      where(testing.world { dir = "fixtures/paths", main = "worker.lua", bindings = { NOTE = "Note" } }))
  end)

  it("finds a path relative to the working directory when the spec's folder has nothing there", function()
    assert.are.equal("spec/fixtures/paths", where(testing.world { config = "spec/fixtures/paths/wrangler.jsonc" }))
  end)

  it("takes an absolute path as it is", function()
    local config = root .. "/spec/fixtures/paths/wrangler.jsonc"
    assert.are.equal("spec/fixtures/paths", where(testing.world { config = config }))
  end)

  it("counts the spec as the caller through pcall", function()
    local ok, world = pcall(testing.world, { config = "fixtures/paths/wrangler.jsonc" })
    assert.is_true(ok, tostring(world))
    world:close()
  end)

  it("names both places it looked, and the spec's line, when the path is in neither", function()
    local ok, err = pcall(function()
      local w = testing.world { config = "nowhere/wrangler.jsonc" }  -- not a tail call: the error names this line
      return w
    end)
    assert.is_false(ok)
    assert.matches("paths_spec%.lua:%d+: testing%.world: config: no file %.?/?spec/nowhere/wrangler%.jsonc "
      .. "%(relative to the calling file%), nor nowhere/wrangler%.jsonc %(relative to the working directory%)$", err)
    local _, folder = pcall(testing.world, { dir = "nowhere", main = "worker.lua", bindings = {} })
    assert.matches("testing%.world: dir: no folder %.?/?spec/nowhere ", folder)
  end)
end)

describe("eutaxy run FILE", function()
  local tmp

  before_each(function()
    tmp = os.tmpname()
    os.remove(tmp)
    assert(os.execute("mkdir -p '" .. tmp .. "/scripts'"))
  end)

  after_each(function()
    os.execute("rm -rf '" .. tmp .. "'")
  end)

  it("finds what the script names beside the script first, then from the working directory", function()
    local worker = 'return { fetch = function() return require("eutaxy").Response.new(%q) end }\n'
    write(tmp .. "/scripts/w.lua", worker:format("beside the script"))
    write(tmp .. "/w.lua", worker:format("in the working directory"))
    write(tmp .. "/only.lua", worker:format("only in the working directory"))
    write(tmp .. "/scripts/show.lua", [[
local testing = require "eutaxy.testing"
for _, main in ipairs(arg) do
  local world = testing.world { main = main, bindings = {} }
  print(world:fetch("http://x/"):text())
  world:close()
end
]])
    local out, err, code = process.run("cd '" .. tmp .. "' && " .. bin .. " run scripts/show.lua w.lua only.lua")
    assert.are.equal(0, code, err)
    assert.are.equal("beside the script\nonly in the working directory\n", out)
  end)

  it("requires the modules beside the script", function()
    write(tmp .. "/scripts/helper.lua", 'return "the helper beside the script"\n')
    write(tmp .. "/scripts/main.lua", 'print((require "helper"))\n')
    local out, err, code = process.run("cd / && " .. bin .. " run '" .. tmp .. "/scripts/main.lua'")
    assert.are.equal(0, code, err)
    assert.are.equal("the helper beside the script\n", out)
  end)

  it("runs the lease pool's demo from another folder", function()
    local out, err, code = process.run("cd / && " .. bin .. " run " .. root .. "/scenarios/lease-pool/demo.lua")
    assert.are.equal(0, code, err)
    assert.matches("POST /projects/p%-1/lease %-> 200 ", out)
    assert.matches("\ngrant p%-2 r%-2 granted %d+ ended %d+\n$", out)
  end)
end)
