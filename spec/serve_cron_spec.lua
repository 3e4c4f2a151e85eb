--- `eutaxy serve` fires the config's crons on its clock. With --test-clock
-- the clock is the spec's: it stands still until POST /__eutaxy/clock
-- moves it, whose answer leaves once what came due has run, so nothing
-- here sleeps or reads the wall clock.
local h = dofile("spec/fixtures/serve/harness.lua")
local start, stop, request = h.start, h.stop, h.request

local CRONS = "spec/fixtures/cron/wrangler.jsonc"
local SWEEP = "scenarios/cron-sweep/wrangler.jsonc"
local START = 1767225600000  -- 2026-01-01T00:00:00Z
local CLOCK = " --test-clock " .. START

local function advance(server, ms)
  return request(server, "POST", "/__eutaxy/clock?advance=" .. ms)
end

describe("eutaxy serve with crons", function()
  local state

  before_each(function()
    state = h.begin()
    if not state then pending("curl is not installed (the .ci/packages list has it)") end
  end)

  after_each(function() h.finish(state) end)

  it("fires a one-minute cron when its clock reaches the minute, as the worker's scheduled()", function()
    local server = start(state, CLOCK, CRONS)
    assert.same({ 200, '{"n":0}' }, { request(server, "GET", "/ticks") })
    assert.same({ 200, '{"now":' .. START + 59999 .. "}" }, { advance(server, 59999) })
    assert.same({ 200, '{"n":0}' }, { request(server, "GET", "/ticks") })
    assert.same({ 200, '{"now":' .. START + 60000 .. "}" }, { advance(server, 1) })
    assert.same({ 200, '{"n":1}' }, { request(server, "GET", "/ticks") })
    advance(server, 4 * 60000)
    assert.same({ 200, '{"n":5}' }, { request(server, "GET", "/ticks") })
    assert.same({ 200, '{"now":' .. START + 5 * 60000 .. "}" }, { request(server, "GET", "/__eutaxy/clock") })
    assert.equal(0, stop(server))
  end)

  it("sweeps the example's expired hold and keeps the confirmed one", function()
    local server = start(state, CLOCK, SWEEP)
    assert.same({ 201, "held for a minute" }, { request(server, "POST", "/holds/a-1") })
    assert.same({ 201, "held for a minute" }, { request(server, "POST", "/holds/b-1") })
    assert.same({ 200, "ordered" }, { request(server, "POST", "/holds/b-1/confirm") })
    advance(server, 30000)
    assert.same({ 200, "held" }, { request(server, "GET", "/holds/a-1") })
    advance(server, 30000)
    assert.same({ 404, "not held" }, { request(server, "GET", "/holds/a-1") })
    assert.same({ 200, "held" }, { request(server, "GET", "/holds/b-1") })
  end)

  it("logs a failing scheduled() and retries it, unless it called noRetry()", function()
    local server = start(state, CLOCK, CRONS)
    advance(server, 30 * 60000)
    advance(server, 30 * 60000 + 2000)
    assert.same({ 200, '{"n":2}' }, { request(server, "GET", "/ticks?cron=0+*+*+*+*") })
    assert.same({ 200, '{"n":1}' }, { request(server, "GET", "/ticks?cron=30+*+*+*+*") })
    stop(server)
    local log = h.log(server)
    assert.truthy(log:find('[cron 30 * * * *] scheduled() raised Error: ', 1, true), log)
    assert.truthy(log:find("[cron 30 * * * *] not retried: the handler called noRetry()", 1, true), log)
    assert.truthy(log:find("[cron 0 * * * *] retry 1 of 6 in 2s", 1, true), log)
    assert.truthy(log:find("[cron 0 * * * *] retry 2 of 6 in 4s", 1, true), log)
  end)

  it("answers an advance once what came due has run, objects opened again on the way included", function()
    -- the half-minute's advance evicts the objects (idle, --evict-after 1),
    -- so the minute's visits wait for their files to open again
    local server = start(state, CLOCK .. " --evict-after 1", "spec/fixtures/cron-many/wrangler.jsonc")
    assert.same({ 200, '{"sum":0}' }, { request(server, "GET", "/") })
    for minute = 1, 3 do
      advance(server, 30000)
      assert.same({ 200, '{"now":' .. START + minute * 60000 .. "}" }, { advance(server, 30000) })
      assert.same({ 200, '{"sum":' .. 24 * minute .. "}" }, { request(server, "GET", "/") })
    end
    assert.equal(0, stop(server))
  end)

  it("takes the clock's advance only as a whole number of ms", function()
    local server = start(state, CLOCK, CRONS)
    assert.equal(400, (request(server, "POST", "/__eutaxy/clock?advance=soon")))
    assert.equal(400, (request(server, "POST", "/__eutaxy/clock")))
    assert.equal(405, (request(server, "PUT", "/__eutaxy/clock")))
    assert.same({ 200, '{"now":' .. START .. "}" }, { request(server, "GET", "/__eutaxy/clock") })
  end)

  it("hands /__eutaxy/clock to the worker without --test-clock", function()
    local server = start(state, "", SWEEP)
    assert.same({ 404, "not found" }, { request(server, "POST", "/__eutaxy/clock?advance=60000") })
  end)

  it("refuses to start a worker whose crons have no scheduled handler, naming the config", function()
    local dir = h.tempdir()
    local f = assert(io.open(dir .. "/wrangler.jsonc", "w"))
    f:write('{ "main": "' .. h.sh("pwd"):gsub("%s+$", "") .. '/spec/fixtures/objects/worker.lua", "triggers": { "crons": ["0 3 * * *"] },'
      .. ' "durable_objects": { "bindings": [{ "name": "COUNTER", "class_name": "Counter" }] } }')
    f:close()
    local out = h.sh(("%s serve %s/wrangler.jsonc --port 0 --state %s 2>&1; echo \"exit $?\""):format(h.bin, dir, state))
    os.execute("rm -rf " .. dir)
    assert.matches("wrangler%.jsonc: triggers%.crons lists \"0 3 %* %* %*\", but [^\n]*worker%.lua exports no scheduled", out)
    assert.matches("exit 1\n$", out)
  end)
end)
