--- eutaxy help, every command's --help, and the man page: one text
-- (lua/eutaxy/help.lua), checked against what the parsers really accept.
local process = dofile("spec/helpers/process.lua")
local help = require "eutaxy.help"

local bin = os.getenv("EUTAXY_BIN") or "build/eutaxy"

-- stdout, stderr and the exit code of `eutaxy ARGS`.
local function run(args)
  return process.run(bin .. " " .. args)
end

local read = process.read

-- The flags a parser compares its arguments with: `a == "--json"` and
-- `["--port"] = ...` (a table of handlers), in the order they appear.
local function parser_flags(source)
  local flags, seen = {}, {}
  for _, pattern in ipairs({ '==%s*"(%-%-?%a[%w-]*)"', '%[%s*"(%-%-?%a[%w-]*)"%s*%]' }) do
    for flag in source:gmatch(pattern) do
      if not seen[flag] then
        seen[flag] = true
        flags[#flags + 1] = flag
      end
    end
  end
  table.sort(flags)
  return flags
end

-- The flags of flags that text does not name as a word of its own.
local function unnamed(flags, text)
  local missing = {}
  for _, flag in ipairs(flags) do
    local quoted = flag:gsub("%-", "%%-")
    if not (" " .. text .. " "):find("[%s,(]" .. quoted .. "[%s,)=]") then missing[#missing + 1] = flag end
  end
  return missing
end

-- Where each command's arguments are parsed.
local PARSERS = {
  check = "lua/eutaxy/checker.lua",
  serve = "lua/eutaxy/serve.lua",
  init = "lua/eutaxy/starter.lua",
  help = "lua/eutaxy/help.lua",
}

describe("eutaxy help", function()
  it("describes every command main.c dispatches", function()
    local main = read("host/main.c")
    local overview = run("help")
    local count = 0
    for word in main:gmatch('strcmp%(cmd, "(%a+)"%) == 0') do
      count = count + 1
      assert.is_truthy(help.command(word), "no help for " .. word)
      assert.is_truthy(overview:find("\n  " .. word .. " ", 1, true), "eutaxy help does not list " .. word)
    end
    assert.is_true(count >= 6)
  end)

  it("names the flags main.c takes in place of a command", function()
    local all = help.overview()
    for _, c in ipairs(help.commands) do all = all .. help.text(c.name) end
    local flags = {}
    for flag in read("host/main.c"):gmatch('"(%-%-?%a[%w-]*)"') do flags[#flags + 1] = flag end
    assert.is_true(#flags >= 3)
    assert.are.same({}, unnamed(flags, all))
  end)

  for _, c in ipairs(help.commands) do
    it("prints the help of " .. c.name .. " for `help " .. c.name .. "` and `" .. c.name .. " --help`", function()
      local out, err, code = run("help " .. c.name)
      assert.are.equal(0, code)
      assert.are.equal("", err)
      -- test's is followed by busted's options (the next spec)
      assert.are.equal(help.text(c.name), c.name == "test" and out:sub(1, #help.text(c.name)) or out)
      assert.are.equal("usage: eutaxy " .. c.name, out:match("^[^\n]*"):sub(1, #c.name + 14))
      local out2, _, code2 = run(c.name .. " --help")
      assert.are.equal(0, code2)
      assert.are.equal(out, out2)
      local out3, _, code3 = run(c.name .. " -h")
      assert.are.equal(0, code3)
      assert.are.equal(out, out3)
    end)
  end

  for name, file in pairs(PARSERS) do
    it("names every flag the " .. name .. " parser accepts", function()
      local flags = parser_flags(read(file))
      assert.is_true(#flags >= 1, file .. " compares no flag: has its parser moved?")
      assert.are.same({}, unnamed(flags, help.text(name)))
    end)
  end

  it("notices a flag a parser accepts and the help does not name", function()
    local source = 'if a == "--json" then j = true elseif a == "--frobnicate" then f = true end\n'
      .. 'local handlers = { ["--port"] = port, ["--evict-after"] = evict }'
    local flags = parser_flags(source)
    assert.are.same({ "--evict-after", "--frobnicate", "--json", "--port" }, flags)
    local text = "usage: eutaxy x [options]\n\n  --json    print JSON\n  --port N  the port\n"
    assert.are.same({ "--evict-after", "--frobnicate" }, unnamed(flags, text))
  end)

  it("follows eutaxy test's help with busted's options, which busted inside the binary would not show", function()
    local out, err, code = run("test --help")
    assert.are.equal(0, code)
    assert.are.equal("", err)
    local busted = out:sub(#help.text("test") + 1)
    assert.matches("^\nUsage: eutaxy test %[OPTIONS%]", busted)
    for _, option in ipairs({ "-o, --output=LIBRARY", "--filter=PATTERN", "-p, --pattern=PATTERN", "-t, --tags=TAGS" }) do
      assert.is_truthy(busted:find("\n  " .. option, 1, true), "busted's help does not list " .. option)
    end
    assert.not_matches("re%-run with %-%-help", busted)
    -- -c is eutaxy's own --coverage, which needs no LuaCov
    assert.is_nil(busted:find("coverage", 1, true))
    assert.is_truthy(busted:find("\n  -f, --config-file=FILE", 1, true))  -- the option after the one left out
  end)

  it("lists the commands for eutaxy, eutaxy help and eutaxy --help", function()
    local out, _, code = run("")
    assert.are.equal(0, code)
    assert.are.equal(help.overview(), out)
    assert.are.equal(out, (run("help")))
    assert.are.equal(out, (run("--help")))
  end)

  it("answers an unknown command with exit 2 and the list of commands", function()
    for _, args in ipairs({ "frobnicate", "help frobnicate", "frobnicate --help" }) do
      local out, err, code = run(args)
      assert.are.equal(2, code)
      assert.are.equal("", out)
      assert.matches("unknown command 'frobnicate' %(the commands: check, serve, init, test, run, version, help;", err)
    end
  end)
end)

describe("the eutaxy(1) man page", function()
  local dir = bin:match("^(.*)/[^/]*$") or "."
  local page = dir .. "/eutaxy.1"

  it("is built beside the binary from the same text as eutaxy help --man", function()
    assert.are.equal(help.roff(), read(page))
    assert.are.equal(help.roff(), (run("help --man")))
  end)

  it("has a section for each command, with its options", function()
    local roff = read(page)
    assert.matches("^%.TH EUTAXY 1 ", roff)
    for _, c in ipairs(help.commands) do
      assert.is_truthy(roff:find("\n.SS " .. c.name .. "\n", 1, true), "no section for " .. c.name)
    end
    assert.is_truthy(roff:find("\\fB\\-\\-check\\-determinism\\fR", 1, true))
  end)

  it("renders with man, without warnings, when man is installed", function()
    if not os.execute("command -v man >/dev/null 2>&1") then
      pending("man is not installed")
      return
    end
    local errfile = os.tmpname()
    local p = assert(io.popen("MANWIDTH=100 man --warnings -l " .. page .. " 2>" .. errfile))
    local text = p:read("a")
    local _, _, code = p:close()
    local err = read(errfile)
    os.remove(errfile)
    assert.are.equal(0, code)
    assert.are.equal("", err)
    for _, c in ipairs(help.commands) do
      assert.is_truthy(text:find("\n   " .. c.name .. "\n", 1, true), "man shows no section " .. c.name)
    end
  end)
end)
