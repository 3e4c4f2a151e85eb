-- vars from wrangler.jsonc and secrets from .dev.vars on env: the file
-- formats, what the worker and the objects see in a world, under check and
-- under serve, what a scenario and a spec put over them, and every kind of
-- bad input, each a clear error with its file and line or field.
local config = require "eutaxy.config"
local dotenv = require "eutaxy.dotenv"
local testing = require "eutaxy.testing"
local process = dofile("spec/helpers/process.lua")

local FIXTURE = "spec/fixtures/vars"
local CONFIG = FIXTURE .. "/wrangler.jsonc"

-- A project in a fresh directory: files = { [name] = text }.
local function project(files)
  local dir = process.sh("mktemp -d"):gsub("%s+$", "")
  for name, text in pairs(files) do
    local f = assert(io.open(dir .. "/" .. name, "wb"))
    f:write(text)
    f:close()
  end
  return dir
end

local function remove(dir)
  if dir then process.sh("rm -rf " .. process.quote(dir)) end
end

local WORKER = process.read(FIXTURE .. "/worker.lua")
local BINDINGS = '"durable_objects": { "bindings": [{ "name": "READER", "class_name": "Reader" }] }'

local function load_error(files)
  local dir = project(files)
  local ok, err = pcall(config.load, dir .. "/wrangler.jsonc")
  remove(dir)
  assert.is_false(ok, "expected an error")
  return (err:gsub(dir:gsub("%p", "%%%0"), "DIR"))
end

describe(".dev.vars", function()
  it("reads dotenv's syntax: export, quotes, comments and blank lines", function()
    local vars, lines = dotenv.parse(table.concat({
      "# a comment",
      "",
      "export API_KEY=abc123   # after the value",
      "  SPACED = hello world  ",
      "EMPTY=",
      "HASH=a#b",
      [[DOUBLE="a\nb # kept"  # dropped]],
      [[SINGLE='raw \n']],
      "TICK=`x`",
      "COLON: yes",
      "dotted.name-1=ok",
      "export=a name too",
    }, "\n"), "f")
    assert.are.same({
      API_KEY = "abc123", SPACED = "hello world", EMPTY = "", HASH = "a", DOUBLE = "a\nb # kept",
      SINGLE = "raw \\n", TICK = "x", COLON = "yes", ["dotted.name-1"] = "ok", export = "a name too",
    }, vars)
    assert.are.equal(3, lines.API_KEY)
    assert.are.equal(12, lines.export)
  end)

  it("keeps a quoted value across lines and counts them", function()
    local vars, lines = dotenv.parse('KEY="-----BEGIN-----\nabc\n-----END-----"\nNEXT=1\r\nLAST=2\r', "f")
    assert.are.same({ KEY = "-----BEGIN-----\nabc\n-----END-----", NEXT = "1", LAST = "2" }, vars)
    assert.are.same({ KEY = 1, NEXT = 4, LAST = 5 }, lines)
  end)

  it("unescapes only \\n and \\r, only in double quotes, and keeps \\\" inside", function()
    local vars = dotenv.parse([[A="say \"hi\"\r\n"
B='it\'s'
C=plain\n]], "f")
    assert.are.same({ A = 'say \\"hi\\"\r\n', B = "it\\'s", C = "plain\\n" }, vars)
  end)

  it("lets a later line win, as dotenv does", function()
    local vars, lines = dotenv.parse("X=1\nX=2\n", "f")
    assert.are.same({ X = "2" }, vars)
    assert.are.equal(2, lines.X)
  end)

  it("names the file and the line of a line it cannot read", function()
    local cases = {
      { "OK=1\nNOEQUALS\n", "f:2: expected = after NOEQUALS (NAME=value)" },
      { "OK=1\n\n=value\n", 'f:3: expected NAME=value (a name of letters, digits, _, . and -), got "=value"' },
      { "A B=1", "f:1: expected = after A (NAME=value)" },
      { 'A="open\nB=2\n', 'f:1: the value of A opens a quote (") that is never closed' },
      { "A=1\nB='x' y\n", "f:2: text after the closing quote of B (a comment starts with #)" },
      { 'A="x\ny" z', "f:2: text after the closing quote of A (a comment starts with #)" },
      { "A=1\nB=\0\n", "f:2: NUL byte in the file" },
    }
    for _, c in ipairs(cases) do
      local ok, err = pcall(dotenv.parse, c[1], "f")
      assert.is_false(ok, c[1])
      assert.are.equal(c[2], err)
    end
  end)

  it("is optional, but one that cannot be read is an error", function()
    assert.is_nil(dotenv.read("/nonexistent-eutaxy-dir/.dev.vars"))
    local dir = project({})
    process.sh("mkdir " .. process.quote(dir .. "/.dev.vars"))
    local ok, err = pcall(dotenv.read, dir .. "/.dev.vars")
    remove(dir)
    assert.is_false(ok)
    assert.matches("^cannot read .*/%.dev%.vars: ", err)
  end)
end)

describe("config.load", function()
  it("reads vars of every JSON type, with .dev.vars' secrets over them", function()
    local c = config.load(CONFIG)
    assert.are.same({
      GREETING = "hello", API_TOKEN = "s3cret", RETRIES = 3, RATIO = 0.5, VERBOSE = true,
      LIMITS = { level = 1, tags = { "a", "b" } }, DB_PASSWORD = "p#ss word", MULTI = "line one\nline two",
    }, c.vars)
    assert.are.equal("integer", math.type(c.vars.RETRIES))
    assert.are.same({ "API_TOKEN", "DB_PASSWORD", "MULTI" }, c.secrets)
  end)

  it("has no vars for a config without them and no .dev.vars", function()
    local c = config.load("scenarios/lease-pool/wrangler.jsonc")
    assert.are.same({}, c.vars)
    assert.are.same({}, c.secrets)
  end)

  it("refuses vars that are not an object", function()
    assert.are.equal("DIR/wrangler.jsonc: vars must be an object of names to values, got an array",
      load_error({ ["wrangler.jsonc"] = '{ "main": "w.lua", "vars": ["a"] }' }))
    assert.are.equal("DIR/wrangler.jsonc: vars must be an object of names to values, got string",
      load_error({ ["wrangler.jsonc"] = '{ "main": "w.lua", "vars": "a" }' }))
  end)

  it("refuses a var with the name of a Durable Object binding, naming the file and the name", function()
    assert.are.equal("DIR/wrangler.jsonc: vars.READER: READER is the name of a Durable Object binding "
      .. "(durable_objects.bindings[1]); a var or secret cannot have it",
      load_error({ ["wrangler.jsonc"] = '{ "main": "w.lua", "vars": { "READER": "x" }, ' .. BINDINGS .. " }" }))
  end)

  it("refuses a secret with the name of a Durable Object binding, naming .dev.vars and its line", function()
    assert.are.equal("DIR/.dev.vars:2: READER is the name of a Durable Object binding "
      .. "(DIR/wrangler.jsonc: durable_objects.bindings[1]); a var or secret cannot have it",
      load_error({ ["wrangler.jsonc"] = '{ "main": "w.lua", ' .. BINDINGS .. " }",
                   [".dev.vars"] = "OK=1\nREADER=oops\n" }))
  end)

  it("names the line of a malformed .dev.vars", function()
    assert.are.equal("DIR/.dev.vars:3: expected = after BROKEN (NAME=value)",
      load_error({ ["wrangler.jsonc"] = '{ "main": "w.lua" }', [".dev.vars"] = "A=1\n# fine\nBROKEN\n" }))
  end)
end)

describe("env in a world", function()
  local world
  after_each(function()
    if world then world:close() end
    world = nil
  end)

  local EXPECTED = {
    GREETING = "hello", API_TOKEN = "s3cret", RETRIES = 3, RATIO = 0.5, VERBOSE = true,
    LIMITS = { level = 1, tags = { "a", "b" } }, DB_PASSWORD = "p#ss word", MULTI = "line one\nline two",
  }

  it("carries the vars and secrets in the worker and in objects, visited in key order", function()
    world = testing.world { config = CONFIG }
    local body = world:fetch("/env"):json()
    assert.are.same(EXPECTED, body.vars)
    assert.are.same({ "API_TOKEN", "DB_PASSWORD", "GREETING", "LIMITS", "MULTI", "RATIO", "READER", "RETRIES",
                      "VERBOSE" }, body.order)
    local vars, order = world.env.READER:getByName("r"):seen()
    assert.are.same(EXPECTED, vars)
    assert.are.same(body.order, order)
    assert.are.equal("hello", world.env.GREETING)
  end)

  it("gives every isolate its own copy", function()
    world = testing.world { config = CONFIG }
    assert.are.equal(99, world.env.READER:getByName("a"):mutate())
    assert.are.equal(1, (world.env.READER:getByName("b"):seen()).LIMITS.level)
    assert.are.equal(1, world:fetch("/env"):json().vars.LIMITS.level)
    world:reset("READER", "a")
    assert.are.equal(1, (world.env.READER:getByName("a"):seen()).LIMITS.level)
  end)

  it("raises on a name env does not have, and rawget tells an optional one", function()
    world = testing.world { config = CONFIG }
    local ok, err = pcall(world.env.READER:getByName("r").missing, world.env.READER:getByName("r"))
    assert.is_false(ok)
    assert.matches("env.NOT_THERE: no binding or var named NOT_THERE in wrangler.jsonc or .dev.vars "
      .. "%(bindings: READER; vars: API_TOKEN, DB_PASSWORD, GREETING, LIMITS, MULTI, RATIO, RETRIES, VERBOSE%)",
      err.message)
  end)

  it("puts a spec's vars over the config's and the secrets", function()
    world = testing.world { config = CONFIG, vars = { API_TOKEN = "test-token", EXTRA = { 1, 2 } } }
    local vars = world:fetch("/env"):json().vars
    assert.are.equal("test-token", vars.API_TOKEN)
    assert.are.same({ 1, 2 }, vars.EXTRA)
    assert.are.equal("hello", vars.GREETING)
  end)

  it("takes vars without a config", function()
    world = testing.world { main = FIXTURE .. "/worker.lua", bindings = { READER = "Reader" }, vars = { ONLY = "me" } }
    assert.are.same({ ONLY = "me" }, world:fetch("/env"):json().vars)
  end)

  it("refuses a spec's var that is no JSON value, naming it", function()
    local loop = {}
    loop.self = loop
    -- each message as a pattern
    local cases = {
      { { F = print }, "vars%.F is a function: a var is a string, a number, a boolean or a table of them" },
      { { T = { deep = { coroutine.create(print) } } }, "vars%.T%.deep%[1%] is a thread" },
      { { C = setmetatable({}, { __call = print }) }, "vars%.C is a callable table" },
      { { L = loop }, "vars%.L%.self contains itself %(a cycle%)" },
      { { N = 0 / 0 }, "vars%.N is %-?nan: a var's number must be finite, as in JSON" },
      { { H = math.huge }, "vars%.H is inf: a var's number must be finite" },
      { { K = { [1.5] = "x" } }, "vars%.K has a key that is a float" },
      { { [""] = "x" }, "vars has a name that is not a non%-empty string" },
      { "GREETING=x", "vars must be an object of names to values, got string" },
      { { READER = "x" }, "vars%.READER: READER is the name of a Durable Object binding %(spec/fixtures/vars/"
        .. "wrangler%.jsonc: durable_objects%.bindings%[1%]%)" },
    }
    for _, c in ipairs(cases) do
      local ok, err = pcall(function()
        local w = testing.world { config = CONFIG, vars = c[1] }  -- not a tail call: the error names this line
        w:close()
      end)
      assert.is_false(ok, c[2])
      assert.matches("vars_spec%.lua:%d+: testing%.world: " .. c[2], err)
    end
  end)
end)

describe("env under eutaxy check", function()
  it("carries the scenario's vars over the config's and the secrets", function()
    local r = process.start_check(FIXTURE .. "/vars.sim.lua --quiet")()
    assert.are.equal(0, r.code, r.out .. r.err)
    assert.are.equal("BOUNDED", r.doc.verdict)
    assert.are.same({ "API_TOKEN", "DB_PASSWORD", "MULTI" }, r.doc.fingerprintInputs.options.secrets)
  end)

  it("takes a variant's vars instead of the original's", function()
    local sim = require "eutaxy.check"
    local base = dofile(FIXTURE .. "/vars.sim.lua")
    local other = sim.variant("fixtures/vars/vars.sim.lua", { name = "other", vars = { GREETING = "else" } })
    assert.are.same({ GREETING = "from the scenario" }, base.vars)
    assert.are.same({ GREETING = "else" }, other.vars)
    assert.are.same(base.worker, other.worker)
    assert.are.same(base.vars, sim.variant("fixtures/vars/vars.sim.lua", { name = "same" }).vars)
  end)

  it("refuses a scenario's var that is no JSON value, at its line", function()
    local sim = require "eutaxy.check"
    local ok, err = pcall(function()
      local s = sim.defineScenario {  -- not a tail call: the error names this line
        name = "bad", worker = { entry = "./w.lua", config = "./wrangler.jsonc" }, vars = { HOOK = print },
        drive = sim.http({ { path = "/" } }), invariants = { sim.invariant("i", function() return true end) },
      }
      return s
    end)
    assert.is_false(ok)
    assert.matches("vars_spec%.lua:%d+: defineScenario: vars%.HOOK is a function", err)
  end)

  local function check_error(files)
    local dir = project(files)
    local out, err, code = process.run(process.bin .. " check " .. process.quote(dir .. "/s.sim.lua") .. " --quiet")
    remove(dir)
    return code, (err:gsub(dir:gsub("%p", "%%%0"), "DIR")), out
  end

  local function scenario(vars)
    return table.concat({
      'local sim = require "eutaxy.check"',
      "return sim.defineScenario {",
      '  name = "bad-vars",',
      '  worker = { entry = "./worker.lua", config = "./wrangler.jsonc" },',
      "  vars = " .. vars .. ",",
      '  drive = sim.http({ { path = "/env" } }),',
      '  invariants = { sim.invariant("holds", function() return true end) },',
      "  faults = {},",
      "}",
    }, "\n")
  end

  local function files(vars, dev_vars)
    return { ["worker.lua"] = WORKER, ["s.sim.lua"] = scenario(vars), [".dev.vars"] = dev_vars,
             ["wrangler.jsonc"] = '{ "main": "worker.lua", ' .. BINDINGS .. " }" }
  end

  it("exits 2 naming the scenario's line for a var with a binding's name", function()
    local code, err = check_error(files('{ READER = "x" }'))
    assert.are.equal(2, code)
    assert.matches("DIR/s.sim.lua:2: vars.READER: READER is the name of a Durable Object binding", err, 1, true)
  end)

  it("exits 2 naming .dev.vars and its line when it is malformed", function()
    local code, err = check_error(files("{}", "GOOD=1\nBAD LINE\n"))
    assert.are.equal(2, code)
    assert.matches("DIR/.dev.vars:2: expected = after BAD (NAME=value)", err, 1, true)
  end)
end)

describe("env under eutaxy serve", function()
  local h = dofile("spec/fixtures/serve/harness.lua")
  local state

  before_each(function()
    state = h.begin()
    if not state then pending("curl is not installed (the .ci/packages list has it)") end
  end)

  after_each(function() h.finish(state) end)

  it("carries the vars and the secrets of .dev.vars", function()
    local server = h.start(state, nil, CONFIG)
    local status, body = h.request(server, "GET", "/env")
    assert.are.equal(200, status)
    local json = require "eutaxy.json"
    assert.are.same({
      GREETING = "hello", API_TOKEN = "s3cret", RETRIES = 3, RATIO = 0.5, VERBOSE = true,
      LIMITS = { level = 1, tags = { "a", "b" } }, DB_PASSWORD = "p#ss word", MULTI = "line one\nline two",
    }, json.decode(body).vars)
    assert.are.equal(0, h.stop(server))
  end)

  it("exits 2 naming .dev.vars and its line when it is malformed", function()
    local dir = project({ ["worker.lua"] = WORKER, [".dev.vars"] = 'A="never closed\n',
                          ["wrangler.jsonc"] = '{ "main": "worker.lua", ' .. BINDINGS .. " }" })
    local _, err, code = process.run(process.bin .. " serve " .. process.quote(dir .. "/wrangler.jsonc")
      .. " --port 0 --state " .. process.quote(state))
    remove(dir)
    assert.are.equal(2, code)
    assert.matches('/.dev.vars:1: the value of A opens a quote (") that is never closed', err, 1, true)
  end)
end)
