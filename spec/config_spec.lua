local config = require "eutaxy.config"

describe("eutaxy.config", function()
  -- Each test writes its wrangler.jsonc into a fresh directory named after
  -- an os.tmpname() path, removed afterwards.
  local dir, path

  before_each(function()
    dir = os.tmpname()
    os.remove(dir)
    assert(os.execute("mkdir '" .. dir .. "'"))
    path = dir .. "/wrangler.jsonc"
  end)

  after_each(function()
    os.remove(path)
    os.remove(dir)
  end)

  local function write(text)
    local f = assert(io.open(path, "wb"))
    f:write(text)
    f:close()
  end

  local function load_error(text)
    write(text)
    local ok, err = pcall(config.load, path)
    assert.is_false(ok, "expected an error")
    return err
  end

  describe("load", function()
    it("reads main and the bindings in file order", function()
      write([[
        {
          "name": "leases",               // other fields are ignored
          "main": "worker.lua",
          "compatibility_date": "2024-01-01",
          "durable_objects": {
            "bindings": [
              { "name": "POOL", "class_name": "LeasePool" },
              { "name": "AUDIT", "class_name": "AuditLog" },
            ],
          },
        }
      ]])
      local c = config.load(path)
      assert.are.equal(path, c.path)
      assert.are.equal(dir, c.dir)
      assert.are.equal(dir .. "/worker.lua", c.main)
      assert.are.same({
        { name = "POOL", class_name = "LeasePool" },
        { name = "AUDIT", class_name = "AuditLog" },
      }, c.bindings)
    end)

    it("joins main to the config's directory, dropping a leading ./", function()
      write('{"main": "./src/worker.lua"}')
      assert.are.equal(dir .. "/src/worker.lua", config.load(path).main)
    end)

    it("keeps an absolute main as it is", function()
      write('{"main": "/opt/app/worker.lua"}')
      assert.are.equal("/opt/app/worker.lua", config.load(path).main)
    end)

    it("gives no bindings when durable_objects or its bindings are absent or empty", function()
      write('{"main": "w.lua"}')
      assert.are.same({}, config.load(path).bindings)
      write('{"main": "w.lua", "durable_objects": {}}')
      assert.are.same({}, config.load(path).bindings)
      write('{"main": "w.lua", "durable_objects": {"bindings": []}}')
      assert.are.same({}, config.load(path).bindings)
    end)

    it("refuses a file whose top level is not an object", function()
      assert.are.equal(path .. ": expected an object at the top level", load_error('["w.lua"]'))
      assert.are.equal(path .. ": expected an object at the top level", load_error('"w.lua"'))
    end)

    it("refuses a missing main", function()
      assert.are.equal(path .. ': field "main" is missing', load_error('{"name": "x"}'))
    end)

    it("refuses a main that is not a string or is empty", function()
      assert.are.equal(path .. ': field "main" must be a string, got number', load_error('{"main": 1}'))
      assert.are.equal(path .. ': field "main" must not be empty', load_error('{"main": ""}'))
    end)

    it("refuses durable_objects that is not an object", function()
      assert.are.equal(path .. ": durable_objects must be an object",
        load_error('{"main": "w.lua", "durable_objects": [1]}'))
      assert.are.equal(path .. ": durable_objects must be an object",
        load_error('{"main": "w.lua", "durable_objects": true}'))
    end)

    it("refuses bindings that are not an array", function()
      assert.are.equal(path .. ": durable_objects.bindings must be an array",
        load_error('{"main": "w.lua", "durable_objects": {"bindings": {"POOL": "LeasePool"}}}'))
      assert.are.equal(path .. ": durable_objects.bindings must be an array",
        load_error('{"main": "w.lua", "durable_objects": {"bindings": "POOL"}}'))
    end)

    it("refuses a binding that is not an object", function()
      assert.are.equal(path .. ": durable_objects.bindings[1] must be an object with name and class_name",
        load_error('{"main": "w.lua", "durable_objects": {"bindings": [["POOL", "LeasePool"]]}}'))
    end)

    it("refuses a binding without name or class_name", function()
      assert.are.equal(path .. ": durable_objects.bindings[1].name is missing",
        load_error('{"main": "w.lua", "durable_objects": {"bindings": [{"class_name": "A"}]}}'))
      assert.are.equal(path .. ": durable_objects.bindings[2].class_name is missing",
        load_error([[{"main": "w.lua", "durable_objects": {"bindings": [
          {"name": "A", "class_name": "A"}, {"name": "B"}]}}]]))
    end)

    it("refuses a name or class_name that is not a string", function()
      assert.are.equal(path .. ": durable_objects.bindings[1].name must be a string",
        load_error('{"main": "w.lua", "durable_objects": {"bindings": [{"name": 1, "class_name": "A"}]}}'))
      assert.are.equal(path .. ": durable_objects.bindings[2].class_name must be a string",
        load_error([[{"main": "w.lua", "durable_objects": {"bindings": [
          {"name": "A", "class_name": "A"}, {"name": "B", "class_name": {}}]}}]]))
    end)

    it("refuses a binding name that is not an identifier", function()
      local err = load_error(
        '{"main": "w.lua", "durable_objects": {"bindings": [{"name": "MY-POOL", "class_name": "A"}]}}')
      assert.are.equal(path .. ': durable_objects.bindings[1].name "MY-POOL" is not an identifier'
        .. " (letters, digits and _, not starting with a digit)", err)
      err = load_error(
        '{"main": "w.lua", "durable_objects": {"bindings": [{"name": "1POOL", "class_name": "A"}]}}')
      assert.matches('bindings%[1%]%.name "1POOL" is not an identifier', err)
    end)

    it("refuses a class_name that is not an identifier", function()
      local err = load_error(
        '{"main": "w.lua", "durable_objects": {"bindings": [{"name": "P", "class_name": "Lease Pool"}]}}')
      assert.matches('bindings%[1%]%.class_name "Lease Pool" is not an identifier', err)
    end)

    it("refuses a binding name used twice", function()
      assert.are.equal(path .. ': durable_objects.bindings[3].name "POOL" is already bound by durable_objects.bindings[1]',
        load_error([[{"main": "w.lua", "durable_objects": {"bindings": [
          {"name": "POOL", "class_name": "A"},
          {"name": "OTHER", "class_name": "A"},
          {"name": "POOL", "class_name": "B"}]}}]]))
    end)

    it("refuses a binding to another worker's class, saying so", function()
      local err = load_error([[{"main": "w.lua", "durable_objects": {"bindings": [
        {"name": "POOL", "class_name": "LeasePool", "script_name": "pool-worker"}]}}]])
      assert.are.equal(path .. ": durable_objects.bindings[1].script_name: bindings to classes of"
        .. " another worker are not supported; export LeasePool from this worker's main instead", err)
    end)

    it("passes on syntax errors with the file, line and column", function()
      assert.are.equal(path .. ":3:3: expected comma or object end but found a string",
        load_error('{\n  "main": "w.lua"\n  "durable_objects": {}\n}'))
    end)

    it("says when the file cannot be read", function()
      local ok, err = pcall(config.load, dir .. "/missing.jsonc")
      assert.is_false(ok)
      assert.are.equal("cannot read " .. dir .. "/missing.jsonc: No such file or directory", err)
    end)

    it("refuses a path that is not a string", function()
      assert.has_error(function() config.load(nil) end, "config.load: expected a path, got nil")
    end)
  end)

  describe("inline", function()
    it("accepts bindings as a name -> class map, in name order", function()
      local c = config.inline({ main = "worker.lua", bindings = { POOL = "LeasePool", AUDIT = "AuditLog" } }, "/proj")
      assert.is_nil(c.path)
      assert.are.equal("/proj", c.dir)
      assert.are.equal("/proj/worker.lua", c.main)
      assert.are.same({
        { name = "AUDIT", class_name = "AuditLog" },
        { name = "POOL", class_name = "LeasePool" },
      }, c.bindings)
    end)

    it("takes main relative to . when no base_dir is given", function()
      local c = config.inline({ main = "./w.lua", bindings = {} })
      assert.are.equal(".", c.dir)
      assert.are.equal("./w.lua", c.main)
      assert.are.same({}, c.bindings)
    end)

    it("accepts bindings as an array in the file's form", function()
      local c = config.inline({ main = "w.lua", bindings = { { name = "POOL", class_name = "LeasePool" } } })
      assert.are.same({ { name = "POOL", class_name = "LeasePool" } }, c.bindings)
    end)

    it("accepts a wrangler-shaped table", function()
      local c = config.inline({
        main = "w.lua",
        durable_objects = { bindings = { { name = "POOL", class_name = "LeasePool" } } },
      }, "base/")
      assert.are.equal("base/w.lua", c.main)
      assert.are.same({ { name = "POOL", class_name = "LeasePool" } }, c.bindings)
    end)

    it("refuses what load refuses, naming the inline config", function()
      assert.has_error(function() config.inline({ bindings = {} }) end,
        'inline config: field "main" is missing')
      assert.has_error(function()
        config.inline({ main = "w.lua", bindings = { { name = "A", class_name = "X" }, { name = "A", class_name = "Y" } } })
      end, 'inline config: bindings[2].name "A" is already bound by bindings[1]')
      assert.has_error(function()
        config.inline({ main = "w.lua", bindings = { { name = "A", class_name = "X", script_name = "w" } } })
      end, "inline config: bindings[1].script_name: bindings to classes of another worker are not"
        .. " supported; export X from this worker's main instead")
      assert.has_error(function()
        config.inline({ main = "w.lua", durable_objects = { bindings = { { name = "A" } } } })
      end, "inline config: durable_objects.bindings[1].class_name is missing")
    end)

    it("refuses a map entry whose class is not a string or whose name is not an identifier", function()
      assert.has_error(function() config.inline({ main = "w.lua", bindings = { POOL = true } }) end,
        'inline config: bindings["POOL"] must be a class name (a string), got boolean')
      assert.has_error(function() config.inline({ main = "w.lua", bindings = { ["my pool"] = "A" } }) end,
        'inline config: bindings["my pool"]: the binding name is not an identifier'
          .. " (letters, digits and _, not starting with a digit)")
    end)

    it("refuses malformed bindings tables", function()
      assert.has_error(function() config.inline({ main = "w.lua", bindings = "POOL" }) end,
        "inline config: bindings must be a table, got string")
      assert.has_error(function()
        config.inline({ main = "w.lua", bindings = { { name = "A", class_name = "X" }, B = "Y" } })
      end, "inline config: bindings mixes array items and names")
      assert.has_error(function() config.inline({ main = "w.lua", bindings = { [true] = "X" } }) end,
        "inline config: bindings has a key that is not a string (true)")
      assert.has_error(function()
        config.inline({ main = "w.lua", bindings = {}, durable_objects = {} })
      end, "inline config: give either bindings or durable_objects.bindings, not both")
    end)

    it("refuses arguments of the wrong type", function()
      assert.has_error(function() config.inline("w.lua") end, "inline config: expected a table, got string")
      assert.has_error(function() config.inline({ main = "w.lua" }, 1) end,
        "inline config: base_dir must be a string, got number")
    end)
  end)
end)
