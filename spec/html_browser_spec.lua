--- The HTML report in a real headless browser (Debian's chromium): the page
-- of the planted lease pool loads without a script error and shows the fault
-- and the lost answer; markup in a scenario's names stays text; and a
-- screenshot of it has the size asked for and is not blank (its pixels are
-- counted by the browser itself, from the PNG handed back as a data: URL).
local bin = os.getenv("EUTAXY_BIN") or "build/eutaxy"
local browser = os.getenv("CHROMIUM") or "chromium"
local WIDTH, HEIGHT = 1100, 800

local function sh(cmd)
  local p = assert(io.popen(cmd))
  local out = p:read("a")
  local _, _, code = p:close()
  return out, code
end

local function read(path)
  local f = assert(io.open(path, "rb"))
  local s = f:read("a")
  f:close()
  return s
end

local function write(path, s)
  local f = assert(io.open(path, "wb"))
  f:write(s)
  f:close()
end

local dir = assert(sh("mktemp -d")):gsub("%s+$", "")

-- chromium with a profile of its own; its chatter on stderr (no D-Bus in a
-- container) goes to a file that a failing test shows.
local function chromium(args)
  local log = dir .. "/chromium.log"
  local out, code = sh(string.format("timeout 120 %s --headless --no-sandbox --disable-gpu --hide-scrollbars "
    .. "--user-data-dir=%s/profile %s 2>%s", browser, dir, args, log))
  return out, code, read(log)
end

local function report(scenario, name)
  local path = dir .. "/" .. name .. ".html"
  local _, code = sh(string.format("%s check %s --budget-ms 600000 --html %s >/dev/null 2>&1", bin, scenario, path))
  assert(code == 1, scenario .. ": expected VIOLATED, exit " .. tostring(code))
  return path
end

local B64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
local function base64(s)
  local out = {}
  for i = 1, #s, 3 do
    local a, b, c = s:byte(i, i + 2)
    local n = a * 65536 + (b or 0) * 256 + (c or 0)
    local q = {}
    for k = 3, 0, -1 do
      local v = (n >> (6 * k)) & 63
      q[#q + 1] = B64:sub(v + 1, v + 1)
    end
    if not b then q[3], q[4] = "=", "=" elseif not c then q[4] = "=" end
    out[#out + 1] = table.concat(q)
  end
  return table.concat(out)
end

describe("the HTML report in headless chromium", function()
  local leases = report("scenarios/lease-pool/leases.sim.lua", "leases")

  it("loads without a script error and shows the fault and the lost answer", function()
    local dom, code, log = chromium("--dump-dom file://" .. leases)
    assert.are.equal(0, code, log)
    local body = assert(dom:match("<body[^>]*>"), dom)
    assert.matches('data%-render="ok"', body, log)
    assert.matches('data%-faults="1"', body)
    assert.matches('data%-lost="1"', body)
    assert.matches('<pre id="errors"></pre>', dom)
    assert.matches("FAULT ambiguous", dom)
    assert.matches("answer lost: ", dom)
    assert.matches("alarm #1 fires", dom)
  end)

  it("keeps markup from names, arguments and rows as text", function()
    local page = report("spec/fixtures/checker/inject.sim.lua", "inject")
    local dom, code, log = chromium("--dump-dom file://" .. page)
    assert.are.equal(0, code, log)
    assert.matches('<body[^>]*data%-render="ok"', dom, log)
    assert.is_nil(dom:find("pwned</title>", 1, true))
    assert.is_nil(dom:find("<img", 1, true))
    assert.truthy(dom:find("DO:COUNTER(&lt;img", 1, true), dom)
  end)

  it("takes a screenshot of the size asked for that is not blank and shows red", function()
    local png_path = dir .. "/leases.png"
    local _, code, log = chromium(string.format("--screenshot=%s --window-size=%d,%d file://%s", png_path, WIDTH, HEIGHT,
      leases))
    assert.are.equal(0, code, log)
    local png = read(png_path)
    assert.are.equal("\137PNG\r\n\26\n", png:sub(1, 8))
    local w, h = string.unpack(">I4I4", png, 17)
    assert.are.same({ WIDTH, HEIGHT }, { w, h })
    -- the browser decodes its own screenshot and counts what is drawn
    local probe = dir .. "/probe.html"
    write(probe, [[<!DOCTYPE html><html><body><img id="shot" src="data:image/png;base64,]] .. base64(png) .. [[">
<script>
window.onload = function () {
  var img = document.getElementById('shot'), c = document.createElement('canvas');
  c.width = img.naturalWidth; c.height = img.naturalHeight;
  var g = c.getContext('2d'); g.drawImage(img, 0, 0);
  var d = g.getImageData(0, 0, c.width, c.height).data, ink = 0, red = 0;
  for (var i = 0; i < d.length; i += 4) {
    if (d[i] < 235 || d[i + 1] < 235 || d[i + 2] < 235) ink++;
    if (d[i] > 150 && d[i + 1] < 80 && d[i + 2] < 80) red++;
  }
  document.body.setAttribute('data-size', c.width + 'x' + c.height);
  document.body.setAttribute('data-ink', String(ink));
  document.body.setAttribute('data-red', String(red));
};
</script></body></html>]])
    local dom, pcode, plog = chromium("--dump-dom file://" .. probe)
    assert.are.equal(0, pcode, plog)
    assert.matches('data%-size="' .. WIDTH .. "x" .. HEIGHT .. '"', dom, plog)
    local ink, red = tonumber(dom:match('data%-ink="(%d+)"')), tonumber(dom:match('data%-red="(%d+)"'))
    assert.is_truthy(ink and red, dom)
    assert.is_true(ink > WIDTH * HEIGHT // 50, "drawn pixels: " .. ink)
    assert.is_true(red > 2000, "red pixels (verdict, fault, lost answer): " .. red)
  end)

  teardown(function()
    sh("rm -rf " .. dir)
  end)
end)
