--- types/ holds LuaLS annotations (---@meta) for the user-facing API. An
-- editor reads them, not eutaxy, so nothing else notices when the API grows
-- a function they do not name: this spec compares the names the modules
-- and objects really have with the names the annotations declare, both ways.
local testing = require "eutaxy.testing"

-- class name -> set of declared names, from ---@class/---@field lines and
-- `function Local.name` / `function Local:name` under a `local Local = {}`
-- that follows a ---@class.
local function parse_types(files)
  local classes = {}
  for _, file in ipairs(files) do
    local locals, current = {}, nil
    for line in io.lines(file) do
      local class = line:match("^%-%-%-@class%s+([%w_.]+)")
      local field = line:match("^%-%-%-@field%s+([%a_][%w_]*)")
      local var = line:match("^local%s+([%a_][%w_]*)%s*=")
      local owner, name = line:match("^function%s+([%a_][%w_]*)[.:]([%a_][%w_]*)%s*%(")
      if class then
        current = class
        classes[class] = classes[class] or {}
      elseif field and current then
        classes[current][field] = true
      elseif var and current then
        locals[var] = current
        current = nil
      elseif owner and locals[owner] then
        classes[locals[owner]][name] = true
      elseif not line:find("^%-%-%-") then
        current = nil
      end
    end
  end
  return classes
end

local function type_files()
  local p = assert(io.popen("ls types/*.lua"))
  local files = {}
  for f in p:lines() do files[#files + 1] = f end
  p:close()
  return files
end

-- Public keys of v and of its metatables' __index tables.
local function names(v)
  local out, seen, t = {}, {}, v
  while type(t) == "table" and not seen[t] do
    seen[t] = true
    for k in next, t do
      if type(k) == "string" and k:sub(1, 1) ~= "_" then out[k] = true end
    end
    local mt = getmetatable(t)
    t = mt and mt.__index
  end
  local list = {}
  for k in next, out do list[#list + 1] = k end
  table.sort(list)
  return list
end

-- The eutaxy module loads most of its fields on first use, from a table
-- its __index closes over.
local function eutaxy_names()
  local eutaxy = require "eutaxy"
  local index = getmetatable(eutaxy).__index
  local i, lazy = 1, nil
  while true do
    local name, value = debug.getupvalue(index, i)
    if name == nil then break end
    if name == "lazy" then lazy = value end
    i = i + 1
  end
  assert(lazy, "eutaxy's lazy table was not found")
  local set = {}
  for _, k in ipairs(names(eutaxy)) do set[k] = true end
  for k in next, lazy do set[k] = true end
  local list = {}
  for k in next, set do list[#list + 1] = k end
  table.sort(list)
  return list
end

-- What the API really has, by the class name the annotations use.
local function actual()
  local http = require "eutaxy.http"
  local fanout = require "eutaxy.fanout"
  local errors = require "eutaxy.errors"
  local out = {
    ["eutaxy"] = eutaxy_names(),
    ["eutaxy.DurableObject"] = names(require("eutaxy").DurableObject),
    ["eutaxy.Headers"] = names(http.Headers),
    ["eutaxy.RequestClass"] = names(http.Request),
    ["eutaxy.Request"] = names(http.Request.new("/", { method = "POST", body = "x" })),
    ["eutaxy.ResponseClass"] = names(http.Response),
    ["eutaxy.Response"] = names(http.Response.new("x")),
    ["eutaxy.Error"] = names(errors.new("E", "m", { remote = true, retryable = false, overloaded = false, stack = "" })),
    ["eutaxy.json"] = names(require "eutaxy.json"),
    ["eutaxy.url"] = names(require "eutaxy.url"),
    ["eutaxy.URL"] = names((require "eutaxy.url").parse("http://a/b?c=d#e")),
    ["eutaxy.Fanout"] = names(fanout.Fanout),
    ["eutaxy.FanoutMessage"] = names(fanout.Message),
    ["eutaxy.check"] = names(require "eutaxy.check"),
    ["eutaxy.testing"] = names(testing),
  }
  local world = testing.world { main = "spec/fixtures/types/worker.lua", bindings = { PROBE = "Probe" } }
  out["eutaxy.World"] = names(world)
  for class, list in pairs(world.env.PROBE:getByName("probe"):names()) do out[class] = list end
  for class, list in pairs(world:fetch("/"):json()) do out[class] = list end
  world:close()
  return out
end

-- Names the runtime has that the annotations do not declare, as "Class.name".
local function undeclared(runtime, declared)
  local missing = {}
  for class, list in pairs(runtime) do
    for _, name in ipairs(list) do
      if not (declared[class] and declared[class][name]) then missing[#missing + 1] = class .. "." .. name end
    end
  end
  table.sort(missing)
  return missing
end

describe("the LuaLS annotations in types/", function()
  local declared = parse_types(type_files())
  local runtime = actual()

  it("declare every class the runtime's objects are compared with", function()
    local absent = {}
    for class in pairs(runtime) do
      if not declared[class] then absent[#absent + 1] = class end
    end
    table.sort(absent)
    assert.are.same({}, absent)
  end)

  it("name every public function and field of the API", function()
    assert.are.same({}, undeclared(runtime, declared))
  end)

  it("name no method the runtime does not have", function()
    -- the hooks a class may define, fields set only on instances and check's
    -- loading (set while a scenario loads) are not in the tables compared
    local hooks = {
      ["eutaxy.DurableObject"] = { init = true, alarm = true, fetch = true, ctx = true, env = true, super = true,
                                   webSocketMessage = true, webSocketClose = true, webSocketError = true },
      -- set on a 101 response only
      ["eutaxy.Response"] = { webSocket = true },
      ["eutaxy.FanoutMessage"] = { id = true, deliveryId = true, target = true, body = true, attempt = true,
                                   enqueuedAt = true },
      ["eutaxy.check"] = { loading = true },
      -- a property computed when read, which no table holds
      ["eutaxy.SqlStorage"] = { databaseSize = true },
    }
    local extra = {}
    for class, list in pairs(runtime) do
      local have = {}
      for _, name in ipairs(list) do have[name] = true end
      for name in pairs(declared[class] or {}) do
        if not have[name] and not (hooks[class] and hooks[class][name]) then extra[#extra + 1] = class .. "." .. name end
      end
    end
    table.sort(extra)
    assert.are.same({}, extra)
  end)

  it("are the library of every example folder's .luarc.json", function()
    local json = require "eutaxy.json"
    local p = assert(io.popen("ls -d scenarios/*/ spec/fixtures/serve/"))
    local count = 0
    for dir in p:lines() do
      local f = assert(io.open(dir .. ".luarc.json"), dir .. " has no .luarc.json")
      local luarc = json.decode(f:read("a"))
      f:close()
      assert.are.equal("Lua 5.4", luarc.runtime.version)
      local types = dir .. luarc.workspace.library[1]
      assert.is_truthy(io.open(types .. "/eutaxy.lua"), dir .. ".luarc.json: " .. types .. " holds no eutaxy.lua")
      count = count + 1
    end
    p:close()
    assert.is_true(count >= 6)
  end)

  it("are found wanting when a module grows a function they do not name", function()
    local grown = { ["eutaxy.Storage"] = { "get", "getMany" } }
    assert.are.same({ "eutaxy.Storage.getMany" }, undeclared(grown, declared))
  end)

  it("read a method declared in a file as the class's", function()
    local path = os.tmpname()
    local f = assert(io.open(path, "w"))
    f:write("---@meta\n---@class demo.Thing\n---@field size integer\nlocal Thing = {}\n\nfunction Thing:grow(n) end\n")
    f:close()
    local classes = parse_types({ path })
    os.remove(path)
    assert.are.same({ size = true, grow = true }, classes["demo.Thing"])
  end)
end)
