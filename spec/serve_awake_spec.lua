-- `eutaxy serve --max-awake`: the heaps of resident objects beyond it are
-- packed and unpacked on their next event, with their in-memory state
-- whole, an object waiting for another's answer included.

local h = dofile("spec/fixtures/serve/harness.lua")
local config = "spec/fixtures/serve/awake/wrangler.jsonc"

-- A field of a flat JSON object: a string's text, or a number's digits.
local function json_field(body, field)
  if not body then return nil end
  return body:match('"' .. field .. '":"([^"]*)"') or body:match('"' .. field .. '":(%d+)')
end

describe("eutaxy serve --max-awake", function()
  local state

  before_each(function()
    state = h.begin()
    if not state then pending("curl is not installed (the .ci/packages list has it)") end
  end)

  after_each(function() h.finish(state) end)

  it("keeps each object's memory through its heap's packing, one request at a time", function()
    local server = h.start(state, "--max-awake 2", config)
    for round = 1, 3 do
      for k = 1, 8 do
        local status, body = h.request(server, "POST", ("/remember/%d?v=r%dk%d"):format(k, round, k))
        assert.equal(200, status, body)
        local want = {}
        for r = 1, round do want[#want + 1] = ("r%dk%d"):format(r, k) end
        assert.equal(table.concat(want, ","), json_field(body, "seen"))
        assert.equal(tostring(round), json_field(body, "n"))
      end
    end
    h.stop(server)
  end)

  it("keeps the state of objects that wait for each other's answers while packed", function()
    -- One awake heap: each object of the chain is packed while it waits for
    -- the one below, and unpacked when the answer comes back.
    local server = h.start(state, "--max-awake 1", config)
    local status, body = h.request(server, "GET", "/chain/5")
    assert.equal(200, status, body)
    assert.equal("c-5#1<c-4#1<c-3#1<c-2#1<c-1#1<c-0#1", json_field(body, "path"))
    status, body = h.request(server, "GET", "/chain/3")
    assert.equal(200, status, body)
    assert.equal("c-3#2<c-2#2<c-1#2<c-0#2", json_field(body, "path"))
    h.stop(server)
  end)

  it("serves concurrent requests to more objects than it keeps awake", function()
    local server = h.start(state, "--max-awake 3", config)
    local urls = {}
    for round = 1, 2 do
      for k = 1, 20 do urls[#urls + 1] = ("http://127.0.0.1:%s/remember/%d?v=%d"):format(server.port, k, round) end
    end
    -- each round's requests in parallel, the rounds one after the other
    for round = 1, 2 do
      local list = {}
      for i = (round - 1) * 20 + 1, round * 20 do list[#list + 1] = "'" .. urls[i] .. "'" end
      local out = h.sh("curl -s --parallel --parallel-max 8 --max-time 60 -X POST -o /dev/null -w '%{http_code}\\n' "
        .. table.concat(list, " "))
      local ok = select(2, out:gsub("200", ""))
      assert.equal(20, ok, out)
    end
    for k = 1, 20 do
      local status, body = h.request(server, "POST", ("/remember/%d?v=3"):format(k))
      assert.equal(200, status, body)
      assert.equal("1,2,3", json_field(body, "seen"))
    end
    h.stop(server)
  end)

  it("evicts a packed object as an awake one: its memory goes, its storage stays", function()
    -- Two heaps awake, five objects resident: the sixth object evicts the
    -- oldest, m-1, packed since m-3 took its berth.
    local server = h.start(state, "--max-awake 2 --max-resident 5", config)
    local function remember(k, v)
      local status, body = h.request(server, "POST", ("/remember/%d?v=%s"):format(k, v))
      assert.equal(200, status, body)
      return json_field(body, "seen"), json_field(body, "n")
    end
    for k = 1, 6 do remember(k, "a") end
    local seen, n = remember(4, "b")  -- packed, not evicted
    assert.equal("a,b", seen)
    assert.equal("2", n)
    seen, n = remember(1, "b")
    assert.equal("b", seen)
    assert.equal("2", n)
    seen, n = remember(2, "b")  -- evicted, packed, when m-1 came back
    assert.equal("b", seen)
    assert.equal("2", n)
    seen, n = remember(5, "b")
    assert.equal("a,b", seen)
    assert.equal("2", n)
    h.stop(server)
  end)

  it("gives each object the module's variables as a load of its own would", function()
    -- a module that does nothing an object could tell loads once for all
    local server = h.start(state, "--max-awake 2", config)
    for _, k in ipairs({ 1, 1, 2, 3, 1 }) do h.request(server, "GET", "/module/" .. k) end
    local _, body = h.request(server, "GET", "/module/2")
    assert.equal("2", json_field(body, "calls"))
    _, body = h.request(server, "GET", "/module/1")
    assert.equal("4", json_field(body, "calls"))
    h.stop(server)
    -- one that draws as it loads is loaded by each object's isolate
    server = h.start(state, "--max-awake 2", "spec/fixtures/serve/awake/wrangler.impure.jsonc")
    local tokens = {}
    for k = 1, 4 do
      local status
      status, body = h.request(server, "GET", "/module/" .. k)
      assert.equal(200, status, body)
      local t = json_field(body, "token")
      assert.is_nil(tokens[t], "objects share the token " .. tostring(t))
      tokens[t] = true
    end
    h.stop(server)
  end)
end)
