local jsonc = require "eutaxy.jsonc"

-- Calls jsonc.decode and returns the message it raised.
local function decode_error(text, filename)
  local ok, err = pcall(jsonc.decode, text, filename or "w.jsonc")
  assert.is_false(ok, "expected an error")
  return err
end

describe("eutaxy.jsonc", function()
  describe("comments", function()
    it("ignores line comments, including one at the end of the text", function()
      local v = jsonc.decode('// header\n{"a": 1, // why\n"b": 2}\n// end')
      assert.are.same({ a = 1, b = 2 }, v)
    end)

    it("ignores block comments, including ones spanning lines", function()
      local v = jsonc.decode('/* one\n two */ {"a": /* inline */ 1}')
      assert.are.same({ a = 1 }, v)
    end)

    it("leaves comment markers inside strings alone", function()
      local v = jsonc.decode('{"url": "http://x/*y*/", "path": "a//b"}')
      assert.are.equal("http://x/*y*/", v.url)
      assert.are.equal("a//b", v.path)
    end)

    it("respects escaped quotes when finding where a string ends", function()
      local v = jsonc.decode('{"s": "say \\"hi\\" // not a comment", "t": "\\\\"} // comment')
      assert.are.equal('say "hi" // not a comment', v.s)
      assert.are.equal("\\", v.t)
    end)

    it("accepts a UTF-8 byte order mark", function()
      assert.are.same({ a = 1 }, jsonc.decode('\239\187\191{"a": 1}'))
    end)
  end)

  describe("trailing commas", function()
    it("accepts a trailing comma in objects and arrays", function()
      local v = jsonc.decode('{"list": [1, 2, ], "o": {"k": "v",},}')
      assert.are.same({ list = { 1, 2 }, o = { k = "v" } }, v)
    end)

    it("accepts a trailing comma followed by comments and newlines", function()
      local v = jsonc.decode('[\n  1, // last\n  /* nothing more */\n]')
      assert.are.same({ 1 }, v)
    end)

    it("still refuses a comma with no value after it in the middle", function()
      assert.are.equal("w.jsonc:1:4: expected value but found ','", decode_error("[1,,2]"))
    end)
  end)

  describe("values", function()
    it("decodes null as nil and integral numbers as integers", function()
      local v = jsonc.decode('{"a": null, "n": 3}')
      assert.is_nil(v.a)
      assert.are.equal("integer", math.type(v.n))
    end)
  end)

  describe("errors", function()
    it("turns cjson's character position into FILE:LINE:COL", function()
      assert.are.equal("w.jsonc:3:3: expected comma or object end but found a string",
        decode_error('{\n  "a": 1\n  "b": 2\n}'))
    end)

    it("counts positions in the original text, comments included", function()
      assert.are.equal("cfg:2:17: expected colon but found a number",
        decode_error('{ /* a\n comment */ "a" 1 }', "cfg"))
    end)

    it("counts columns in characters for UTF-8 text", function()
      assert.are.equal("w.jsonc:1:10: expected comma or object end but found a number",
        decode_error('{"éé": 1 2}'))
    end)

    it("reports the end of the text for a document that stops early", function()
      assert.are.equal("w.jsonc:2:7: expected comma or object end but found the end of the text",
        decode_error('{\n"a": 1'))
      assert.are.equal("w.jsonc:1:1: expected value but found the end of the text", decode_error(""))
    end)

    it("reports an unterminated block comment at its start", function()
      assert.are.equal("w.jsonc:2:3: unterminated /* comment", decode_error('{\n  /* never closed\n}'))
    end)

    it("reports an unterminated string at its start", function()
      assert.are.equal("w.jsonc:2:8: unterminated string", decode_error('{\n  "a": "x\n}'))
      assert.are.equal("w.jsonc:1:1: unterminated string", decode_error('"abc\\'))
      assert.are.equal("w.jsonc:1:1: unterminated string", decode_error('"abc'))
    end)

    it("refuses a NUL byte, past which cjson would read nothing", function()
      assert.are.equal("w.jsonc:2:5: NUL byte in the text", decode_error('{"a": 1}\n    \0 garbage'))
    end)

    it("names a default file when none is given", function()
      local ok, err = pcall(jsonc.decode, "{")
      assert.is_false(ok)
      assert.matches("^<jsonc>:1:2: ", err)
    end)

    it("refuses something that is not text", function()
      assert.are.equal("w.jsonc: expected text, got table", decode_error({}))
    end)
  end)

  describe("read", function()
    local path

    before_each(function()
      path = os.tmpname()
    end)

    after_each(function()
      os.remove(path)
    end)

    local function write(text)
      local f = assert(io.open(path, "wb"))
      f:write(text)
      f:close()
    end

    it("reads and decodes a file", function()
      write('{\n  // the entry\n  "main": "worker.lua",\n}\n')
      assert.are.same({ main = "worker.lua" }, jsonc.read(path))
    end)

    it("names the file in decode errors", function()
      write('{\n  "main" "worker.lua"\n}\n')
      local ok, err = pcall(jsonc.read, path)
      assert.is_false(ok)
      assert.are.equal(path .. ":2:10: expected colon but found a string", err)
    end)

    it("says why a file cannot be read", function()
      os.remove(path)
      local ok, err = pcall(jsonc.read, path)
      assert.is_false(ok)
      assert.are.equal("cannot read " .. path .. ": No such file or directory", err)
    end)
  end)
end)
