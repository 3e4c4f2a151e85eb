--- Broken workers and configs give a clear message naming the file (and the
-- line where there is one), never a crash.
local testing = require "eutaxy.testing"

local DIR = "spec/fixtures/broken/"
local bin = os.getenv("EUTAXY_BIN") or "build/eutaxy"

local function world_error(opts)
  local ok, err = pcall(testing.world, opts)
  assert.is_false(ok, "the world was built")
  return tostring(err)
end

describe("a broken project", function()
  it("names the file and line of a worker that does not parse", function()
    local err = world_error { main = DIR .. "syntax.lua", bindings = { THING = "Thing" } }
    assert.matches("syntax%.lua:3: ", err)
  end)

  it("names a class missing from the module, and what it exports", function()
    local err = world_error { main = DIR .. "noclass.lua", bindings = { THING = "Thing" } }
    assert.matches("binding THING: class Thing is not exported by .*noclass%.lua %(it exports: Other, fetch%)", err)
  end)

  it("refuses an export that is not a DurableObject class", function()
    local err = world_error { main = DIR .. "notaclass.lua", bindings = { THING = "Thing" } }
    assert.matches("class Thing is not exported by .*notaclass%.lua as a DurableObject class", err)
  end)

  it("reports an error raised while the worker module loads", function()
    local err = world_error { main = DIR .. "raises.lua", bindings = {} }
    assert.matches("raises%.lua:1: cannot start: missing setting", err)
  end)

  it("refuses a worker module that returns something else than a table", function()
    local err = world_error { main = DIR .. "returns.lua", bindings = {} }
    assert.matches("returns%.lua must return a table of its exports", err)
  end)

  it("names a worker file that does not exist", function()
    local err = world_error { main = DIR .. "nowhere.lua", bindings = {} }
    assert.matches("nowhere%.lua", err)
  end)

  it("gives the line of a malformed wrangler.jsonc", function()
    local err = world_error { config = DIR .. "bad.jsonc" }
    assert.matches("bad%.jsonc:4:", err)
  end)

  it("exits non-zero with the message from the command line", function()
    for _, config in ipairs({ "bad.jsonc", "missing-class.jsonc" }) do
      local p = io.popen(bin .. " run " .. DIR .. "world.lua " .. DIR .. config .. " 2>&1")
      local out = p:read("a")
      local ok, _, code = p:close()
      assert.is_nil(ok, out)
      assert.are.equal(1, code)
      assert.is_truthy(out:find(config, 1, true), out)
      assert.not_matches("built", out)
    end
  end)
end)
