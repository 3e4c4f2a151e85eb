--- eutaxy.fetch to services outside the worker: in a world (testing.world's
-- services) and in eutaxy check (sim.service), where every call to a
-- service is a fault point. The outbound-payment example pair
-- (scenarios/outbound-payment) is in ctest with its verdicts.
local testing = require "eutaxy.testing"
local json = require "eutaxy.json"
local process = dofile("spec/helpers/process.lua")
local bin = os.getenv("EUTAXY_BIN") or "build/eutaxy"

local DIR = "spec/fixtures/outbound/"
local ECHO = { module = DIR .. "echo.lua", sql = { schema = "CREATE TABLE seen (method TEXT, url TEXT, body TEXT)" } }

local function world(services)
  return testing.world{ config = DIR .. "wrangler.jsonc", services = services }
end

describe("eutaxy.fetch in a world", function()
  it("reaches the service of the URL's origin, with the method, headers and body sent", function()
    local w = world{ ["https://echo.example"] = ECHO }
    local r = w:fetch("/?url=https://echo.example/x%3Fy=1")
    assert.are.equal(200, r.status)
    assert.are.equal("201 POST https://echo.example/x?y=1 1 hello", r.body)
    assert.are.same({ { method = "POST", url = "https://echo.example/x?y=1", body = "hello" } },
      w:serviceRows("https://echo.example", "SELECT * FROM seen"))
    assert.matches("calls service%(https://echo.example%) fetch POST https://echo.example/x%?y=1", w:trace())
    w:close()
  end)

  it("is a clear error, at the caller's line, for an origin no service answers", function()
    local w = world{ ["https://echo.example"] = ECHO }
    local ok, err = pcall(w.fetch, w, "/?url=https://other.example/x")
    assert.is_false(ok)
    assert.matches("worker%.lua:6: eutaxy%.fetch: no service answers https://other%.example in this world "
      .. "%(services: https://echo%.example%)", tostring(err))
    w:close()
  end)

  it("says there are no services when the world has none", function()
    local w = world(nil)
    local ok, err = pcall(w.fetch, w, "/?url=https://echo.example/x")
    assert.is_false(ok)
    assert.matches("%(services: none%)", tostring(err))
    w:close()
  end)

  it("needs an absolute URL", function()
    local w = world{ ["https://echo.example"] = ECHO }
    local ok, err = pcall(w.fetch, w, "/?url=/relative")
    assert.is_false(ok)
    assert.matches('worker%.lua:6: eutaxy%.fetch needs an absolute URL %(https://host/path%), got "/relative"',
      tostring(err))
    w:close()
  end)

  it("refuses a scheme other than http: and https:, naming it", function()
    local w = world{ ["https://echo.example"] = ECHO }
    local ok, err = pcall(w.fetch, w, "/?url=ftp://echo.example/x")
    assert.is_false(ok)
    assert.matches('worker%.lua:6: eutaxy%.fetch: unsupported scheme ftp: in "ftp://echo%.example/x": only http: '
      .. "and https: URLs are fetched", tostring(err))
    w:close()
  end)

  it("runs only inside an isolate", function()
    local eutaxy = require "eutaxy"
    assert.has_error(function() eutaxy.fetch("https://echo.example/") end,
      "eutaxy.fetch() runs inside an isolate (a worker or object); a spec moves time with world:advance")
  end)

  it("raises the service module's mistake at the caller", function()
    local w = world{ ["https://echo.example"] = { module = DIR .. "nofetch.lua" } }
    local ok, err = pcall(w.fetch, w, "/?url=https://echo.example/x")
    assert.is_false(ok)
    assert.matches("nofetch%.lua exports no fetch%(request, env, ctx%) handler", tostring(err))
    w:close()
  end)

  it("refuses a services key that is not an origin, and a module that is not there", function()
    assert.has_error(function() world{ ["https://echo.example/path"] = ECHO } end,
      'testing.world: services["https://echo.example/path"]: the key must be an origin such as "https://payments.example"')
    assert.has_error(function() world{ ["https://echo.example"] = { module = DIR .. "missing.lua" } } end,
      'testing.world: services["https://echo.example"].module: no file spec/' .. DIR .. "missing.lua (relative to the "
        .. "calling file), nor " .. DIR .. "missing.lua (relative to the working directory)")
  end)
end)

describe("eutaxy check with services", function()
  local function refused(file)
    local out, err, code = process.run(bin .. " check " .. DIR .. file)
    assert.are.equal(2, code, out .. err)
    assert.are.equal("", out)
    return err
  end

  it("makes every call to a service a fault point, and tries each kind there", function()
    local out, err, code = process.run(bin .. " check " .. DIR .. "echo.sim.lua --json")
    assert.are.equal(1, code, err)
    local report = json.decode(out)
    assert.are.equal("no-uncaught-errors", report.invariant)
    local point
    for _, c in ipairs(report.coverage) do
      if c.point == "req-1 effect #0 (service https://echo.example fetch)" then point = c end
    end
    assert.is_not_nil(point, out)
    assert.are.same({ "rpc-fail", "ambiguous", "fetch-timeout" }, point.tried)
  end)

  it("times a caller out after 30 s of virtual time when the service applies a fetch and never answers", function()
    local out, err, code = process.run(bin .. " check " .. DIR .. "echo_timeout.sim.lua --json")
    assert.are.equal(1, code, err)
    local report = json.decode(out)
    assert.are.equal("fetch raised TimeoutError: The request to https://echo.example timed out after 30000 ms. (uncaught)",
      report.message)
    assert.matches("req%-1>echo%.example  answered 201 POST https://echo%.example/x 1 hello\n[^\n]*its answer never comes back\n"
      .. "%s+30%.000s  req%-1  raised TimeoutError", table.concat(report.trace, "\n"))
  end)

  it("stops with exit 2 at a fetch to an origin the scenario does not declare", function()
    assert.matches("^eutaxy check: " .. DIR:gsub("%p", "%%%0") .. "undeclared%.sim%.lua: eutaxy%.fetch: no service "
      .. "answers https://other%.example in this world %(services: https://echo%.example%)", refused("undeclared.sim.lua"))
  end)

  it("names the file, line and field of a bad service", function()
    assert.matches("bad_origin%.sim%.lua:5: service: the origin %(first argument%) must be an origin such as "
      .. '"https://payments%.example" %(a scheme, a host, no path%), got "payments%.example"', refused("bad_origin.sim.lua"))
    assert.matches("missing_module%.sim%.lua:5: service https://echo%.example: no module "
      .. "spec/fixtures/outbound/missing%.lua", refused("missing_module.sim.lua"))
    assert.matches("unknown_table%.sim%.lua:7: invariant once: no service https://nowhere%.example in the scenario "
      .. "%(services: https://echo%.example%)", refused("unknown_table.sim.lua"))
    assert.matches("twice%.sim%.lua:7: defineScenario: services lists https://echo%.example twice "
      .. "%(first at spec/fixtures/outbound/twice%.sim%.lua:6%)", refused("twice.sim.lua"))
  end)
end)
