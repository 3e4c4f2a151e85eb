local json = require "eutaxy.json"
local cjson = require "cjson"

describe("eutaxy.json", function()
  describe("encode: objects", function()
    it("sorts object keys so the same table always encodes the same", function()
      local t = {}
      for _, k in ipairs({ "zeta", "alpha", "Mid", "beta", "_x" }) do t[k] = #k end
      assert.are.equal('{"Mid":3,"_x":2,"alpha":5,"beta":4,"zeta":4}', json.encode(t))
    end)

    it("orders keys bytewise, with a shorter prefix first", function()
      assert.are.equal('{"a":1,"ab":2,"b":3,"é":4}', json.encode({ ["é"] = 4, b = 3, ab = 2, a = 1 }))
    end)

    it("sorts keys bytewise even when the collation locale is not C", function()
      local previous = os.setlocale(nil, "collate")
      if not os.setlocale("C.UTF-8", "collate") then
        pending("no C.UTF-8 locale on this machine")
        return
      end
      local ok, text = pcall(json.encode, { a = 1, B = 2, ["é"] = 3, z = 4, ab = 5 })
      os.setlocale(previous, "collate")
      assert.is_true(ok)
      assert.are.equal('{"B":2,"a":1,"ab":5,"z":4,"é":3}', text)
    end)

    it("encodes nested objects with sorted keys at every level", function()
      assert.are.equal('{"a":{"x":1,"y":{"m":true,"n":false}},"b":"s"}',
        json.encode({ b = "s", a = { y = { n = false, m = true }, x = 1 } }))
    end)

    it("encodes an empty table as an object", function()
      assert.are.equal("{}", json.encode({}))
      assert.are.equal('{"items":{}}', json.encode({ items = {} }))
    end)

    it("lets a table appear twice when it is shared rather than cyclic", function()
      local shared = { 1 }
      assert.are.equal('{"a":[1],"b":[1]}', json.encode({ a = shared, b = shared }))
    end)
  end)

  describe("encode: arrays", function()
    it("encodes a table with keys exactly 1..n as an array in order", function()
      assert.are.equal('[3,"b",true,{"k":1}]', json.encode({ 3, "b", true, { k = 1 } }))
    end)

    it("encodes an empty table marked with json.array as []", function()
      assert.are.equal("[]", json.encode(json.array()))
      assert.are.equal('{"list":[]}', json.encode({ list = json.array({}) }))
    end)

    it("encodes a non-empty marked array as usual", function()
      assert.are.equal("[1,2]", json.encode(json.array({ 1, 2 })))
    end)

    it("returns the table it marks and can tell marked tables apart", function()
      local t = {}
      assert.are.equal(t, json.array(t))
      assert.is_true(json.is_array(t))
      assert.is_false(json.is_array({}))
    end)

    it("refuses to mark something that is not a table", function()
      assert.has_error(function() json.array("x") end)
    end)
  end)

  describe("encode: scalars", function()
    it("prints integers as integers", function()
      assert.are.equal("[0,-7,42,9007199254740993]", json.encode({ 0, -7, 42, 9007199254740993 }))
      assert.are.equal(tostring(math.mininteger), json.encode(math.mininteger))
    end)

    it("prints floats with the shortest text that reads back to the same value", function()
      assert.are.equal("0.1", json.encode(0.1))
      assert.are.equal("0.3333333333333333", json.encode(1 / 3))
      assert.are.equal("0.30000000000000004", json.encode(0.1 + 0.2))
      assert.are.equal("1e+300", json.encode(1e300))
      for _, v in ipairs({ 0.1, 1 / 3, 0.1 + 0.2, 123456.789, 5e-324, 1.7976931348623157e308 }) do
        assert.are.equal(v, tonumber(json.encode(v)))
      end
    end)

    it("prints an integral float without a fraction, as JavaScript does", function()
      assert.are.equal("3", json.encode(3.0))
    end)

    it("encodes booleans, nil and json.null", function()
      assert.are.equal("true", json.encode(true))
      assert.are.equal("false", json.encode(false))
      assert.are.equal("null", json.encode(nil))
      assert.are.equal("null", json.encode(json.null))
      assert.are.equal('{"a":null}', json.encode({ a = json.null }))
      assert.are.equal("[1,null,3]", json.encode({ 1, json.null, 3 }))
    end)

    it("uses cjson.null as json.null so cjson's values encode the same", function()
      assert.are.equal(cjson.null, json.null)
    end)
  end)

  describe("encode: strings", function()
    it("escapes quotes and backslashes", function()
      assert.are.equal([["a\"b\\c"]], json.encode('a"b\\c'))
    end)

    it("escapes control characters", function()
      assert.are.equal([["\n\t\r\b\f"]], json.encode("\n\t\r\b\f"))
      assert.are.equal([["\u0000\u0001\u001f\u007f"]], json.encode("\0\1\31\127"))
    end)

    it("keeps UTF-8 bytes and slashes as they are", function()
      assert.are.equal('"héllo/✓"', json.encode("héllo/✓"))
    end)

    it("keeps bytes that are not valid UTF-8 rather than failing", function()
      assert.are.equal('"\255\254"', json.encode("\255\254"))
    end)

    it("escapes object keys like other strings", function()
      assert.are.equal('{"a\\"b":1}', json.encode({ ['a"b'] = 1 }))
    end)

    -- json.encode quotes strings in C (host/ljson.c); json.lua's pattern is
    -- the definition, byte by byte and in runs.
    it("quotes every byte as the pattern-based escape does", function()
      assert.are.equal("C", debug.getinfo(json.encode, "S").what)
      local escapes = { ['"'] = '\\"', ["\\"] = "\\\\", ["\b"] = "\\b", ["\f"] = "\\f", ["\n"] = "\\n",
                        ["\r"] = "\\r", ["\t"] = "\\t", ["\127"] = "\\u007f" }
      for b = 0, 31 do escapes[string.char(b)] = escapes[string.char(b)] or string.format("\\u%04x", b) end
      local function by_pattern(s) return '"' .. s:gsub('[%c"\\]', escapes) .. '"' end
      local all = {}
      for b = 0, 255 do
        local c = string.char(b)
        all[#all + 1] = c
        assert.are.equal(by_pattern(c), json.encode(c))
        assert.are.equal(by_pattern("x" .. c .. c .. "yz"), json.encode("x" .. c .. c .. "yz"))
      end
      local s = table.concat(all)
      assert.are.equal(by_pattern(s .. s), json.encode(s .. s))
      assert.are.equal('""', json.encode(""))
    end)
  end)

  -- json.encode is the host's encoder (host/ljson.c), which calls json.lua's
  -- where it gives up: the two must give the same text wherever the
  -- host's answers, and the host must answer wherever json.lua does for
  -- plain values (no other metatable, no nesting past 100).
  describe("encode: the host's encoder against json.lua's", function()
    local core = require "eutaxy.core"
    -- the host's encoder alone: json.lua's stands in as "nil"
    local host_encode = core.json_encoder(getmetatable(json.array()), json.null, function() return nil end)
    local rng = 4
    local function random(n)
      rng = (rng * 1103515245 + 12345) % 2147483648
      return rng % n + 1
    end
    local SCALARS = { 0, 1, -1, 42, math.maxinteger, math.mininteger, 0.0, -0.0, 0.1, 1.5, -2.5, 1e300, 1e-300,
                      2 ^ 53, 2 ^ 63, 123456789.125, 1 / 3, 100.0, true, false, "", "a", "key", "x\"y", "\\",
                      "\n\0\127", "é✓", "\255", json.null }
    local KEYS = { "a", "b", "ab", "B", "", "a\0b", "é", "\255", "z", "_", "1" }
    local BAD = { 0 / 0, math.huge, -math.huge, print, coroutine.create(print), io and io.stdout }
    local function value(depth)
      local r = random(10)
      if depth > 3 or r <= 4 then return SCALARS[random(#SCALARS)] end
      if r == 5 and random(4) == 1 then return BAD[random(#BAD)] end
      local t = {}
      if r <= 7 then
        for i = 1, random(4) - 1 do t[i] = value(depth + 1) end
        if random(6) == 1 then t[#t + 2] = 1 end          -- sparse
        if random(5) == 1 then json.array(t) end
      else
        for _ = 1, random(4) - 1 do t[KEYS[random(#KEYS)]] = value(depth + 1) end
        if random(12) == 1 then                            -- wide: more keys than the encoder sorts by insertion
          for _ = 1, 12 + random(30) do t[KEYS[random(#KEYS)] .. random(50)] = SCALARS[random(#SCALARS)] end
        end
        if random(8) == 1 then t[1] = true end             -- mixed
        if random(10) == 1 then t[2.5] = 1 end             -- a float key
        if random(10) == 1 then json.array(t) end
      end
      return t
    end

    it("gives json.lua's text, or leaves the value to it where json.lua raises", function()
      local answered, raised = 0, 0
      for _ = 1, 4000 do
        local v = value(0)
        local text = host_encode(v)
        local ok, lua_text = pcall(json._encode_in_lua, v)
        if ok then
          assert.are.equal(lua_text, text)
          answered = answered + 1
        else
          assert.is_nil(text, lua_text)
          raised = raised + 1
        end
      end
      assert.is_true(answered > 1000 and raised > 300, answered .. " answered, " .. raised .. " raised")
    end)

    -- A finalizer run by one of the encoder's allocations empties the table
    -- being encoded: the keys already read stay valid (valgrind and ASan
    -- in CI see a read of a freed key), the values read after are null.
    it("keeps the keys it has read when a finalizer empties the table", function()
      local hit = 0
      for attempt = 1, 5 do
        local t = {}
        for i = 1, 300 do t[string.rep("k", 60) .. i .. "-" .. attempt] = string.rep("v", 10000) end
        local encoding, cleared = false, false
        local function second()
          setmetatable({}, { __gc = function()
            if encoding and not cleared then
              cleared = true
              for k in pairs(t) do t[k] = nil end
            end
          end })
        end
        setmetatable({}, { __gc = function() if encoding then second() end end })
        collectgarbage("incremental", 10, 1000, 0)
        encoding = true
        local text = json.encode(t)
        encoding = false
        collectgarbage("incremental", 200, 100, 13)
        assert.matches("^{.*}$", text)
        local nulls = select(2, text:gsub(":null", ""))
        if cleared and nulls > 0 and nulls < 300 then hit = hit + 1 end
      end
      assert.is_true(hit > 0, "no finalizer emptied the table while it was encoded")
    end)

    it("leaves cycles, deep nesting and other metatables to json.lua", function()
      local cycle = {}
      cycle.self = cycle
      assert.is_nil(host_encode(cycle))
      local deep = {}
      for _ = 1, 150 do deep = { deep } end
      assert.is_nil(host_encode(deep))
      assert.are.equal(json._encode_in_lua(deep), json.encode(deep))
      assert.is_nil(host_encode(setmetatable({}, {})))
      assert.has_error(function() json.encode(cycle) end,
        "json.encode: cannot encode a cycle at .self (a table that contains itself)")
    end)
  end)

  describe("encode: errors", function()
    it("names the path of a function it cannot encode", function()
      assert.has_error(function() json.encode({ items = { 1, print } }) end,
        "json.encode: cannot encode a function at .items[2]")
    end)

    it("refuses userdata and threads", function()
      assert.has_error(function() json.encode({ f = io.stdout }) end,
        "json.encode: cannot encode a userdata at .f")
      assert.has_error(function() json.encode(coroutine.create(print)) end,
        "json.encode: cannot encode a thread at the top level")
    end)

    it("quotes keys in the path that are not identifiers", function()
      assert.has_error(function() json.encode({ ["a b"] = { print } }) end,
        'json.encode: cannot encode a function at ["a b"][1]')
    end)

    it("refuses a cycle", function()
      local t = { a = {} }
      t.a.back = t
      assert.has_error(function() json.encode(t) end,
        "json.encode: cannot encode a cycle at .a.back (a table that contains itself)")
    end)

    it("refuses a table with both array and object keys", function()
      assert.has_error(function() json.encode({ x = { 1, 2, name = "n" } }) end,
        "json.encode: table at .x has both array and object keys")
    end)

    it("refuses a sparse array", function()
      assert.has_error(function() json.encode({ list = { [1] = "a", [3] = "c" } }) end,
        "json.encode: table at .list is a sparse array (2 items but the largest index is 3)")
    end)

    it("refuses keys that are neither strings nor positive integers", function()
      local ok, err = pcall(json.encode, { [1.5] = true })
      assert.is_false(ok)
      assert.matches("table at the top level has a key that is neither a string nor a positive integer %(1%.5, float%)", err)
      ok, err = pcall(json.encode, { t = { [0] = "zero" } })
      assert.is_false(ok)
      assert.matches("table at %.t has a key .* %(0, integer%)", err)
      ok, err = pcall(json.encode, { [true] = 1 })
      assert.is_false(ok)
      assert.matches("%(true, boolean%)", err)
      ok, err = pcall(json.encode, { [{}] = 1 })
      assert.is_false(ok)
      assert.matches("table: 0x%x+, table%)", err)
    end)

    it("refuses object keys in a table marked as an array", function()
      assert.has_error(function() json.encode(json.array({ a = 1 })) end,
        "json.encode: table at the top level is marked with json.array but has object keys")
    end)

    it("refuses NaN and infinities", function()
      assert.has_error(function() json.encode({ n = 0 / 0 }) end, "json.encode: cannot encode NaN at .n")
      assert.has_error(function() json.encode({ math.huge }) end, "json.encode: cannot encode infinity at [1]")
      assert.has_error(function() json.encode(-math.huge) end,
        "json.encode: cannot encode infinity at the top level")
    end)
  end)

  describe("decode", function()
    it("reads objects, arrays and scalars", function()
      local v = json.decode('{"a":[1,"two",true,false],"b":{"c":2.5}}')
      assert.are.same({ a = { 1, "two", true, false }, b = { c = 2.5 } }, v)
    end)

    it("turns integral numbers into integers", function()
      local v = json.decode("[1,-3,1e3,2.5,9007199254740992]")
      assert.are.equal("integer", math.type(v[1]))
      assert.are.equal("integer", math.type(v[2]))
      assert.are.equal(1000, v[3])
      assert.are.equal("integer", math.type(v[3]))
      assert.are.equal("float", math.type(v[4]))
      assert.are.equal("integer", math.type(v[5]))
    end)

    it("keeps integral numbers beyond 2^53 as floats, since they were not exact", function()
      assert.are.equal("float", math.type(json.decode("[1e300]")[1]))
    end)

    it("decodes null as nil, inside objects and arrays", function()
      local v = json.decode('{"a":null,"b":[1,null,3]}')
      assert.is_nil(v.a)
      assert.is_nil(v.b[2])
      assert.are.equal(3, v.b[3])
      assert.is_nil(json.decode("null"))
    end)

    it("round-trips what encode produced", function()
      local value = { name = "x", list = { 1, 2.5, "s" }, nested = { ok = true } }
      assert.are.same(value, json.decode(json.encode(value)))
    end)

    it("reports malformed text with cjson's message", function()
      local ok, err = pcall(json.decode, '{"a":')
      assert.is_false(ok)
      assert.matches("^json%.decode: Expected value but found T_END at character 6$", err)
    end)

    it("refuses something that is not a string", function()
      assert.has_error(function() json.decode(42) end, "json.decode: expected a string, got number")
    end)
  end)

  describe("normalize", function()
    it("replaces cjson.null and integral floats in place", function()
      local t = { a = cjson.null, b = 2.0, c = { 1.0 } }
      assert.are.equal(t, json.normalize(t))
      assert.is_nil(t.a)
      assert.are.equal("integer", math.type(t.b))
      assert.are.equal("integer", math.type(t.c[1]))
    end)
  end)
end)
